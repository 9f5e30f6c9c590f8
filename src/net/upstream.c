#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/io.h"
#include "net/dns_client.h"
#include "net/hostaddr.h"
#include "net/proxy_internal.h"
#include "net/rules.h"

/* ---- byte streams: a plain socket or TLS over one ---- */

ssize_t proxy_stream_read(struct stream *s, char *buf, size_t n)
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

bool proxy_stream_write(struct stream *s, const char *buf, size_t n)
{
  if (!s->ssl)
    return cap_write_all(s->fd, buf, n, CAP_IO_NOSIGPIPE) == 0;
  while (n) {
    size_t w = 0;
    if (SSL_write_ex(s->ssl, buf, n, &w) != 1)
      return false;
    buf += w;
    n -= w;
  }
  return true;
}

void proxy_set_timeouts(int fd, int seconds)
{
  struct timeval tv = {.tv_sec = seconds};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* ---- upstream connections ---- */

/* connect() with a deadline, so an upstream that never answers cannot hold
 * a proxy thread (and capsule's exit) for the kernel's two-minute SYN retry. */
/* A socket for ai with its timeouts: a blocking connect bounded by
 * SO_SNDTIMEO (no poll round and no flag changes when the upstream
 * answers at once, the common case), then STREAM_TIMEOUT_S both ways. */
static int bounded_socket(int family, int type, int protocol)
{
  int fd = socket(family, type | SOCK_CLOEXEC, protocol);
  if (fd < 0)
    return -1;
  struct timeval bound = {.tv_sec = CONNECT_TIMEOUT_MS / 1000,
                          .tv_usec = (CONNECT_TIMEOUT_MS % 1000) * 1000};
  struct timeval stream = {.tv_sec = STREAM_TIMEOUT_S};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &stream, sizeof stream);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound);
  return fd;
}

int proxy_spare_socket(void) { return bounded_socket(AF_INET, SOCK_STREAM, 0); }

int proxy_connect_bounded(const struct addrinfo *ai, int *spare)
{
  int fd;
  if (spare && *spare >= 0 && ai->ai_family == AF_INET && ai->ai_socktype == SOCK_STREAM &&
      ai->ai_protocol == 0) {
    fd = *spare;
    *spare = -1;
  } else {
    fd = bounded_socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0)
      return -1;
  }
  struct timeval stream = {.tv_sec = STREAM_TIMEOUT_S};
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

/* An IPv4 (strict dotted quad) or IPv6 literal into d; false when text is
 * neither. */
static bool add_literal(struct dest *d, const char *text, uint16_t port)
{
  struct sockaddr_in6 v6 = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
  struct sockaddr_in v4 = {.sin_family = AF_INET, .sin_port = htons(port)};
  if (inet_pton(AF_INET, text, &v4.sin_addr) == 1)
    memcpy(&d->addrs[d->n++], &v4, sizeof v4);
  else if (inet_pton(AF_INET6, text, &v6.sin6_addr) == 1)
    memcpy(&d->addrs[d->n++], &v6, sizeof v6);
  else
    return false;
  return true;
}

/* --resolve's addresses for host (comma-separated literals), or host
 * itself. */
static const char *resolve_override(const struct proxy *px, const char *host)
{
  size_t n = strlen(host);
  if (n && host[n - 1] == '.')
    n--;
  for (size_t i = 0; i < px->opt.n_resolve; i++) {
    const char *h = px->opt.resolve[i].host;
    size_t m = strlen(h);
    if (m && h[m - 1] == '.')
      m--;
    if (m == n && strncasecmp(h, host, n) == 0)
      return px->opt.resolve[i].addr;
  }
  return host;
}

