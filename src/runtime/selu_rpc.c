/* The Selu gRPC client, built as the shared module capsule-selu-rpc.so
 * (see selu_rpc_module.h): the only code that links libgrpc. Its
 * functions are reached through the table at the bottom. The transport
 * (a unary call, a server-streaming call) is shared; each contract has its
 * own messages (capability.pb-c.h: the seed's CapabilityService;
 * orchestrator.pb-c.h: the orchestrator's Capability, compiled under the
 * C package selu.orchestrator.v1, proto/meson.build). */
#include "runtime/selu_rpc_module.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "capability.pb-c.h"
#include "core/buf.h"
#include "core/cancel.h"
#include "orchestrator.pb-c.h"

/* the wire's method paths: both services live in package selu.capability.v1 */
#define SERVICE_INVOKE "/selu.capability.v1.CapabilityService/Invoke"
#define SERVICE_HEALTH "/selu.capability.v1.CapabilityService/HealthCheck"
#define CAPABILITY_INVOKE "/selu.capability.v1.Capability/Invoke"
#define CAPABILITY_STREAM "/selu.capability.v1.Capability/StreamInvoke"
#define CAPABILITY_HEALTH "/selu.capability.v1.Capability/Healthcheck"

/* A channel may carry several calls at once (from several threads): each
 * call has its own completion queue (struct rpc). */
struct selu_channel {
  grpc_channel *channel;
  size_t max_response;
  int watch; /* the socket's duplicate: how a kept channel learns its peer hung up */
};

static int rpc_channel_open(int fd, size_t max_response, struct selu_channel **ret,
                            struct cap_error *err)
{
  *ret = NULL;
  grpc_init();
  grpc_arg args[1] = {{.type = GRPC_ARG_INTEGER,
                       .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                       .value.integer = max_response > INT_MAX ? INT_MAX : (int)max_response}};
  grpc_channel_args cargs = {.num_args = 1, .args = args};
  /* gRPC sets TCP_NODELAY on the sockets it makes, not on this one: a
   * call of several writes (an artifact's upload) would wait out the
   * peer's delayed ACK (40 ms) at each. A unix socket has no Nagle. */
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int watch = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  grpc_channel *channel = grpc_channel_create_from_fd("capsule-selu", fd, creds, &cargs);
  grpc_channel_credentials_release(creds);
  if (!channel) {
    if (watch >= 0)
      close(watch);
    grpc_shutdown_blocking();
    return cap_error_set(err, EIO, "cannot open a gRPC channel on the capability's socket");
  }
  struct selu_channel *ch = cap_xcalloc(1, sizeof *ch);
  ch->channel = channel;
  ch->max_response = max_response;
  ch->watch = watch;
  *ret = ch;
  return 0;
}

/* Shutdowns put off (rpc_defer_shutdown): done before a fork, or never
 * (the process ends with _exit). One thread per process calls. */
static bool defer;
static unsigned deferred;

static void before_fork(void)
{
  for (; deferred; deferred--)
    grpc_shutdown_blocking();
}

static void rpc_defer_shutdown(void)
{
  if (!defer)
    pthread_atfork(before_fork, NULL, NULL);
  defer = true;
}

static void rpc_channel_close(struct selu_channel *ch)
{
  if (!ch)
    return;
  grpc_channel_destroy(ch->channel);
  if (ch->watch >= 0)
    close(ch->watch);
  free(ch);
  if (defer)
    deferred++;
  else
    grpc_shutdown_blocking(); /* no gRPC thread left: this process may fork a keeper next */
}

/* A call that ended with a gRPC status other than OK, as an errno and a
 * message that says what it means for the call. */
static int status_error(grpc_status_code status, grpc_slice details, const char *method,
                        int timeout_ms, struct cap_error *err)
{
  char *msg = grpc_slice_to_c_string(details);
  int r;
  switch (status) {
  case GRPC_STATUS_DEADLINE_EXCEEDED:
    r = cap_error_set(err, ETIMEDOUT, "no answer within %d ms (the deadline)", timeout_ms);
    break;
  case GRPC_STATUS_UNAVAILABLE:
    r = cap_error_set(err, ECONNRESET, "the capability's server went away during the call (%s)",
                      msg);
    break;
  case GRPC_STATUS_RESOURCE_EXHAUSTED:
    r = cap_error_set(err, EFBIG, "the answer is larger than the output cap (%s)", msg);
    break;
  case GRPC_STATUS_UNIMPLEMENTED:
    r = cap_error_set(err, ENOSYS, "the server does not implement %s", method);
    break;
  default:
    r = cap_error_set(err, EPROTO, "%s failed with gRPC status %d: %s", method, (int)status, msg);
  }
  gpr_free(msg);
  return r;
}

