#include "net/proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/secret.h"
#include "core/text.h"
#include "net/http.h"
#include "net/rules.h"
#include "net/tls.h"

#define IO_TIMEOUT_MS 30000      /* a request head must arrive within this */
#define STREAM_TIMEOUT_S 300     /* a response or tunnel may idle this long */
#define CONNECT_TIMEOUT_MS 10000 /* upstream connect deadline */
#define MAX_CONNS 256
#define SECRET_MAX 8192
#define PIPE_BYTES (256 << 10)

/* A connection's two sockets, so proxy_stop can shut them down. */
struct slot {
  bool used;
  int client, upstream;
  uint16_t forward_port; /* ports.localhost: relay to the host's 127.0.0.1:port; 0: proxy */
};

struct route_secret {
  char *secret;       /* the real value; wiped when freed */
  char phantom[65];   /* what the tool holds instead, "" without env_var */
};

struct proxy {
  const struct cap_spec *spec;
  struct proxy_options opt;
  struct tls_ca *ca; /* NULL when nothing is intercepted */
  char *bundle;
  size_t bundle_len;
  struct route_secret *secrets; /* one per spec->routes[] */
  char **tool_env;
  size_t n_tool_env;
  pthread_mutex_t log_lock;

  int listen_fds[1 + PROXY_MAX_FORWARDS];
  size_t n_listen;
  int stop_pipe[2];
  bool started;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t idle;  /* a worker ended */
  pthread_cond_t work;  /* a connection was queued, or stopping */
  size_t active;        /* slots in use */
  size_t n_workers, idle_workers;
  size_t acceptors; /* workers blocked in accept() on the proxy's listener */
  bool stopping;
  size_t queue[MAX_CONNS]; /* slots waiting for a worker */
  size_t q_head, q_len;
  struct slot slots[MAX_CONNS];
};

/* ---- byte streams: a plain socket or TLS over one ---- */

struct stream {
  int fd;
  SSL *ssl;
};

static ssize_t stream_read(struct stream *s, char *buf, size_t n)
{
  if (!s->ssl) {
    ssize_t r;
    do
      r = recv(s->fd, buf, n, 0);
    while (r < 0 && errno == EINTR);
    return r;
  }
  size_t got = 0;
  int r = SSL_read_ex(s->ssl, buf, n, &got);
  if (r == 1)
    return (ssize_t)got;
  return SSL_get_error(s->ssl, r) == SSL_ERROR_ZERO_RETURN ? 0 : -1;
}

static bool stream_write(struct stream *s, const char *buf, size_t n)
{
  while (n) {
    if (s->ssl) {
      size_t w = 0;
      if (SSL_write_ex(s->ssl, buf, n, &w) != 1)
        return false;
      buf += w;
      n -= w;
    } else {
      ssize_t w = send(s->fd, buf, n, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        return false;
      buf += w;
      n -= (size_t)w;
    }
  }
  return true;
}

static void set_timeouts(int fd, int seconds)
{
  struct timeval tv = {.tv_sec = seconds};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* ---- the egress log ---- */

/* What one decision is about. */
struct event {
  const char *kind;   /* "connect", "tunnel", "http", "intercept", "reverse" */
  const char *host;
  unsigned port;
  const char *method; /* NULL for tunnels */
  const char *path;   /* as the tool sent it (no secret), NULL for tunnels */
  const char *route;  /* credential route used, or NULL */
  long long bytes_up, bytes_down;
};

static void log_event(struct proxy *px, const struct event *ev, bool allowed, const char *why)
{
  if (px->opt.verbose && !allowed)
    fprintf(stderr, "capsule: egress denied: %s %s:%u%s%s: %s\n",
            ev->method ? ev->method : "CONNECT", ev->host ? ev->host : "?", ev->port,
            ev->path ? " " : "", ev->path ? ev->path : "", why);
  if (!px->opt.log)
    return;
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  char when[40];
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  size_t n = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(when + n, sizeof when - n, ".%03ldZ", ts.tv_nsec / 1000000);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "time");
  cap_jw_string(&w, when);
  cap_jw_key(&w, "decision");
  cap_jw_string(&w, allowed ? "allow" : "deny");
  cap_jw_key(&w, "kind");
  cap_jw_string(&w, ev->kind);
  cap_jw_key(&w, "host");
  cap_jw_string_or_null(&w, ev->host);
  cap_jw_key(&w, "port");
  cap_jw_int(&w, ev->port);
  cap_jw_key(&w, "method");
  cap_jw_string_or_null(&w, ev->method);
  cap_jw_key(&w, "path");
  cap_jw_string_or_null(&w, ev->path);
  cap_jw_key(&w, "credential");
  cap_jw_string_or_null(&w, ev->route);
  cap_jw_key(&w, "reason");
  cap_jw_string(&w, why);
  cap_jw_key(&w, "bytes_up");
  cap_jw_int(&w, ev->bytes_up);
  cap_jw_key(&w, "bytes_down");
  cap_jw_int(&w, ev->bytes_down);
  cap_jw_end_object(&w);
  cap_buf_putc(&b, '\n');
  pthread_mutex_lock(&px->log_lock);
  fwrite(b.data, 1, b.len, px->opt.log);
  fflush(px->opt.log);
  pthread_mutex_unlock(&px->log_lock);
  cap_buf_free(&b);
}

static void respond(struct stream *s, const char *status, const char *why)
{
  char buf[768];
  int n = snprintf(buf, sizeof buf,
                   "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                   "Connection: close\r\n\r\ncapsule: %s\n",
                   status, strlen(why) + 10, why);
  if (n > 0)
    stream_write(s, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* Denies: the answer to the tool, the log line. */
static void deny(struct proxy *px, struct stream *s, struct event *ev, const char *status,
                 const char *why)
{
  log_event(px, ev, false, why);
  respond(s, status, why);
}

/* ---- upstream connections ---- */

/* connect() with a deadline, so an upstream that never answers cannot hold
 * a proxy thread (and capsule's exit) for the kernel's two-minute SYN retry. */
static int connect_bounded(const struct addrinfo *ai)
{
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0)
    return -1;
  /* a blocking connect bounded by SO_SNDTIMEO: no poll round and no flag
   * changes when the upstream answers at once (the common case) */
  struct timeval bound = {.tv_sec = CONNECT_TIMEOUT_MS / 1000,
                          .tv_usec = (CONNECT_TIMEOUT_MS % 1000) * 1000};
  struct timeval stream = {.tv_sec = STREAM_TIMEOUT_S};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &stream, sizeof stream);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound);
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int soerr = 0;
    socklen_t len = sizeof soerr;
    /* a signal cut the wait short: the handshake goes on, wait for it */
    if (errno != EINTR || poll(&p, 1, CONNECT_TIMEOUT_MS) != 1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0 || soerr != 0) {
      close(fd);
      return -1;
    }
  }
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &stream, sizeof stream);
  return fd;
}

/* Resolves host and connects; refuses when ANY address it resolves to is
 * forbidden (a name that also points at the metadata service is not used). */
