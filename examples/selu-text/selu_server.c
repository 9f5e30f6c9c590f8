/* Serve selu.capability.v1.CapabilityService on gRPC core's C API.
 *
 * One completion queue, driven by the thread that called selu_serve. The
 * server takes every method as an unregistered ("generic") call, so an
 * unknown method can be answered UNIMPLEMENTED with a readable message. Each
 * call holds a count of the completions still to come for it (its receive,
 * its close, its reply); that count is touched only by the queue's thread, and
 * the call is freed when it reaches zero. Invoke handlers run on detached
 * threads that post the reply batch themselves: grpc_call_start_batch is
 * thread-safe, and its completion comes back through the queue. */
#include "selu_server.h"

#include "capability.pb-c.h"
#include "orchestrator.pb-c.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Selu's two contracts, both in package selu.capability.v1: the seed's
 * CapabilityService and the orchestrator's current Capability (its C
 * names are selu.orchestrator.v1, see proto/meson.build). */
enum method {
  M_NONE,
  M_SERVICE_INVOKE,
  M_SERVICE_HEALTH,
  M_CAPABILITY_INVOKE,
  M_CAPABILITY_STREAM,
  M_CAPABILITY_HEALTH,
};
static const struct {
  const char *path;
  enum method m;
  unsigned protocol; /* SELU_SERVE_* */
} methods[] = {
    {"/selu.capability.v1.CapabilityService/Invoke", M_SERVICE_INVOKE, SELU_SERVE_SERVICE},
    {"/selu.capability.v1.CapabilityService/HealthCheck", M_SERVICE_HEALTH, SELU_SERVE_SERVICE},
    {"/selu.capability.v1.Capability/Invoke", M_CAPABILITY_INVOKE, SELU_SERVE_CAPABILITY},
    {"/selu.capability.v1.Capability/StreamInvoke", M_CAPABILITY_STREAM, SELU_SERVE_CAPABILITY},
    {"/selu.capability.v1.Capability/Healthcheck", M_CAPABILITY_HEALTH, SELU_SERVE_CAPABILITY},
};

/* Calls served at once (including the one waiting to be accepted). Beyond
 * it, gRPC queues new calls until one finishes: every Invoke costs a thread,
 * and a sandbox's pids limit counts threads. */
#define MAX_INFLIGHT 24
/* How often the loop looks at the stop flag a signal handler sets. */
#define POLL_MS 100
/* On SIGTERM, calls still running get this long to finish before they are
 * cancelled; a handler that never returns is abandoned this much later. */
#define STOP_GRACE_MS 1000
#define ABANDON_MS 1000

static atomic_bool g_healthy = true;
static atomic_uint g_protocols = SELU_SERVE_SERVICE | SELU_SERVE_CAPABILITY;
static volatile sig_atomic_t g_stop;

enum tag_kind { TAG_NEW_CALL, TAG_RECV, TAG_CLOSE, TAG_REPLY, TAG_SHUTDOWN };

struct tag {
  enum tag_kind kind;
  struct call *call;
};

struct server;

struct call {
  struct server *srv;
  grpc_call *call;
  grpc_call_details details;
  grpc_metadata_array request_md;
  grpc_byte_buffer *request;
  int cancelled;
  grpc_byte_buffer *reply;
  grpc_slice status_details;
  bool have_status_details;
  /* set by the handler's thread before it posts the reply */
  bool exit_after;
  enum method method;
  Selu__Capability__V1__InvokeRequest *invoke;    /* M_SERVICE_INVOKE */
  Selu__Orchestrator__V1__InvokeRequest *cinvoke; /* M_CAPABILITY_INVOKE, _STREAM */
  int pending;                                    /* completions still to come; queue thread only */
  struct tag new_tag, recv_tag, close_tag, reply_tag;
};

struct server {
  grpc_server *server;
  grpc_completion_queue *cq;
  selu_handler_fn handler;
  void *ctx;
  int inflight;    /* struct calls alive */
  bool requesting; /* a grpc_server_request_call is outstanding */
  bool stopping;   /* grpc_server_shutdown_and_notify has been called */
  bool exit_now;   /* a reply asked for exit_after: no grace */
  bool shutdown_done;
};

