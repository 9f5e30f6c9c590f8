/* The Hermes runtime's HTTP client (hermes_http.h). */
#include "runtime/hermes_http.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "net/rules.h"
#include "net/tls_client.h"

#define RESPONSE_CAP (16u << 20)

static int left_ms(uint64_t deadline)
{
  uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
  return now >= deadline ? 0 : deadline - now > 600000 ? 600000 : (int)(deadline - now);
}

static int on_status(http_parser *p, const char *at, size_t len)
{
  (void)at;
  (void)len;
  ((struct hermes_http *)p->data)->status = (int)p->status_code;
  return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
  struct hermes_http *h = p->data;
  if (len >= 17 && strncasecmp(at, "text/event-stream", 17) == 0)
    h->event_stream = true;
  return 0;
}

static int on_headers_complete(http_parser *p)
{
  struct hermes_http *h = p->data;
  h->status = (int)p->status_code;
  h->headers_done = true;
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
  struct hermes_http *h = p->data;
  if (h->body.len + len > h->body_cap)
    return -1;
  cap_buf_append(&h->body, at, len);
  return 0;
}

static int on_message_complete(http_parser *p)
{
  ((struct hermes_http *)p->data)->complete = true;
  return 0;
}

/* The egress check, then a connection within the deadline. */
static int dial(const struct cap_network *net, const struct http_url *url, uint64_t deadline,
                struct cap_error *err)
{
  if (!net_host_allowed(net, url->host, url->port, NULL))
    return cap_error_set(err, EACCES,
                         "the agent's network grant does not allow its Hermes endpoint %s:%u "
                         "(resources.network; capsule's egress rules apply to it)",
                         url->host, url->port);
  char port[8];
  snprintf(port, sizeof port, "%u", url->port);
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
  int g = getaddrinfo(url->host, port, &hints, &res);
  if (g)
    return cap_error_set(err, EHOSTUNREACH, "cannot resolve the Hermes endpoint %s: %s", url->host,
                         gai_strerror(g));
  int fd = -1, r = -ECONNREFUSED;
  bool unrestricted = net->mode == CAP_NET_UNRESTRICTED;
  for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
    if (net_address_forbidden(a->ai_addr, unrestricted)) {
      r = cap_error_set(err, EACCES,
                        "the Hermes endpoint %s resolves to an address capsule's egress rules "
                        "refuse (link-local or metadata; loopback and private ones only with "
                        "resources.network = \"full\")",
                        url->host);
      continue;
    }
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0)
      continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) < 0 && errno != EINPROGRESS) {
      r = cap_error_errno(err, errno, "cannot connect to the Hermes endpoint %s:%u", url->host,
                          url->port);
      close(fd);
      fd = -1;
      continue;
    }
    struct pollfd pfd = {fd, POLLOUT, 0};
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (poll(&pfd, 1, left_ms(deadline)) != 1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
      r = cap_error_errno(err, soerr ? soerr : ETIMEDOUT,
                          "cannot connect to the Hermes endpoint %s:%u", url->host, url->port);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  return fd >= 0 ? fd : r;
}

/* What a refusal over capsule's client certificate asks of the operator. */
static int certificate_refused(const struct tls_client_files *tls, struct cap_error *err)
{
  cap_error_clear(err);
  if (tls && tls->cert_file)
    return cap_error_set(err, EKEYREJECTED,
                         "the Hermes endpoint refused capsule's client certificate %s "
                         "(HERMES_CLIENT_CERT): it does not trust it; give one its CA signed",
                         tls->cert_file);
  return cap_error_set(err, EKEYREJECTED,
                       "the Hermes endpoint requires a client certificate (mutual TLS) and "
                       "none is set: set HERMES_CLIENT_CERT and HERMES_CLIENT_KEY to PEM files "
                       "of a certificate its CA signed and its key");
}

static int write_all(const struct hermes_http *h, const char *data, size_t len, uint64_t deadline,
                     struct cap_error *err)
{
  while (len) {
    struct pollfd pfd = {h->fd, h->tls ? POLLOUT | POLLIN : POLLOUT, 0};
    if (poll(&pfd, 1, left_ms(deadline)) != 1)
      return cap_error_set(err, ETIMEDOUT, "the Hermes endpoint does not take the request");
    ssize_t n = h->tls ? tls_client_write(h->tls, data, len) : send(h->fd, data, len, MSG_NOSIGNAL);
    if (h->tls && n == -EKEYREJECTED)
      return certificate_refused(h->files, err);
    if (h->tls && n < 0 && n != -EAGAIN)
      return cap_error_errno(err, EPIPE, "cannot send to the Hermes endpoint");
    if (!h->tls && n < 0 && errno != EAGAIN && errno != EINTR)
      return cap_error_errno(err, errno, "cannot send to the Hermes endpoint");
    if (n > 0) {
      data += n;
      len -= (size_t)n;
    }
  }
  return 0;
}