static int dial(struct proxy *px, const char *host, uint16_t port, const char **why)
{
  struct sockaddr_in6 v6 = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
  struct sockaddr_in v4 = {.sin_family = AF_INET, .sin_port = htons(port)};
  struct addrinfo lit = {.ai_socktype = SOCK_STREAM};
  if (inet_pton(AF_INET, host, &v4.sin_addr) == 1) { /* a literal: no resolver round */
    lit.ai_family = AF_INET;
    lit.ai_addr = (struct sockaddr *)&v4;
    lit.ai_addrlen = sizeof v4;
  } else if (inet_pton(AF_INET6, host, &v6.sin6_addr) == 1) {
    lit.ai_family = AF_INET6;
    lit.ai_addr = (struct sockaddr *)&v6;
    lit.ai_addrlen = sizeof v6;
  }
  if (lit.ai_addr) {
    if (net_address_forbidden(lit.ai_addr, px->opt.allow_private)) {
      *why = "the host resolves to an address capsule never connects to "
             "(link-local, metadata, private or loopback)";
      return -1;
    }
    int fd = connect_bounded(&lit);
    if (fd < 0)
      *why = "the upstream did not accept the connection";
    return fd;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
  char service[8];
  snprintf(service, sizeof service, "%u", port);
  if (getaddrinfo(host, service, &hints, &res) != 0) {
    *why = "the host name does not resolve";
    return -1;
  }
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next)
    if (net_address_forbidden(ai->ai_addr, px->opt.allow_private)) {
      freeaddrinfo(res);
      *why = "the host resolves to an address capsule never connects to "
             "(link-local, metadata, private or loopback)";
      return -1;
    }
  int fd = -1;
  for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next)
    fd = connect_bounded(ai);
  freeaddrinfo(res);
  if (fd < 0)
    *why = "the upstream did not accept the connection";
  return fd;
}

/* A thread that serves one connection at a time, with what it reuses. */
struct worker {
  struct proxy *px;
  size_t slot;              /* the connection being served */
  int pipes[2][2];          /* splice pipes, one per direction; -1 until used */
  bool bulk[2];             /* this direction moved a full small buffer: splice it */
  char small[16384];        /* the first bytes of each direction, copied */
  struct http_request req;  /* the request being parsed */
  char buf[HTTP_HEAD_MAX + 65536];
};

static void slot_set_upstream(struct worker *w, int fd)
{
  pthread_mutex_lock(&w->px->lock);
  w->px->slots[w->slot].upstream = fd;
  pthread_mutex_unlock(&w->px->lock);
}

/* Moves what one readable socket has (up to a pipe's worth) to the other
 * without copying through user space: socket -> pipe -> socket. Returns
 * the bytes moved, 0 at end of stream, -1 on error. */
