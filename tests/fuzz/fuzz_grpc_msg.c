/* libFuzzer target for the messages of `serve --grpc` (src/front/
 * grpc_serve_msg.c): the first byte picks a method, the rest is the
 * request a client sent (for UploadInputArtifact: one of its chunks).
 * Whatever the bytes, decoding must not crash or leak, the strings a
 * decoded call holds must be NUL-terminated within what was decoded, and
 * an answer (or an ArtifactChunk) built from them must encode. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "front/grpc_serve_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void chunk(const uint8_t *data, size_t size)
{
  struct grpc_serve_chunk c;
  void *msg = NULL;
  if (grpc_serve_decode_chunk(data, size, &c, &msg)) {
    if (!c.filename || !c.mime_type || (c.len && !c.data))
      abort();
    struct grpc_serve_chunk out = {.filename = c.filename,
                                   .mime_type = c.mime_type,
                                   .data = c.data,
                                   .len = c.len,
                                   .done = c.len % 2 == 0,
                                   .error = c.filename};
    size_t len = 0;
    free(grpc_serve_encode_chunk(&out, &len));
  }
  grpc_serve_chunk_free(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  enum grpc_serve_method method = (enum grpc_serve_method)(data[0] % 7);
  if (method == GRPC_SERVE_CAP_UPLOAD) {
    chunk(data + 1, size - 1);
    return 0;
  }
  struct grpc_serve_request req;
  struct grpc_serve_call call = {0};
  if (grpc_serve_decode(method, data + 1, size - 1, &req, &call) && !call.health) {
    if (method == GRPC_SERVE_CAP_DOWNLOAD) {
      if (!call.artifact_id || strlen(call.artifact_id) > size)
        abort();
    } else if (!call.tool_name || !call.parameters) {
      abort();
    }
    const char *text = call.parameters ? call.parameters : call.artifact_id;
    struct grpc_serve_answer a = {.success = strlen(text) % 2 == 0,
                                  .result = (char *)text,
                                  .error = (char *)(call.tool_name ? call.tool_name : text),
                                  .size = strlen(text)};
    size_t len = 0;
    free(grpc_serve_encode(method, &a, &len));
    if (call.session_id && !*call.session_id)
      abort();
  }
  grpc_serve_request_free(&req);
  return 0;
}
