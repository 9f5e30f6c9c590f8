/* A call of the gRPC server answered (grpc_serve_h2.h): its request
 * decoded and handed to the options' handler, the artifact calls'
 * streams, the answer and its status. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "front/grpc_serve_h2.h"
#include "front/grpc_serve_msg.h"

#define SEND_QUEUE_MAX (1u << 20) /* a download's bytes not yet taken when send_chunk waits */

/* Writes what the session queued; a socket that does not take it all
 * needs a reader polling for room: the lead goes to one, woken. */
static void flush_unlock(struct gs_stream *k)
{
  struct gs_conn *c = k->c;
  gs_conn_flush(c);
  bool blocked = c->want_out;
  pthread_mutex_unlock(&c->mu);
  if (blocked) {
    cap_wait_hook_run(&k->lead);
    gs_conn_wake(c);
  }
}

/* ---- the artifact calls' streams ---- */

struct grpc_serve_stream {
  struct gs_stream *k;
  int idle_ms;
  bool ended, failed;
  struct cap_buf in;       /* the chunk taken last */
  struct cap_buf inflated; /* it inflated, when it came compressed */
  void *msg;               /* it decoded */
};

static int recv_chunk(struct grpc_serve_stream *st, struct grpc_serve_chunk *ch)
{
  memset(ch, 0, sizeof *ch);
  grpc_serve_chunk_free(st->msg);
  st->msg = NULL;
  if (st->failed || st->ended)
    return st->failed ? -1 : 0;
  struct gs_stream *k = st->k;
  cap_wait_hook_run(&k->lead); /* the connection is read for the chunks */
  struct timespec until = gs_in_ms(st->idle_ms);
  pthread_mutex_lock(&k->c->mu);
  int r;
  bool packed = false;
  while ((r = gs_stream_take(k, &st->in, &packed)) == -1 && !k->closed && !k->too_big &&
         !k->compressed)
    if (pthread_cond_timedwait(&k->cv, &k->c->mu, &until) == ETIMEDOUT)
      break;
  flush_unlock(k); /* the window given back */
  if (r == 0) {
    st->ended = true;
    return 0;
  }
  if (r == 1 && packed) { /* a chunk of max_message at most, inflated too */
    r = grpc_serve_inflate((const uint8_t *)st->in.data, st->in.len, k->c->srv->lim.max_message,
                           &st->inflated) == 0
            ? 1
            : -1;
    cap_buf_free(&st->in);
    st->in = st->inflated;
    st->inflated = (struct cap_buf){0};
  }
  if (r != 1 || !grpc_serve_decode_chunk((const uint8_t *)st->in.data, st->in.len, ch, &st->msg)) {
    st->failed = true;
    memset(ch, 0, sizeof *ch);
    return -1;
  }
  return 1;
}

static bool send_chunk(struct grpc_serve_stream *st, const struct grpc_serve_chunk *ch)
{
  if (st->failed)
    return false;
  struct gs_stream *k = st->k;
  cap_wait_hook_run(&k->lead);
  size_t len = 0;
  uint8_t *buf = grpc_serve_encode_chunk(ch, &len);
  struct timespec until = gs_in_ms(st->idle_ms);
  pthread_mutex_lock(&k->c->mu);
  bool ok = gs_stream_send(k, buf, len);
  free(buf);
  gs_conn_flush(k->c);
  if (k->c->want_out)
    gs_conn_wake(k->c);
  while (ok && !k->closed && !k->c->dead && k->out.len - k->out_off > SEND_QUEUE_MAX)
    if (pthread_cond_timedwait(&k->cv, &k->c->mu, &until) == ETIMEDOUT)
      ok = false;
  ok = ok && !k->closed && !k->c->dead;
  pthread_mutex_unlock(&k->c->mu);
  st->failed = !ok;
  return ok;
}

/* ---- the answer ---- */

/* Sends the answer (its message, then the status): whether it went, the
 * stream still open (not reset by the client, its deadline not past). */
