/* libFuzzer target for the messages of `serve --grpc` (src/front/
 * grpc_serve_msg.c): the first byte picks a method, the rest is the
 * request a client sent. Whatever the bytes, decoding must not crash or
 * leak, the strings a decoded call holds must be NUL-terminated within
 * what was decoded, and an answer built from them must encode. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "front/grpc_serve_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  enum grpc_serve_method method = (enum grpc_serve_method)(data[0] % 5);
  struct grpc_serve_request req;
  struct grpc_serve_call call = {0};
  if (grpc_serve_decode(method, data + 1, size - 1, &req, &call) && !call.health) {
    if (!call.tool_name || !call.parameters)
      abort();
    struct grpc_serve_answer a = {.success = strlen(call.parameters) % 2 == 0,
                                  .result = (char *)call.parameters,
                                  .error = (char *)call.tool_name};
    size_t len = 0;
    free(grpc_serve_encode(method, &a, &len));
    if (call.session_id && !*call.session_id)
      abort();
  }
  grpc_serve_request_free(&req);
  return 0;
}