static ssize_t pump(struct worker *w, int dir, int from, int to, bool wait)
{
  int *pp = w->pipes[dir];
  if (!w->bulk[dir]) {
    /* most answers are small: one copy costs less than making, sizing
     * and closing a pipe; a full buffer means bulk, spliced from then on.
     * With wait, the first read blocks (SO_RCVTIMEO bounds it) rather than
     * failing and polling. */
    ssize_t n = recv(from, w->small, sizeof w->small, wait ? 0 : MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return wait ? -1 : -2; /* waited the stream timeout out: over */
    if (n <= 0)
      return n;
    for (ssize_t off = 0; off < n;) {
      ssize_t m = send(to, w->small + off, (size_t)(n - off), MSG_NOSIGNAL);
      if (m <= 0)
        return -1;
      off += m;
    }
    w->bulk[dir] = n == (ssize_t)sizeof w->small;
    return n;
  }
  if (pp[0] < 0) {
    if (pipe2(pp, O_CLOEXEC) < 0)
      return -1;
    fcntl(pp[1], F_SETPIPE_SZ, PIPE_BYTES);
  }
  ssize_t n = splice(from, NULL, pp[1], NULL, PIPE_BYTES, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
  if (n < 0 && errno == EAGAIN)
    return -2; /* nothing after all: not an end */
  if (n <= 0)
    return n;
  for (ssize_t left = n; left > 0;) {
    ssize_t m = splice(pp[0], NULL, to, NULL, (size_t)left, SPLICE_F_MOVE);
    if (m <= 0) { /* bytes stranded in the pipe: it cannot be reused */
      close(pp[0]);
      close(pp[1]);
      pp[0] = pp[1] = -1;
      return -1;
    }
    left -= m;
  }
  return n;
}

/* Copies bytes both ways until both directions have ended (a half-close
 * is passed on) or the tunnel stays idle too long. */
static void relay(struct worker *w, int a, int b, struct event *ev)
{
  const int fds[2] = {a, b};
  struct pollfd p[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
  int open_directions = 2;
  while (open_directions > 0) {
    int r = poll(p, 2, STREAM_TIMEOUT_S * 1000);
    if (r <= 0)
      return;
    for (int i = 0; i < 2; i++) {
      if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      ssize_t n = pump(w, i, p[i].fd, fds[1 - i], false);
      if (n == -2)
        continue;
      if (n < 0)
        return;
      if (n == 0) { /* this side is done sending: tell the other, keep reading it */
        shutdown(fds[1 - i], SHUT_WR);
        p[i].fd = -1; /* poll ignores negative fds */
        open_directions--;
        continue;
      }
      *(i == 0 ? &ev->bytes_up : &ev->bytes_down) += n;
    }
  }
}

/* ---- URLs and credential routes ---- */

static bool host_equal(const char *a, const char *b)
{
  size_t na = strlen(a), nb = strlen(b);
  if (na && a[na - 1] == '.')
    na--;
  if (nb && b[nb - 1] == '.')
    nb--;
  return na == nb && strncasecmp(a, b, na) == 0;
}

/* The route whose upstream is t's scheme, host and port, and whose base
 * path is a prefix of t's path (at a segment boundary). */
static const struct cap_credential_route *route_for(const struct proxy *px, const struct http_url *t,
                                                   size_t *base_len)
{
  for (size_t i = 0; i < px->spec->n_routes; i++) {
    struct http_url up;
    if (!http_parse_url(px->spec->routes[i].upstream, &up) || up.tls != t->tls || up.port != t->port ||
        !host_equal(up.host, t->host))
      continue;
    size_t n = strlen(up.path);
    while (n && up.path[n - 1] == '/')
      n--;
    if (strncmp(t->path, up.path, n) == 0 && (t->path[n] == '/' || t->path[n] == '?' || !t->path[n])) {
      *base_len = n;
      return &px->spec->routes[i];
    }
  }
  return NULL;
}

static bool has_route_host(const struct proxy *px, const char *host, uint16_t port)
{
  for (size_t i = 0; i < px->spec->n_routes; i++) {
    struct http_url up;
    if (http_parse_url(px->spec->routes[i].upstream, &up) && up.port == port && host_equal(up.host, host))
      return true;
  }
  return false;
}

static const struct route_secret *secret_of(const struct proxy *px,
                                            const struct cap_credential_route *r)
{
  return &px->secrets[r - px->spec->routes];
}

static bool phantom_equal(const struct route_secret *s, const char *v, size_t n)
{
  size_t len = strlen(s->phantom);
  return n == len && CRYPTO_memcmp(v, s->phantom, len) == 0;
}

/* ---- credential injection ---- */

/* s with "{}" replaced by value */
static void put_format(struct cap_buf *out, const char *fmt, const char *value)
{
  const char *hole = strstr(fmt, "{}");
  if (!hole) {
    cap_buf_puts(out, fmt);
    return;
  }
  cap_buf_append(out, fmt, (size_t)(hole - fmt));
  cap_buf_puts(out, value);
  cap_buf_puts(out, hole + 2);
}

static void put_urlencoded(struct cap_buf *out, const char *s)
{
  static const char hex[] = "0123456789ABCDEF";
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
        strchr("-._~", c))
      cap_buf_putc(out, (char)c);
    else {
      cap_buf_putc(out, '%');
      cap_buf_putc(out, hex[c >> 4]);
      cap_buf_putc(out, hex[c & 15]);
    }
  }
}

static void put_base64(struct cap_buf *out, const char *s)
{
  size_t n = strlen(s);
  unsigned char *enc = cap_xmalloc(4 * ((n + 2) / 3) + 1);
  int len = EVP_EncodeBlock(enc, (const unsigned char *)s, (int)n);
  cap_buf_append(out, (const char *)enc, (size_t)len);
  OPENSSL_cleanse(enc, (size_t)len);
  free(enc);
}

/* Whether the tool's value for the injected header carries the phantom:
 * "Bearer <phantom>", or the phantom itself, or for basic_auth
 * "Basic base64(user:<phantom>)". */
static bool header_has_phantom(const struct route_secret *s, enum cap_inject_mode mode, const char *v)
{
  while (*v == ' ')
    v++;
  if (mode == CAP_INJECT_BASIC_AUTH) {
    if (strncasecmp(v, "Basic ", 6) != 0)
      return false;
    v += 6;
    unsigned char dec[512];
    size_t n = strlen(v);
    if (n == 0 || n > 4 * (sizeof dec / 3) - 4)
      return false;
    int len = EVP_DecodeBlock(dec, (const unsigned char *)v, (int)n);
    if (len < 0)
      return false;
    while (len > 0 && n && v[n - 1] == '=') { /* DecodeBlock counts padding as zeros */
      len--;
      n--;
    }
    dec[len] = '\0';
    const char *colon = memchr(dec, ':', (size_t)len);
    const char *pw = colon ? colon + 1 : (const char *)dec;
    return phantom_equal(s, pw, strlen(pw));
  }
  const char *sp = strrchr(v, ' ');
  const char *token = sp ? sp + 1 : v;
  return phantom_equal(s, token, strlen(token));
}

/* Rewrites t->path for url_path and query_param routes (into out, the
 * upstream's origin form). Returns NULL, or why the request is refused. */
static const char *rewrite_path(const struct cap_credential_route *r, const struct route_secret *s,
                                const char *path, struct cap_buf *out)
{
  size_t plen = strcspn(path, "?");
  if (r->mode == CAP_INJECT_URL_PATH) {
    const char *hole = strstr(r->path_pattern, "{}");
    size_t pre = (size_t)(hole - r->path_pattern);
    const char *suffix = hole + 2;
    const char *at = NULL;
    for (const char *p = path; p + pre <= path + plen; p++)
      if (strncmp(p, r->path_pattern, pre) == 0) {
        at = p;
        break;
      }
    if (!at)
      return "the path does not contain the credential's path_pattern";
    const char *tok = at + pre;
    size_t tlen = *suffix ? 0 : strcspn(tok, "/?");
    if (*suffix) {
      const char *end = strstr(tok, suffix);
      if (!end || end > path + plen)
        return "the path does not contain the credential's path_pattern";
      tlen = (size_t)(end - tok);
    }
    if (s->phantom[0] && !phantom_equal(s, tok, tlen))
      return "the path does not carry this session's token for the credential";
    cap_buf_append(out, path, (size_t)(at - path));
    put_format(out, r->path_replacement ? r->path_replacement : r->path_pattern, s->secret);
    cap_buf_puts(out, tok + tlen + strlen(suffix));
    return NULL;
  }
  if (r->mode == CAP_INJECT_QUERY_PARAM) {
    cap_buf_append(out, path, plen);
    const char *q = path[plen] == '?' ? path + plen + 1 : "";
    size_t name_len = strlen(r->query_param_name);
    bool first = true, saw_phantom = false;
    while (*q) {
      size_t n = strcspn(q, "&");
      bool ours = n >= name_len && strncmp(q, r->query_param_name, name_len) == 0 &&
                  (n == name_len || q[name_len] == '=');
      if (ours) {
        const char *v = n > name_len ? q + name_len + 1 : "";
        saw_phantom |= phantom_equal(s, v, n > name_len ? n - name_len - 1 : 0);
      } else if (n) {
        cap_buf_putc(out, first ? '?' : '&');
        cap_buf_append(out, q, n);
        first = false;
      }
      q += n + (q[n] == '&');
    }
    if (s->phantom[0] && !saw_phantom)
      return "the query does not carry this session's token for the credential";
    cap_buf_putc(out, first ? '?' : '&');
    cap_buf_puts(out, r->query_param_name);
    cap_buf_putc(out, '=');
    put_urlencoded(out, s->secret);
    return NULL;
  }
  cap_buf_puts(out, path);
  return NULL;
}

/* ---- one HTTP request, forwarded ---- */

static bool hop_header(const char *name)
{
  static const char *const hop[] = {"Host", "Connection", "Proxy-Connection", "Keep-Alive",
                                    "Proxy-Authorization", "Upgrade", "TE", "Trailer",
                                    "Transfer-Encoding", NULL};
  for (size_t i = 0; hop[i]; i++)
    if (strcasecmp(name, hop[i]) == 0)
      return true;
  return false;
}

/* A secret an upstream sends back (an echo, a redirect or an error page
 * that quotes the URL) never reaches the tool: in a routed response the
 * secret, its percent-encoded and its base64 forms are overwritten with
 * '*' of the same length (lengths and framing stay valid). Streaming: the
 * last (longest form - 1) bytes wait for the next piece. */
struct scrub {
  char *forms[3];
  size_t lens[3], n, keep;
  struct cap_buf carry;
};

static void scrub_init(struct scrub *sc, const char *secret)
{
  *sc = (struct scrub){0};
  if (!secret || strlen(secret) < 4)
    return;
  struct cap_buf enc = {0}, b64 = {0};
  put_urlencoded(&enc, secret);
  put_base64(&b64, secret);
  const char *forms[3] = {secret, enc.data, b64.data};
  for (size_t i = 0; i < 3; i++) {
    bool dup = false;
    for (size_t k = 0; k < sc->n; k++)
      dup |= strcmp(sc->forms[k], forms[i]) == 0;
    if (dup || !forms[i])
      continue;
    sc->forms[sc->n] = cap_xstrdup(forms[i]);
    sc->lens[sc->n] = strlen(forms[i]);
    if (sc->lens[sc->n] > sc->keep)
      sc->keep = sc->lens[sc->n];
    sc->n++;
  }
  sc->keep--; /* a form split across pieces is at most this long in the first */
  OPENSSL_cleanse(enc.data, enc.len);
  OPENSSL_cleanse(b64.data, b64.len);
  cap_buf_free(&enc);
  cap_buf_free(&b64);
}

static void scrub_mask(struct scrub *sc)
{
  for (size_t k = 0; k < sc->n; k++)
    for (char *p = sc->carry.data; p && (p = memmem(p, sc->carry.len - (size_t)(p - sc->carry.data),
                                                     sc->forms[k], sc->lens[k]));)
      memset(p, '*', sc->lens[k]);
}

static void scrub_feed(struct scrub *sc, const char *data, size_t n, struct cap_buf *out)
{
  if (!sc->n) {
    cap_buf_append(out, data, n);
    return;
  }
  cap_buf_append(&sc->carry, data, n);
  scrub_mask(sc);
  if (sc->carry.len > sc->keep) {
    size_t emit = sc->carry.len - sc->keep;
    cap_buf_append(out, sc->carry.data, emit);
    memmove(sc->carry.data, sc->carry.data + emit, sc->keep);
    sc->carry.len = sc->keep;
  }
}

static void scrub_finish(struct scrub *sc, struct cap_buf *out)
{
  if (sc->carry.len)
    cap_buf_append(out, sc->carry.data, sc->carry.len);
  for (size_t k = 0; k < sc->n; k++) {
    OPENSSL_cleanse(sc->forms[k], sc->lens[k]);
    free(sc->forms[k]);
  }
  cap_buf_free(&sc->carry);
}

/* Streams the request body (exactly the bytes the parser says are this
 * request's) from the client to the upstream. */
static bool forward_body(struct http_request *req, struct stream *client, struct stream *up,
                         const char *have, size_t have_len, struct event *ev)
{
  char buf[65536];
  struct cap_buf body = {0};
  bool ok = true;
  while (ok && !req->body_done) {
    if (!have_len) {
      ssize_t n = stream_read(client, buf, sizeof buf);
      if (n <= 0) {
        ok = false;
        break;
      }
      have = buf;
      have_len = (size_t)n;
    }
    body.len = 0;
    long used = http_body_feed(req, have, have_len, &body);
    if (used < 0 || (used == 0 && !req->body_done)) {
      ok = false;
      break;
    }
    /* the decoded body, in framing of capsule's own making */
    if (body.len && req->chunked) {
      char size[24];
      int n = snprintf(size, sizeof size, "%zx\r\n", body.len);
      ok = stream_write(up, size, (size_t)n) && stream_write(up, body.data, body.len) &&
           stream_write(up, "\r\n", 2);
    } else if (body.len) {
      ok = stream_write(up, body.data, body.len);
    }
    ev->bytes_up += (long long)body.len;
    have += used;
    have_len -= (size_t)used;
  }
  if (ok && req->chunked)
    ok = stream_write(up, "0\r\n\r\n", 5);
  cap_buf_free(&body);
  return ok;
}

/* Checks one request against the allowlist, the host's L7 rules and the
 * route's rules, injects the route's credential, forwards it, and streams
 * the response back. route may be NULL; base_len is the route's base path
 * length inside t->path. via_route: the host is reachable because of the
 * route alone (reverse-proxy form). */
static void forward_request(struct worker *w, struct stream *client,
                            struct http_request *req, struct http_url *t,
                            const struct cap_credential_route *route, size_t base_len,
                            bool via_route, const char *rest, size_t rest_len, struct event *ev)
{
  struct proxy *px = w->px;
  ev->method = req->method;
  ev->host = t->host;
  ev->port = t->port;
  ev->route = route ? route->name : NULL;
  char path_only[4096];
  snprintf(path_only, sizeof path_only, "%.*s", (int)strcspn(t->path, "?"), t->path);

  const struct cap_endpoint *endpoint = NULL;
  bool host_ok = net_host_allowed(&px->spec->network, t->host, t->port, &endpoint);
  if (!host_ok && !via_route && !route) {
    deny(px, client, ev, "403 Forbidden", "this host:port is not in the capability's network allowlist");
    return;
  }
  if (endpoint && !net_rules_allow(endpoint->rules, endpoint->n_rules, req->method, path_only)) {
    deny(px, client, ev, "403 Forbidden",
         "the capability's rules for this host do not allow this method and path");
    return;
  }
  if (strcasecmp(req->method, "TRACE") == 0 || strcasecmp(req->method, "TRACK") == 0) {
    /* a server that echoes the request would hand back what capsule added */
    deny(px, client, ev, "405 Method Not Allowed", "TRACE and TRACK are not forwarded");
    return;
  }
  const struct route_secret *sec = route ? secret_of(px, route) : NULL;
  if (route && !net_path_matches("/**", path_only)) {
    /* with or without endpoint_rules: a secret never goes to a path an
     * upstream could read as outside the route (.., encoded slashes) */
    deny(px, client, ev, "403 Forbidden",
         "the path is ambiguous (\".\" or \"..\" segments, encoded separators); send it normalised");
    return;
  }
  if (route && !net_rules_allow(route->rules, route->n_rules, req->method,
                                path_only[base_len] ? path_only + base_len : "/")) {
    deny(px, client, ev, "403 Forbidden",
         "the credential's endpoint_rules do not allow this method and path");
    return;
  }

  /* the upstream head: origin form, Host from the checked target, the
   * client's end-to-end headers, the credential, Connection: close */
  struct cap_buf head = {0};
  const char *refused = NULL;
  cap_buf_printf(&head, "%s ", req->method);
  if (route)
    refused = rewrite_path(route, sec, t->path, &head);
  else
    cap_buf_puts(&head, t->path);
  bool v6 = strchr(t->host, ':') != NULL;
  bool default_port = t->port == (t->tls ? 443 : 80);
  cap_buf_printf(&head, " HTTP/1.1\r\nHost: %s%s%s", v6 ? "[" : "", t->host, v6 ? "]" : "");
  if (!default_port)
    cap_buf_printf(&head, ":%u", t->port);
  cap_buf_puts(&head, "\r\n");
  const char *inject_header = NULL;
  if (route && route->mode == CAP_INJECT_HEADER)
    inject_header = route->header ? route->header : "Authorization";
  else if (route && route->mode == CAP_INJECT_BASIC_AUTH)
    inject_header = "Authorization";
  bool phantom_seen = false;
  for (size_t i = 0; i < req->n_headers && !refused; i++) {
    const struct http_header *h = &req->headers[i];
    if (hop_header(h->name) || (route && strcasecmp(h->name, "Accept-Encoding") == 0))
      continue; /* routed: uncompressed, so the response can be scrubbed */
    if (inject_header && strcasecmp(h->name, inject_header) == 0) {
      phantom_seen |= sec->phantom[0] && header_has_phantom(sec, route->mode, h->value);
      continue; /* the tool's value never reaches the upstream */
    }
    cap_buf_printf(&head, "%s: %s\r\n", h->name, h->value);
  }
  if (inject_header && sec->phantom[0] && !phantom_seen && !refused)
    refused = "the request does not carry this session's token for the credential "
              "(send the value of its env_var)";
  if (inject_header) {
    cap_buf_printf(&head, "%s: ", inject_header);
    if (route->mode == CAP_INJECT_BASIC_AUTH) {
      cap_buf_puts(&head, "Basic ");
      put_base64(&head, sec->secret);
    } else {
      put_format(&head, route->format ? route->format : "Bearer {}", sec->secret);
    }
    cap_buf_puts(&head, "\r\n");
  }
  if (route)
    cap_buf_puts(&head, "Accept-Encoding: identity\r\n");
  if (req->chunked)
    cap_buf_puts(&head, "Transfer-Encoding: chunked\r\n");
  cap_buf_puts(&head, "Connection: close\r\n\r\n");
  if (refused) {
    OPENSSL_cleanse(head.data, head.len);
    cap_buf_free(&head);
    deny(px, client, ev, "403 Forbidden", refused);
    return;
  }

  const char *why = NULL;
  int fd = dial(px, t->host, t->port, &why);
  if (fd < 0) {
    OPENSSL_cleanse(head.data, head.len);
    cap_buf_free(&head);
    deny(px, client, ev, fd == -1 && strstr(why, "never connects") ? "403 Forbidden" : "502 Bad Gateway",
         why);
    return;
  }
  slot_set_upstream(w, fd);
  struct stream up = {.fd = fd};
  char errbuf[256];
  if (t->tls) {
    up.ssl = SSL_new(tls_client_ctx(px->ca));
    if (!up.ssl || tls_client_expect_host(up.ssl, t->host) < 0 || SSL_set_fd(up.ssl, fd) != 1 ||
        SSL_connect(up.ssl) != 1) {
      const char *e = tls_last_error(errbuf, sizeof errbuf);
      char msg[400];
      snprintf(msg, sizeof msg, "TLS to the upstream failed verification or handshake: %s", e);
      SSL_free(up.ssl);
      OPENSSL_cleanse(head.data, head.len);
      cap_buf_free(&head);
      deny(px, client, ev, "502 Bad Gateway", msg);
      return;
    }
  }
  bool ok = stream_write(&up, head.data, head.len);
  OPENSSL_cleanse(head.data, head.len);
  cap_buf_free(&head);
  ok = ok && forward_body(req, client, &up, rest, rest_len, ev);
  if (ok) {
    if (!up.ssl)
      shutdown(fd, SHUT_WR);
    /* the response, to the end (the upstream closes: Connection: close);
     * spliced when neither side is TLS and no secret was added; with a
     * secret, copied and scrubbed of it */
    struct scrub sc;
    scrub_init(&sc, route ? sec->secret : NULL);
    for (;;) {
      ssize_t n;
      if (route) {
        n = stream_read(&up, w->buf, sizeof w->buf);
        if (n > 0) {
          struct cap_buf clean = {0};
          scrub_feed(&sc, w->buf, (size_t)n, &clean);
          if (clean.len && !stream_write(client, clean.data, clean.len))
            n = -1;
          cap_buf_free(&clean);
        }
      } else if (!up.ssl && !client->ssl) {
        n = pump(w, 1, fd, client->fd, true);
        if (n == -2) { /* nothing yet: wait for it */
          struct pollfd pf = {.fd = fd, .events = POLLIN};
          if (poll(&pf, 1, STREAM_TIMEOUT_S * 1000) <= 0)
            break;
          continue;
        }
      } else {
        n = stream_read(&up, w->buf, sizeof w->buf);
        if (n > 0 && !stream_write(client, w->buf, (size_t)n))
          n = -1;
      }
      if (n <= 0)
        break;
      ev->bytes_down += n;
    }
    struct cap_buf tail = {0};
    scrub_finish(&sc, &tail);
    if (tail.len)
      stream_write(client, tail.data, tail.len);
    cap_buf_free(&tail);
    if (!client->ssl) /* the client sees the end now, not after the log line */
      shutdown(client->fd, SHUT_WR);
  }
  log_event(px, ev, true, ok ? "allowed" : "allowed; the request body broke off");
  if (up.ssl) {
    SSL_shutdown(up.ssl);
    SSL_free(up.ssl);
  }
}

/* ---- a connection ---- */

/* Reads a request head from s into buf (which keeps what follows it).
 * Returns the head length, or -1 (*why set when it is the client's fault). */
static long read_request(struct stream *s, struct http_request *req, char *buf, size_t size,
                         size_t *got, const char **why)
{
  *got = 0;
  for (;;) {
    /* a client usually sends its request with the connection: try first,
     * wait only when nothing is there yet */
    ssize_t n = -1;
    if (!s->ssl)
      n = recv(s->fd, buf + *got, size - *got, MSG_DONTWAIT);
    if (n < 0 && (s->ssl || errno == EAGAIN)) {
      if (!s->ssl || SSL_pending(s->ssl) == 0) {
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        if (poll(&p, 1, IO_TIMEOUT_MS) <= 0) {
          *why = NULL;
          return -1;
        }
      }
      n = stream_read(s, buf + *got, size - *got);
    }
    if (n <= 0) {
      *why = NULL;
      return -1;
    }
    *got += (size_t)n;
    long r = http_request_parse(req, buf, *got, why);
    if (r != 0)
      return r;
    if (*got == size) {
      *why = "the request head is larger than 16 KiB";
      return -1;
    }
  }
}

/* After CONNECT to a host with rules or a credential route: TLS with a
 * minted leaf, then one request read, checked and forwarded. */
static void intercept(struct worker *w, struct stream *client, const char *host,
                      uint16_t port, struct event *ev)
{
  struct proxy *px = w->px;
  SSL_CTX *ctx = tls_ca_server_ctx(px->ca, host);
  SSL *ssl = ctx ? SSL_new(ctx) : NULL;
  SSL_CTX_free(ctx);
  static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
  if (!ssl || !stream_write(client, ok, sizeof ok - 1) || SSL_set_fd(ssl, client->fd) != 1 ||
      SSL_accept(ssl) != 1) {
    char errbuf[256];
    ev->kind = "intercept";
    log_event(px, ev, false, tls_last_error(errbuf, sizeof errbuf));
    SSL_free(ssl);
    return;
  }
  struct stream tls = {.fd = client->fd, .ssl = ssl};
  /* the CONNECT request is done with: its buffers are reused */
  struct http_request *req = &w->req;
  char *buf = w->buf;
  size_t got;
  const char *why = NULL;
  long head = read_request(&tls, req, buf, sizeof w->buf, &got, &why);
  ev->kind = "intercept";
  if (head < 0) {
    if (why)
      deny(px, &tls, ev, "400 Bad Request", why);
  } else {
    struct http_url t = {.tls = true, .port = port};
    snprintf(t.host, sizeof t.host, "%s", host);
    ev->path = req->target;
    if (req->target[0] != '/' || strlen(req->target) >= sizeof t.path || strchr(req->target, '#')) {
      deny(px, &tls, ev, "400 Bad Request",
           "inside the tunnel a request needs an origin-form /path (no #fragment)");
    } else {
      snprintf(t.path, sizeof t.path, "%s", req->target);
      size_t base = 0;
      const struct cap_credential_route *route = route_for(px, &t, &base);
      forward_request(w, &tls, req, &t, route, base, false, buf + head,
                      got - (size_t)head, ev);
    }
  }
  SSL_shutdown(ssl);
  SSL_free(ssl);
}

static void handle_connect(struct worker *w, struct stream *client,
                           struct http_request *req, const char *rest, size_t rest_len,
                           struct event *ev)
{
  struct proxy *px = w->px;
  char authority[300];
  char *host;
  uint16_t port;
  ev->kind = "tunnel";
  snprintf(authority, sizeof authority, "%s", req->target);
  if (!http_split_authority(authority, &host, &port)) {
    deny(px, client, ev, "400 Bad Request", "CONNECT needs host:port");
    return;
  }
  ev->host = host;
  ev->port = port;
  const struct cap_endpoint *endpoint = NULL;
  bool allowed = net_host_allowed(&px->spec->network, host, port, &endpoint);
  bool routed = has_route_host(px, host, port);
  if (!allowed && !routed) {
    deny(px, client, ev, "403 Forbidden", "this host:port is not in the capability's network allowlist");
    return;
  }
  if ((endpoint && endpoint->n_rules) || routed) {
    if (rest_len) {
      deny(px, client, ev, "400 Bad Request", "data sent before the tunnel was established");
      return;
    }
    intercept(w, client, host, port, ev);
    return;
  }
  const char *why = NULL;
  int up = dial(px, host, port, &why);
  if (up < 0) {
    deny(px, client, ev, strstr(why, "never connects") ? "403 Forbidden" : "502 Bad Gateway", why);
    return;
  }
  slot_set_upstream(w, up);
  static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
  struct stream upstream = {.fd = up};
  if (stream_write(client, ok, sizeof ok - 1) && (!rest_len || stream_write(&upstream, rest, rest_len))) {
    ev->bytes_up += (long long)rest_len;
    relay(w, client->fd, up, ev);
  }
  log_event(px, ev, true, "tunnel closed");
}

/* Every spelling of this machine's loopback: localhost (a trailing dot
 * too), 127/8 in any inet_aton form (127.1), ::1, ::ffff:127.x.y.z. */
static bool is_loopback_name(const char *host)
{
  if (strcasecmp(host, "localhost") == 0 || strcasecmp(host, "localhost.") == 0)
    return true;
  struct in_addr v4;
  if (inet_aton(host, &v4))
    return (ntohl(v4.s_addr) >> 24) == 127;
  struct in6_addr v6;
  if (inet_pton(AF_INET6, host, &v6) == 1)
    return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
  return false;
}

/* GET /<credential-name>/rest: the reverse-proxy form (path is the origin
 * form the tool sent) */
static void handle_reverse(struct worker *w, struct stream *client,
                           struct http_request *req, const char *path, const char *rest,
                           size_t rest_len, struct event *ev)
{
  struct proxy *px = w->px;
  ev->kind = "reverse";
  ev->path = path;
  if (strchr(path, '#')) {
    deny(px, client, ev, "400 Bad Request", "a request target carries no #fragment");
    return;
  }
  const char *name = path + 1;
  size_t nlen = strcspn(name, "/?");
  const struct cap_credential_route *route = NULL;
  for (size_t i = 0; i < px->spec->n_routes && !route; i++)
    if (strlen(px->spec->routes[i].name) == nlen && strncmp(px->spec->routes[i].name, name, nlen) == 0)
      route = &px->spec->routes[i];
  if (!route) {
    deny(px, client, ev, "404 Not Found",
         "no credential route of this name: send proxy requests (absolute URLs or CONNECT), or "
         "/<credential-name>/path for a route the capability declares");
    return;
  }
  struct http_url t;
  if (!http_parse_url(route->upstream, &t)) {
    deny(px, client, ev, "502 Bad Gateway", "the credential's upstream URL cannot be parsed");
    return;
  }
  size_t base = strlen(t.path);
  while (base && t.path[base - 1] == '/')
    base--;
  const char *tail = name + nlen; /* "/rest?q", "?q" or "" */
  if (base + strlen(tail) + 2 >= sizeof t.path) {
    deny(px, client, ev, "414 URI Too Long", "the path is too long");
    return;
  }
  snprintf(t.path + base, sizeof t.path - base, "%s%s", *tail == '/' ? "" : "/", tail);
  forward_request(w, client, req, &t, route, base, true, rest, rest_len, ev);
}

static void serve_one(struct worker *w, int fd)
{
  struct proxy *px = w->px;
  struct stream client = {.fd = fd}; /* timeouts inherited from the listener */
  struct http_request *req = &w->req;
  char *buf = w->buf;
  size_t got;
  const char *why = NULL;
  struct event ev = {.kind = "http"};
  long head = read_request(&client, req, buf, sizeof w->buf, &got, &why);
  if (head < 0) {
    if (why)
      deny(px, &client, &ev, "400 Bad Request", why);
  } else if (strcmp(req->method, "CONNECT") == 0) {
    handle_connect(w, &client, req, buf + head, got - (size_t)head, &ev);
  } else if (req->target[0] == '/') {
    handle_reverse(w, &client, req, req->target, buf + head, got - (size_t)head, &ev);
  } else {
    struct http_url t;
    ev.path = req->target;
    if (!http_parse_url(req->target, &t) || t.tls) {
      deny(px, &client, &ev, "400 Bad Request",
           "a proxy request needs an absolute http:// URL (use CONNECT for https)");
    } else if (t.port == PROXY_PORT && is_loopback_name(t.host)) {
      /* addressed to the proxy itself (a client that ignores NO_PROXY):
       * the reverse-proxy form, never the host's own port 3128 */
      handle_reverse(w, &client, req, t.path, buf + head, got - (size_t)head, &ev);
    } else {
      ev.path = t.path;
      size_t base = 0;
      const struct cap_credential_route *route = route_for(px, &t, &base);
      forward_request(w, &client, req, &t, route, base, false, buf + head,
                      got - (size_t)head, &ev);
    }
  }
}

/* ---- threads ---- */

/* A ports.localhost connection: relayed to the same port on the host's
 * loopback, which the manifest named explicitly. */
static void serve_forward(struct worker *w, int fd, uint16_t port)
{
  struct event ev = {.kind = "localhost", .host = "127.0.0.1", .port = port};
  struct addrinfo ai = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ai.ai_addr = (struct sockaddr *)&a;
  ai.ai_addrlen = sizeof a;
  int up = connect_bounded(&ai);
  if (up < 0) {
    log_event(w->px, &ev, false, "nothing accepts on this port of the host's loopback");
    return;
  }
  slot_set_upstream(w, up);
  relay(w, fd, up, &ev);
  log_event(w->px, &ev, true, "forward closed");
}

/* Workers live until proxy_stop (a thread per connection would pay for
 * creating and unmapping a stack, with TLB shootdowns, on every one).
 * A few workers (up to MAX_ACCEPTORS) block in accept() on the proxy's
 * listener at once; the kernel wakes exactly one per connection, which
 * serves it itself: no hand-off, and while another acceptor is still
 * waiting, no wake-up of anyone else either. The last acceptor to leave
 * calls on an idle worker (or makes one). Other idle workers wait for
 * queued work: ports.localhost connections, accepted by the poll thread. */

#define MAX_ACCEPTORS 4

static bool spawn_worker(struct proxy *px);

/* A free slot for fd (locked), or SIZE_MAX after answering 503. */
static size_t claim_slot(struct proxy *px, int fd, uint16_t forward_port)
{
  size_t slot = 0;
  while (slot < MAX_CONNS && px->slots[slot].used)
    slot++;
  if (slot == MAX_CONNS) {
    struct stream s = {.fd = fd};
    if (!forward_port)
      respond(&s, "503 Service Unavailable", "too many connections through the proxy");
    close(fd);
    return SIZE_MAX;
  }
  px->slots[slot] = (struct slot){.used = true, .client = fd, .upstream = -1, .forward_port = forward_port};
  px->active++;
  return slot;
}

/* Serves slot with the lock dropped, then frees it (locked again). */
static void serve_slot(struct worker *w, size_t slot)
{
  struct proxy *px = w->px;
  w->slot = slot;
  w->bulk[0] = w->bulk[1] = false;
  int fd = px->slots[slot].client;
  uint16_t forward_port = px->slots[slot].forward_port;
  pthread_mutex_unlock(&px->lock);
  if (forward_port)
    serve_forward(w, fd, forward_port);
  else
    serve_one(w, fd);
  for (int i = 0; i < 2; i++) /* descriptors are the scarce thing: not kept idle */
    if (w->pipes[i][0] >= 0) {
      close(w->pipes[i][0]);
      close(w->pipes[i][1]);
      w->pipes[i][0] = w->pipes[i][1] = -1;
    }
  pthread_mutex_lock(&px->lock);
  close(px->slots[slot].client);
  if (px->slots[slot].upstream >= 0)
    close(px->slots[slot].upstream);
  px->slots[slot].used = false;
  px->active--;
}

static void *worker_main(void *arg)
{
  struct worker *w = arg;
  struct proxy *px = w->px;
  pthread_mutex_lock(&px->lock);
  for (;;) {
    if (px->q_len) {
      size_t slot = px->queue[px->q_head];
      px->q_head = (px->q_head + 1) % MAX_CONNS;
      px->q_len--;
      serve_slot(w, slot);
      continue;
    }
    if (px->stopping)
      break;
    if (px->acceptors < MAX_ACCEPTORS) {
      px->acceptors++;
      pthread_mutex_unlock(&px->lock);
      int fd;
      for (;;) {
        fd = accept4(px->listen_fds[0], NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0 || __atomic_load_n(&px->stopping, __ATOMIC_ACQUIRE) || errno == EINVAL)
          break; /* EINVAL: the listener was shut down */
        if (errno != EINTR && errno != ECONNABORTED)
          usleep(50000); /* out of descriptors or memory: back off, do not spin */
      }
      pthread_mutex_lock(&px->lock);
      px->acceptors--;
      if (fd < 0)
        continue; /* stopping */
      /* the listener must not go unwatched: an idle worker, or a new one */
      if (!px->stopping && px->acceptors == 0 &&
          (px->idle_workers == 0 ? !spawn_worker(px) : true))
        pthread_cond_signal(&px->work);
      size_t slot = claim_slot(px, fd, 0);
      if (slot != SIZE_MAX)
        serve_slot(w, slot);
      continue;
    }
    px->idle_workers++;
    pthread_cond_wait(&px->work, &px->lock);
    px->idle_workers--;
  }
  px->n_workers--;
  pthread_cond_broadcast(&px->idle);
  pthread_mutex_unlock(&px->lock);
  for (int i = 0; i < 2; i++)
    if (w->pipes[i][0] >= 0) {
      close(w->pipes[i][0]);
      close(w->pipes[i][1]);
    }
  free(w);
  return NULL;
}

/* A new worker (locked). False when none can be made (the limit, or no
 * thread): the queue then waits for a busy one. */
static bool spawn_worker(struct proxy *px)
{
  if (px->n_workers >= MAX_CONNS)
    return false;
  struct worker *w = cap_xcalloc(1, sizeof *w);
  w->px = px;
  w->pipes[0][0] = w->pipes[0][1] = w->pipes[1][0] = w->pipes[1][1] = -1;
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  bool ok = pthread_create(&t, &attr, worker_main, w) == 0;
  pthread_attr_destroy(&attr);
  if (!ok) {
    free(w);
    return false;
  }
  px->n_workers++;
  return true;
}

/* The poll thread: ports.localhost connections, queued for a worker. */
static void *accept_loop(void *arg)
{
  struct proxy *px = arg;
  struct pollfd p[PROXY_MAX_FORWARDS + 1];
  size_t n = px->n_listen - 1;
  for (size_t i = 0; i < n; i++)
    p[i] = (struct pollfd){.fd = px->listen_fds[1 + i], .events = POLLIN};
  p[n] = (struct pollfd){.fd = px->stop_pipe[0], .events = POLLIN};
  for (;;) {
    if (poll(p, n + 1, -1) < 0 && errno != EINTR)
      return NULL;
    if (p[n].revents)
      return NULL;
    for (size_t i = 0; i < n; i++) {
      if (!(p[i].revents & POLLIN))
        continue;
      int fd = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN)
          usleep(50000); /* out of descriptors: back off, do not spin */
        continue;
      }
      pthread_mutex_lock(&px->lock);
      size_t slot = claim_slot(px, fd, px->spec->network.localhost.v[i]);
      if (slot != SIZE_MAX) {
        px->queue[(px->q_head + px->q_len) % MAX_CONNS] = slot;
        px->q_len++;
        if (px->idle_workers < px->q_len)
          spawn_worker(px);
        pthread_cond_signal(&px->work);
      }
      pthread_mutex_unlock(&px->lock);
    }
  }
}

