/* The gRPC server, built as the shared module capsule-grpc-serve.so (see
 * grpc_serve_module.h): gRPC's core API, a pool of worker threads of
 * which one at a time takes calls and answers the one it took itself
 * (worker: leader and followers), each call with a completion queue of
 * its own, a call that came alone answered with the lead held (lazy:
 * see worker); a worker idle for WORKER_IDLE_MS ends (a thread started per
 * call cost every call its start and its stack); the
 * messages are grpc_serve_msg.c's. The artifact calls stream: the handler
 * pulls an upload's chunks (recv_chunk) and pushes a download's
 * (send_chunk), each within the options' stream_idle_ms, as is a call's
 * first message. */
#include "front/grpc_serve_module.h"

#include <errno.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/buf.h"
#include "core/wait_hook.h"
#include "front/grpc_serve_msg.h"

#define DEFAULT_MAX_CALLS 64
#define DEFAULT_MAX_MESSAGE (4u << 20)
#define WORKER_IDLE_MS 10000
#define QUEUED_US 50 /* a call taken sooner than this after asking had waited: calls pile up */

struct grpc_serve {
  grpc_server *server;
  grpc_completion_queue *cq; /* calls arriving, and the shutdown's notice */
  struct grpc_serve_options opt;
  pthread_mutex_t lock;
  pthread_cond_t idle;    /* calls or active went down */
  pthread_cond_t work;    /* the lead is free, or stopping */
  struct pending *posted; /* the request for the next call (the leader's) */
  unsigned active;        /* worker threads running */
  unsigned waiting;       /* of them, waiting to lead */
  unsigned calls;         /* calls being answered (at most max_calls) */
  bool leader;            /* a thread takes calls from cq */
  bool cq_done;           /* cq has shut down: no one leads any more */
  bool stopping;
};

/* One call, from its arrival to its last batch. */
struct pending {
  struct grpc_serve *s;
  grpc_call *call;
  grpc_call_details details;
  grpc_metadata_array md;
  grpc_completion_queue *cq; /* this call's batches */
  char *user;                /* the options' authenticate's answer */
  struct pending *next;      /* in the queue */
  /* answered with the lead held (no other thread takes calls meanwhile)
   * until it is about to wait long: then lead.fn hands the lead over */
  struct cap_wait_hook lead;
};

static int shutdown_tag; /* its address marks the server's shutdown notice */

static struct pending *pending_new(struct grpc_serve *s)
{
  struct pending *p = cap_xcalloc(1, sizeof *p);
  p->s = s;
  grpc_call_details_init(&p->details);
  grpc_metadata_array_init(&p->md);
  p->cq = grpc_completion_queue_create_for_next(NULL);
  return p;
}

static void pending_free(struct pending *p)
{
  if (p->call)
    grpc_call_unref(p->call);
  grpc_call_details_destroy(&p->details);
  grpc_metadata_array_destroy(&p->md);
  grpc_completion_queue_shutdown(p->cq);
  while (grpc_completion_queue_next(p->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
         GRPC_QUEUE_SHUTDOWN)
    ;
  grpc_completion_queue_destroy(p->cq);
  free(p->user);
  free(p);
}

/* The call's next event by deadline; a call answered with the lead held
 * hands it over once it has waited CAP_WAIT_SOON_US (a client slow to
 * send or to take, say), so that no other call waits on it. */
static grpc_event next_event(struct pending *p, gpr_timespec deadline)
{
  deadline = gpr_convert_clock_type(deadline, GPR_CLOCK_MONOTONIC);
  if (cap_wait_hook_armed(&p->lead)) {
    gpr_timespec soon = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                     gpr_time_from_micros(CAP_WAIT_SOON_US, GPR_TIMESPAN));
    if (gpr_time_cmp(soon, deadline) < 0) {
      grpc_event ev = grpc_completion_queue_next(p->cq, soon, NULL);
      if (ev.type != GRPC_QUEUE_TIMEOUT)
        return ev;
      cap_wait_hook_run(&p->lead);
    }
  }
  return grpc_completion_queue_next(p->cq, deadline, NULL);
}

/* Runs one batch on the call's queue and waits for it: its success. */
static bool batch(struct pending *p, grpc_op *ops, size_t n)
{
  if (grpc_call_start_batch(p->call, ops, n, p, NULL) != GRPC_CALL_OK)
    return false;
  grpc_event ev = next_event(p, gpr_inf_future(GPR_CLOCK_MONOTONIC));
  return ev.type == GRPC_OP_COMPLETE && ev.success;
}

