#include "net/proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/buf.h"
#include "net/rules.h"

#define HEAD_MAX 16384
#define IO_TIMEOUT_MS 30000
#define CONNECT_TIMEOUT_MS 10000
#define MAX_CONNS 256

/* A connection's two sockets, so proxy_stop can shut them down. */
struct slot {
  bool used;
  int client, upstream;
};

struct proxy {
  const struct cap_spec *spec;
  int listen_fd;
  int stop_pipe[2];
  bool allow_private;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t idle;
  size_t active;
  struct slot slots[MAX_CONNS];
};

struct conn {
  struct proxy *proxy;
  size_t slot;
};

static void send_all(int fd, const char *s, size_t n)
{
  while (n) {
    ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
    if (w <= 0)
      return;
    s += w;
    n -= (size_t)w;
  }
}

static void respond(int fd, const char *status, const char *why)
{
  char buf[512];
  int n = snprintf(buf, sizeof buf,
                   "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
                   "capsule: %s\n",
                   status, why);
  send_all(fd, buf, n > 0 ? (size_t)n : 0);
}

/* Reads the request head (through the blank line) into buf. */
static ssize_t read_head(int fd, char *buf, size_t size)
{
  size_t got = 0;
  while (got < size - 1) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, IO_TIMEOUT_MS) <= 0)
      return -1;
    ssize_t n = recv(fd, buf + got, size - 1 - got, 0);
    if (n <= 0)
      return -1;
    got += (size_t)n;
    buf[got] = '\0';
    if (strstr(buf, "\r\n\r\n"))
      return (ssize_t)got;
  }
  return -1;
}

/* "host:port" or "[v6]:port" -> host, port */
static bool split_authority(char *target, char **host, uint16_t *port)
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

/* connect() with a deadline, so an upstream that never answers cannot hold
 * a proxy thread (and capsule's exit) for the kernel's two-minute SYN retry. */
static int connect_bounded(const struct addrinfo *ai)
{
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
  if (fd < 0)
    return -1;
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (errno != EINPROGRESS || poll(&p, 1, CONNECT_TIMEOUT_MS) != 1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0 || soerr != 0) {
      close(fd);
      return -1;
    }
  }
  int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

/* Resolves host and connects; refuses when ANY address it resolves to is
 * forbidden (a name that also points at the metadata service is not used). */
static int dial(struct proxy *px, const char *host, uint16_t port, const char **why)
{
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
  char service[8];
  snprintf(service, sizeof service, "%u", port);
  if (getaddrinfo(host, service, &hints, &res) != 0) {
    *why = "the host name does not resolve";
    return -1;
  }
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next)
    if (net_address_forbidden(ai->ai_addr, px->allow_private)) {
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
    *why = "the upstream refused the connection";
  return fd;
}

/* Copies bytes both ways until both directions have ended (a half-close
 * is passed on) or the tunnel stays idle too long. */