const char *selu_context_get(const struct selu_call *call, const char *key)
{
  for (size_t i = 0; i < call->n_context; i++)
    if (strcmp(call->context[i].key, key) == 0)
      return call->context[i].value;
  return NULL;
}

static char *xstrdup(const char *s)
{
  char *d = strdup(s);
  if (!d) {
    fputs("selu: out of memory\n", stderr);
    abort();
  }
  return d;
}

void selu_reply_ok(struct selu_reply *reply, const char *json)
{
  selu_reply_ok_owned(reply, json ? xstrdup(json) : NULL);
}

void selu_reply_ok_owned(struct selu_reply *reply, char *json)
{
  free(reply->result);
  free(reply->error);
  reply->result = json;
  reply->error = NULL;
  reply->success = true;
}

void selu_reply_error(struct selu_reply *reply, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  char *msg = NULL;
  if (vasprintf(&msg, fmt, ap) < 0)
    msg = xstrdup("the tool failed (and its error message could not be formatted)");
  va_end(ap);
  free(reply->result);
  free(reply->error);
  reply->result = NULL;
  reply->error = msg;
  reply->success = false;
}

void selu_set_healthy(bool healthy) { atomic_store(&g_healthy, healthy); }

void selu_set_protocols(unsigned protocols) { atomic_store(&g_protocols, protocols); }

void selu_stop(void) { g_stop = 1; }

static void on_stop_signal(int sig)
{
  (void)sig;
  g_stop = 1;
}

static void post_request(struct server *srv);

static void free_call(struct call *c)
{
  struct server *srv = c->srv;
  if (c->call)
    grpc_call_unref(c->call);
  grpc_call_details_destroy(&c->details);
  grpc_metadata_array_destroy(&c->request_md);
  if (c->request)
    grpc_byte_buffer_destroy(c->request);
  if (c->reply)
    grpc_byte_buffer_destroy(c->reply);
  if (c->have_status_details)
    grpc_slice_unref(c->status_details);
  if (c->invoke)
    selu__capability__v1__invoke_request__free_unpacked(c->invoke, NULL);
  if (c->cinvoke)
    selu__orchestrator__v1__invoke_request__free_unpacked(c->cinvoke, NULL);
  free(c);
  srv->inflight--;
  post_request(srv);
}

static void release(struct call *c)
{
  if (--c->pending == 0)
    free_call(c);
}

/* Keep one request_call outstanding while there is room, so gRPC hands over
 * the next call as soon as it arrives. */
static void post_request(struct server *srv)
{
  if (srv->requesting || srv->stopping || srv->inflight >= MAX_INFLIGHT)
    return;
  struct call *c = calloc(1, sizeof *c);
  if (!c) {
    fputs("selu: out of memory; not accepting calls until one finishes\n", stderr);
    return;
  }
  c->srv = srv;
  c->new_tag = (struct tag){TAG_NEW_CALL, c};
  c->recv_tag = (struct tag){TAG_RECV, c};
  c->close_tag = (struct tag){TAG_CLOSE, c};
  c->reply_tag = (struct tag){TAG_REPLY, c};
  grpc_call_details_init(&c->details);
  grpc_metadata_array_init(&c->request_md);
  grpc_call_error err = grpc_server_request_call(srv->server, &c->call, &c->details, &c->request_md,
                                                 srv->cq, srv->cq, &c->new_tag);
  if (err != GRPC_CALL_OK) {
    fprintf(stderr, "selu: grpc_server_request_call failed (%d)\n", (int)err);
    grpc_call_details_destroy(&c->details);
    grpc_metadata_array_destroy(&c->request_md);
    free(c);
    return;
  }
  srv->inflight++;
  srv->requesting = true;
}

/* Post the reply batch: initial metadata, the message (when there is one) and
 * the status. Called from the queue's thread or a handler's thread. */