/* An https:// endpoint: the handshake, its certificate verified. */
static int start_tls(struct hermes_http *h, const struct http_url *url,
                     const struct tls_client_files *tls, uint64_t deadline, struct cap_error *err)
{
  const char *ca_file = tls ? tls->ca_file : NULL;
  int r = tls_client_open(h->fd, url->host, tls, deadline, &h->tls, err);
  if (r == -EACCES) {
    char why[512];
    snprintf(why, sizeof why, "%s", err->message);
    cap_error_clear(err); /* the first message would stay */
    return cap_error_set(err, EACCES,
                         "refusing the Hermes endpoint %s:%u: %s (capsule trusts the system's CA "
                         "store%s%s; set HERMES_CA_FILE to a PEM file of the CA that signed it, "
                         "or use the name its certificate is for)",
                         url->host, url->port, why, ca_file ? " and " : "", ca_file ? ca_file : "");
  }
  if (r == -EKEYREJECTED)
    return certificate_refused(tls, err);
  if (r == -ENOENT)
    cap_error_prefix(err, "HERMES_CA_FILE");
  else if (r == -ENOKEY)
    cap_error_prefix(err, "HERMES_CLIENT_CERT, HERMES_CLIENT_KEY");
  else if (r < 0)
    cap_error_prefix(err, "the Hermes endpoint %s:%u", url->host, url->port);
  return r;
}

