/* When the dashboard's live stream looks at the state (ui_wait, a hook
 * the stream calls between its events). On a PostgreSQL state a thread
 * with a connection of its own LISTENs on the approvals' channel (a new
 * approval, a decision: gateway/approval.h) and the audit log's (each
 * record appended: gateway/state.h) and counts what it hears; a stream
 * waits for the count to move, so it reads the state when something
 * changed, on whichever gateway, not every second. A listener whose
 * connection fails moves the count once a second (the streams look, as
 * on SQLite) and connects again at its next wait. On SQLite, which
 * notifies no other process, the count moves once a second. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "front/serve_core.h"
#include "front/ui.h"
#include "gateway/approval.h"
#include "gateway/db.h"
#include "gateway/state.h"

struct ui_live {
  pthread_mutex_t mu;
  pthread_cond_t moved; /* CLOCK_MONOTONIC */
  uint64_t count;       /* under mu */
  bool stop;            /* under mu */
  struct gw_db *db;     /* the listener's own connection */
  pthread_t thread;
};

static void deadline_in(struct timespec *t, int ms)
{
  clock_gettime(CLOCK_MONOTONIC, t);
  t->tv_sec += ms / 1000;
  t->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (t->tv_nsec >= 1000000000L) {
    t->tv_sec++;
    t->tv_nsec -= 1000000000L;
  }
}

static void *listen_main(void *arg)
{
  struct ui_live *l = arg;
  static const char *const channels[] = {GW_APPROVAL_CHANNEL, GW_AUDIT_CHANNEL};
  for (;;) {
    pthread_mutex_lock(&l->mu);
    bool stop = l->stop;
    pthread_mutex_unlock(&l->mu);
    if (stop)
      return NULL;
    /* a second at a time: the stop is seen within one */
    int r = gw_db_wait_notify_any(l->db, channels, 2, 1000);
    if (r == 0)
      continue;
    pthread_mutex_lock(&l->mu);
    l->count++; /* heard, or deaf for now: the streams look either way */
    pthread_cond_broadcast(&l->moved);
    if (r < 0 && !l->stop) { /* the connection is gone: a second before the next try */
      struct timespec t;
      deadline_in(&t, 1000);
      pthread_cond_timedwait(&l->moved, &l->mu, &t);
    }
    pthread_mutex_unlock(&l->mu);
  }
}

int ui_live_start(struct serve *sv, struct cap_error *err)
{
  struct gw_db *db = NULL;
  int r = gw_state_listener(sv->opt->st, &db, err);
  if (r == -ENOTSUP)
    return 0; /* SQLite: the streams look once a second */
  if (r < 0)
    return r;
  struct ui_live *l = cap_xcalloc(1, sizeof *l);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&l->moved, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&l->mu, NULL);
  l->db = db;
  if ((r = pthread_create(&l->thread, NULL, listen_main, l)) != 0) {
    gw_db_close(db);
    free(l);
    return cap_error_errno(err, r, "cannot start the dashboard's listener");
  }
  sv->live = l;
  return 0;
}

void ui_live_stop(struct serve *sv)
{
  struct ui_live *l = sv->live;
  if (!l)
    return;
  pthread_mutex_lock(&l->mu);
  l->stop = true;
  pthread_cond_broadcast(&l->moved);
  pthread_mutex_unlock(&l->mu);
  pthread_join(l->thread, NULL);
  gw_db_close(l->db);
  pthread_cond_destroy(&l->moved);
  pthread_mutex_destroy(&l->mu);
  free(l);
  sv->live = NULL;
}

uint64_t ui_wait(struct serve *sv, uint64_t seen, int timeout_ms)
{
  struct ui_live *l = sv->live;
  if (!l) { /* SQLite: a look each time, once a second at most */
    struct timespec t = {.tv_sec = timeout_ms / 1000, .tv_nsec = (timeout_ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
    return seen + 1;
  }
  struct timespec t;
  deadline_in(&t, timeout_ms);
  pthread_mutex_lock(&l->mu);
  while (l->count == seen && !l->stop)
    if (pthread_cond_timedwait(&l->moved, &l->mu, &t) == ETIMEDOUT)
      break;
  uint64_t now = l->count;
  pthread_mutex_unlock(&l->mu);
  return now;
}
