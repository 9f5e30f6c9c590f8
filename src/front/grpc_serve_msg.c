/* The two services' messages (front/grpc_serve_msg.h). */
#include "front/grpc_serve_msg.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "capability.pb-c.h"
#include "core/buf.h"
#include "orchestrator.pb-c.h"

static const struct {
  const char *path;
  enum grpc_serve_method method;
} methods[] = {
    {"/selu.capability.v1.CapabilityService/Invoke", GRPC_SERVE_INVOKE},
    {"/selu.capability.v1.CapabilityService/HealthCheck", GRPC_SERVE_HEALTH},
    {"/selu.capability.v1.Capability/Invoke", GRPC_SERVE_CAP_INVOKE},
    {"/selu.capability.v1.Capability/StreamInvoke", GRPC_SERVE_CAP_STREAM},
    {"/selu.capability.v1.Capability/Healthcheck", GRPC_SERVE_CAP_HEALTH},
    {"/selu.capability.v1.Capability/UploadInputArtifact", GRPC_SERVE_CAP_UPLOAD},
    {"/selu.capability.v1.Capability/DownloadOutputArtifact", GRPC_SERVE_CAP_DOWNLOAD},
};

bool grpc_serve_method_of(const char *path, size_t len, enum grpc_serve_method *method)
{
  for (size_t i = 0; i < sizeof methods / sizeof *methods; i++)
    if (strlen(methods[i].path) == len && memcmp(methods[i].path, path, len) == 0) {
      *method = methods[i].method;
      return true;
    }
  return false;
}

static const char *nonempty(const char *s) { return s && *s ? s : NULL; }

static bool decode_seed(const uint8_t *data, size_t len, struct grpc_serve_request *req,
                        struct grpc_serve_call *call)
{
  Selu__Capability__V1__InvokeRequest *m =
      selu__capability__v1__invoke_request__unpack(NULL, len, data);
  if (!m)
    return false;
  req->msg = m;
  call->tool_name = m->tool_name;
  call->parameters = m->parameters;
  req->keys = cap_xcalloc(m->n_context + 1, sizeof *req->keys);
  req->values = cap_xcalloc(m->n_context + 1, sizeof *req->values);
  for (size_t i = 0; i < m->n_context; i++) {
    req->keys[i] = m->context[i]->key;
    req->values[i] = m->context[i]->value;
    if (strcmp(m->context[i]->key, "session_id") == 0 && *m->context[i]->value)
      call->session_id = m->context[i]->value;
    else if (strcmp(m->context[i]->key, "thread_id") == 0 && *m->context[i]->value)
      call->thread_id = m->context[i]->value;
  }
  call->context_keys = req->keys;
  call->context_values = req->values;
  call->n_context = m->n_context;
  return true;
}

static bool decode_orchestrator(const uint8_t *data, size_t len, struct grpc_serve_request *req,
                                struct grpc_serve_call *call)
{
  Selu__Orchestrator__V1__InvokeRequest *m =
      selu__orchestrator__v1__invoke_request__unpack(NULL, len, data);
  if (!m)
    return false;
  req->msg = m;
  if (m->args_json.len && memchr(m->args_json.data, '\0', m->args_json.len))
    return false;
  req->args =
      cap_xstrndup(m->args_json.len ? (const char *)m->args_json.data : "", m->args_json.len);
  call->tool_name = m->tool_name;
  call->parameters = req->args;
  call->session_id = nonempty(m->session_id);
  call->thread_id = nonempty(m->thread_id);
  return true; /* config_json is not read: capsule injects the credentials it holds */
}

static bool decode_download(const uint8_t *data, size_t len, struct grpc_serve_request *req,
                            struct grpc_serve_call *call)
{
  Selu__Orchestrator__V1__DownloadOutputArtifactRequest *m =
      selu__orchestrator__v1__download_output_artifact_request__unpack(NULL, len, data);
  if (!m)
    return false;
  req->msg = m;
  call->artifact_id = m->capability_artifact_id;
  return true;
}