/* The same within ms: past it the call is cancelled (a client that sends
 * nothing, or takes nothing, does not hold a worker), and fails. */
static bool batch_within(struct pending *p, grpc_op *ops, size_t n, int ms)
{
  if (grpc_call_start_batch(p->call, ops, n, p, NULL) != GRPC_CALL_OK)
    return false;
  grpc_event ev = next_event(
      p, gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN)));
  if (ev.type == GRPC_QUEUE_TIMEOUT) {
    grpc_call_cancel(p->call, NULL);
    grpc_completion_queue_next(p->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    return false;
  }
  return ev.type == GRPC_OP_COMPLETE && ev.success;
}

static char *slice_str(grpc_slice s)
{
  return grpc_slice_to_c_string(s); /* gpr_malloc'd, freed with gpr_free */
}

static bool slice_is(grpc_slice s, const char *text)
{
  size_t n = strlen(text);
  return GRPC_SLICE_LENGTH(s) == n && memcmp(GRPC_SLICE_START_PTR(s), text, n) == 0;
}

/* The token of "authorization: Bearer TOKEN" (gpr_malloc'd), or NULL. */
static char *bearer_of(const grpc_metadata_array *md)
{
  for (size_t i = 0; i < md->count; i++) {
    if (!slice_is(md->metadata[i].key, "authorization"))
      continue;
    char *v = slice_str(md->metadata[i].value);
    if (strncasecmp(v, "Bearer ", 7) == 0) {
      memmove(v, v + 7, strlen(v + 7) + 1);
      return v;
    }
    gpr_free(v);
  }
  return NULL;
}

/* The request message as one contiguous slice. */
static grpc_slice message_slice(grpc_byte_buffer *bb)
{
  grpc_byte_buffer_reader r;
  if (!bb || !grpc_byte_buffer_reader_init(&r, bb))
    return grpc_empty_slice();
  grpc_slice s = grpc_byte_buffer_reader_readall(&r);
  grpc_byte_buffer_reader_destroy(&r);
  return s;
}

static grpc_byte_buffer *buffer_of(uint8_t *buf, size_t len)
{
  grpc_slice sl = grpc_slice_from_copied_buffer((const char *)buf, len);
  free(buf);
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&sl, 1);
  grpc_slice_unref(sl);
  return bb;
}

/* ---- the artifact calls' streams ---- */

struct grpc_serve_stream {
  struct pending *p;
  grpc_byte_buffer *first; /* the first message, received with the call's first batch */
  bool first_pending, ended, failed;
  void *msg; /* the chunk given last */
};

static int recv_chunk(struct grpc_serve_stream *s, struct grpc_serve_chunk *c)
{
  memset(c, 0, sizeof *c);
  grpc_serve_chunk_free(s->msg);
  s->msg = NULL;
  if (s->failed || s->ended)
    return s->failed ? -1 : 0;
  grpc_byte_buffer *in = NULL;
  if (s->first_pending) {
    in = s->first;
    s->first = NULL;
    s->first_pending = false;
  } else {
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &in;
    if (!batch_within(s->p, &op, 1, s->p->s->opt.stream_idle_ms)) {
      s->failed = true;
      if (in)
        grpc_byte_buffer_destroy(in);
      return -1;
    }
  }
  if (!in && grpc_call_failed_before_recv_message(s->p->call)) { /* cancelled, not ended */
    s->failed = true;
    return -1;
  }
  if (!in) {
    s->ended = true;
    return 0;
  }
  grpc_slice body = message_slice(in);
  grpc_byte_buffer_destroy(in);
  bool ok =
      grpc_serve_decode_chunk(GRPC_SLICE_START_PTR(body), GRPC_SLICE_LENGTH(body), c, &s->msg);
  grpc_slice_unref(body);
  if (!ok) {
    s->failed = true;
    memset(c, 0, sizeof *c);
    return -1;
  }
  return 1;
}

static bool send_chunk(struct grpc_serve_stream *s, const struct grpc_serve_chunk *c)
{
  if (s->failed)
    return false;
  size_t len = 0;
  uint8_t *buf = grpc_serve_encode_chunk(c, &len);
  grpc_byte_buffer *bb = buffer_of(buf, len);
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_SEND_MESSAGE;
  op.data.send_message.send_message = bb;
  bool ok = batch_within(s->p, &op, 1, s->p->s->opt.stream_idle_ms);
  grpc_byte_buffer_destroy(bb);
  s->failed = !ok;
  return ok;
}