/* ---- life cycle ---- */

/* env://NAME or file:///path; the value without a trailing newline. */
static int read_secret(const struct cap_credential_route *r, const struct proxy_store *store,
                       char **ret, struct cap_error *err)
{
  cap_secret_hold(); /* this process holds a credential from here on */
  const char *src = r->source;
  if (strncmp(src, "env://", 6) == 0) {
    const char *v = getenv(src + 6);
    if (!v || !*v)
      return cap_error_set(err, ENOENT,
                           "credential \"%s\": the environment variable %s is not set; export it "
                           "before running capsule",
                           r->name, src + 6);
    *ret = cap_xstrdup(v);
    return 0;
  }
  if (strncmp(src, "file://", 7) == 0) {
    char *text = NULL;
    size_t len = 0;
    int e = cap_read_file(src + 7, SECRET_MAX, &text, &len, err);
    if (e < 0)
      return cap_error_set(err, -e, "credential \"%s\": %s", r->name, err->message);
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
      text[--len] = '\0';
    if (!len || memchr(text, '\n', len) || memchr(text, '\0', len)) {
      OPENSSL_cleanse(text, len);
      free(text);
      return cap_error_set(err, EINVAL,
                           "credential \"%s\": %s must hold one non-empty line (the secret)",
                           r->name, src + 7);
    }
    *ret = text;
    return 0;
  }
  if (!strstr(src, "://") && store) { /* a bare name: capsule's credential store */
    bool found = false;
    int e = store->lookup(store->arg, src, ret, &found, err);
    if (e < 0)
      return e;
    if (!found)
      return cap_error_set(err, ENOENT,
                           "credential \"%s\": %s is not in capsule's credential store; set it "
                           "with `capsule cred set --shared %s --scope system` (the value on stdin)",
                           r->name, src, src);
    return 0;
  }
  return cap_error_set(err, ENOTSUP,
                       "credential \"%s\": capsule cannot read %s sources; use env://, file:// or "
                       "a name in capsule's credential store",
                       r->name, src);
}