bool grpc_serve_decode(enum grpc_serve_method method, const uint8_t *data, size_t len,
                       struct grpc_serve_request *req, struct grpc_serve_call *call)
{
  memset(req, 0, sizeof *req);
  req->method = method;
  call->method = method;
  switch (method) {
  case GRPC_SERVE_HEALTH:
  case GRPC_SERVE_CAP_HEALTH:
    call->health = true;
    return true; /* the health requests have no fields: any bytes will do */
  case GRPC_SERVE_INVOKE: return decode_seed(data, len, req, call);
  case GRPC_SERVE_CAP_INVOKE:
  case GRPC_SERVE_CAP_STREAM: return decode_orchestrator(data, len, req, call);
  case GRPC_SERVE_CAP_UPLOAD: return true; /* its chunks are grpc_serve_decode_chunk's */
  case GRPC_SERVE_CAP_DOWNLOAD: return decode_download(data, len, req, call);
  }
  return false;
}

void grpc_serve_request_free(struct grpc_serve_request *req)
{
  if (req->msg && req->method == GRPC_SERVE_INVOKE)
    selu__capability__v1__invoke_request__free_unpacked(req->msg, NULL);
  else if (req->msg && req->method == GRPC_SERVE_CAP_DOWNLOAD)
    selu__orchestrator__v1__download_output_artifact_request__free_unpacked(req->msg, NULL);
  else if (req->msg)
    selu__orchestrator__v1__invoke_request__free_unpacked(req->msg, NULL);
  free(req->keys);
  free(req->values);
  free(req->args);
  memset(req, 0, sizeof *req);
}

static uint8_t *pack(const ProtobufCMessage *m, size_t *len)
{
  *len = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = cap_xmalloc(*len ? *len : 1);
  protobuf_c_message_pack(m, buf);
  return buf;
}

static ProtobufCBinaryData bytes(const char *s)
{
  return (ProtobufCBinaryData){.len = s ? strlen(s) : 0, .data = (uint8_t *)(s ? s : "")};
}

/* The failure's text: the tool's error, never empty. */
static char *failure(const struct grpc_serve_answer *a)
{
  return (char *)(a->error && *a->error ? a->error : "the tool failed");
}

uint8_t *grpc_serve_encode(enum grpc_serve_method method, const struct grpc_serve_answer *a,
                           size_t *len)
{
  switch (method) {
  case GRPC_SERVE_HEALTH: {
    Selu__Capability__V1__HealthCheckResponse h = SELU__CAPABILITY__V1__HEALTH_CHECK_RESPONSE__INIT;
    h.healthy = a->success;
    return pack(&h.base, len);
  }
  case GRPC_SERVE_INVOKE: {
    Selu__Capability__V1__InvokeResponse r = SELU__CAPABILITY__V1__INVOKE_RESPONSE__INIT;
    r.result = a->result ? a->result : (char *)"";
    r.success = a->success;
    r.error = a->error ? a->error : (char *)"";
    return pack(&r.base, len);
  }
  case GRPC_SERVE_CAP_HEALTH: {
    Selu__Orchestrator__V1__HealthResponse h = SELU__ORCHESTRATOR__V1__HEALTH_RESPONSE__INIT;
    h.ready = a->success;
    h.message = a->success ? (char *)"ready" : failure(a);
    return pack(&h.base, len);
  }
  case GRPC_SERVE_CAP_INVOKE: {
    Selu__Orchestrator__V1__InvokeResponse r = SELU__ORCHESTRATOR__V1__INVOKE_RESPONSE__INIT;
    r.result_json = bytes(a->success ? a->result : NULL);
    r.error = a->success ? (char *)"" : failure(a);
    return pack(&r.base, len);
  }
  case GRPC_SERVE_CAP_STREAM: {
    Selu__Orchestrator__V1__InvokeChunk c = SELU__ORCHESTRATOR__V1__INVOKE_CHUNK__INIT;
    c.data = bytes(a->success ? a->result : NULL);
    c.done = true;
    c.error = a->success ? (char *)"" : failure(a);
    return pack(&c.base, len);
  }
  case GRPC_SERVE_CAP_UPLOAD: {
    Selu__Orchestrator__V1__UploadInputArtifactResponse r =
        SELU__ORCHESTRATOR__V1__UPLOAD_INPUT_ARTIFACT_RESPONSE__INIT;
    r.capability_artifact_id = a->result ? a->result : (char *)"";
    r.size_bytes = a->size;
    r.error = a->error ? a->error : (char *)"";
    return pack(&r.base, len);
  }
  case GRPC_SERVE_CAP_DOWNLOAD: break;
  }
  *len = 0;
  return NULL;
}

