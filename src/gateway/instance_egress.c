/* A warm instance's egress decisions by lease (instance_int.h): the
 * keeper's proxy serves every call leased on its server, so each decision
 * is given to one of them, the oldest lease held when it was made (while
 * calls come one at a time, the call that made it), and sent back to that
 * call at its lease's end, which stores it with its audit record
 * (gateway/egress_store.h) as a call's own proxy would. */
#include "gateway/instance_int.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/buf.h"

/* The sink's function (a proxy thread): into the oldest lease's batch. */
static void keeper_egress_event(void *arg, const struct proxy_egress_event *ev)
{
  struct keeper_egress *e = arg;
  pthread_mutex_lock(&e->lock);
  struct gw_egress_batch *b = e->n ? e->held[0] : e->next;
  b->sink.event(b->sink.arg, ev);
  /* on disk too until it goes to its call (keeper_egress_end): a keeper
   * killed before, mid-call too, leaves it to the recovery */
  gw_egress_spool_event(&e->spool, ev);
  pthread_mutex_unlock(&e->lock);
}

static struct gw_egress_batch *batch_new(void)
{
  struct gw_egress_batch *b = cap_xmalloc(sizeof *b);
  gw_egress_batch_init(b);
  return b;
}

void keeper_egress_init(struct keeper_egress *e, const char *run_dir, const char *capability,
                        const char *user)
{
  *e =
      (struct keeper_egress){.next = batch_new(), .sink = {.event = keeper_egress_event, .arg = e}};
  gw_egress_spool_init(&e->spool, run_dir, capability, user);
  pthread_mutex_init(&e->lock, NULL);
}

void keeper_egress_close(struct keeper_egress *e)
{
  pthread_mutex_lock(&e->lock);
  gw_egress_spool_close(&e->spool);
  e->closed = true; /* what it holds is the recovery's: a lease ending now sends none */
  pthread_mutex_unlock(&e->lock);
}

struct gw_egress_batch *keeper_egress_grant(struct keeper_egress *e)
{
  struct gw_egress_batch *fresh = batch_new();
  pthread_mutex_lock(&e->lock);
  struct gw_egress_batch *b = e->next;
  e->next = fresh;               /* b's rows stay spooled until they go */
  if (e->n < KEEPER_MAX_CLIENTS) /* one lease per client: always room */
    e->held[e->n++] = b;
  pthread_mutex_unlock(&e->lock);
  return b;
}

/* One message: the head, then len bytes of data; waits up to a second
 * for room (the caller reads as it goes). */
static bool send_chunk(int fd, const char *data, size_t len, bool last)
{
  char head[5];
  memcpy(head, KEEPER_EGRESS_MAGIC, 4);
  head[4] = last ? 1 : 0;
  struct iovec iov[2] = {{.iov_base = head, .iov_len = sizeof head},
                         {.iov_base = (void *)data, .iov_len = len}};
  struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
  for (;;) {
    if (sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0)
      return true;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    if ((errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS) || poll(&p, 1, 1000) <= 0)
      return false;
  }
}

void keeper_egress_end(struct keeper_egress *e, struct gw_egress_batch *b, int fd)
{
  if (!b)
    return;
  pthread_mutex_lock(&e->lock);
  for (size_t i = 0; i < e->n; i++)
    if (e->held[i] == b) {
      memmove(&e->held[i], &e->held[i + 1], (e->n - i - 1) * sizeof e->held[0]);
      e->n--;
      break;
    }
  if (e->closed) /* the file holds them for the recovery: sent too, they would be stored twice */
    fd = -1;
  if (fd < 0) /* its caller gone: the decisions go to the next lease (spooled already) */
    gw_egress_batch_take(b, e->n ? e->held[0] : e->next);
  else { /* b out of the spool before it goes: a kill between loses it, never stores it twice */
    gw_egress_spool_clear(&e->spool);
    for (size_t i = 0; i < e->n; i++)
      gw_egress_spool_batch(&e->spool, e->held[i]);
    gw_egress_spool_batch(&e->spool, e->next);
  }
  pthread_mutex_unlock(&e->lock);
  if (fd >= 0) {
    struct cap_buf out = {0};
    gw_egress_batch_encode(b, &out);
    size_t off = 0;
    bool ok = true;
    do {
      size_t len = out.len - off < KEEPER_EGRESS_CHUNK ? out.len - off : KEEPER_EGRESS_CHUNK;
      ok = send_chunk(fd, out.data + off, len, off + len == out.len);
      off += len;
    } while (ok && off < out.len);
    cap_buf_free(&out);
    if (!ok) { /* not whole (the caller takes no part): the next lease's, spooled again */
      pthread_mutex_lock(&e->lock);
      gw_egress_spool_batch(&e->spool, b);
      gw_egress_batch_take(b, e->n ? e->held[0] : e->next);
      pthread_mutex_unlock(&e->lock);
    }
  }
  gw_egress_batch_free(b);
  free(b);
}