/* The answer's bytes, appended to out. */
static int read_answer(grpc_byte_buffer *recv, const char *method, struct cap_buf *out,
                       struct cap_error *err)
{
  grpc_byte_buffer_reader reader;
  if (!grpc_byte_buffer_reader_init(&reader, recv))
    return cap_error_set(err, EPROTO, "cannot read the answer to %s", method);
  grpc_slice all = grpc_byte_buffer_reader_readall(&reader);
  cap_buf_append(out, (const char *)GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all));
  grpc_slice_unref(all);
  grpc_byte_buffer_reader_destroy(&reader);
  return 0;
}

/* One call in flight on a channel: what the unary, server-streaming and
 * client-streaming calls share. */
struct rpc {
  struct selu_channel *ch;
  grpc_completion_queue *cq; /* the call's own */
  const char *method;
  int timeout_ms;
  grpc_call *call;
  gpr_timespec deadline;
  grpc_metadata_array initial, trailing;
  grpc_status_code status;
  grpc_slice details;
  struct cap_cancel *cancel; /* NULL: not cancellable */
};

static void rpc_begin(struct rpc *c, struct selu_channel *ch, const char *method, int timeout_ms)
{
  *c = (struct rpc){.ch = ch, .method = method, .timeout_ms = timeout_ms};
  c->cq = grpc_completion_queue_create_for_next(NULL);
  c->deadline =
      gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
  c->call =
      grpc_channel_create_call(ch->channel, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq,
                               grpc_slice_from_static_string(method), NULL, c->deadline, NULL);
  grpc_metadata_array_init(&c->initial);
  grpc_metadata_array_init(&c->trailing);
  c->status = GRPC_STATUS_UNKNOWN;
  c->details = grpc_empty_slice();
}

static void rpc_end(struct rpc *c)
{
  grpc_slice_unref(c->details);
  grpc_metadata_array_destroy(&c->initial);
  grpc_metadata_array_destroy(&c->trailing);
  grpc_call_unref(c->call);
  grpc_completion_queue_shutdown(c->cq);
  while (grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
         GRPC_QUEUE_SHUTDOWN)
    ;
  grpc_completion_queue_destroy(c->cq);
}

/* A message to send (a copy of msg). */
static grpc_byte_buffer *message(const uint8_t *msg, size_t len)
{
  grpc_slice s = grpc_slice_from_copied_buffer((const char *)msg, len);
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
  grpc_slice_unref(s);
  return bb;
}

/* The ops that read the call's status. */
static grpc_op recv_status(struct rpc *c)
{
  grpc_op op = {.op = GRPC_OP_RECV_STATUS_ON_CLIENT};
  op.data.recv_status_on_client.trailing_metadata = &c->trailing;
  op.data.recv_status_on_client.status = &c->status;
  op.data.recv_status_on_client.status_details = &c->details;
  return op;
}

/* Runs one batch and waits for it until the call's deadline (and a little
 * longer: the deadline itself ends the call first). On a timeout the call
 * is cancelled and its batch drained. */
static void rpc_stop(void *call) { grpc_call_cancel(call, NULL); }

static int rpc_batch(struct rpc *c, const grpc_op *ops, size_t n, struct cap_error *err)
{
  if (!cap_cancel_arm(c->cancel, rpc_stop, c->call)) /* cancelled before it started */
    return cap_error_set(err, ECANCELED, "the call was cancelled by the client");
  if (grpc_call_start_batch(c->call, ops, n, (void *)c, NULL) != GRPC_CALL_OK) {
    cap_cancel_disarm(c->cancel);
    return cap_error_set(err, EIO, "cannot start the gRPC call %s", c->method);
  }
  gpr_timespec wait = gpr_time_add(c->deadline, gpr_time_from_millis(2000, GPR_TIMESPAN));
  grpc_event ev = grpc_completion_queue_next(c->cq, wait, NULL);
  cap_cancel_disarm(c->cancel);
  if (ev.type == GRPC_OP_COMPLETE)
    return 0;
  grpc_call_cancel(c->call, NULL);
  grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  return cap_error_set(err, ETIMEDOUT, "no answer to %s", c->method);
}

