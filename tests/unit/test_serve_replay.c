/* Unit tests for serve's resumable streams (front/serve_replay.c,
 * front/serve_stream.c) without a server: a session's bound (256 events
 * or 1 MiB, the oldest forgotten first, never an event its connected
 * reader has not been sent), the ids (written and read back), a GET's
 * Last-Event-ID pointed at its stream or refused (forgotten, unknown,
 * another session's), ended streams kept while they hold events, and
 * the 2026-07-28 form's streams left without ids. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "front/serve_core.h"
#include "front/serve_internal.h"
#include "unit.h"

static struct serve sv; /* what the sessions hold, all told */

static struct stream *add_call(struct sess *x, const char *id)
{
  struct stream *st = stream_new();
  serve_replay_open(x, st);
  x->routes = cap_xrealloc(x->routes, (x->n_routes + 1) * sizeof *x->routes);
  x->routes[x->n_routes++] = (struct route){.id = cap_xstrdup(id), .stream = st};
  return st;
}

static void push_n(struct sess *x, struct stream *st, int n, size_t len)
{
  char *msg = cap_xcalloc(1, len + 1);
  memset(msg, 'x', len);
  for (int i = 0; i < n; i++)
    serve_replay_push(x, st, msg, len, false);
  free(msg);
}

/* The GET a Last-Event-ID makes: 0 and its stream resumed, or the HTTP
 * status it is refused with. */
static int resume(struct sess *x, const char *id, struct stream **target, uint64_t *after)
{
  struct stream *get = stream_new();
  serve_replay_resume(x, id, get);
  int status = get->http_status;
  *target = get->resume; /* the caller's reference now */
  get->resume = NULL;
  *after = get->resume_after;
  stream_unref(get);
  return status;
}

static void id_of(char out[STREAM_ID_MAX], const struct stream *st, uint64_t seq)
{
  stream_event_id(out, st->number, seq);
}

static void end_session(struct sess *x)
{
  for (size_t i = 0; i < x->n_routes; i++) {
    stream_unref(x->routes[i].stream);
    free(x->routes[i].id);
  }
  free(x->routes);
  serve_replay_end(x);
}

static void test_ids(void)
{
  char id[STREAM_ID_MAX];
  unsigned number;
  uint64_t seq;
  stream_event_id(id, 4294967295u, UINT64_MAX);
  CHECK_STR(id, "4294967295-18446744073709551615");
  CHECK(stream_parse_event_id(id, &number, &seq) == 0 && number == 4294967295u &&
        seq == UINT64_MAX);
  static const char *const bad[] = {
      "",     "1",   "1-",    "-1",           "01-2",
      "1-02", "1-x", "1-2-3", "4294967296-1", "1-18446744073709551616",
      " 1-2", "1-2 "};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECK(stream_parse_event_id(bad[i], &number, &seq) < 0);
}