static bool respond(struct gs_stream *k, const struct grpc_serve_answer *a)
{
  uint8_t *msg = NULL;
  size_t len = 0;
  if (a->status == GRPC_SERVE_OK && k->method != GRPC_SERVE_CAP_DOWNLOAD)
    msg = grpc_serve_encode(k->method, a, &len);
  bool late = k->deadline_us && cap_now_us(CLOCK_MONOTONIC) > k->deadline_us;
  pthread_mutex_lock(&k->c->mu);
  bool went;
  if (late) {
    gs_stream_finish(k, GRPC_SERVE_DEADLINE_EXCEEDED, "the call's deadline passed");
    went = false;
  } else {
    went =
        (!msg || gs_stream_send(k, msg, len)) &&
        gs_stream_finish(k, (int)a->status, a->status == GRPC_SERVE_OK ? NULL : a->status_message);
  }
  flush_unlock(k);
  free(msg);
  return went;
}

static void refusal(struct gs_stream *k, bool room, struct grpc_serve_answer *a)
{
  const struct grpc_serve_options *o = &k->c->srv->opt;
  if (!room) {
    a->status = GRPC_SERVE_RESOURCE_EXHAUSTED;
    a->status_message = cap_xstrdup("too many calls at once; retry");
  } else if (!k->known) {
    a->status = GRPC_SERVE_UNIMPLEMENTED;
    a->status_message = cap_xasprintf("capsule serves no method %.200s", gs_stream_path(k));
  } else if (!k->grpc_type) {
    a->status = GRPC_SERVE_INVALID_ARGUMENT;
    a->status_message = cap_xstrdup("the request's content-type is not application/grpc");
  } else if (!k->admitted) {
    a->status = GRPC_SERVE_UNAUTHENTICATED;
    a->status_message = cap_xstrdup(o->unauthenticated_message ? o->unauthenticated_message
                                                               : "a bearer token is needed");
  } else if (k->second) {
    a->status = GRPC_SERVE_INVALID_ARGUMENT;
    a->status_message = cap_xstrdup("the request has a second message: the method takes one");
  } else if (k->too_big) {
    a->status = GRPC_SERVE_RESOURCE_EXHAUSTED;
    a->status_message = cap_xasprintf("a message is larger than the limit of %zu bytes",
                                      k->c->srv->lim.max_message);
  } else if (k->crowded) {
    a->status = GRPC_SERVE_RESOURCE_EXHAUSTED;
    a->status_message = cap_xstrdup("capsule holds too many requests' bytes at once; retry");
  } else if (k->compressed && k->encoding == GRPC_ENC_OTHER) {
    a->status = GRPC_SERVE_UNIMPLEMENTED;
    a->status_message =
        cap_xstrdup("capsule takes messages in the grpc-encodings " GRPC_SERVE_ACCEPT_ENCODING);
  } else if (k->compressed) { /* grpc-go's and libgrpc's INTERNAL */
    a->status = GRPC_SERVE_INTERNAL;
    a->status_message = cap_xstrdup("a message is flagged compressed with no grpc-encoding (or "
                                    "identity), or its flag is neither 0 nor 1");
  }
}

/* The call handed to the handler: its request decoded (an upload's
 * chunks come through recv_chunk) */