static grpc_call_error send_reply(struct call *c, grpc_byte_buffer *msg, grpc_status_code code,
                                  const char *details)
{
  grpc_op ops[3];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  if (msg) {
    c->reply = msg;
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = msg;
  }
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status = code;
  if (details) {
    c->status_details = grpc_slice_from_copied_string(details);
    c->have_status_details = true;
    ops[n].data.send_status_from_server.status_details = &c->status_details;
  }
  n++;
  return grpc_call_start_batch(c->call, ops, n, &c->reply_tag, NULL);
}

/* From the queue's thread: the reply completion will release the call. */
static void reply_now(struct call *c, grpc_byte_buffer *msg, grpc_status_code code,
                      const char *details)
{
  grpc_call_error err = send_reply(c, msg, code, details);
  if (err != GRPC_CALL_OK) {
    fprintf(stderr, "selu: cannot send a reply: grpc_call_start_batch failed (%d)\n", (int)err);
    if (msg && c->reply != msg)
      grpc_byte_buffer_destroy(msg);
    return;
  }
  c->pending++;
}

/* Wrap a malloc'd buffer as a byte buffer without copying it. */
static grpc_byte_buffer *wrap(void *buf, size_t len)
{
  grpc_slice s = grpc_slice_new(buf, len, free);
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
  grpc_slice_unref(s);
  return bb;
}

static void *xmalloc(size_t n)
{
  void *p = malloc(n ? n : 1);
  if (!p) {
    fputs("selu: out of memory\n", stderr);
    abort();
  }
  return p;
}

/* A bytes field as a NUL-terminated string (the handler's view). */
static char *bytes_text(ProtobufCBinaryData b)
{
  char *s = xmalloc(b.len + 1);
  if (b.len)
    memcpy(s, b.data, b.len);
  s[b.len] = '\0';
  return s;
}

/* The handler's view of either contract's request. The orchestrator's
 * session_id, capability_id and thread_id appear as context entries too,
 * so selu_context_get reads both alike. */
static struct selu_call call_view(const struct call *c, struct selu_kv *kv, char **args,
                                  char **config)
{
  struct selu_call call = {0};
  if (c->invoke) {
    const Selu__Capability__V1__InvokeRequest *in = c->invoke;
    size_t n = in->n_context > 8 ? 8 : in->n_context;
    for (size_t i = 0; i < n; i++)
      kv[i] = (struct selu_kv){in->context[i]->key ? in->context[i]->key : "",
                               in->context[i]->value ? in->context[i]->value : ""};
    call = (struct selu_call){.tool_name = in->tool_name ? in->tool_name : "",
                              .parameters = in->parameters ? in->parameters : "",
                              .config_json = "",
                              .context = kv,
                              .n_context = n,
                              .protocol = SELU_SERVE_SERVICE};
    return call;
  }
  const Selu__Orchestrator__V1__InvokeRequest *in = c->cinvoke;
  *args = bytes_text(in->args_json);
  *config = bytes_text(in->config_json);
  kv[0] = (struct selu_kv){"session_id", in->session_id ? in->session_id : ""};
  kv[1] = (struct selu_kv){"capability_id", in->capability_id ? in->capability_id : ""};
  kv[2] = (struct selu_kv){"thread_id", in->thread_id ? in->thread_id : ""};
  return (struct selu_call){.tool_name = in->tool_name ? in->tool_name : "",
                            .parameters = *args,
                            .config_json = *config,
                            .context = kv,
                            .n_context = 3,
                            .protocol = SELU_SERVE_CAPABILITY,
                            .streamed = c->method == M_CAPABILITY_STREAM};
}

/* The reply in the contract the call came in: an InvokeResponse of
 * either, or StreamInvoke's one chunk (all the data, done). */
