/* The streams that carry an HTTP request's messages from the main thread
 * to the HTTP thread answering it (serve_internal.h). */
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
    free(s->msgs[i]);
  free(s->msgs);
  free(s->lens);
  free(s->error);
  free(s->session_id);
  cap_buf_free(&s->pending);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
}

void stream_push(struct stream *s, const char *json, size_t len, bool final)
{
  pthread_mutex_lock(&s->mu);
  if (s->head && s->head == s->n) /* all sent (a long-lived GET stream): the list starts over */
    s->head = s->n = 0;
  if (s->n - s->head >= STREAM_MAX_QUEUED && !final) { /* a client that reads nothing */
    pthread_mutex_unlock(&s->mu);
    return;
  }
  s->msgs = cap_xrealloc(s->msgs, (s->n + 1) * sizeof *s->msgs);
  s->lens = cap_xrealloc(s->lens, (s->n + 1) * sizeof *s->lens);
  s->msgs[s->n] = cap_xstrndup(json, len);
  s->lens[s->n++] = len;
  s->done |= final;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
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
