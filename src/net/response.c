/* A routed response on its way back to the tool. The upstream may send the
 * secret back (an echo, a redirect, an error page quoting the URL), and
 * the tool can shape the response (pad its request so a chunk boundary
 * falls inside the echoed secret), so masking runs over what the response
 * means, not over its wire bytes: the head as a whole, then the body as
 * libhttp-parser decodes it (chunk framing removed), masked as one stream
 * and framed anew by capsule. A body in a content coding (gzip, br...)
 * cannot be masked and is refused, whatever Accept-Encoding asked for. */
#include <http_parser.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "net/mask.h"
#include "net/proxy_internal.h"

#define RESPONSE_HEAD_MAX (64 << 10)

enum piece { PIECE_NONE, PIECE_FIELD, PIECE_VALUE };

struct masked {
  struct stream *client;
  const char *secret; /* the route's, owned by the proxy */
  struct secret_mask mask;
  struct cap_buf head;  /* the head being collected, re-serialised */
  struct cap_buf field; /* the current header's name, for the checks */
  struct cap_buf out;   /* what goes to the client after this read */
  enum piece last;
  bool head_request, in_body, chunked, done, sent;
  const char *refused; /* why the response cannot be relayed */
  struct event *ev;
};

static int on_message_begin(http_parser *p)
{
  struct masked *m = p->data;
  m->head.len = m->field.len = 0;
  m->last = PIECE_NONE;
  m->in_body = false;
  return 0;
}

/* The status line's start, once per message (a reason phrase may be
 * empty: then on_status never runs). */
static void start_head(http_parser *p, struct masked *m)
{
  if (!m->head.len)
    cap_buf_printf(&m->head, "HTTP/%u.%u %u ", p->http_major, p->http_minor, p->status_code);
}

static int on_status(http_parser *p, const char *at, size_t len)
{
  struct masked *m = p->data;
  start_head(p, m);
  cap_buf_append(&m->head, at, len);
  return 0;
}

/* A header's value may hide the body from the mask: a content coding, or
 * a transfer coding other than chunked. */
static const char *coding_refused(const struct masked *m, const char *value)
{
  const char *name = m->field.data;
  while (*value == ' ' || *value == '\t')
    value++;
  size_t n = strlen(value);
  while (n && (value[n - 1] == ' ' || value[n - 1] == '\t'))
    n--;
  if (strcasecmp(name, "Content-Encoding") == 0 && !(n == 8 && !strncasecmp(value, "identity", 8)))
    return "the upstream sent a compressed (Content-Encoding) response to a request that carried a "
           "credential; capsule masks the secret only in bodies it can read";
  if (strcasecmp(name, "Transfer-Encoding") == 0 && !(n == 7 && !strncasecmp(value, "chunked", 7)))
    return "the upstream sent a response in a transfer coding other than chunked";
  return NULL;
}

/* The header just completed (its value is the head's tail after ": "). */
static void header_done(struct masked *m)
{
  if (m->last != PIECE_VALUE || m->refused)
    return;
  cap_buf_putc(&m->head, '\0');
  m->head.len--;
  const char *value = strrchr(m->head.data, '\n');
  value = value ? strstr(value, ": ") : NULL;
  if (value)
    m->refused = coding_refused(m, value + 2);
}

static int on_field(http_parser *p, const char *at, size_t len)
{
  struct masked *m = p->data;
  if (m->in_body) /* a trailer: dropped (capsule ends its chunks itself) */
    return 0;
  start_head(p, m);
  if (m->last != PIECE_FIELD) {
    header_done(m);
    cap_buf_puts(&m->head, "\r\n");
    m->field.len = 0;
  }
  cap_buf_append(&m->head, at, len);
  cap_buf_append(&m->field, at, len);
  cap_buf_putc(&m->field, '\0');
  m->field.len--;
  m->last = PIECE_FIELD;
  return m->head.len > RESPONSE_HEAD_MAX;
}

