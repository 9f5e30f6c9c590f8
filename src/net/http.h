/* HTTP/1.1 request heads for the egress proxy, parsed by Debian's
 * libhttp-parser (with capsule's own stricter checks on top: CRLF only, one
 * request per head, one framing): the request line, the headers, and the body
 * framing. The body itself is not buffered: http_body_feed walks it through
 * the same parser as it streams past, so chunked framing is checked too, the
 * proxy takes exactly the bytes that belong to this one request, and it
 * forwards the decoded body in framing of its own. Heads must use CRLF. */
#ifndef CAPSULE_NET_HTTP_H
#define CAPSULE_NET_HTTP_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

#define HTTP_HEAD_MAX 16384 /* request line and headers together */
#define HTTP_MAX_HEADERS 100

struct http_header {
  const char *name, *value; /* NUL-terminated, inside http_request.head */
};

struct http_request {
  char head[HTTP_HEAD_MAX + 1]; /* NUL-separated copies of the strings */
  size_t head_used;
  const char *method; /* "GET", "CONNECT", ... */
  const char *target; /* the request target as sent */
  struct http_header headers[HTTP_MAX_HEADERS];
  size_t n_headers;
  bool chunked;             /* Transfer-Encoding: chunked */
  long long content_length; /* -1 when absent */
  bool body_done;           /* http_body_feed reached the end of the body */
  http_parser parser;
  struct cap_buf *sink; /* during http_body_feed: where the body goes */
  /* parse state */
  bool complete;
  const char *why;
};

/* Parses the head at data[0..len) (through its blank line, CRLF CRLF).
 * Returns the head's length in bytes, 0 when more bytes are needed, -1 when
 * it is malformed (*why says how). Bytes after the head are the body's. */
long http_request_parse(struct http_request *req, const char *data, size_t len, const char **why);

/* The first header named name (any case), or NULL. */
const char *http_header(const struct http_request *req, const char *name);

/* Body bytes as they arrive: returns how many of data[0..len) belong to
 * this request's body (the rest would be a pipelined next request), or -1
 * when the framing is broken, and appends the body itself to out (chunk
 * framing removed: the proxy frames it anew, so an upstream never sees the
 * client's framing). Sets req->body_done at the body's end. A request with
 * no body is done at once. */
long http_body_feed(struct http_request *req, const char *data, size_t len, struct cap_buf *out);

/* A URL the proxy acts on. */
struct http_url {
  bool tls;
  char host[256];
  uint16_t port;
  char path[4096]; /* origin form, query included */
};

/* "http[s]://authority[/path]" -> url (path "/" when none; the fragment
 * dropped; userinfo refused). Returns false when it is not such a URL. */
bool http_parse_url(const char *text, struct http_url *url);

/* "host:port" or "[v6]:port" -> host, port; authority is modified. */
bool http_split_authority(char *authority, char **host, uint16_t *port);

#endif