static void stream_free(struct grpc_serve_stream *s)
{
  grpc_serve_chunk_free(s->msg);
  if (s->first)
    grpc_byte_buffer_destroy(s->first);
}

/* The answer's message for the method, NULL when the status is not OK
 * (or the method's messages are sent as they come). */
static grpc_byte_buffer *answer_message(enum grpc_serve_method method,
                                        const struct grpc_serve_answer *a)
{
  if (a->status != GRPC_SERVE_OK || method == GRPC_SERVE_CAP_DOWNLOAD)
    return NULL;
  size_t len = 0;
  uint8_t *buf = grpc_serve_encode(method, a, &len);
  return buffer_of(buf, len);
}

/* Sends the answer (message, status) and waits for the client's close:
 * whether it went, the call not cancelled first. */
static bool respond(struct pending *p, enum grpc_serve_method method,
                    const struct grpc_serve_answer *a, bool sent_metadata)
{
  int cancelled = 0;
  grpc_byte_buffer *msg = answer_message(method, a);
  grpc_slice details = grpc_slice_from_copied_string(a->status_message ? a->status_message : "");
  grpc_op ops[4];
  size_t n = 0;
  memset(ops, 0, sizeof ops);
  if (!sent_metadata)
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  ops[n++].data.recv_close_on_server.cancelled = &cancelled;
  if (msg) {
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = msg;
  }
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status = (grpc_status_code)a->status;
  ops[n++].data.send_status_from_server.status_details = &details;
  bool went = batch(p, ops, n) && !cancelled;
  grpc_slice_unref(details);
  if (msg)
    grpc_byte_buffer_destroy(msg);
  return went;
}

static void answer_free(struct grpc_serve_answer *a)
{
  free(a->status_message);
  free(a->result);
  free(a->error);
}

/* The call's token checked before anything is read from the call: false
 * with a filled (UNAUTHENTICATED) when the options' authenticate refused
 * it. */
static bool admitted(struct pending *p, struct grpc_serve_answer *a)
{
  const struct grpc_serve_options *o = &p->s->opt;
  if (!o->authenticate)
    return true;
  char *bearer = bearer_of(&p->md);
  p->user = o->authenticate(o->arg, bearer);
  gpr_free(bearer);
  if (p->user)
    return true;
  a->status = GRPC_SERVE_UNAUTHENTICATED;
  a->status_message = cap_xstrdup(o->unauthenticated_message ? o->unauthenticated_message
                                                             : "a bearer token is needed");
  return false;
}

static void answer_call(struct pending *p)
{
  struct grpc_serve *s = p->s;
  struct grpc_serve_answer a = {0};
  enum grpc_serve_method method = GRPC_SERVE_INVOKE;
  bool known = grpc_serve_method_of((const char *)GRPC_SLICE_START_PTR(p->details.method),
                                    GRPC_SLICE_LENGTH(p->details.method), &method);
  if (!known) {
    char *m = slice_str(p->details.method);
    a.status = GRPC_SERVE_UNIMPLEMENTED;
    a.status_message = cap_xasprintf("capsule serves no method %.200s", m);
    gpr_free(m);
    respond(p, method, &a, false);
  } else if (!admitted(p, &a)) {
    respond(p, method, &a, false);
  } else {
    /* a unary call's headers go with its answer, in one write; a stream's
     * before its first message */
    bool streams = method == GRPC_SERVE_CAP_UPLOAD || method == GRPC_SERVE_CAP_DOWNLOAD;
    grpc_byte_buffer *in = NULL;
    grpc_op ops[2];
    memset(ops, 0, sizeof ops);
    size_t n = 0;
    if (streams)
      ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[n].op = GRPC_OP_RECV_MESSAGE;
    ops[n++].data.recv_message.recv_message = &in;
    bool got = batch_within(p, ops, n, s->opt.stream_idle_ms);
    struct grpc_serve_stream stream = {.p = p};
    if (got && method == GRPC_SERVE_CAP_UPLOAD) { /* the first chunk, or none */
      stream.first = in;
      stream.first_pending = true;
      in = NULL;
    }
    grpc_slice body = message_slice(in);
    struct grpc_serve_request req = {0};
    char *bearer = bearer_of(&p->md), *peer = grpc_call_get_peer(p->call);
    struct grpc_serve_call call = {
        .method = method,
        .bearer = bearer,
        .user = p->user,
        .peer = peer,
        .stream = &stream,
        .wait = &p->lead,
        .recv_chunk = method == GRPC_SERVE_CAP_UPLOAD ? recv_chunk : NULL,
        .send_chunk = method == GRPC_SERVE_CAP_DOWNLOAD ? send_chunk : NULL};
    if (!got || (!in && method != GRPC_SERVE_CAP_UPLOAD) ||
        !grpc_serve_decode(method, GRPC_SLICE_START_PTR(body), GRPC_SLICE_LENGTH(body), &req,
                           &call)) {
      a.status = GRPC_SERVE_INVALID_ARGUMENT;
      a.status_message = cap_xstrdup("the request is not a well-formed message of its method");
    } else {
      s->opt.handler(s->opt.arg, &call, &a);
    }
    bool went = respond(p, method, &a, streams);
    if (a.finish)
      a.finish(a.finish_ctx, went);
    stream_free(&stream);
    grpc_serve_request_free(&req);
    gpr_free(bearer);
    gpr_free(peer);
    grpc_slice_unref(body);
    if (in)
      grpc_byte_buffer_destroy(in);
  }
  answer_free(&a);
  pending_free(p);
}

