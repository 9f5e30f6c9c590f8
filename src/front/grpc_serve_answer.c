/* The answer of a gRPC server's stream (grpc_serve_h2.h): its headers,
 * its length-prefixed messages fed to nghttp2 as the client's window
 * lets them go, its status in the trailers (or a Trailers-Only answer),
 * grpc-message percent-encoded. Under the connection's mu throughout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grpc_wire.h"
#include "front/grpc_serve_h2.h"
#include "front/grpc_serve_msg.h"

static void stream_wake(struct gs_stream *k) { pthread_cond_broadcast(&k->cv); }

static void trailers(nghttp2_session *s, struct gs_stream *k);

static ssize_t on_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                       nghttp2_data_source *src, void *user)
{
  (void)user, (void)id;
  struct gs_stream *k = src->ptr;
  size_t left = k->out.len - k->out_off;
  if (!left && !k->out_end) {
    k->out_deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  size_t n = left < length ? left : length;
  if (n)
    memcpy(buf, k->out.data + k->out_off, n);
  k->out_off += n;
  if (k->out_off == k->out.len) {
    k->out.len = k->out_off = 0;
    if (k->out_end) {
      *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
      trailers(s, k);
    }
  }
  stream_wake(k); /* room for a stream's next chunk */
  return (ssize_t)n;
}

#define NV(n, v, vl)                                                                               \
  {                                                                                                \
    (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vl),                                           \
        NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE                               \
  }

/* The status and its message (percent-encoded) as nva[0..1]; *text freed
 * by the caller after the submit (nghttp2 copies it then). */
static size_t status_nv(struct gs_stream *k, nghttp2_nv *nva, char code[12], char **text)
{
  snprintf(code, 12, "%d", k->status < 0 ? 0 : k->status);
  nva[0] = (nghttp2_nv)NV("grpc-status", code, strlen(code));
  *text = grpc_wire_percent_encoded(k->status_message ? k->status_message : "");
  if (!**text)
    return 1;
  nva[1] = (nghttp2_nv)NV("grpc-message", *text, strlen(*text));
  nva[1].flags = NGHTTP2_NV_FLAG_NO_COPY_NAME;
  return 2;
}

static void trailers(nghttp2_session *s, struct gs_stream *k)
{
  nghttp2_nv nva[2];
  char code[12], *text = NULL;
  size_t n = status_nv(k, nva, code, &text);
  nva[0].flags = NGHTTP2_NV_FLAG_NO_COPY_NAME;
  nghttp2_submit_trailer(s, k->id, nva, n);
  free(text);
}

static bool usable(const struct gs_stream *k) { return !k->closed && !k->c->dead; }

static void start_answer(struct gs_stream *k)
{
  nghttp2_nv nva[] = {NV(":status", "200", 3), NV("content-type", "application/grpc", 16),
                      NV("grpc-accept-encoding", GRPC_SERVE_ACCEPT_ENCODING,
                         sizeof GRPC_SERVE_ACCEPT_ENCODING - 1)};
  nghttp2_data_provider dp = {.source.ptr = k, .read_callback = on_read};
  nghttp2_submit_response(k->c->h2, k->id, nva, 3, &dp);
  k->headers_sent = true;
}

bool gs_stream_send(struct gs_stream *k, const uint8_t *msg, size_t len)
{
  if (!usable(k))
    return false;
  uint8_t prefix[5] = {0, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
                       (uint8_t)len};
  cap_buf_append(&k->out, (const char *)prefix, 5);
  cap_buf_append(&k->out, (const char *)msg, len);
  if (!k->headers_sent) {
    start_answer(k);
  } else if (k->out_deferred) {
    k->out_deferred = false;
    nghttp2_session_resume_data(k->c->h2, k->id);
  }
  return true;
}

bool gs_stream_finish(struct gs_stream *k, int status, const char *message)
{
  if (!usable(k))
    return false;
  k->status = status;
  free(k->status_message);
  k->status_message = message && *message ? cap_xstrdup(message) : NULL;
  k->out_end = true;
  if (k->headers_sent) {
    if (k->out_deferred) {
      k->out_deferred = false;
      nghttp2_session_resume_data(k->c->h2, k->id);
    }
    return true;
  }
  /* Trailers-Only: one HEADERS with the status, the stream's end */
  nghttp2_nv nva[5] = {NV(":status", "200", 3), NV("content-type", "application/grpc", 16),
                       NV("grpc-accept-encoding", GRPC_SERVE_ACCEPT_ENCODING,
                          sizeof GRPC_SERVE_ACCEPT_ENCODING - 1)};
  char code[12], *text = NULL;
  size_t n = 3 + status_nv(k, nva + 3, code, &text);
  nva[3].flags = NGHTTP2_NV_FLAG_NO_COPY_NAME;
  nghttp2_submit_response(k->c->h2, k->id, nva, n, NULL);
  k->headers_sent = true;
  free(text);
  return true;
}