static void test_bound(void)
{
  struct sess x = {.sv = &sv}, other = {.sv = &sv};
  struct stream *a = add_call(&x, "1");
  CHECK(a->resumable && a->prime_seq > 0);
  uint64_t first = a->prime_seq + 1;
  push_n(&x, a, 300, 10);
  /* no reader has taken them, and the request's reader is not gone: none forgotten */
  CHECK(x.replay_events == 300 && a->head == 0);
  a->closed = true; /* its client left */
  push_n(&x, a, 1, 10);
  CHECK(x.replay_events == 256);
  CHECK(a->forgot == first + 44);
  char id[STREAM_ID_MAX];
  struct stream *t;
  uint64_t after;
  id_of(id, a, first);
  CHECK(resume(&x, id, &t, &after) == 400); /* what followed it is forgotten */
  id_of(id, a, a->prime_seq);
  CHECK(resume(&x, id, &t, &after) == 400);
  id_of(id, a, a->forgot);
  CHECK(resume(&x, id, &t, &after) == 0 && t == a && after == a->forgot);
  CHECK(!a->closed && a->sent == after); /* its reader from now on */
  stream_unref(t);
  a->closed = true; /* and gone again */
  id_of(id, a, a->last_seq + 1);
  CHECK(resume(&x, id, &t, &after) == 400); /* not yet sent: not an id it gave */
  /* another session: the same id names none of its streams */
  struct stream *b = add_call(&other, "1");
  push_n(&other, b, 3, 10);
  id_of(id, a, a->last_seq);
  CHECK(resume(&other, id, &t, &after) == 400);
  CHECK(resume(&x, "999-1", &t, &after) == 400);
  /* a connected reader's unsent events stay: the closed stream's go first */
  struct stream *c = add_call(&x, "2");
  uint64_t before = a->forgot;
  push_n(&x, c, 100, 10);
  CHECK(c->head == 0 && a->forgot == before + 100 && x.replay_events == 256);
  /* bytes: 1 MiB at most of what may be forgotten */
  c->closed = true;
  push_n(&x, c, 2, 600 * 1024);
  CHECK(x.replay_bytes <= 1024 * 1024 && c->n - c->head == 1);
  end_session(&x);
  end_session(&other);
}

static void test_kept(void)
{
  struct sess x = {.sv = &sv};
  struct stream *a = add_call(&x, "1");
  push_n(&x, a, 2, 10);
  serve_replay_push(&x, a, "{}", 2, true); /* its answer: the route goes, the stream is kept */
  stream_finish(a);
  serve_replay_keep(&x, a);
  x.n_routes = 0;
  free(x.routes[0].id);
  CHECK(x.n_kept == 1);
  char id[STREAM_ID_MAX];
  struct stream *t;
  uint64_t after;
  id_of(id, a, a->prime_seq);
  CHECK(resume(&x, id, &t, &after) == 0 && t == a && stream_next(a, after) == a->head);
  stream_unref(t);
  a->closed = true;
  push_n(&x, add_call(&x, "2"), 300, 1); /* the kept stream's events forgotten, then itself */
  x.routes[0].stream->closed = true;
  push_n(&x, x.routes[0].stream, 1, 1);
  CHECK(x.n_kept == 0);
  stream_unref(a);
  CHECK(resume(&x, id, &t, &after) == 400);
  end_session(&x);
}

static void test_sessionless(void)
{
  struct sess x = {.sv = &sv, .sessionless = true};
  struct stream *a = add_call(&x, "1");
  CHECK(!a->resumable);
  push_n(&x, a, 3, 10);
  CHECK(x.replay_events == 0 && a->n == 3);
  end_session(&x);
}

/* Past 32 MiB held by all sessions, a session keeps none of its sent
 * events (tests/review10/replay_memory.sh); its end gives back its own */
static void test_total(void)
{
  struct sess x = {.sv = &sv}, y = {.sv = &sv};
  CHECK(sv.replay_bytes == 0);
  struct stream *a = add_call(&x, "1");
  a->closed = true; /* its reader gone: sent events may go */
  push_n(&x, a, 10, 100);
  CHECK(x.replay_events == 10 && sv.replay_bytes == 1000);
  sv.replay_bytes += 33u << 20; /* the other sessions' */
  struct stream *b = add_call(&y, "1");
  b->closed = true;
  push_n(&y, b, 10, 100);
  CHECK(y.replay_events == 0 && y.replay_bytes == 0);
  push_n(&x, a, 1, 100); /* x's turn: its own kept events go too */
  CHECK(x.replay_events == 0 && x.replay_bytes == 0);
  sv.replay_bytes -= 33u << 20;
  CHECK(sv.replay_bytes == 0);
  push_n(&x, a, 3, 100); /* under the total again: kept */
  CHECK(x.replay_events == 3);
  end_session(&x);
  end_session(&y);
  CHECK(sv.replay_bytes == 0);
}

UNIT_MAIN(test_ids, test_bound, test_kept, test_sessionless, test_total)
