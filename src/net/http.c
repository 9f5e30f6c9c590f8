#include "net/http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Which string the callbacks are building, so a value split over two
 * callbacks is appended rather than started anew. */
enum piece { PIECE_NONE, PIECE_URL, PIECE_FIELD, PIECE_VALUE };

struct parse_state {
  struct http_request *req;
  enum piece last;
  char *cur; /* the string being built, inside req->head */
  int messages;
};

/* A head that holds a second request (a first one ended by bare LFs before
 * the CRLF CRLF capsule looks for) is refused, not half-read. */
static int on_message_begin(http_parser *p)
{
  struct parse_state *st = p->data;
  if (++st->messages > 1) {
    st->req->why = "a second request inside the first one's head; send one request at a time";
    return 1;
  }
  return 0;
}

static int store(http_parser *p, enum piece kind, const char *at, size_t len)
{
  struct parse_state *st = p->data;
  struct http_request *req = st->req;
  if (req->head_used + len + 1 > sizeof req->head) {
    req->why = "the request head is too large";
    return 1;
  }
  if (st->last == kind) { /* continuation: overwrite the terminator */
    req->head_used--;
  } else {
    st->cur = req->head + req->head_used;
    if (kind == PIECE_FIELD) {
      if (req->n_headers == HTTP_MAX_HEADERS) {
        req->why = "too many header lines";
        return 1;
      }
      req->headers[req->n_headers++] = (struct http_header){.name = st->cur, .value = ""};
    } else if (kind == PIECE_VALUE) {
      req->headers[req->n_headers - 1].value = st->cur;
    } else {
      req->target = st->cur;
    }
  }
  memcpy(req->head + req->head_used, at, len);
  req->head_used += len;
  req->head[req->head_used++] = '\0';
  st->last = kind;
  return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
  return store(p, PIECE_URL, at, len);
}
static int on_field(http_parser *p, const char *at, size_t len)
{
  return store(p, PIECE_FIELD, at, len);
}
static int on_value(http_parser *p, const char *at, size_t len)
{
  return store(p, PIECE_VALUE, at, len);
}

static int on_headers_complete(http_parser *p)
{
  struct parse_state *st = p->data;
  struct http_request *req = st->req;
  req->complete = true;
  req->chunked = (p->flags & F_CHUNKED) != 0;
  req->content_length = (p->flags & F_CONTENTLENGTH) ? (long long)p->content_length : -1;
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
  struct http_request *req = p->data;
  if (req && req->sink)
    cap_buf_append(req->sink, at, len);
  return 0;
}

static int on_message_complete(http_parser *p)
{
  struct http_request *req = p->data;
  if (!req)
    return 0;
  req->body_done = true;
  http_parser_pause(p, 1); /* what follows is another request's */
  return 0;
}

/* Only the first request on a connection: the head callbacks write through
 * parse_state while parsing the head; body callbacks see the request. */
static const http_parser_settings head_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_headers_complete = on_headers_complete,
};
static const http_parser_settings body_settings = {
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

const char *http_header(const struct http_request *req, const char *name)
{
  for (size_t i = 0; i < req->n_headers; i++)
    if (strcasecmp(req->headers[i].name, name) == 0)
      return req->headers[i].value;
  return NULL;
}

/* RFC 9110 token: what a field name is made of. A name with a space or a
 * separator ("Transfer-Encoding : chunked", "X Y: z") is one the parser
 * would let through and an upstream could read as another header. */
static bool is_token(const char *s)
{
  static const char extra[] = "!#$%&'*+-.^_`|~";
  if (!*s)
    return false;
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          (c && strchr(extra, c))))
      return false;
  }
  return true;
}

static bool te_is_plain_chunked(const char *v)
{
  while (*v == ' ' || *v == '\t')
    v++;
  size_t n = strlen(v);
  while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
    n--;
  return n == 7 && strncasecmp(v, "chunked", 7) == 0;
}