static void relay(int a, int b)
{
  char buf[16384];
  const int fds[2] = {a, b};
  struct pollfd p[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
  int open_directions = 2;
  while (open_directions > 0) {
    int r = poll(p, 2, IO_TIMEOUT_MS * 4);
    if (r <= 0)
      return;
    for (int i = 0; i < 2; i++) {
      if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      ssize_t n = recv(p[i].fd, buf, sizeof buf, 0);
      if (n < 0)
        return;
      if (n == 0) { /* this side is done sending: tell the other, keep reading it */
        shutdown(fds[1 - i], SHUT_WR);
        p[i].fd = -1; /* poll ignores negative fds */
        open_directions--;
        continue;
      }
      send_all(fds[1 - i], buf, (size_t)n);
    }
  }
}

static void serve_one(struct proxy *px, size_t slot, int fd);

static void *serve(void *arg)
{
  struct conn *c = arg;
  struct proxy *px = c->proxy;
  size_t slot = c->slot;
  free(c);
  serve_one(px, slot, px->slots[slot].client);
  pthread_mutex_lock(&px->lock);
  close(px->slots[slot].client);
  if (px->slots[slot].upstream >= 0)
    close(px->slots[slot].upstream);
  px->slots[slot].used = false;
  if (--px->active == 0)
    pthread_cond_broadcast(&px->idle);
  pthread_mutex_unlock(&px->lock);
  return NULL;
}

static bool header_is(const char *line, size_t len, const char *name)
{
  size_t n = strlen(name);
  return len > n && line[n] == ':' && strncasecmp(line, name, n) == 0;
}

/* A plain-HTTP request in absolute form ("GET http://host/path HTTP/1.1"):
 * one request per connection, its body framed by Content-Length only, sent
 * upstream in origin form with "Connection: close"; nothing more the client
 * sends is forwarded, so no second request can ride along unchecked. */
static void forward_http(struct proxy *px, size_t slot, int fd, char *head, const char *method,
                         char *target)
{
  if (strncasecmp(target, "http://", 7) != 0) {
    respond(fd, "400 Bad Request", "a proxy request needs an absolute http:// URL");
    return;
  }
  char *authority = target + 7;
  char *path = strchr(authority, '/');
  char origin[1100];
  snprintf(origin, sizeof origin, "%s", path ? path : "/");
  if (path)
    *path = '\0';
  char *host = authority;
  uint16_t port = 80;
  if (strchr(authority, ':') && !split_authority(authority, &host, &port)) {
    respond(fd, "400 Bad Request", "bad host:port in the URL");
    return;
  }
  char path_only[1100];
  snprintf(path_only, sizeof path_only, "%.*s", (int)strcspn(origin, "?#"), origin);

  /* headers: no folding, no Transfer-Encoding, a plain Content-Length */
  char *line = strstr(head, "\r\n") + 2;
  char *end = strstr(head, "\r\n\r\n");
  struct cap_buf out = {0};
  /* Host comes from the checked URL, never from the client's header: a
   * shared server (a CDN) would otherwise route to an unchecked name */
  if (port == 80)
    cap_buf_printf(&out, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, origin, host);
  else
    cap_buf_printf(&out, "%s %s HTTP/1.1\r\nHost: %s:%u\r\n", method, origin, host, port);
  long long content_length = 0;
  const char *bad = NULL;
  while (line < end + 2 && !bad) {
    char *eol = strstr(line, "\r\n");
    size_t len = (size_t)(eol - line);
    if (len == 0)
      break;
    if (line[0] == ' ' || line[0] == '\t' || !memchr(line, ':', len))
      bad = "malformed header line";
    else if (header_is(line, len, "Transfer-Encoding"))
      bad = "Transfer-Encoding request bodies are not supported; send Content-Length";
    else if (header_is(line, len, "Content-Length")) {
      char *v = line + 15;
      while (*v == ' ' || *v == '\t')
        v++;
      char *stop;
      content_length = strtoll(v, &stop, 10);
      while (*stop == ' ' || *stop == '\t')
        stop++;
      if (stop != eol || content_length < 0 || v == stop)
        bad = "bad Content-Length";
      else {
        cap_buf_append(&out, line, len);
        cap_buf_puts(&out, "\r\n");
      }
    } else if (!header_is(line, len, "Host") && !header_is(line, len, "Connection") &&
               !header_is(line, len, "Proxy-Connection") &&
               !header_is(line, len, "Keep-Alive") && !header_is(line, len, "Proxy-Authorization")) {
      cap_buf_append(&out, line, len);
      cap_buf_puts(&out, "\r\n");
    }
    line = eol + 2;
  }
  cap_buf_puts(&out, "Connection: close\r\n\r\n");

  const struct cap_endpoint *endpoint = NULL;
  const char *why = NULL;
  if (bad)
    respond(fd, "400 Bad Request", bad);
  else if (!net_host_allowed(&px->spec->network, host, port, &endpoint))
    respond(fd, "403 Forbidden", "this host:port is not in the capability's network allowlist");
  else if (endpoint && !net_rules_allow(endpoint->rules, endpoint->n_rules, method, path_only))
    respond(fd, "403 Forbidden", "the capability's rules for this host do not allow this method and path");
  else {
    int up = dial(px, host, port, &why);
    if (up < 0) {
      respond(fd, "403 Forbidden", why);
    } else {
      pthread_mutex_lock(&px->lock);
      px->slots[slot].upstream = up;
      pthread_mutex_unlock(&px->lock);
      send_all(up, out.data, out.len);
      /* the body: exactly Content-Length bytes, part of it maybe read already */
      const char *body = end + 4;
      size_t have = strlen(body);
      if ((long long)have > content_length)
        have = (size_t)content_length;
      send_all(up, body, have);
      long long left = content_length - (long long)have;
      char buf[16384];
      while (left > 0) {
        ssize_t n = recv(fd, buf, left < (long long)sizeof buf ? (size_t)left : sizeof buf, 0);
        if (n <= 0)
          break;
        send_all(up, buf, (size_t)n);
        left -= n;
      }
      shutdown(up, SHUT_WR);
      for (;;) { /* the response, to the end */
        ssize_t n = recv(up, buf, sizeof buf, 0);
        if (n <= 0)
          break;
        send_all(fd, buf, (size_t)n);
      }
    }
  }
  cap_buf_free(&out);
}

static void serve_one(struct proxy *px, size_t slot, int fd)
{
  char head[HEAD_MAX];
  if (read_head(fd, head, sizeof head) < 0) {
    respond(fd, "400 Bad Request", "could not read a request head");
    return;
  }
  char method[16], target[1024];
  if (sscanf(head, "%15s %1023s HTTP/1.", method, target) != 2) {
    respond(fd, "400 Bad Request", "malformed request line");
    return;
  }
  if (strcmp(method, "CONNECT") != 0) {
    forward_http(px, slot, fd, head, method, target);
    return;
  }
  char *host;
  uint16_t port;
  const struct cap_endpoint *endpoint = NULL;
  if (!split_authority(target, &host, &port)) {
    respond(fd, "400 Bad Request", "CONNECT needs host:port");
  } else if (!net_host_allowed(&px->spec->network, host, port, &endpoint)) {
    respond(fd, "403 Forbidden", "this host:port is not in the capability's network allowlist");
  } else if (endpoint && endpoint->n_rules) {
    respond(fd, "403 Forbidden",
            "this host has method/path rules, which need TLS interception (not yet available)");
  } else {
    const char *why = NULL;
    int up = dial(px, host, port, &why);
    if (up < 0) {
      respond(fd, "403 Forbidden", why);
    } else {
      static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
      send_all(fd, ok, sizeof ok - 1);
      /* bytes the client sent after the head belong to the tunnel */
      char *rest = strstr(head, "\r\n\r\n") + 4;
      size_t extra = strlen(rest);
      if (extra)
        send_all(up, rest, extra);
      pthread_mutex_lock(&px->lock);
      px->slots[slot].upstream = up;
      pthread_mutex_unlock(&px->lock);
      relay(fd, up);
    }
  }
}

static void *accept_loop(void *arg)
{
  struct proxy *px = arg;
  struct pollfd p[2] = {{.fd = px->listen_fd, .events = POLLIN},
                        {.fd = px->stop_pipe[0], .events = POLLIN}};
  for (;;) {
    if (poll(p, 2, -1) < 0 && errno != EINTR)
      return NULL;
    if (p[1].revents)
      return NULL;
    if (!(p[0].revents & POLLIN))
      continue;
    int fd = accept4(px->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    pthread_mutex_lock(&px->lock);
    size_t slot = 0;
    while (slot < MAX_CONNS && px->slots[slot].used)
      slot++;
    if (slot == MAX_CONNS) {
      pthread_mutex_unlock(&px->lock);
      respond(fd, "503 Service Unavailable", "too many connections through the proxy");
      close(fd);
      continue;
    }
    px->slots[slot] = (struct slot){.used = true, .client = fd, .upstream = -1};
    px->active++;
    pthread_mutex_unlock(&px->lock);
    struct conn *c = cap_xmalloc(sizeof *c);
    c->proxy = px;
    c->slot = slot;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, serve, c) != 0) {
      pthread_mutex_lock(&px->lock);
      px->slots[slot].used = false;
      px->active--;
      pthread_mutex_unlock(&px->lock);
      close(fd);
      free(c);
    }
    pthread_attr_destroy(&attr);
  }
}