bool grpc_serve_decode_chunk(const uint8_t *data, size_t len, struct grpc_serve_chunk *c,
                             void **msg)
{
  Selu__Orchestrator__V1__UploadInputArtifactChunk *m =
      selu__orchestrator__v1__upload_input_artifact_chunk__unpack(NULL, len, data);
  *msg = m;
  if (!m)
    return false;
  *c = (struct grpc_serve_chunk){
      .filename = m->filename, .mime_type = m->mime_type, .data = m->data.data, .len = m->data.len};
  return true;
}

void grpc_serve_chunk_free(void *msg)
{
  if (msg)
    selu__orchestrator__v1__upload_input_artifact_chunk__free_unpacked(msg, NULL);
}

uint8_t *grpc_serve_encode_chunk(const struct grpc_serve_chunk *c, size_t *len)
{
  Selu__Orchestrator__V1__ArtifactChunk m = SELU__ORCHESTRATOR__V1__ARTIFACT_CHUNK__INIT;
  m.data = (ProtobufCBinaryData){.len = c->len, .data = (uint8_t *)(c->len ? c->data : NULL)};
  m.filename = (char *)(c->filename ? c->filename : "");
  m.mime_type = (char *)(c->mime_type ? c->mime_type : "");
  m.done = c->done;
  m.error = (char *)(c->error ? c->error : "");
  return pack(&m.base, len);
}

enum grpc_serve_encoding grpc_serve_encoding_of(const uint8_t *v, size_t n)
{
  if (n == 8 && strncasecmp((const char *)v, "identity", 8) == 0)
    return GRPC_ENC_IDENTITY;
  if (n == 4 && strncasecmp((const char *)v, "gzip", 4) == 0)
    return GRPC_ENC_GZIP;
  if (n == 7 && strncasecmp((const char *)v, "deflate", 7) == 0)
    return GRPC_ENC_DEFLATE;
  return GRPC_ENC_OTHER;
}

int grpc_serve_inflate(const uint8_t *in, size_t n, size_t max, struct cap_buf *out)
{
  out->len = 0;
  z_stream z = {0};
  if (n > UINT_MAX || inflateInit2(&z, 15 + 32) != Z_OK) /* a zlib or a gzip header */
    return -EINVAL;
  z.next_in = (Bytef *)in;
  z.avail_in = (uInt)n;
  int r = Z_OK;
  /* one byte past max: a message of max bytes exactly ends within it */
  while (r == Z_OK && out->len <= max) {
    size_t room = max + 1 - out->len < 65536 ? max + 1 - out->len : 65536;
    cap_buf_reserve(out, room);
    z.next_out = (Bytef *)out->data + out->len;
    z.avail_out = (uInt)room;
    r = inflate(&z, Z_NO_FLUSH);
    out->len += room - z.avail_out;
  }
  inflateEnd(&z);
  if (out->len > max)
    return -E2BIG;
  return r == Z_STREAM_END && z.avail_in == 0 ? 0 : -EINVAL;
}
