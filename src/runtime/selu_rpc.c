/* The Selu gRPC client, built as the shared module capsule-selu-rpc.so
 * (see selu_rpc_module.h): gRPC over nghttp2 (selu_h2.c) with protobuf-c's
 * messages. Its functions are reached through the table at the bottom.
 * The transport (a unary call, a server-streaming call, a client-streaming
 * upload) is shared; each contract has its own messages (capability.pb-c.h:
 * the seed's CapabilityService; orchestrator.pb-c.h: the orchestrator's
 * Capability, compiled under the C package selu.orchestrator.v1,
 * proto/meson.build). */
#include "runtime/selu_rpc_module.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "capability.pb-c.h"
#include "core/buf.h"
#include "core/cancel.h"
#include "orchestrator.pb-c.h"
#include "runtime/selu_h2.h"

/* the wire's method paths: both services live in package selu.capability.v1 */
#define SERVICE_INVOKE "/selu.capability.v1.CapabilityService/Invoke"
#define SERVICE_HEALTH "/selu.capability.v1.CapabilityService/HealthCheck"
#define CAPABILITY_INVOKE "/selu.capability.v1.Capability/Invoke"
#define CAPABILITY_STREAM "/selu.capability.v1.Capability/StreamInvoke"
#define CAPABILITY_HEALTH "/selu.capability.v1.Capability/Healthcheck"

/* A channel carries calls from several threads at once (selu_h2.c). */
struct selu_channel {
  struct h2_conn *conn;
  size_t max_response;
};

static int rpc_channel_open(int fd, size_t max_response, struct selu_channel **ret,
                            struct cap_error *err)
{
  *ret = NULL;
  struct h2_conn *conn = NULL;
  int r = h2_open(fd, max_response, &conn, err);
  if (r < 0)
    return r;
  struct selu_channel *ch = cap_xcalloc(1, sizeof *ch);
  ch->conn = conn;
  ch->max_response = max_response;
  *ret = ch;
  return 0;
}

static void rpc_channel_close(struct selu_channel *ch)
{
  if (!ch)
    return;
  h2_close(ch->conn);
  free(ch);
}

/* A call that ended with a gRPC status other than OK, as an errno and a
 * message that says what it means for the call. */
static int status_error(int status, const char *msg, const char *method, int timeout_ms,
                        struct cap_error *err)
{
  switch (status) {
  case H2_GRPC_DEADLINE_EXCEEDED:
    return cap_error_set(err, ETIMEDOUT, "no answer within %d ms (the deadline)", timeout_ms);
  case H2_GRPC_UNAVAILABLE:
    return cap_error_set(err, ECONNRESET, "the capability's server went away during the call (%s)",
                         msg);
  case H2_GRPC_RESOURCE_EXHAUSTED:
    return cap_error_set(err, EFBIG, "the answer is larger than the output cap (%s)", msg);
  case H2_GRPC_UNIMPLEMENTED:
    return cap_error_set(err, ENOSYS, "the server does not implement %s", method);
  default:
    return cap_error_set(err, EPROTO, "%s failed with gRPC status %d: %s", method, status, msg);
  }
}

/* The call's end: 0 when its status is OK. */
static int call_end(struct h2_call *k, const char *method, int timeout_ms, struct cap_error *err)
{
  int code = H2_GRPC_UNKNOWN;
  const char *msg = "";
  int r = h2_call_status(k, &code, &msg, err);
  if (r == 0 && code != H2_GRPC_OK)
    r = status_error(code, msg, method, timeout_ms, err);
  return r;
}

/* After the client's side has gone (sent, 0, or failed): the one answer
 * into out, and the call's status. */
static int one_answer(struct h2_call *k, int sent, const char *method, int timeout_ms,
                      struct cap_buf *out, struct cap_error *err)
{
  struct cap_buf msg = {0};
  int got = sent == 0 ? h2_call_recv(k, &msg, err) : sent;
  int r = got < 0 ? got : call_end(k, method, timeout_ms, err);
  if (r == 0 && got == 0)
    r = cap_error_set(err, EPROTO, "%s returned no message", method);
  if (r == 0)
    cap_buf_append(out, msg.data, msg.len);
  cap_buf_free(&msg);
  return r;
}