long http_request_parse(struct http_request *req, const char *data, size_t len, const char **why)
{
  const char *end = NULL;
  for (size_t i = 0; i + 3 < len; i++)
    if (data[i] == '\r' && memcmp(data + i, "\r\n\r\n", 4) == 0) {
      end = data + i + 4;
      break;
    }
  if (!end) {
    if (len >= HTTP_HEAD_MAX) {
      *why = "the request head is larger than 16 KiB";
      return -1;
    }
    return 0;
  }
  size_t head_len = (size_t)(end - data);
  if (head_len > HTTP_HEAD_MAX) {
    *why = "the request head is larger than 16 KiB";
    return -1;
  }
  /* every line ends in CRLF: a bare LF would let the parser end the head
   * before the CRLF CRLF found above, and read body bytes as head */
  for (size_t i = 0; i < head_len; i++)
    if (data[i] == '\n' && (i == 0 || data[i - 1] != '\r')) {
      *why = "a line of the request head ends in a bare LF; HTTP lines end in CRLF";
      return -1;
    }
  req->head_used = 0;
  req->n_headers = 0;
  req->method = req->target = NULL;
  req->complete = req->body_done = false;
  req->why = NULL;
  struct parse_state st = {.req = req};
  http_parser_init(&req->parser, HTTP_REQUEST);
  req->parser.data = &st;
  size_t n = http_parser_execute(&req->parser, &head_settings, data, head_len);
  enum http_errno e = HTTP_PARSER_ERRNO(&req->parser);
  if (req->why || (e != HPE_OK && e != HPE_PAUSED) || !req->complete || !req->target) {
    *why = req->why      ? req->why
           : e != HPE_OK ? http_errno_description(e)
                         : "the request head is incomplete";
    return -1;
  }
  (void)n;
  req->method = http_method_str((enum http_method)req->parser.method);
  for (size_t i = 0; i < req->n_headers; i++)
    if (!is_token(req->headers[i].name)) {
      *why = "a header name holds a space or a character outside RFC 9110's token set";
      return -1;
    }
  const char *te = http_header(req, "Transfer-Encoding");
  if (te && !te_is_plain_chunked(te)) {
    *why = "only \"Transfer-Encoding: chunked\" request bodies are supported";
    return -1;
  }
  size_t lengths = 0;
  for (size_t i = 0; i < req->n_headers; i++)
    lengths += strcasecmp(req->headers[i].name, "Content-Length") == 0;
  if (lengths > 1 || (lengths && te)) {
    *why = "the request frames its body twice (Content-Length with Transfer-Encoding, or two "
           "Content-Length headers)";
    return -1;
  }
  /* a request whose head ends its message (no body) is done now; the
   * parser has not seen it finish because the head callbacks ignore it */
  req->body_done = !req->chunked && req->content_length <= 0;
  req->parser.data = req;
  return (long)head_len;
}

long http_body_feed(struct http_request *req, const char *data, size_t len, struct cap_buf *out)
{
  if (req->body_done)
    return 0;
  if (!len)
    return 0;
  req->sink = out;
  size_t n = http_parser_execute(&req->parser, &body_settings, data, len);
  req->sink = NULL;
  enum http_errno e = HTTP_PARSER_ERRNO(&req->parser);
  if (e != HPE_OK && e != HPE_PAUSED)
    return -1;
  return (long)n;
}

/* "host:port" or "[v6]:port" -> host, port (target is modified) */
bool http_split_authority(char *target, char **host, uint16_t *port)
{
  char *colon = strrchr(target, ':');
  if (!colon || colon == target)
    return false;
  *colon = '\0';
  char *end;
  long p = strtol(colon + 1, &end, 10);
  if (*end || p < 1 || p > 65535)
    return false;
  *port = (uint16_t)p;
  if (target[0] == '[') {
    size_t n = strlen(target);
    if (n < 3 || target[n - 1] != ']')
      return false;
    target[n - 1] = '\0';
    target++;
  }
  *host = target;
  return true;
}

/* "http[s]://authority[/path]" -> t (path "/" when none) */
bool http_parse_url(const char *url, struct http_url *t)
{
  size_t skip;
  if (strncasecmp(url, "https://", 8) == 0) {
    t->tls = true;
    skip = 8;
  } else if (strncasecmp(url, "http://", 7) == 0) {
    t->tls = false;
    skip = 7;
  } else {
    return false;
  }
  const char *auth = url + skip;
  size_t alen = strcspn(auth, "/?#");
  char authority[300];
  if (alen == 0 || alen >= sizeof authority || memchr(auth, '@', alen))
    return false;
  memcpy(authority, auth, alen);
  authority[alen] = '\0';
  char *host = authority;
  t->port = t->tls ? 443 : 80;
  bool has_port =
      authority[0] == '[' ? strstr(authority, "]:") != NULL : strchr(authority, ':') != NULL;
  if (has_port && !http_split_authority(authority, &host, &t->port))
    return false;
  if (!has_port && authority[0] == '[') {
    size_t n = strlen(authority);
    if (authority[n - 1] != ']')
      return false;
    authority[n - 1] = '\0';
    host++;
  }
  if (!*host || strlen(host) >= sizeof t->host)
    return false;
  snprintf(t->host, sizeof t->host, "%s", host);
  const char *path = auth + alen;
  if (*path == '#')
    path = "";
  size_t plen = strcspn(path, "#");
  if (plen >= sizeof t->path - 1)
    return false;
  if (plen == 0 || path[0] != '/') { /* "?q" or nothing: the root */
    t->path[0] = '/';
    memcpy(t->path + 1, path, plen);
    t->path[plen + 1] = '\0';
  } else {
    memcpy(t->path, path, plen);
    t->path[plen] = '\0';
  }
  return true;
}