static struct timespec in_ms(int ms)
{
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_sec += ms / 1000;
  t.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec++;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}

/* A call past the limit: refused at once, on this thread. */
static void refuse(struct pending *p)
{
  struct grpc_serve_answer a = {.status = GRPC_SERVE_RESOURCE_EXHAUSTED,
                                .status_message = cap_xstrdup("too many calls at once; retry")};
  respond(p, GRPC_SERVE_INVOKE, &a, false);
  answer_free(&a);
  pending_free(p);
}

/* The leader's part: keeps a request for the next call posted and waits
 * on the server's queue until a call comes that is within max_calls
 * (counted in calls; those past it refused here), or NULL once the
 * queue has shut down. *piled: the call was there (or came) at once, as
 * when calls come faster than they are answered. */
static struct pending *take(struct grpc_serve *s, bool *piled)
{
  for (;;) {
    pthread_mutex_lock(&s->lock);
    bool stopping = s->stopping;
    pthread_mutex_unlock(&s->lock);
    if (!s->posted && !stopping) {
      struct pending *p = pending_new(s);
      if (grpc_server_request_call(s->server, &p->call, &p->details, &p->md, p->cq, s->cq, p) ==
          GRPC_CALL_OK)
        s->posted = p;
      else
        pending_free(p);
    }
    gpr_timespec asked = gpr_now(GPR_CLOCK_MONOTONIC);
    grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    *piled = gpr_time_cmp(gpr_time_sub(gpr_now(GPR_CLOCK_MONOTONIC), asked),
                          gpr_time_from_micros(QUEUED_US, GPR_TIMESPAN)) < 0;
    if (ev.type == GRPC_QUEUE_SHUTDOWN)
      return NULL;
    if (ev.tag == &shutdown_tag)
      continue; /* the queue's shutdown follows */
    struct pending *got = ev.tag;
    if (got == s->posted)
      s->posted = NULL;
    if (!ev.success) { /* a request the shutdown cancelled */
      pending_free(got);
      continue;
    }
    pthread_mutex_lock(&s->lock);
    bool room = s->calls < s->opt.max_calls;
    s->calls += room;
    pthread_mutex_unlock(&s->lock);
    if (room)
      return got;
    refuse(got);
  }
}

static void *worker(void *arg);
static int start_worker(struct grpc_serve *s);

/* The lead handed over by the thread answering a call taken with it
 * (pending.lead): to a waiting worker, or a new one, unless another
 * leads already. */
static void hand_lead(void *arg)
{
  struct grpc_serve *s = arg;
  pthread_mutex_lock(&s->lock);
  bool vacant = !s->leader && !s->cq_done && !s->stopping;
  bool spawn = vacant && s->waiting == 0;
  if (spawn)
    s->active++;
  else if (vacant)
    pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
  if (spawn && start_worker(s) != 0) { /* no one leads until this call is answered */
    pthread_mutex_lock(&s->lock);
    s->active--;
    pthread_mutex_unlock(&s->lock);
  }
}

/* A new worker thread, detached (counted in active by the caller): 0 or
 * pthread_create's error. It
 * starts outside the lock (a thread's start allocates: in the ASan build
 * it may wait for a fork, core/fork_gate.h). */
