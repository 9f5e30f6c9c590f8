/* libFuzzer target for the egress proxy's request parsing (src/net/http.c):
 * the input is a request as a client would stream it. The head is parsed,
 * the target read as a URL or CONNECT authority, and the body walked
 * through the parser in pieces whose sizes come from the input itself, so
 * chunked framing is exercised across every split. Whatever the bytes, the
 * parser must not read out of bounds, must not claim more body bytes than
 * it was given, and must agree with itself on how a head ends. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static struct http_request req; /* 16 KiB: not on the stack */
  const char *text = (const char *)data;
  const char *why = NULL;
  long head = http_request_parse(&req, text, size, &why);
  if (head < 0) {
    if (!why)
      abort(); /* a refusal always says why */
    return 0;
  }
  if (head == 0)
    return 0;
  if ((size_t)head > size || !req.method || !req.target)
    abort();
  for (size_t i = 0; i < req.n_headers; i++)
    if (!req.headers[i].name || !req.headers[i].value)
      abort();
  (void)http_header(&req, "Content-Length");

  struct http_url url;
  if (http_parse_url(req.target, &url) && (!url.host[0] || url.path[0] != '/'))
    abort();
  char authority[300];
  char *host;
  uint16_t port;
  if (strlen(req.target) < sizeof authority) {
    strcpy(authority, req.target);
    if (http_split_authority(authority, &host, &port) && port == 0)
      abort();
  }

  /* the body in pieces: each piece's length is the next input byte */
  size_t at = (size_t)head;
  unsigned step = size > 0 ? data[size - 1] % 17 + 1 : 1;
  struct cap_buf body = {0};
  while (at < size && !req.body_done) {
    size_t n = size - at < step ? size - at : step;
    size_t before = body.len;
    long used = http_body_feed(&req, text + at, n, &body);
    if (used >= 0 && body.len - before > (size_t)used)
      abort(); /* a decoded body is never longer than its encoding */
    if (used < 0)
      break;
    if ((size_t)used > n)
      abort();
    if (used == 0 && !req.body_done)
      break;
    at += (size_t)used;
  }
  cap_buf_free(&body);
  return 0;
}