static void wipe_secrets(struct proxy *px)
{
  for (size_t i = 0; px->secrets && i < px->spec->n_routes; i++)
    if (px->secrets[i].secret) {
      OPENSSL_cleanse(px->secrets[i].secret, strlen(px->secrets[i].secret));
      free(px->secrets[i].secret);
      px->secrets[i].secret = NULL;
    }
}

static void proxy_free(struct proxy *px)
{
  wipe_secrets(px);
  free(px->secrets);
  for (size_t i = 0; i < px->n_tool_env; i++)
    free(px->tool_env[i]);
  free(px->tool_env);
  free(px->bundle);
  tls_ca_free(px->ca);
  pthread_mutex_destroy(&px->log_lock);
  pthread_mutex_destroy(&px->lock);
  pthread_cond_destroy(&px->idle);
  pthread_cond_destroy(&px->work);
  free(px);
}

int proxy_new(const struct cap_spec *spec, const struct proxy_options *opt, struct proxy **ret,
              struct cap_error *err)
{
  struct proxy *px = cap_xcalloc(1, sizeof *px);
  px->spec = spec;
  px->opt = *opt;
  px->stop_pipe[0] = px->stop_pipe[1] = -1;
  pthread_mutex_init(&px->log_lock, NULL);
  pthread_mutex_init(&px->lock, NULL);
  pthread_cond_init(&px->idle, NULL);
  pthread_cond_init(&px->work, NULL);
  px->secrets = cap_xcalloc(spec->n_routes + 1, sizeof *px->secrets);
  px->tool_env = cap_xcalloc(spec->n_routes + 1, sizeof *px->tool_env);
  for (size_t i = 0; i < spec->n_routes; i++) {
    const struct cap_credential_route *r = &spec->routes[i];
    int e = read_secret(r, opt->store, &px->secrets[i].secret, err);
    if (e < 0) {
      proxy_free(px);
      return e;
    }
    if (r->env_var) {
      unsigned char raw[32];
      RAND_bytes(raw, sizeof raw);
      for (size_t k = 0; k < sizeof raw; k++)
        snprintf(px->secrets[i].phantom + 2 * k, 3, "%02x", raw[k]);
      px->tool_env[px->n_tool_env++] = cap_xasprintf("%s=%s", r->env_var, px->secrets[i].phantom);
    }
  }
  bool intercept = spec->n_routes > 0;
  for (size_t i = 0; i < spec->network.n_endpoints; i++)
    intercept |= spec->network.endpoints[i].n_rules > 0;
  /* the client side verifies upstreams for routes too, so the CA object
   * (which holds the client context) exists whenever there is TLS to do */
  if (intercept) {
    int e = tls_ca_create(&px->ca, err);
    if (e < 0) {
      proxy_free(px);
      return e;
    }
    struct cap_buf b = {0};
    tls_ca_bundle(px->ca, &b);
    px->bundle_len = b.len;
    px->bundle = cap_buf_steal(&b);
  }
  *ret = px;
  return 0;
}