/* After the status came: the call's answer (one message, in out). */
static int rpc_answer(struct rpc *c, grpc_byte_buffer *recv, struct cap_buf *out,
                      struct cap_error *err)
{
  if (c->status == GRPC_STATUS_CANCELLED && cap_cancel_fired(c->cancel))
    return cap_error_set(err, ECANCELED, "the call was cancelled by the client");
  if (c->status != GRPC_STATUS_OK)
    return status_error(c->status, c->details, c->method, c->timeout_ms, err);
  if (!recv)
    return cap_error_set(err, EPROTO, "%s returned no message", c->method);
  return read_answer(recv, c->method, out, err);
}

/* One unary call: request bytes in, response bytes out (*out owned). */
static int unary(struct selu_channel *ch, const char *method, const uint8_t *req, size_t req_len,
                 int timeout_ms, struct cap_cancel *cancel, struct cap_buf *out,
                 struct cap_error *err)
{
  struct rpc c;
  rpc_begin(&c, ch, method, timeout_ms);
  c.cancel = cancel;
  grpc_byte_buffer *send = message(req, req_len), *recv = NULL;
  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = send;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &c.initial;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &recv;
  ops[5] = recv_status(&c);
  int r = rpc_batch(&c, ops, 6, err);
  if (r == 0)
    r = rpc_answer(&c, recv, out, err);
  grpc_byte_buffer_destroy(send);
  if (recv)
    grpc_byte_buffer_destroy(recv);
  rpc_end(&c);
  return r;
}

/* What a streamed call does with each message: append it, and say when the
 * stream is complete (*done). */
typedef int (*stream_fn)(void *ctx, const uint8_t *msg, size_t len, bool *done,
                         struct cap_error *err);

/* Reads messages one batch at a time until on_msg says done or the server
 * ends the stream; the whole stream is bounded by the channel's
 * max_response. */
static int stream_read(struct rpc *c, stream_fn on_msg, void *ctx, bool *done,
                       struct cap_error *err)
{
  size_t total = 0;
  int r = 0;
  while (r == 0 && !*done) {
    grpc_byte_buffer *recv = NULL;
    grpc_op op = {.op = GRPC_OP_RECV_MESSAGE};
    op.data.recv_message.recv_message = &recv;
    if ((r = rpc_batch(c, &op, 1, err)) < 0)
      return r;
    if (!recv)
      return 0; /* the server ended the stream: its status says how */
    struct cap_buf b = {0};
    r = read_answer(recv, c->method, &b, err);
    grpc_byte_buffer_destroy(recv);
    total += b.len;
    if (r == 0 && total > c->ch->max_response)
      r = cap_error_set(err, EFBIG, "the stream of %s is larger than the output cap (%zu bytes)",
                        c->method, c->ch->max_response);
    if (r == 0)
      r = on_msg(ctx, (const uint8_t *)b.data, b.len, done, err);
    cap_buf_free(&b);
  }
  return r;
}

/* One server-streaming call: the request out, then on_msg for each answer. */
static int server_stream(struct selu_channel *ch, const char *method, const uint8_t *req,
                         size_t req_len, int timeout_ms, struct cap_cancel *cancel,
                         stream_fn on_msg, void *ctx, struct cap_error *err)
{
  struct rpc c;
  rpc_begin(&c, ch, method, timeout_ms);
  c.cancel = cancel;
  grpc_byte_buffer *send = message(req, req_len);
  grpc_op ops[4];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = send;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &c.initial;
  bool done = false;
  int r = rpc_batch(&c, ops, 4, err);
  if (r == 0)
    r = stream_read(&c, on_msg, ctx, &done, err);
  if (r != 0 || done)
    grpc_call_cancel(c.call, NULL); /* nothing more is wanted from it */
  grpc_op st = recv_status(&c);
  struct cap_error ignored = {0};
  bool have_status = rpc_batch(&c, &st, 1, &ignored) == 0;
  cap_error_clear(&ignored);
  if (r == 0 && !done && (!have_status || c.status != GRPC_STATUS_OK))
    r = have_status ? status_error(c.status, c.details, method, timeout_ms, err)
                    : cap_error_set(err, ETIMEDOUT, "no end to the stream of %s", method);
  grpc_byte_buffer_destroy(send);
  rpc_end(&c);
  return r;
}