int proxy_start(const struct cap_spec *spec, int listen_fd, bool allow_private,
                struct proxy **ret, struct cap_error *err)
{
  struct proxy *px = cap_xcalloc(1, sizeof *px);
  px->spec = spec;
  px->listen_fd = listen_fd;
  px->allow_private = allow_private;
  pthread_mutex_init(&px->lock, NULL);
  pthread_cond_init(&px->idle, NULL);
  if (pipe2(px->stop_pipe, O_CLOEXEC) < 0) {
    free(px);
    return cap_error_errno(err, errno, "proxy: pipe");
  }
  if (pthread_create(&px->thread, NULL, accept_loop, px) != 0) {
    close(px->stop_pipe[0]);
    close(px->stop_pipe[1]);
    free(px);
    return cap_error_set(err, EAGAIN, "proxy: cannot start its thread");
  }
  *ret = px;
  return 0;
}

void proxy_stop(struct proxy *px)
{
  if (!px)
    return;
  if (write(px->stop_pipe[1], "x", 1) < 0) {
    /* the thread also ends when the process does */
  }
  pthread_join(px->thread, NULL);
  /* end every relay and wait for its thread: nothing may outlive the spec */
  pthread_mutex_lock(&px->lock);
  for (size_t i = 0; i < MAX_CONNS; i++) {
    if (!px->slots[i].used)
      continue;
    shutdown(px->slots[i].client, SHUT_RDWR);
    if (px->slots[i].upstream >= 0)
      shutdown(px->slots[i].upstream, SHUT_RDWR);
  }
  while (px->active)
    pthread_cond_wait(&px->idle, &px->lock);
  pthread_mutex_unlock(&px->lock);
  pthread_mutex_destroy(&px->lock);
  pthread_cond_destroy(&px->idle);
  close(px->stop_pipe[0]);
  close(px->stop_pipe[1]);
  close(px->listen_fd);
  free(px);
}