static int on_value(http_parser *p, const char *at, size_t len)
{
  struct masked *m = p->data;
  if (m->in_body)
    return 0;
  if (m->last == PIECE_FIELD)
    cap_buf_puts(&m->head, ": ");
  cap_buf_append(&m->head, at, len);
  m->last = PIECE_VALUE;
  return m->head.len > RESPONSE_HEAD_MAX;
}

static int on_headers_complete(http_parser *p)
{
  struct masked *m = p->data;
  header_done(m);
  if (m->refused)
    return -1; /* an error: nothing of this response reaches the tool */
  start_head(p, m);
  cap_buf_puts(&m->head, "\r\n\r\n");
  secret_mask_buf(&m->mask, m->head.data, m->head.len);
  cap_buf_append(&m->out, m->head.data, m->head.len);
  m->sent = true;
  m->in_body = true;
  m->chunked = (p->flags & F_CHUNKED) != 0;
  return m->head_request && p->status_code >= 200 ? 1 : 0; /* 1: no body */
}

/* Masked body bytes, in capsule's own chunks when the body is chunked. */
static void put_body(struct masked *m, const struct cap_buf *clean)
{
  if (!clean->len)
    return;
  if (m->chunked)
    cap_buf_printf(&m->out, "%zx\r\n", clean->len);
  cap_buf_append(&m->out, clean->data, clean->len);
  if (m->chunked)
    cap_buf_puts(&m->out, "\r\n");
}

static int on_body(http_parser *p, const char *at, size_t len)
{
  struct masked *m = p->data;
  struct cap_buf clean = {0};
  secret_mask_feed(&m->mask, at, len, &clean);
  put_body(m, &clean);
  cap_buf_free(&clean);
  return 0;
}

static int on_message_complete(http_parser *p)
{
  struct masked *m = p->data;
  /* the held-back tail of the body; the mask starts afresh for the next
   * message (a final response after a 1xx) */
  struct cap_buf tail = {0};
  secret_mask_finish(&m->mask, &tail);
  put_body(m, &tail);
  cap_buf_free(&tail);
  secret_mask_init(&m->mask, m->secret);
  if (m->chunked)
    cap_buf_puts(&m->out, "0\r\n\r\n");
  m->in_body = false;
  if (p->status_code >= 200) {
    m->done = true;
    http_parser_pause(p, 1); /* Connection: close: nothing else is ours */
  }
  return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_status = on_status,
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* Parses one read (len 0: the upstream's end) and writes what it produced.
 * False when the relay is over (an error, or the response's end). */
static bool step(http_parser *p, struct masked *m, const char *data, size_t len)
{
  http_parser_execute(p, &settings, data, len);
  enum http_errno e = HTTP_PARSER_ERRNO(p);
  bool ok = e == HPE_OK || e == HPE_PAUSED;
  if (m->out.len && !proxy_stream_write(m->client, m->out.data, m->out.len))
    ok = false;
  m->ev->bytes_down += (long long)m->out.len;
  m->out.len = 0;
  if (!ok && !m->sent)
    proxy_respond(m->client, "502 Bad Gateway",
                  m->refused ? m->refused : "the upstream's response is not valid HTTP/1.1");
  return ok && !m->done && len;
}

bool proxy_relay_masked(struct worker *w, struct stream *up, struct stream *client,
                        const char *secret, bool head_request, struct event *ev)
{
  struct masked m = {.client = client, .secret = secret, .head_request = head_request, .ev = ev};
  secret_mask_init(&m.mask, secret);
  http_parser p;
  http_parser_init(&p, HTTP_RESPONSE);
  p.data = &m;
  for (;;) {
    ssize_t n = proxy_stream_read(up, w->buf, sizeof w->buf);
    if (n < 0 || !step(&p, &m, w->buf, (size_t)n))
      break;
  }
  bool complete = m.done;
  struct cap_buf rest = {0};
  secret_mask_finish(&m.mask, &rest);
  OPENSSL_cleanse(rest.data, rest.len); /* a broken-off body's tail is not sent */
  cap_buf_free(&rest);
  cap_buf_free(&m.head);
  cap_buf_free(&m.field);
  cap_buf_free(&m.out);
  return complete;
}