/* ---- health, either contract ---- */

/* A health call: an empty request; the answer's field 1 says ready
 * (CapabilityService's HealthCheckResponse.healthy, Capability's
 * HealthResponse.ready). */
static int health_call(struct selu_channel *ch, const char *method,
                       const ProtobufCMessageDescriptor *answer, int timeout_ms, bool *healthy,
                       struct cap_error *err)
{
  struct cap_buf out = {0};
  int r = unary(ch, method, (const uint8_t *)"", 0, timeout_ms, NULL, &out, err);
  ProtobufCMessage *m =
      r == 0 ? protobuf_c_message_unpack(answer, NULL, out.len, (const uint8_t *)out.data) : NULL;
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field(answer, 1); /* a bool in both */
  if (r == 0 && !m)
    r = cap_error_set(err, EPROTO, "the answer to %s is not a %s", method, answer->short_name);
  if (m) {
    *healthy = *(const protobuf_c_boolean *)((const char *)m + f->offset);
    protobuf_c_message_free_unpacked(m, NULL);
  }
  cap_buf_free(&out);
  return r;
}

/* ---- the seed's CapabilityService ---- */

/* A copy of the answer's text: a string with a NUL inside is not text. */
static int answer_text(const uint8_t *data, size_t len, const char *what, char **out,
                       struct cap_error *err)
{
  if (len && memchr(data, '\0', len)) /* an empty field may come as NULL */
    return cap_error_set(err, EPROTO, "the %s holds a NUL byte: not JSON text", what);
  *out = cap_xmalloc(len + 1);
  if (len)
    memcpy(*out, data, len);
  (*out)[len] = '\0';
  return 0;
}

static int service_invoke(struct selu_channel *ch, const struct selu_invoke_args *a, int timeout_ms,
                          struct selu_response *resp, struct cap_error *err)
{
  Selu__Capability__V1__InvokeRequest req = SELU__CAPABILITY__V1__INVOKE_REQUEST__INIT;
  req.tool_name = (char *)a->tool;
  req.parameters = (char *)a->args_json;
  Selu__Capability__V1__InvokeRequest__ContextEntry entries[2], *ptrs[2];
  const char *keys[] = {"session_id", "user_id"}, *values[] = {a->session_id, a->user_id};
  for (size_t i = 0; i < 2; i++) {
    selu__capability__v1__invoke_request__context_entry__init(&entries[i]);
    entries[i].key = (char *)keys[i];
    entries[i].value = (char *)(values[i] ? values[i] : "");
    ptrs[i] = &entries[i];
  }
  req.n_context = 2;
  req.context = ptrs;
  size_t len = selu__capability__v1__invoke_request__get_packed_size(&req);
  uint8_t *buf = cap_xmalloc(len + 1);
  selu__capability__v1__invoke_request__pack(&req, buf);
  struct cap_buf out = {0};
  int r = unary(ch, SERVICE_INVOKE, buf, len, timeout_ms, a->cancel, &out, err);
  free(buf);
  if (r == 0) {
    Selu__Capability__V1__InvokeResponse *m =
        selu__capability__v1__invoke_response__unpack(NULL, out.len, (const uint8_t *)out.data);
    if (!m) {
      r = cap_error_set(err, EPROTO, "the Invoke answer is not an InvokeResponse");
    } else {
      resp->success = m->success;
      resp->result = cap_xstrdup(m->result ? m->result : "");
      resp->error = cap_xstrdup(m->error ? m->error : "");
      selu__capability__v1__invoke_response__free_unpacked(m, NULL);
    }
  }
  cap_buf_free(&out);
  return r;
}

/* ---- the orchestrator's Capability ---- */

static ProtobufCBinaryData bytes_of(const char *s)
{
  return (ProtobufCBinaryData){.len = strlen(s), .data = (uint8_t *)s};
}

/* StreamInvoke's chunks, gathered. */
struct chunks {
  struct cap_buf data;
  char *error;
};