const char *proxy_ca_bundle(const struct proxy *p, size_t *len)
{
  *len = p->bundle_len;
  return p->bundle;
}

char *const *proxy_tool_env(const struct proxy *p, size_t *n)
{
  *n = p->n_tool_env;
  return p->tool_env;
}

void proxy_scrub(struct proxy *p)
{
  if (!p)
    return;
  wipe_secrets(p);
  /* this copy's environment still holds env:// sources, and the CA's keys
   * are of no use here */
  for (size_t i = 0; i < p->spec->n_routes; i++) {
    const char *src = p->spec->routes[i].source;
    char *v = strncmp(src, "env://", 6) == 0 ? getenv(src + 6) : NULL;
    if (v)
      OPENSSL_cleanse(v, strlen(v));
  }
  tls_ca_free(p->ca);
  p->ca = NULL;
}

int proxy_start(struct proxy *px, const int *fds, size_t n, struct cap_error *err)
{
  /* a peer that resets its socket must cost an EPIPE, not capsule's life
   * (splice and TLS writes raise SIGPIPE; the sandbox's child restores it) */
  signal(SIGPIPE, SIG_IGN);
  /* 256 connections hold up to 6 descriptors each: more than the usual
   * soft limit of 1024 */
  struct rlimit nofile;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < 4096) {
    nofile.rlim_cur = nofile.rlim_max < 4096 ? nofile.rlim_max : 4096;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  if (n > sizeof px->listen_fds / sizeof px->listen_fds[0]) {
    for (size_t i = 0; i < n; i++)
      close(fds[i]);
    return cap_error_set(err, EINVAL, "proxy: too many listeners");
  }
  memcpy(px->listen_fds, fds, n * sizeof *fds);
  px->n_listen = n;
  for (size_t i = 0; i < n; i++) /* accepted connections inherit them: no calls per connection */
    set_timeouts(fds[i], STREAM_TIMEOUT_S);
  if (pipe2(px->stop_pipe, O_CLOEXEC) < 0)
    return cap_error_errno(err, errno, "proxy: pipe");
  if (pthread_create(&px->thread, NULL, accept_loop, px) != 0)
    return cap_error_set(err, EAGAIN, "proxy: cannot start its thread");
  px->started = true;
  pthread_mutex_lock(&px->lock);
  bool ok = spawn_worker(px); /* the first acceptor */
  pthread_mutex_unlock(&px->lock);
  if (!ok)
    return cap_error_set(err, EAGAIN, "proxy: cannot start a worker thread");
  return 0;
}