static void handle(struct gs_stream *k, struct grpc_serve_answer *a)
{
  struct grpc_serve *s = k->c->srv;
  struct grpc_serve_request req = {0};
  struct grpc_serve_stream st = {.k = k, .idle_ms = s->lim.stream_idle_ms};
  struct grpc_serve_call call = {
      .method = k->method,
      .bearer = k->bearer,
      .user = k->user,
      .peer = k->c->peer,
      .stream = &st,
      .wait = &k->lead,
      .recv_chunk = k->method == GRPC_SERVE_CAP_UPLOAD ? recv_chunk : NULL,
      .send_chunk = k->method == GRPC_SERVE_CAP_DOWNLOAD ? send_chunk : NULL};
  /* a unary request is one whole message, its bytes stable once dispatched
   * (an upload's are the reader's: its chunks are taken under mu) */
  bool upload = k->method == GRPC_SERVE_CAP_UPLOAD;
  bool one = !upload && k->scan >= 5 && k->scan == k->in.len;
  const uint8_t *body = one ? (const uint8_t *)k->in.data + 5 : (const uint8_t *)"";
  size_t len = one ? k->scan - 5 : 0;
  struct cap_buf inflated = {0};
  int packed =
      one && k->in.data[0] == 1 ? grpc_serve_inflate(body, len, s->lim.max_message, &inflated) : 1;
  if (packed == 0) {
    body = (const uint8_t *)(inflated.data ? inflated.data : "");
    len = inflated.len;
  }
  uint64_t now = cap_now_us(CLOCK_MONOTONIC);
  if (k->deadline_us) /* what is left of the client's, rounded up */
    call.deadline_ms = k->deadline_us > now ? (k->deadline_us - now + 999) / 1000 : 0;
  if (packed == -E2BIG) {
    a->status = GRPC_SERVE_RESOURCE_EXHAUSTED;
    a->status_message = cap_xasprintf("a message is larger than the limit of %zu bytes inflated",
                                      s->lim.max_message);
  } else if (packed < 0) { /* a failed decompression: INTERNAL, as grpc-go and libgrpc say */
    a->status = GRPC_SERVE_INTERNAL;
    a->status_message =
        cap_xstrdup("the request's compressed message is not whole gzip or deflate");
  } else if ((!upload && !one) || !grpc_serve_decode(k->method, body, len, &req, &call)) {
    a->status = GRPC_SERVE_INVALID_ARGUMENT;
    a->status_message = cap_xstrdup("the request is not a well-formed message of its method");
  } else if (k->deadline_us && !call.deadline_ms) {
    a->status = GRPC_SERVE_DEADLINE_EXCEEDED;
    a->status_message = cap_xstrdup("the call's deadline passed before it started");
  } else {
    pthread_mutex_lock(&k->c->mu);
    bool gone = k->closed; /* a client that gave up while its call waited */
    k->handling = !gone;
    pthread_mutex_unlock(&k->c->mu);
    call.cancel = &k->cancel;
    if (gone) {
      a->status = GRPC_SERVE_CANCELLED;
      a->status_message = cap_xstrdup("the client cancelled the call");
    } else {
      s->opt.handler(s->opt.arg, &call, a);
    }
    pthread_mutex_lock(&k->c->mu); /* from now on the stream's end fires nothing */
    k->handling = false;
    pthread_mutex_unlock(&k->c->mu);
  }
  grpc_serve_request_free(&req);
  grpc_serve_chunk_free(st.msg);
  cap_buf_free(&st.in);
  cap_buf_free(&inflated);
}

bool gs_answer(struct gs_stream *k)
{
  struct gs_conn *c = k->c;
  struct grpc_serve *s = c->srv;
  bool led = cap_wait_hook_armed(&k->lead);
  pthread_mutex_lock(&s->lock);
  bool room = s->calls < s->opt.max_calls;
  s->calls += room;
  pthread_mutex_unlock(&s->lock);
  struct grpc_serve_answer a = {0};
  pthread_mutex_lock(&c->mu); /* an upload's too_big and compressed are the reader's */
  refusal(k, room, &a);
  pthread_mutex_unlock(&c->mu);
  if (a.status == GRPC_SERVE_OK)
    handle(k, &a);
  bool went = respond(k, &a);
  if (a.finish)
    a.finish(a.finish_ctx, went);
  free(a.status_message);
  free(a.result);
  free(a.error);
  if (room) {
    pthread_mutex_lock(&s->lock);
    s->calls--;
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
  }
  bool handed = led && !cap_wait_hook_armed(&k->lead);
  pthread_mutex_lock(&c->mu);
  gs_stream_done(k);
  c->calls--;
  gs_conn_flush(c);
  gs_conn_unref_locked(c);
  return handed;
}

void gs_answer_task(struct gs_task *t)
{
  gs_answer((struct gs_stream *)((char *)t - offsetof(struct gs_stream, task)));
}