static int on_chunk(void *ctx, const uint8_t *msg, size_t len, bool *done, struct cap_error *err)
{
  struct chunks *c = ctx;
  Selu__Orchestrator__V1__InvokeChunk *m =
      selu__orchestrator__v1__invoke_chunk__unpack(NULL, len, msg);
  if (!m)
    return cap_error_set(err, EPROTO, "a StreamInvoke answer is not an InvokeChunk");
  cap_buf_append(&c->data, (const char *)m->data.data, m->data.len);
  if (m->error && *m->error) {
    c->error = cap_xstrdup(m->error);
    *done = true;
  }
  *done = *done || m->done;
  selu__orchestrator__v1__invoke_chunk__free_unpacked(m, NULL);
  return 0;
}

static int capability_answer(const struct cap_buf *out, struct selu_response *resp,
                             struct cap_error *err)
{
  Selu__Orchestrator__V1__InvokeResponse *m =
      selu__orchestrator__v1__invoke_response__unpack(NULL, out->len, (const uint8_t *)out->data);
  if (!m)
    return cap_error_set(err, EPROTO, "the Invoke answer is not an InvokeResponse");
  int r = answer_text(m->result_json.data, m->result_json.len, "result_json", &resp->result, err);
  resp->error = cap_xstrdup(m->error ? m->error : "");
  resp->success = !*resp->error;
  selu__orchestrator__v1__invoke_response__free_unpacked(m, NULL);
  return r;
}

static int capability_invoke(struct selu_channel *ch, bool stream, const struct selu_invoke_args *a,
                             int timeout_ms, struct selu_response *resp, struct cap_error *err)
{
  Selu__Orchestrator__V1__InvokeRequest req = SELU__ORCHESTRATOR__V1__INVOKE_REQUEST__INIT;
  req.tool_name = (char *)a->tool;
  req.args_json = bytes_of(a->args_json);
  req.config_json = bytes_of(a->config_json ? a->config_json : "{}");
  req.session_id = (char *)(a->session_id ? a->session_id : "");
  req.capability_id = (char *)(a->capability_id ? a->capability_id : "");
  req.thread_id = (char *)(a->thread_id ? a->thread_id : "");
  size_t len = selu__orchestrator__v1__invoke_request__get_packed_size(&req);
  uint8_t *buf = cap_xmalloc(len + 1);
  selu__orchestrator__v1__invoke_request__pack(&req, buf);
  int r;
  if (!stream) {
    struct cap_buf out = {0};
    r = unary(ch, CAPABILITY_INVOKE, buf, len, timeout_ms, a->cancel, &out, err);
    if (r == 0)
      r = capability_answer(&out, resp, err);
    cap_buf_free(&out);
  } else {
    struct chunks c = {0};
    r = server_stream(ch, CAPABILITY_STREAM, buf, len, timeout_ms, a->cancel, on_chunk, &c, err);
    if (r == 0)
      r = answer_text((const uint8_t *)(c.data.data ? c.data.data : ""), c.data.len,
                      "StreamInvoke data", &resp->result, err);
    resp->error = c.error ? c.error : cap_xstrdup("");
    resp->success = !c.error;
    cap_buf_free(&c.data);
  }
  free(buf);
  return r;
}

/* ---- the orchestrator's artifact calls ---- */

#define ARTIFACT_CHUNK (256 * 1024) /* as Selu's orchestrator sends them */
#define CAPABILITY_UPLOAD "/selu.capability.v1.Capability/UploadInputArtifact"
#define CAPABILITY_DOWNLOAD "/selu.capability.v1.Capability/DownloadOutputArtifact"

/* The chunks, one message each: the first names the file, each at most
 * ARTIFACT_CHUNK. */
