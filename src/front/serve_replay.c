/* Resumable SSE streams of an HTTP session (2025-06-18 and 2025-11-25's
 * "Resumability and Redelivery"), on serve's main thread: each event of
 * a session's GET stream and of its calls' SSE answers is numbered by the
 * session (its id "STREAM-SEQ"), kept after it is sent, and a GET with
 * Last-Event-ID reads the stream it names again after that event. The
 * session keeps at most REPLAY_EVENTS events or REPLAY_BYTES bytes of
 * them, the oldest forgotten first; an event the current reader has not
 * written yet is never forgotten (a slow reader is bounded by the
 * stream's own queue). Past REPLAY_TOTAL held by all sessions, a
 * session forgets its events once they are sent (1,000 sessions of one
 * token holder each held 1 MiB: tests/review10/replay_memory.sh). An id
 * is looked up among the session's own streams only. docs/serve.md
 * "Resuming a stream". */
#include <sodium.h>
#include <stdlib.h>

#include "front/serve_core.h"
#include "front/serve_internal.h"

#define REPLAY_EVENTS 256
#define REPLAY_BYTES (1024 * 1024)
#define REPLAY_TOTAL (32 * 1024 * 1024) /* over every session */

void serve_replay_open(struct sess *x, struct stream *st)
{
  if (x->sessionless)
    return; /* 2026-07-28 has no resumption */
  /* numbered from a random start: another session's ids name none of these */
  if (!x->replay_streams)
    x->replay_streams = randombytes_uniform(UINT32_MAX / 2) + 1;
  pthread_mutex_lock(&st->mu);
  st->resumable = true;
  st->number = ++x->replay_streams;
  st->prime_seq = ++x->replay_seq;
  pthread_mutex_unlock(&st->mu);
}

/* The session's streams that may hold events: its calls', its GET
 * stream, and those kept after they ended. */
static size_t streams_of(struct sess *x, struct stream ***out)
{
  size_t n = 0;
  struct stream **all = cap_xcalloc(x->n_routes + x->n_kept + 1, sizeof *all);
  for (size_t i = 0; i < x->n_routes; i++)
    all[n++] = x->routes[i].stream;
  if (x->listen)
    all[n++] = x->listen;
  for (size_t i = 0; i < x->n_kept; i++)
    all[n++] = x->kept[i];
  *out = all;
  return n;
}

/* With s->mu held: its oldest event, if it may be forgotten (written by
 * the current reader, or no reader is there), else NULL. */
static struct stream_event *forgettable(struct stream *s)
{
  if (!s->resumable || s->head == s->n)
    return NULL;
  struct stream_event *e = &s->ev[s->head];
  return e->seq <= s->sent || s->closed ? e : NULL;
}

/* Forgets the session's oldest events while it holds more than the
 * bound; then lets go of kept streams with nothing left. */
static void trim(struct sess *x)
{
  size_t bound = x->sv->replay_bytes > REPLAY_TOTAL ? 0 : REPLAY_BYTES;
  while (x->replay_events > REPLAY_EVENTS || x->replay_bytes > bound) {
    struct stream **all;
    size_t n = streams_of(x, &all);
    struct stream *oldest = NULL;
    uint64_t seq = 0;
    for (size_t i = 0; i < n; i++) {
      pthread_mutex_lock(&all[i]->mu);
      struct stream_event *e = forgettable(all[i]);
      if (e && (!oldest || e->seq < seq)) {
        oldest = all[i];
        seq = e->seq;
      }
      pthread_mutex_unlock(&all[i]->mu);
    }
    free(all);
    if (!oldest)
      break; /* all unwritten: the readers' queues bound them */
    pthread_mutex_lock(&oldest->mu);
    struct stream_event *e = &oldest->ev[oldest->head++];
    oldest->forgot = e->seq;
    x->replay_events--;
    x->replay_bytes -= e->len;
    x->sv->replay_bytes -= e->len;
    free(e->json);
    e->json = NULL;
    pthread_mutex_unlock(&oldest->mu);
  }
  for (size_t i = 0; i < x->n_kept;) {
    struct stream *s = x->kept[i];
    pthread_mutex_lock(&s->mu);
    bool empty = s->head == s->n;
    pthread_mutex_unlock(&s->mu);
    if (!empty) {
      i++;
      continue;
    }
    stream_unref(s);
    x->kept[i] = x->kept[--x->n_kept];
  }
}

void serve_replay_push(struct sess *x, struct stream *st, const char *json, size_t len, bool final)
{
  if (!st->resumable) { /* set before the request was accepted, on this thread */
    stream_push(st, json, len, final);
    return;
  }
  bool kept = stream_push_event(st, ++x->replay_seq, json, len, final);
  if (kept) {
    x->replay_events++;
    x->replay_bytes += len;
    x->sv->replay_bytes += len;
    trim(x);
  }
}

void serve_replay_keep(struct sess *x, struct stream *st)
{
  if (!st->resumable)
    return;
  pthread_mutex_lock(&st->mu);
  st->refs++;
  pthread_mutex_unlock(&st->mu);
  x->kept = cap_xrealloc(x->kept, (x->n_kept + 1) * sizeof *x->kept);
  x->kept[x->n_kept++] = st;
  trim(x); /* nothing held: let go at once */
}

void serve_replay_trim(struct sess *x)
{
  if (x->sv->replay_bytes > REPLAY_TOTAL && x->replay_bytes)
    trim(x);
}

void serve_replay_end(struct sess *x)
{
  x->sv->replay_bytes -= x->replay_bytes;
  x->replay_bytes = x->replay_events = 0;
  for (size_t i = 0; i < x->n_kept; i++)
    stream_unref(x->kept[i]);
  free(x->kept);
  x->kept = NULL;
  x->n_kept = 0;
}

static struct stream *find(struct sess *x, unsigned number)
{
  struct stream **all;
  size_t n = streams_of(x, &all);
  struct stream *found = NULL;
  for (size_t i = 0; i < n && !found; i++)
    if (all[i]->resumable && all[i]->number == number)
      found = all[i];
  free(all);
  return found;
}

void serve_replay_resume(struct sess *x, const char *last_event_id, struct stream *get)
{
  unsigned number;
  uint64_t seq;
  struct stream *s = NULL;
  if (stream_parse_event_id(last_event_id, &number, &seq) == 0)
    s = find(x, number);
  if (s) {
    pthread_mutex_lock(&s->mu);
    bool known =
        seq >= s->forgot && seq >= s->prime_seq && (seq == s->prime_seq || seq <= s->last_seq);
    if (known) { /* its reader from now on: an older one ends */
      s->reader++;
      s->closed = false;
      s->sent = seq;
      s->refs++; /* get's */
      pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    if (!known)
      s = NULL;
  }
  if (!s) {
    stream_fail(get, 400,
                "Bad Request: Last-Event-ID names no event this session still holds (a session "
                "keeps its last 256 events or 1 MiB); send the request again");
    return;
  }
  pthread_mutex_lock(&get->mu);
  get->resume = s;
  get->resume_gen = s->reader;
  get->resume_after = seq;
  get->accepted = true;
  pthread_cond_broadcast(&get->cv);
  pthread_mutex_unlock(&get->mu);
}