int hermes_http_send(struct hermes_http *h, const struct cap_network *net,
                     const struct http_url *url, const struct tls_client_files *tls,
                     const char *method, const char *suffix, const char *key,
                     const char *const *headers, const char *body, uint64_t deadline,
                     struct cap_error *err)
{
  *h = (struct hermes_http){.fd = -1, .body_cap = RESPONSE_CAP};
  http_parser_init(&h->parser, HTTP_RESPONSE);
  h->parser.data = h;
  h->settings.on_status = on_status;
  h->settings.on_header_value = on_header_value;
  h->settings.on_headers_complete = on_headers_complete;
  h->settings.on_body = on_body;
  h->settings.on_message_complete = on_message_complete;
  for (const char *k = key; k && *k; k++)
    if ((unsigned char)*k < 0x20 || *k == 0x7f) /* it goes into a header line */
      return cap_error_set(err, EINVAL,
                           "the credential HERMES_API_KEY holds a control character; set it "
                           "again without one");
  if (!url->tls && tls && (tls->cert_file || tls->key_file))
    return cap_error_set(err, EINVAL,
                         "HERMES_CLIENT_CERT and HERMES_CLIENT_KEY are set but the Hermes "
                         "endpoint %s:%u is http://: a client certificate needs https://",
                         url->host, url->port);
  int fd = dial(net, url, deadline, err);
  if (fd < 0)
    return fd;
  h->fd = fd;
  h->files = tls;
  if (url->tls) {
    int t = start_tls(h, url, tls, deadline, err);
    if (t < 0)
      return t;
  }
  struct cap_buf req = {0};
  const char *base = strcmp(url->path, "/") ? url->path : "";
  size_t blen = strlen(base);
  bool v6 = strchr(url->host, ':') != NULL;
  cap_buf_printf(&req, "%s %.*s%s HTTP/1.1\r\nHost: %s%s%s:%u\r\nConnection: close\r\n", method,
                 (int)(blen && base[blen - 1] == '/' ? blen - 1 : blen), base, suffix,
                 v6 ? "[" : "", url->host, v6 ? "]" : "", url->port);
  if (key)
    cap_buf_printf(&req, "Authorization: Bearer %s\r\n", key);
  for (size_t i = 0; headers && headers[i]; i++)
    cap_buf_printf(&req, "%s\r\n", headers[i]);
  if (body)
    cap_buf_printf(&req, "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                   strlen(body), body);
  else
    cap_buf_puts(&req, strcmp(method, "POST") ? "\r\n" : "Content-Length: 0\r\n\r\n");
  int r = write_all(h, req.data, req.len, deadline, err);
  if (key) /* the request held the key */
    memset(req.data, 0, req.len);
  cap_buf_free(&req);
  return r;
}

int hermes_http_read(struct hermes_http *h, int wait_ms, uint64_t deadline, struct cap_error *err)
{
  if (h->complete)
    return 0;
  int wait = left_ms(deadline);
  if (wait_ms >= 0 && wait_ms < wait)
    wait = wait_ms;
  struct pollfd pfd = {h->fd, POLLIN, 0};
  int p = h->tls && tls_client_pending(h->tls) ? 1 : poll(&pfd, 1, wait);
  if (p == 0)
    return -ETIMEDOUT;
  if (p < 0)
    return cap_error_errno(err, errno, "cannot wait for the Hermes endpoint");
  char buf[16384];
  ssize_t n = h->tls ? tls_client_read(h->tls, buf, sizeof buf) : recv(h->fd, buf, sizeof buf, 0);
  if (h->tls && n == -EAGAIN)
    return 0;
  if (h->tls && n == -EKEYREJECTED) /* TLS 1.3: after the client's handshake */
    return certificate_refused(h->files, err);
  if (h->tls && n < 0)
    return cap_error_set(err, EPROTO, "the Hermes endpoint's TLS stream is broken");
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return 0;
  if (n < 0)
    return cap_error_errno(err, errno, "cannot read from the Hermes endpoint");
  size_t used = http_parser_execute(&h->parser, &h->settings, buf, (size_t)n);
  if (n == 0 && !h->complete) /* the end: a body read until close ends here */
    http_parser_execute(&h->parser, &h->settings, buf, 0);
  if (used != (size_t)n || HTTP_PARSER_ERRNO(&h->parser) != HPE_OK) {
    if (HTTP_PARSER_ERRNO(&h->parser) == HPE_CB_body)
      return cap_error_set(err, EFBIG, "the Hermes endpoint's answer is larger than 16 MiB");
    return cap_error_set(err, EPROTO, "the Hermes endpoint's answer is not HTTP/1.1 (%s)",
                         http_errno_name(HTTP_PARSER_ERRNO(&h->parser)));
  }
  if (n == 0 && !h->complete)
    return cap_error_set(err, ECONNRESET,
                         "the Hermes endpoint closed the connection before its answer ended");
  return 0;
}

int hermes_http_call(struct hermes_http *h, const struct cap_network *net,
                     const struct http_url *url, const struct tls_client_files *tls,
                     const char *method, const char *suffix, const char *key,
                     const char *const *headers, const char *body, uint64_t deadline,
                     struct cap_error *err)
{
  int r = hermes_http_send(h, net, url, tls, method, suffix, key, headers, body, deadline, err);
  while (r == 0 && !h->complete) {
    r = hermes_http_read(h, -1, deadline, err);
    if (r == -ETIMEDOUT)
      r = cap_error_set(err, ETIMEDOUT, "the Hermes endpoint did not answer %s %s in time", method,
                        suffix);
  }
  return r;
}

void hermes_http_close(struct hermes_http *h)
{
  tls_client_free(h->tls);
  h->tls = NULL;
  if (h->fd >= 0)
    close(h->fd);
  h->fd = -1;
  cap_buf_free(&h->body);
}

/* The data of one frame, its "data:" lines joined. */
static void frame_data(const char *frame, size_t len, struct cap_buf *data)
{
  for (size_t i = 0; i < len;) {
    const char *nl = memchr(frame + i, '\n', len - i);
    size_t end = nl ? (size_t)(nl - frame) : len, n = end - i;
    if (n && frame[i + n - 1] == '\r')
      n--;
    if (n >= 5 && !memcmp(frame + i, "data:", 5)) {
      size_t skip = n > 5 && frame[i + 5] == ' ' ? 6 : 5;
      if (data->len)
        cap_buf_putc(data, '\n');
      cap_buf_append(data, frame + i + skip, n - skip);
    }
    i = end + 1;
  }
}

size_t hermes_sse_take(const char *buf, size_t len,
                       void (*fn)(void *arg, const char *data, size_t len), void *arg)
{
  size_t used = 0;
  for (;;) {
    const char *start = buf + used;
    size_t left = len - used;
    const char *lf = left ? memmem(start, left, "\n\n", 2) : NULL;
    const char *crlf = left ? memmem(start, left, "\r\n\r\n", 4) : NULL;
    const char *end = crlf && (!lf || crlf < lf) ? crlf : lf;
    if (!end)
      return used;
    struct cap_buf data = {0};
    frame_data(start, (size_t)(end - start), &data);
    if (data.len)
      fn(arg, data.data, data.len);
    cap_buf_free(&data);
    used += (size_t)(end - start) + (end == crlf ? 4 : 2);
  }
}