static int upload_chunks(struct rpc *c, const char *filename, const char *mime, const char *data,
                         size_t len, struct cap_error *err)
{
  size_t off = 0;
  int r = 0;
  do {
    size_t n = len - off > ARTIFACT_CHUNK ? ARTIFACT_CHUNK : len - off;
    Selu__Orchestrator__V1__UploadInputArtifactChunk m =
        SELU__ORCHESTRATOR__V1__UPLOAD_INPUT_ARTIFACT_CHUNK__INIT;
    m.filename = (char *)(off == 0 ? filename : "");
    m.mime_type = (char *)(off == 0 ? mime : "");
    m.data = (ProtobufCBinaryData){.len = n, .data = (uint8_t *)(data + off)};
    size_t plen = selu__orchestrator__v1__upload_input_artifact_chunk__get_packed_size(&m);
    uint8_t *buf = cap_xmalloc(plen + 1);
    selu__orchestrator__v1__upload_input_artifact_chunk__pack(&m, buf);
    grpc_byte_buffer *bb = message(buf, plen);
    free(buf);
    grpc_op op = {.op = GRPC_OP_SEND_MESSAGE};
    op.data.send_message.send_message = bb;
    r = rpc_batch(c, &op, 1, err);
    grpc_byte_buffer_destroy(bb);
    off += n;
  } while (r == 0 && off < len);
  return r;
}

static int upload_answer(const struct cap_buf *out, char **id, struct cap_error *err)
{
  Selu__Orchestrator__V1__UploadInputArtifactResponse *m =
      selu__orchestrator__v1__upload_input_artifact_response__unpack(NULL, out->len,
                                                                     (const uint8_t *)out->data);
  if (!m)
    return cap_error_set(err, EPROTO,
                         "the UploadInputArtifact answer is not an UploadInputArtifactResponse");
  int r = 0;
  if (m->error && *m->error)
    r = cap_error_set(err, EIO, "the capability refused the artifact: %s", m->error);
  else if (!m->capability_artifact_id || !*m->capability_artifact_id)
    r = cap_error_set(err, EPROTO, "the capability returned no capability_artifact_id");
  else
    *id = cap_xstrdup(m->capability_artifact_id);
  selu__orchestrator__v1__upload_input_artifact_response__free_unpacked(m, NULL);
  return r;
}

static int rpc_artifact_upload(struct selu_channel *ch, const char *filename, const char *mime,
                               const char *data, size_t len, int timeout_ms, char **id,
                               struct cap_error *err)
{
  *id = NULL;
  struct rpc c;
  rpc_begin(&c, ch, CAPABILITY_UPLOAD, timeout_ms);
  grpc_op start = {.op = GRPC_OP_SEND_INITIAL_METADATA};
  int r = rpc_batch(&c, &start, 1, err);
  if (r == 0)
    r = upload_chunks(&c, filename, mime, data, len, err);
  grpc_byte_buffer *recv = NULL;
  grpc_op ops[4];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[1].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[1].data.recv_initial_metadata.recv_initial_metadata = &c.initial;
  ops[2].op = GRPC_OP_RECV_MESSAGE;
  ops[2].data.recv_message.recv_message = &recv;
  ops[3] = recv_status(&c);
  if (r != 0)
    grpc_call_cancel(c.call, NULL);
  struct cap_error ignored = {0};
  int ended = rpc_batch(&c, ops, 4, r == 0 ? err : &ignored);
  cap_error_clear(&ignored);
  if (r == 0)
    r = ended;
  struct cap_buf out = {0};
  if (r == 0)
    r = rpc_answer(&c, recv, &out, err);
  if (r == 0)
    r = upload_answer(&out, id, err);
  cap_buf_free(&out);
  if (recv)
    grpc_byte_buffer_destroy(recv);
  rpc_end(&c);
  return r;
}

static int on_artifact_chunk(void *ctx, const uint8_t *msg, size_t len, bool *done,
                             struct cap_error *err)
{
  struct selu_artifact *a = ctx;
  Selu__Orchestrator__V1__ArtifactChunk *m =
      selu__orchestrator__v1__artifact_chunk__unpack(NULL, len, msg);
  if (!m)
    return cap_error_set(err, EPROTO, "a DownloadOutputArtifact answer is not an ArtifactChunk");
  int r = 0;
  if (m->error && *m->error) {
    r = cap_error_set(err, EIO, "the capability's artifact stream failed: %s", m->error);
  } else {
    struct cap_buf b = {.data = a->data, .len = a->len, .cap = a->cap};
    cap_buf_append(&b, (const char *)m->data.data, m->data.len);
    a->data = b.data, a->len = b.len, a->cap = b.cap;
    if (!a->filename && m->filename && *m->filename)
      a->filename = cap_xstrdup(m->filename);
    if (!a->mime_type && m->mime_type && *m->mime_type)
      a->mime_type = cap_xstrdup(m->mime_type);
    *done = m->done;
  }
  selu__orchestrator__v1__artifact_chunk__free_unpacked(m, NULL);
  return r;
}

