/* The dashboard's pending and trusted connections (ui_conn.h). */
#include "front/ui_conn.h"

#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "core/buf.h"

struct ui_conn {
  struct ui_conn *prev, *next; /* in the pending list while !trusted */
  int fd;
  enum { CONN_PENDING, CONN_TRUSTED, CONN_EVICTED } state;
};

void ui_conns_init(struct ui_conns *cs)
{
  *cs = (struct ui_conns){0};
  pthread_mutex_init(&cs->mu, NULL);
}

void ui_conns_destroy(struct ui_conns *cs) { pthread_mutex_destroy(&cs->mu); }

static void unlink_pending(struct ui_conns *cs, struct ui_conn *k)
{
  if (k->prev)
    k->prev->next = k->next;
  else
    cs->oldest = k->next;
  if (k->next)
    k->next->prev = k->prev;
  else
    cs->newest = k->prev;
  k->prev = k->next = NULL;
  cs->n_pending--;
}

/* A new connection joins the pending list; past the share, the one
 * accepted longest ago is shut down (not closed: libmicrohttpd owns the
 * descriptor and closes it after its CLOSED notification, which takes it
 * off this list under the same mutex first, so the descriptor shut down
 * is still that connection's). */
static void started(struct ui_conns *cs, struct MHD_Connection *c, void **ctx)
{
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  struct ui_conn *k = cap_xcalloc(1, sizeof *k);
  k->fd = info ? info->connect_fd : -1;
  *ctx = k;
  pthread_mutex_lock(&cs->mu);
  k->prev = cs->newest;
  if (cs->newest)
    cs->newest->next = k;
  else
    cs->oldest = k;
  cs->newest = k;
  cs->n_pending++;
  while (cs->n_pending > UI_CONN_PENDING) {
    struct ui_conn *old = cs->oldest;
    unlink_pending(cs, old);
    if (old->fd >= 0)
      shutdown(old->fd, SHUT_RDWR);
    old->state = CONN_EVICTED; /* off the list: nothing to unlink at its close */
  }
  pthread_mutex_unlock(&cs->mu);
}

void ui_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                     enum MHD_ConnectionNotificationCode code)
{
  struct ui_conns *cs = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    started(cs, c, socket_context);
    return;
  }
  struct ui_conn *k = *socket_context;
  if (!k)
    return;
  pthread_mutex_lock(&cs->mu);
  if (k->state == CONN_PENDING)
    unlink_pending(cs, k);
  pthread_mutex_unlock(&cs->mu);
  free(k);
  *socket_context = NULL;
}

void ui_conns_trust(struct ui_conns *cs, struct MHD_Connection *c)
{
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  struct ui_conn *k = info ? info->socket_context : NULL;
  if (!k)
    return;
  pthread_mutex_lock(&cs->mu);
  bool was_pending = k->state == CONN_PENDING;
  if (was_pending) {
    unlink_pending(cs, k);
    k->state = CONN_TRUSTED;
  }
  pthread_mutex_unlock(&cs->mu);
  if (was_pending)
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
                              (unsigned int)UI_CONN_TRUSTED_TIMEOUT_S);
}