static grpc_byte_buffer *encode_reply(const struct call *c, const struct selu_reply *reply)
{
  const char *error = reply->error     ? reply->error
                      : reply->success ? ""
                                       : "the tool failed without saying why";
  const char *result = reply->result ? reply->result : "";
  size_t len;
  uint8_t *buf;
  if (c->method == M_SERVICE_INVOKE) {
    Selu__Capability__V1__InvokeResponse out = SELU__CAPABILITY__V1__INVOKE_RESPONSE__INIT;
    out.success = reply->success;
    out.result = (char *)result;
    out.error = (char *)error;
    len = selu__capability__v1__invoke_response__get_packed_size(&out);
    buf = xmalloc(len);
    selu__capability__v1__invoke_response__pack(&out, buf);
  } else if (c->method == M_CAPABILITY_INVOKE) {
    Selu__Orchestrator__V1__InvokeResponse out = SELU__ORCHESTRATOR__V1__INVOKE_RESPONSE__INIT;
    out.result_json = (ProtobufCBinaryData){strlen(result), (uint8_t *)result};
    out.error = (char *)(reply->success ? "" : error);
    len = selu__orchestrator__v1__invoke_response__get_packed_size(&out);
    buf = xmalloc(len);
    selu__orchestrator__v1__invoke_response__pack(&out, buf);
  } else {
    Selu__Orchestrator__V1__InvokeChunk out = SELU__ORCHESTRATOR__V1__INVOKE_CHUNK__INIT;
    out.data = (ProtobufCBinaryData){strlen(result), (uint8_t *)result};
    out.done = true;
    out.error = (char *)(reply->success ? "" : error);
    len = selu__orchestrator__v1__invoke_chunk__get_packed_size(&out);
    buf = xmalloc(len);
    selu__orchestrator__v1__invoke_chunk__pack(&out, buf);
  }
  return wrap(buf, len);
}

static void *run_invoke(void *arg)
{
  struct call *c = arg;
  struct server *srv = c->srv;
  /* The stop signals are the queue thread's business; a handler sleeping
   * here should not be woken early by them. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, NULL);

  struct selu_kv kv[8];
  char *args = NULL, *config = NULL;
  struct selu_call call = call_view(c, kv, &args, &config);
  struct selu_reply reply = {.success = false};
  srv->handler(srv->ctx, &call, &reply);
  grpc_byte_buffer *msg = encode_reply(c, &reply);
  free(args);
  free(config);
  free(reply.result);
  free(reply.error);

  c->exit_after = reply.exit_after;
  grpc_call_error err = send_reply(c, msg, GRPC_STATUS_OK, NULL);
  if (err != GRPC_CALL_OK) {
    /* The queue thread still counts this reply as pending, so the call is
     * never freed; that leak is the lesser harm next to a double free. */
    fprintf(stderr, "selu: cannot send the reply to \"%s\": grpc_call_start_batch failed (%d)\n",
            call.tool_name, (int)err);
    if (c->reply != msg)
      grpc_byte_buffer_destroy(msg);
  }
  return NULL;
}

static enum method method_of(const grpc_slice *m)
{
  unsigned serving = atomic_load(&g_protocols);
  for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
    size_t n = strlen(methods[i].path);
    if ((serving & methods[i].protocol) && GRPC_SLICE_LENGTH(*m) == n &&
        memcmp(GRPC_SLICE_START_PTR(*m), methods[i].path, n) == 0)
      return methods[i].m;
  }
  return M_NONE;
}

/* Health: the seed's HealthCheckResponse or the orchestrator's
 * HealthResponse. */
static grpc_byte_buffer *health_reply(enum method m)
{
  size_t len;
  uint8_t *buf;
  if (m == M_SERVICE_HEALTH) {
    Selu__Capability__V1__HealthCheckResponse out =
        SELU__CAPABILITY__V1__HEALTH_CHECK_RESPONSE__INIT;
    out.healthy = atomic_load(&g_healthy);
    len = selu__capability__v1__health_check_response__get_packed_size(&out);
    buf = xmalloc(len);
    selu__capability__v1__health_check_response__pack(&out, buf);
  } else {
    Selu__Orchestrator__V1__HealthResponse out = SELU__ORCHESTRATOR__V1__HEALTH_RESPONSE__INIT;
    out.ready = atomic_load(&g_healthy);
    out.message = (char *)(out.ready ? "ready" : "not ready");
    len = selu__orchestrator__v1__health_response__get_packed_size(&out);
    buf = xmalloc(len);
    selu__orchestrator__v1__health_response__pack(&out, buf);
  }
  return wrap(buf, len);
}