static void set_port(struct sockaddr_storage *sa, uint16_t port)
{
  if (sa->ss_family == AF_INET)
    ((struct sockaddr_in *)sa)->sin_port = htons(port);
  else if (sa->ss_family == AF_INET6)
    ((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
}

/* Resolves host (a literal skips the resolver; --resolve's entries stand
 * for the literal they name) into d, and refuses when ANY
 * address it resolves to is forbidden: a name that also points at the
 * metadata service is not used at all (DNS-rebinding defence: the
 * addresses checked are the ones connected to). */
int proxy_resolve(struct proxy *px, const char *host, uint16_t port, struct dest *d,
                  const char **why)
{
  *d = (struct dest){0};
  const char *literals = resolve_override(px, host);
  if (literals != host) { /* --resolve's comma-separated literals */
    for (const char *a = literals; *a && d->n < DEST_MAX_ADDRS;) {
      size_t n = strcspn(a, ",");
      char one[INET6_ADDRSTRLEN];
      if (n < sizeof one) {
        memcpy(one, a, n);
        one[n] = '\0';
        add_literal(d, one, port);
      }
      a += n + (a[n] == ',');
    }
    if (d->n == 0) {
      *why = "the host is not an address capsule reads";
      return -ENOENT;
    }
  } else if (!add_literal(d, host, port)) {
    /* capsule's own queries, kept for their TTL (dns_client.h) */
    enum dns_source from;
    int n = dns_cache_lookup(px->dns, host, cap_now_ms(CLOCK_MONOTONIC), d->addrs, DEST_MAX_ADDRS,
                             &from);
    if (n <= 0) {
      *why = "the host name does not resolve";
      return -ENOENT;
    }
    d->n = (size_t)n;
    for (size_t i = 0; i < d->n; i++) /* the cache holds addresses; the port is this call's */
      set_port(&d->addrs[i], port);
  }
  for (size_t i = 0; i < d->n; i++)
    if (net_address_forbidden((const struct sockaddr *)&d->addrs[i], px->opt.allow_private)) {
      *why = "the host resolves to an address capsule never connects to "
             "(link-local, metadata, private or loopback)";
      return -EACCES;
    }
  /* the host's own interface addresses are its loopback by another name */
  for (size_t i = 0; i < d->n && !px->opt.allow_private; i++)
    if (host_addrs_local(px->host_addrs, (const struct sockaddr *)&d->addrs[i])) {
      *why = "the host resolves to an address capsule never connects to "
             "(one this machine answers for itself: an interface address or a local route)";
      return -EACCES;
    }
  return 0;
}

int proxy_connect_dest(struct worker *w, const struct dest *d, const char **why)
{
  for (size_t i = 0; i < d->n; i++) {
    const struct sockaddr *sa = (const struct sockaddr *)&d->addrs[i];
    struct addrinfo ai = {.ai_family = sa->sa_family,
                          .ai_socktype = SOCK_STREAM,
                          .ai_addr = (struct sockaddr *)sa,
                          .ai_addrlen = sa->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                                 : sizeof(struct sockaddr_in6)};
    int fd = proxy_connect_bounded(&ai, &w->spare_up);
    if (fd >= 0)
      return fd;
  }
  *why = "the upstream did not accept the connection";
  return -ECONNREFUSED;
}

/* e's host and port ("host", "host:port", "[v6]:port") into host; *port 0
 * when e names none. False for patterns ("*.x", ".x", "*"): they name no
 * address. */
static bool endpoint_host(const struct cap_endpoint *e, char *host, size_t size, uint16_t *port)
{
  const char *h = e->host, *colon = strrchr(h, ':');
  size_t len = strlen(h);
  *port = 0;
  if (h[0] == '[') { /* [v6] or [v6]:port */
    const char *close = strchr(h, ']');
    if (!close)
      return false;
    if (close[1] == ':')
      *port = (uint16_t)atoi(close + 2);
    h++;
    len = (size_t)(close - h);
  } else if (colon && strchr(h, ':') == colon) { /* one colon: host:port */
    *port = (uint16_t)atoi(colon + 1);
    len = (size_t)(colon - h);
  } /* more colons: a bare IPv6 literal */
  if (len == 0 || len >= size)
    return false;
  memcpy(host, h, len);
  host[len] = '\0';
  return host[0] != '.' && !strchr(host, '*');
}

/* Whether any address name resolves to is one of d's. */
static bool resolves_into(struct proxy *px, const char *name, const struct dest *d)
{
  if (resolve_override(px, name) != name) { /* --resolve: its literals, no lookup */
    struct dest other;
    const char *why;
    if (proxy_resolve(px, name, 0, &other, &why) < 0 && other.n == 0)
      return false;
    for (size_t i = 0; i < other.n; i++)
      for (size_t k = 0; k < d->n; k++)
        if (host_addrs_same((const struct sockaddr *)&other.addrs[i],
                            (const struct sockaddr *)&d->addrs[k]))
          return true;
    return false;
  }
  struct sockaddr_storage addrs[DEST_MAX_ADDRS];
  enum dns_source from;
  int n =
      dns_cache_lookup(px->dns, name, cap_now_ms(CLOCK_MONOTONIC), addrs, DEST_MAX_ADDRS, &from);
  for (int i = 0; i < n; i++)
    for (size_t k = 0; k < d->n; k++)
      if (host_addrs_same((const struct sockaddr *)&addrs[i],
                          (const struct sockaddr *)&d->addrs[k]))
        return true;
  return false;
}

size_t proxy_endpoints_at(struct proxy *px, const struct dest *d, uint16_t port,
                          const struct cap_endpoint **out, size_t max)
{
  const struct cap_network *net = &px->spec->network;
  size_t n = 0;
  for (size_t i = 0; i < net->n_endpoints && n < max; i++) {
    const struct cap_endpoint *e = &net->endpoints[i];
    char host[300];
    uint16_t eport;
    if (!e->n_rules || !endpoint_host(e, host, sizeof host, &eport) || (eport && eport != port))
      continue;
    if (resolves_into(px, host, d))
      out[n++] = e;
  }
  return n;
}

/* The bytes buf[0..n) read from from, sent on to; when from's end comes
 * right after them (a second read finds it) and last is not NULL, they go
 * with to's FIN in one segment (MSG_MORE holds them back, the shutdown
 * sends both) and *last is set: one packet, one ACK and one wake-up of
 * to's reader fewer than data and FIN apart. n grows by what a second read
 * finds instead. */
static bool send_small(int from, int to, char *buf, size_t size, ssize_t *n, bool *last)
{
  int more = 0;
  if (last && (size_t)*n < size) {
    ssize_t e = recv(from, buf + *n, size - (size_t)*n, MSG_DONTWAIT);
    if (e == 0)
      more = MSG_MORE;
    else if (e > 0)
      *n += e;
  }
  for (ssize_t off = 0; off < *n;) {
    ssize_t m = send(to, buf + off, (size_t)(*n - off), MSG_NOSIGNAL | more);
    if (m <= 0)
      return false;
    off += m;
  }
  if (more) {
    shutdown(to, SHUT_WR);
    *last = true;
  }
  return true;
}

/* Moves what one readable socket has (up to a pipe's worth) to the other
 * without copying through user space: socket -> pipe -> socket. Returns
 * the bytes moved, 0 at end of stream, -1 on error. */
ssize_t proxy_pump(struct worker *w, int dir, int from, int to, bool wait, bool *last)
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
    if (!send_small(from, to, w->small, sizeof w->small, &n, last))
      return -1;
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
void proxy_relay(struct worker *w, int a, int b, struct event *ev)
{
  const int fds[2] = {a, b};
  /* POLLRDHUP: a side that has half-closed behind its last bytes has them
   * sent with the other's FIN (proxy_pump's last) */
  struct pollfd p[2] = {{.fd = a, .events = POLLIN | POLLRDHUP},
                        {.fd = b, .events = POLLIN | POLLRDHUP}};
  int open_directions = 2;
  while (open_directions > 0) {
    int r = poll(p, 2, STREAM_TIMEOUT_S * 1000);
    if (r <= 0)
      return;
    for (int i = 0; i < 2; i++) {
      if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)))
        continue;
      /* the other side still reads: the FIN may go with these bytes (when
       * both are done, closing them tells them) */
      bool last = false, ending = (p[i].revents & POLLRDHUP) && p[1 - i].fd >= 0;
      ssize_t n = proxy_pump(w, i, p[i].fd, fds[1 - i], false, ending ? &last : NULL);
      if (n == -2)
        continue;
      if (n < 0)
        return;
      if (last) { /* moved, and this side ended: the other was told with them */
        *(i == 0 ? &ev->bytes_up : &ev->bytes_down) += n;
        p[i].fd = -1;
        open_directions--;
        continue;
      }
      if (n == 0) {           /* this side is done sending: tell the other, keep reading it */
        if (p[1 - i].fd >= 0) /* else both are done: closing them tells them */
          shutdown(fds[1 - i], SHUT_WR);
        p[i].fd = -1; /* poll ignores negative fds */
        open_directions--;
        continue;
      }
      *(i == 0 ? &ev->bytes_up : &ev->bytes_down) += n;
    }
  }
}