static int rpc_artifact_download(struct selu_channel *ch, const char *id, int timeout_ms,
                                 struct selu_artifact *out, struct cap_error *err)
{
  *out = (struct selu_artifact){0};
  Selu__Orchestrator__V1__DownloadOutputArtifactRequest req =
      SELU__ORCHESTRATOR__V1__DOWNLOAD_OUTPUT_ARTIFACT_REQUEST__INIT;
  req.capability_artifact_id = (char *)id;
  size_t len = selu__orchestrator__v1__download_output_artifact_request__get_packed_size(&req);
  uint8_t *buf = cap_xmalloc(len + 1);
  selu__orchestrator__v1__download_output_artifact_request__pack(&req, buf);
  int r = server_stream(ch, CAPABILITY_DOWNLOAD, buf, len, timeout_ms, NULL, on_artifact_chunk, out,
                        err);
  free(buf);
  if (r == 0 && !out->len) /* as Selu's orchestrator: an artifact has bytes */
    r = cap_error_set(err, EPROTO, "the capability's artifact %s has no data", id);
  if (r < 0) {
    free(out->data);
    free(out->filename);
    free(out->mime_type);
    *out = (struct selu_artifact){0};
  }
  return r;
}

/* ---- the table's functions ---- */

static int rpc_health(struct selu_channel *ch, int timeout_ms, enum selu_protocol *proto,
                      bool *healthy, struct cap_error *err)
{
  *healthy = false;
  int r;
  if (*proto != SELU_PROTOCOL_SERVICE) {
    r = health_call(ch, CAPABILITY_HEALTH, &selu__orchestrator__v1__health_response__descriptor,
                    timeout_ms, healthy, err);
    if (r == 0)
      *proto = SELU_PROTOCOL_CAPABILITY;
    if (r != -ENOSYS || *proto == SELU_PROTOCOL_CAPABILITY)
      return r;
    cap_error_clear(err); /* not the orchestrator's contract: the seed's? */
  }
  r = health_call(ch, SERVICE_HEALTH, &selu__capability__v1__health_check_response__descriptor,
                  timeout_ms, healthy, err);
  if (r == -ENOSYS && *proto == SELU_PROTOCOL_UNKNOWN) {
    cap_error_clear(err); /* the seed's HealthCheck is optional */
    *healthy = true;
    r = 0;
  }
  if (r == 0)
    *proto = SELU_PROTOCOL_SERVICE;
  return r;
}

static int rpc_invoke(struct selu_channel *ch, enum selu_protocol proto, bool stream,
                      const struct selu_invoke_args *a, int timeout_ms, struct selu_response *resp,
                      struct cap_error *err)
{
  *resp = (struct selu_response){0};
  if (proto == SELU_PROTOCOL_CAPABILITY)
    return capability_invoke(ch, stream, a, timeout_ms, resp, err);
  if (stream)
    return cap_error_set(err, ENOSYS,
                         "StreamInvoke is a call of the orchestrator's Capability service; this "
                         "server speaks the seed's CapabilityService, which has Invoke only");
  return service_invoke(ch, a, timeout_ms, resp, err);
}

/* A kept channel's connection is not known broken: a channel made on a
 * socket never reconnects (and gRPC reports no state for it), so its
 * socket is asked: the peer hung up, or gRPC shut it. */
static bool rpc_channel_usable(struct selu_channel *ch)
{
  struct pollfd p = {.fd = ch->watch, .events = POLLRDHUP};
  return ch->watch >= 0 && poll(&p, 1, 0) >= 0 && !(p.revents & (POLLHUP | POLLERR | POLLRDHUP));
}

__attribute__((visibility("default"))) const struct selu_rpc_module selu_rpc_module_v2 = {
    .size = sizeof(struct selu_rpc_module),
    .channel_open = rpc_channel_open,
    .channel_close = rpc_channel_close,
    .health = rpc_health,
    .invoke = rpc_invoke,
    .artifact_upload = rpc_artifact_upload,
    .artifact_download = rpc_artifact_download,
    .defer_shutdown = rpc_defer_shutdown,
    .channel_usable = rpc_channel_usable,
};