/* A call of method, cancelled by a's token and telling a's wait hook (a
 * NULL: neither). */
static struct h2_call *call_start(struct selu_channel *ch, const char *method, int timeout_ms,
                                  const struct selu_invoke_args *a)
{
  struct h2_call *k = h2_call_start(ch->conn, method, timeout_ms, a ? a->cancel : NULL);
  h2_call_on_wait(k, a ? a->wait : NULL);
  return k;
}

/* One unary call: request bytes in, response bytes out (*out owned). */
static int unary(struct selu_channel *ch, const char *method, const uint8_t *req, size_t req_len,
                 int timeout_ms, const struct selu_invoke_args *a, struct cap_buf *out,
                 struct cap_error *err)
{
  struct h2_call *k = call_start(ch, method, timeout_ms, a);
  int r = one_answer(k, h2_call_send(k, req, req_len, true, err), method, timeout_ms, out, err);
  h2_call_free(k);
  return r;
}

/* What a streamed call does with each message: append it, and say when the
 * stream is complete (*done). */
typedef int (*stream_fn)(void *ctx, const uint8_t *msg, size_t len, bool *done,
                         struct cap_error *err);

/* One server-streaming call: the request out, then on_msg for each answer
 * until it says done or the server ends the stream; the whole stream is
 * bounded by the channel's max_response (selu_h2.c counts it). */
static int server_stream(struct selu_channel *ch, const char *method, const uint8_t *req,
                         size_t req_len, int timeout_ms, const struct selu_invoke_args *a,
                         stream_fn on_msg, void *ctx, struct cap_error *err)
{
  struct h2_call *k = call_start(ch, method, timeout_ms, a);
  int r = h2_call_send(k, req, req_len, true, err);
  bool done = false;
  struct cap_buf msg = {0};
  while (r == 0 && !done) {
    int got = h2_call_recv(k, &msg, err);
    if (got <= 0) {
      r = got;
      break; /* 0: the server ended the stream: its status says how */
    }
    r = on_msg(ctx, (const uint8_t *)msg.data, msg.len, &done, err);
  }
  if (r == 0 && !done)
    r = call_end(k, method, timeout_ms, err);
  cap_buf_free(&msg);
  h2_call_free(k); /* reset when done early: nothing more is wanted from it */
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
  int r = unary(ch, SERVICE_INVOKE, buf, len, timeout_ms, a, &out, err);
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
    r = unary(ch, CAPABILITY_INVOKE, buf, len, timeout_ms, a, &out, err);
    if (r == 0)
      r = capability_answer(&out, resp, err);
    cap_buf_free(&out);
  } else {
    struct chunks c = {0};
    r = server_stream(ch, CAPABILITY_STREAM, buf, len, timeout_ms, a, on_chunk, &c, err);
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
 * ARTIFACT_CHUNK; the last ends the client's side. */
static int upload_chunks(struct h2_call *k, const char *filename, const char *mime,
                         const char *data, size_t len, struct cap_error *err)
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
    off += n;
    r = h2_call_send(k, buf, plen, off >= len, err);
    free(buf);
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
  struct h2_call *k = h2_call_start(ch->conn, CAPABILITY_UPLOAD, timeout_ms, NULL);
  struct cap_buf out = {0};
  int r = one_answer(k, upload_chunks(k, filename, mime, data, len, err), CAPABILITY_UPLOAD,
                     timeout_ms, &out, err);
  if (r == 0)
    r = upload_answer(&out, id, err);
  cap_buf_free(&out);
  h2_call_free(k);
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

/* A kept channel's connection is not known broken (it never reconnects). */
static bool rpc_channel_usable(struct selu_channel *ch) { return h2_usable(ch->conn); }

__attribute__((visibility("default"))) const struct selu_rpc_module selu_rpc_module_v3 = {
    .size = sizeof(struct selu_rpc_module),
    .channel_open = rpc_channel_open,
    .channel_close = rpc_channel_close,
    .health = rpc_health,
    .invoke = rpc_invoke,
    .artifact_upload = rpc_artifact_upload,
    .artifact_download = rpc_artifact_download,
    .channel_usable = rpc_channel_usable,
};
