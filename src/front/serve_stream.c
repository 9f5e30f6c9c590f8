/* The streams that carry an HTTP request's messages from the main thread
 * to the HTTP thread answering it (serve_internal.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front/serve_internal.h"

#define STREAM_MAX_QUEUED 4096 /* messages waiting for a slow reader; more are dropped */

struct stream *stream_new(void)
{
  struct stream *s = cap_xcalloc(1, sizeof *s);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  s->refs = 1;
  return s;
}

void stream_unref(struct stream *s)
{
  pthread_mutex_lock(&s->mu);
  bool last = --s->refs == 0;
  pthread_mutex_unlock(&s->mu);
  if (!last)
    return;
  for (size_t i = s->head; i < s->n; i++)
    free(s->ev[i].json);
  free(s->ev);
  free(s->error);
  free(s->session_id);
  if (s->resume)
    stream_unref(s->resume);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
}

bool stream_push_event(struct stream *s, uint64_t seq, const char *json, size_t len, bool final)
{
  pthread_mutex_lock(&s->mu);
  if (s->head && s->head == s->n) /* all sent or forgotten: the list starts over */
    s->head = s->n = 0;
  if (s->n - s->head >= STREAM_MAX_QUEUED && !final) { /* a client that reads nothing */
    pthread_mutex_unlock(&s->mu);
    return false;
  }
  s->ev = cap_xrealloc(s->ev, (s->n + 1) * sizeof *s->ev);
  s->last_seq = seq ? seq : s->last_seq + 1;
  s->ev[s->n++] = (struct stream_event){cap_xstrndup(json, len), len, s->last_seq};
  s->done |= final;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return true;
}

void stream_push(struct stream *s, const char *json, size_t len, bool final)
{
  (void)stream_push_event(s, 0, json, len, final);
}

void stream_fail(struct stream *s, int http_status, const char *error)
{
  pthread_mutex_lock(&s->mu);
  s->http_status = http_status;
  s->error = error ? cap_xstrdup(error) : NULL;
  s->done = true;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

void stream_finish(struct stream *s)
{
  pthread_mutex_lock(&s->mu);
  s->done = true;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

size_t stream_next(const struct stream *s, uint64_t after)
{
  size_t i = s->head;
  while (i < s->n && s->ev[i].seq <= after)
    i++;
  return i;
}

void stream_event_id(char out[STREAM_ID_MAX], unsigned number, uint64_t seq)
{
  snprintf(out, STREAM_ID_MAX, "%u-%" PRIu64, number, seq);
}

/* Digits only, no sign, no leading zero, within max. */
static const char *read_number(const char *p, uint64_t max, uint64_t *out)
{
  if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9'))
    return NULL;
  uint64_t v = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    uint64_t d = (uint64_t)(*p - '0');
    if (v > (max - d) / 10)
      return NULL;
    v = v * 10 + d;
  }
  *out = v;
  return p;
}

int stream_parse_event_id(const char *id, unsigned *number, uint64_t *seq)
{
  uint64_t a, b;
  const char *p = read_number(id, UINT32_MAX, &a);
  if (!p || *p != '-' || !(p = read_number(p + 1, UINT64_MAX, &b)) || *p)
    return -EINVAL;
  *number = (unsigned)a;
  *seq = b;
  return 0;
}
