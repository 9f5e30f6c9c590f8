/* libFuzzer target for what a Selu server sends the gRPC client
 * (runtime/selu_h2.c over nghttp2): the input is the server's side of the
 * connection (its HTTP/2 frames, then its end), read while a call is in
 * flight; its first byte picks the call (unary, or streamed) and a small
 * or a large message cap. Whatever comes, the call ends (a message, the
 * stream's end, or an error) with the messages it returned within the
 * cap, and nothing leaks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/selu_h2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  bool stream = data[0] & 1;
  size_t cap = data[0] & 2 ? 64 : 1 << 20;
  data++, size--;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    abort();
  int big = 1 << 20;
  setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  for (size_t off = 0; off < size;) { /* the server's bytes, then its end */
    ssize_t n = write(sv[1], data + off, size - off);
    if (n <= 0)
      abort();
    off += (size_t)n;
  }
  shutdown(sv[1], SHUT_WR);
  struct h2_conn *c = NULL;
  struct cap_error err = {0};
  if (h2_open(sv[0], cap, &c, &err) < 0)
    abort();
  struct h2_call *k = h2_call_start(c, "/selu.capability.v1.Capability/Invoke", 5000, NULL);
  int r = h2_call_send(k, (const uint8_t *)"\x0a\x01x", 3, true, &err);
  cap_error_clear(&err);
  struct cap_buf msg = {0};
  size_t total = 0;
  for (int i = 0; i < 1000; i++) {
    r = h2_call_recv(k, &msg, &err);
    cap_error_clear(&err);
    if (r <= 0)
      break;
    total += msg.len;
    if (total > cap)
      abort(); /* past the cap: refused, never returned */
    if (!stream)
      break;
  }
  int code = -1;
  const char *text = NULL;
  if (h2_call_status(k, &code, &text, &err) == 0 && (code < 0 || !text))
    abort();
  cap_error_clear(&err);
  cap_buf_free(&msg);
  h2_call_free(k);
  h2_close(c);
  close(sv[1]);
  return 0;
}