void proxy_stop(struct proxy *px)
{
  if (!px)
    return;
  if (px->started) {
    if (write(px->stop_pipe[1], "x", 1) < 0) {
      /* the thread also ends when the process does */
    }
    pthread_join(px->thread, NULL);
    /* end every connection and wait for its thread: nothing may outlive the spec */
    pthread_mutex_lock(&px->lock);
    for (size_t i = 0; i < MAX_CONNS; i++) {
      if (!px->slots[i].used)
        continue;
      shutdown(px->slots[i].client, SHUT_RDWR);
      if (px->slots[i].upstream >= 0)
        shutdown(px->slots[i].upstream, SHUT_RDWR);
    }
    /* queued connections not yet served are served at once: their
     * sockets are shut down, so each ends immediately */
    __atomic_store_n(&px->stopping, true, __ATOMIC_RELEASE);
    shutdown(px->listen_fds[0], SHUT_RDWR); /* wakes every accept() */
    pthread_cond_broadcast(&px->work);
    while (px->n_workers)
      pthread_cond_wait(&px->idle, &px->lock);
    pthread_mutex_unlock(&px->lock);
  }
  for (size_t i = 0; i < px->n_listen; i++)
    close(px->listen_fds[i]);
  if (px->stop_pipe[0] >= 0) {
    close(px->stop_pipe[0]);
    close(px->stop_pipe[1]);
  }
  proxy_free(px);
}