static int start_worker(struct grpc_serve *s)
{
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int e = pthread_create(&t, &attr, worker, s);
  pthread_attr_destroy(&attr);
  return e;
}

/* Leader and followers: one thread at a time (the leader) takes calls
 * from the server's queue; the call it takes it answers itself, on this
 * thread, once it has handed the lead to a waiting thread (or a new one).
 * A call thus starts on the thread that gRPC woke, with no hand-off to
 * another. A call that came alone (no other being answered, none piled
 * up) is answered with the lead held instead: the next leader's wake-up
 * (a futex, a thread woken on the other CPU, and gRPC's poller role
 * moving to it, so that this call's own completions come through it)
 * cost a warm call 0.05-0.07 ms on a 2-vCPU machine; the lead is handed
 * over only when the call is about to wait long (pending.lead, run by
 * next_event past CAP_WAIT_SOON_US, and by the handler before a call
 * process, a stream, a lease not granted at once, an instance slow to
 * answer), and meanwhile a call that comes waits in gRPC's queue. A
 * follower idle for WORKER_IDLE_MS ends; the leader leads until the
 * queue shuts down. */
static void *worker(void *arg)
{
  struct grpc_serve *s = arg;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    if (!s->leader && !s->cq_done) {
      s->leader = true;
      pthread_mutex_unlock(&s->lock);
      bool piled = false;
      struct pending *got = take(s, &piled);
      pthread_mutex_lock(&s->lock);
      s->leader = false;
      if (!got) {
        s->cq_done = true;
        pthread_cond_broadcast(&s->work);
        continue;
      }
      bool alone = !piled && s->calls == 1;
      if (alone) /* answered with the lead held */
        got->lead = (struct cap_wait_hook){.fn = hand_lead, .arg = s};
      pthread_mutex_unlock(&s->lock);
      if (!alone)
        hand_lead(s); /* to another as this call starts */
      answer_call(got);
      pthread_mutex_lock(&s->lock);
      s->calls--;
      pthread_cond_broadcast(&s->idle);
      continue;
    }
    if (s->cq_done || s->stopping)
      break; /* another leads (or the queue is done): this one is not needed */
    struct timespec until = in_ms(WORKER_IDLE_MS);
    int r = 0;
    while (s->leader && !s->stopping && !s->cq_done && r != ETIMEDOUT) {
      s->waiting++;
      r = pthread_cond_timedwait(&s->work, &s->lock, &until);
      s->waiting--;
    }
    if (r == ETIMEDOUT && s->leader)
      break;
  }
  unsigned left = --s->active;
  bool stopping = s->stopping || s->cq_done;
  pthread_cond_broadcast(&s->idle);
  pthread_mutex_unlock(&s->lock);
  if (!stopping && s->opt.workers_shrank)
    s->opt.workers_shrank(s->opt.arg, left);
  return NULL;
}

static char *read_pem(const char *path, struct cap_error *err)
{
  FILE *f = fopen(path, "re");
  if (!f) {
    cap_error_errno(err, errno, "cannot read %s", path);
    return NULL;
  }
  struct cap_buf b = {0};
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len < (1u << 20))
    cap_buf_append(&b, chunk, n);
  fclose(f);
  cap_buf_putc(&b, '\0');
  return b.data;
}

static grpc_server_credentials *credentials(const struct grpc_serve_options *opt,
                                            struct cap_error *err)
{
  if (!opt->tls_cert && !opt->tls_key)
    return grpc_insecure_server_credentials_create();
  if (!opt->tls_cert || !opt->tls_key) {
    cap_error_set(err, EINVAL, "TLS needs both --tls-cert and --tls-key");
    return NULL;
  }
  char *cert = read_pem(opt->tls_cert, err);
  char *key = cert ? read_pem(opt->tls_key, err) : NULL;
  grpc_server_credentials *c = NULL;
  if (cert && key) {
    grpc_ssl_pem_key_cert_pair pair = {.private_key = key, .cert_chain = cert};
    c = grpc_ssl_server_credentials_create(NULL, &pair, 1, 0, NULL);
    if (!c)
      cap_error_set(err, EINVAL, "cannot use %s and %s as TLS certificate and key", opt->tls_cert,
                    opt->tls_key);
  }
  if (key)
    memset(key, 0, strlen(key));
  free(key);
  free(cert);
  return c;
}