static void on_request(struct call *c, bool ok)
{
  if (!ok) /* the call was cancelled before its message arrived */
    return;
  const grpc_slice *m = &c->details.method;
  c->method = method_of(m);
  if (c->method == M_NONE) {
    char msg[300];
    snprintf(msg, sizeof msg, "unknown method %.*s",
             (int)(GRPC_SLICE_LENGTH(*m) > 200 ? 200 : GRPC_SLICE_LENGTH(*m)),
             (const char *)GRPC_SLICE_START_PTR(*m));
    reply_now(c, NULL, GRPC_STATUS_UNIMPLEMENTED, msg);
    return;
  }
  if (!c->request) {
    reply_now(c, NULL, GRPC_STATUS_INVALID_ARGUMENT, "the call carried no request message");
    return;
  }
  grpc_byte_buffer_reader reader;
  if (!grpc_byte_buffer_reader_init(&reader, c->request)) {
    reply_now(c, NULL, GRPC_STATUS_INVALID_ARGUMENT, "cannot read the request message");
    return;
  }
  grpc_slice body = grpc_byte_buffer_reader_readall(&reader);
  grpc_byte_buffer_reader_destroy(&reader);

  if (c->method == M_SERVICE_HEALTH || c->method == M_CAPABILITY_HEALTH) {
    grpc_slice_unref(body);
    reply_now(c, health_reply(c->method), GRPC_STATUS_OK, NULL);
    return;
  }
  if (c->method == M_SERVICE_INVOKE)
    c->invoke = selu__capability__v1__invoke_request__unpack(NULL, GRPC_SLICE_LENGTH(body),
                                                             GRPC_SLICE_START_PTR(body));
  else
    c->cinvoke = selu__orchestrator__v1__invoke_request__unpack(NULL, GRPC_SLICE_LENGTH(body),
                                                                GRPC_SLICE_START_PTR(body));
  grpc_slice_unref(body);
  if (!c->invoke && !c->cinvoke) {
    reply_now(c, NULL, GRPC_STATUS_INVALID_ARGUMENT,
              "cannot decode the request as a selu.capability.v1.InvokeRequest");
    return;
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t th;
  c->pending++; /* the reply the handler's thread will post */
  int err = pthread_create(&th, &attr, run_invoke, c);
  pthread_attr_destroy(&attr);
  if (err) {
    c->pending--;
    char msg[200];
    snprintf(msg, sizeof msg, "the capability cannot start a thread for this call: %s",
             strerror(err));
    reply_now(c, NULL, GRPC_STATUS_RESOURCE_EXHAUSTED, msg);
  }
}

static void on_event(struct server *srv, grpc_event ev)
{
  struct tag *t = ev.tag;
  struct call *c = t->call;
  switch (t->kind) {
  case TAG_SHUTDOWN: srv->shutdown_done = true; return;
  case TAG_NEW_CALL:
    srv->requesting = false;
    if (!ev.success) { /* the server is shutting down */
      c->pending = 1;
      release(c);
      return;
    }
    {
      grpc_op recv = {.op = GRPC_OP_RECV_MESSAGE};
      recv.data.recv_message.recv_message = &c->request;
      grpc_op close = {.op = GRPC_OP_RECV_CLOSE_ON_SERVER};
      close.data.recv_close_on_server.cancelled = &c->cancelled;
      c->pending = 0;
      if (grpc_call_start_batch(c->call, &recv, 1, &c->recv_tag, NULL) == GRPC_CALL_OK)
        c->pending++;
      if (grpc_call_start_batch(c->call, &close, 1, &c->close_tag, NULL) == GRPC_CALL_OK)
        c->pending++;
      if (c->pending == 0) {
        fputs("selu: cannot start receiving a call; dropping it\n", stderr);
        c->pending = 1;
        release(c);
      }
    }
    post_request(srv);
    return;
  case TAG_RECV:
    on_request(c, ev.success);
    release(c);
    return;
  case TAG_CLOSE: release(c); return;
  case TAG_REPLY:
    if (c->exit_after) {
      srv->exit_now = true;
      g_stop = 1;
    }
    release(c);
    return;
  }
}

static gpr_timespec after_ms(gpr_timespec t, int ms)
{
  return gpr_time_add(t, gpr_time_from_millis(ms, GPR_TIMESPAN));
}

int selu_serve(const char *addr, selu_handler_fn handler, void *ctx)
{
  struct sigaction sa, old_term, old_int;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, &old_term);
  sigaction(SIGINT, &sa, &old_int);

  grpc_init();
  struct server srv = {.handler = handler, .ctx = ctx};
  srv.cq = grpc_completion_queue_create_for_next(NULL);
  srv.server = grpc_server_create(NULL, NULL);
  grpc_server_register_completion_queue(srv.server, srv.cq, NULL);
  grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
  int port = grpc_server_add_http2_port(srv.server, addr, creds);
  grpc_server_credentials_release(creds);
  if (port == 0) {
    fprintf(stderr,
            "selu: cannot listen on %s (is the address valid, and the port free?); "
            "gRPC's log above may say more\n",
            addr);
    grpc_server_destroy(srv.server);
    grpc_completion_queue_shutdown(srv.cq);
    while (grpc_completion_queue_next(srv.cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
      ;
    grpc_completion_queue_destroy(srv.cq);
    grpc_shutdown();
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGINT, &old_int, NULL);
    return -1;
  }
  grpc_server_start(srv.server);
  post_request(&srv);

  struct tag shutdown_tag = {TAG_SHUTDOWN, NULL};
  gpr_timespec cancel_at = gpr_inf_future(GPR_CLOCK_MONOTONIC);
  gpr_timespec abandon_at = gpr_inf_future(GPR_CLOCK_MONOTONIC);
  bool cancelled = false, abandoned = false;
  while (!srv.shutdown_done) {
    gpr_timespec now = gpr_now(GPR_CLOCK_MONOTONIC);
    if (g_stop && !srv.stopping) {
      srv.stopping = true;
      grpc_server_shutdown_and_notify(srv.server, srv.cq, &shutdown_tag);
      cancel_at = after_ms(now, srv.exit_now ? 0 : STOP_GRACE_MS);
    }
    if (srv.stopping && !cancelled && gpr_time_cmp(now, cancel_at) >= 0) {
      grpc_server_cancel_all_calls(srv.server);
      cancelled = true;
      abandon_at = after_ms(now, ABANDON_MS);
    }
    if (cancelled && gpr_time_cmp(now, abandon_at) >= 0) {
      abandoned = true;
      break;
    }
    grpc_event ev = grpc_completion_queue_next(srv.cq, after_ms(now, POLL_MS), NULL);
    if (ev.type == GRPC_OP_COMPLETE)
      on_event(&srv, ev);
  }

  sigaction(SIGTERM, &old_term, NULL);
  sigaction(SIGINT, &old_int, NULL);
  if (abandoned) {
    /* A handler that never returns keeps its call, and gRPC cannot finish
     * shutting down under it; the process is about to exit anyway. */
    fprintf(stderr, "selu: %d call(s) still in the tool handler at shutdown; abandoning them\n",
            srv.inflight);
    return 0;
  }
  grpc_server_destroy(srv.server);
  grpc_completion_queue_shutdown(srv.cq);
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(srv.cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN)
      break;
    if (ev.type == GRPC_OP_COMPLETE)
      on_event(&srv, ev);
  }
  grpc_completion_queue_destroy(srv.cq);
  grpc_shutdown();
  g_stop = 0;
  return 0;
}