static int serve_start(const struct grpc_serve_options *opt, struct grpc_serve **ret, int *port,
                       struct cap_error *err)
{
  *ret = NULL;
  *port = 0;
  grpc_server_credentials *creds = credentials(opt, err);
  if (!creds)
    return -(err->code ? err->code : EINVAL);
  grpc_init();
  struct grpc_serve *s = cap_xcalloc(1, sizeof *s);
  s->opt = *opt;
  if (!s->opt.max_calls)
    s->opt.max_calls = DEFAULT_MAX_CALLS;
  if (!s->opt.max_message)
    s->opt.max_message = DEFAULT_MAX_MESSAGE;
  if (s->opt.stream_idle_ms <= 0)
    s->opt.stream_idle_ms = GRPC_SERVE_STREAM_IDLE_MS;
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->idle, NULL);
  pthread_cond_init(&s->work, NULL);
  grpc_arg args[2] = {
      {.type = GRPC_ARG_INTEGER,
       .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
       .value.integer = (int)s->opt.max_message},
      {.type = GRPC_ARG_INTEGER, .key = (char *)GRPC_ARG_ALLOW_REUSEPORT, .value.integer = 0},
  };
  grpc_channel_args cargs = {.num_args = 2, .args = args};
  s->server = grpc_server_create(&cargs, NULL);
  s->cq = grpc_completion_queue_create_for_next(NULL);
  grpc_server_register_completion_queue(s->server, s->cq, NULL);
  int bound = grpc_server_add_http2_port(s->server, opt->address, creds);
  grpc_server_credentials_release(creds);
  if (!bound) {
    grpc_server_destroy(s->server);
    grpc_completion_queue_shutdown(s->cq);
    while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
      ;
    grpc_completion_queue_destroy(s->cq);
    free(s);
    grpc_shutdown();
    return cap_error_set(err, EADDRNOTAVAIL,
                         "cannot listen for gRPC on %s (in use, or not an address of this host)",
                         opt->address);
  }
  grpc_server_start(s->server);
  s->active = 1;
  int e = start_worker(s);
  if (e != 0) {
    grpc_server_shutdown_and_notify(s->server, s->cq, &shutdown_tag);
    grpc_server_cancel_all_calls(s->server);
    grpc_completion_queue_shutdown(s->cq);
    while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
      ;
    grpc_server_destroy(s->server);
    grpc_completion_queue_destroy(s->cq);
    free(s);
    grpc_shutdown();
    return cap_error_errno(err, e, "cannot start the gRPC server's thread");
  }
  *port = strncmp(opt->address, "unix:", 5) == 0 ? 0 : bound;
  *ret = s;
  return 0;
}

/* Waits until *n (calls, or active) is 0, at most ms (< 0: no bound). */
static void wait_none(struct grpc_serve *s, const unsigned *n, int ms)
{
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += ms / 1000;
  until.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&s->lock);
  while (*n) {
    if (ms < 0)
      pthread_cond_wait(&s->idle, &s->lock);
    else if (pthread_cond_timedwait(&s->idle, &s->lock, &until) == ETIMEDOUT)
      break;
  }
  pthread_mutex_unlock(&s->lock);
}

static void serve_stop(struct grpc_serve *s, int drain_ms)
{
  if (!s)
    return;
  pthread_mutex_lock(&s->lock);
  s->stopping = true;
  pthread_cond_broadcast(&s->work); /* the waiting workers end */
  pthread_mutex_unlock(&s->lock);
  grpc_server_shutdown_and_notify(s->server, s->cq, &shutdown_tag);
  wait_none(s, &s->calls, drain_ms);
  grpc_server_cancel_all_calls(s->server);
  wait_none(s, &s->calls, -1); /* each handler's own deadline bounds this */
  grpc_completion_queue_shutdown(s->cq);
  wait_none(s, &s->active, -1); /* the leader ends at the queue's shutdown, the rest at once */
  if (s->posted)
    pending_free(s->posted);
  grpc_server_destroy(s->server);
  grpc_completion_queue_destroy(s->cq);
  pthread_cond_destroy(&s->idle);
  pthread_cond_destroy(&s->work);
  pthread_mutex_destroy(&s->lock);
  free(s);
  grpc_shutdown();
}

__attribute__((visibility("default"))) const struct grpc_serve_module grpc_serve_module_v1 = {
    .size = sizeof(struct grpc_serve_module),
    .start = serve_start,
    .stop = serve_stop,
};
