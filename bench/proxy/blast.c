/* The egress benchmark's two ends, small enough to be the fastest thing in
 * the measurement: a server that answers GET /<bytes> with that many bytes
 * (Connection: close), and a client that either fetches one large body
 * (throughput) or makes many small requests, each on a new connection
 * (connection rate and added latency). The client goes direct, through an
 * HTTP proxy in absolute form, or through a CONNECT tunnel (the proxy is on
 * 127.0.0.1; HOST is an IPv4 address).
 *
 *   blast serve [ADDR] PORT            (ADDR: 127.0.0.1 by default)
 *   blast fetch HOST PORT BYTES [PROXY_PORT [connect]]   -> MB/s
 *   blast rate HOST PORT COUNT [PROXY_PORT [connect]]    -> median/p90 us
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static char block[1 << 20];

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *serve_one(void *arg)
{
  int fd = (int)(long)arg;
  char req[4096];
  size_t got = 0;
  while (got < sizeof req - 1) {
    ssize_t n = recv(fd, req + got, sizeof req - 1 - got, 0);
    if (n <= 0)
      break;
    got += (size_t)n;
    req[got] = '\0';
    if (strstr(req, "\r\n\r\n"))
      break;
  }
  char *path = strchr(req, '/');
  long long left = path ? atoll(path + 1) : 0;
  char head[128];
  int n = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %lld\r\nConnection: close\r\n\r\n", left);
  send(fd, head, (size_t)n, MSG_NOSIGNAL);
  while (left > 0) {
    ssize_t w = send(fd, block, left < (long long)sizeof block ? (size_t)left : sizeof block, MSG_NOSIGNAL);
    if (w <= 0)
      break;
    left -= w;
  }
  close(fd);
  return NULL;
}

static int serve(const char *addr, int port)
{
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, addr, &a.sin_addr);
  if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 4096) < 0) {
    perror("blast serve");
    return 1;
  }
  for (;;) {
    int fd = accept(l, NULL, NULL);
    if (fd < 0)
      continue;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, serve_one, (void *)(long)fd) != 0)
      close(fd);
    pthread_attr_destroy(&attr);
  }
}

static int dial(const char *addr, int port)
{
  int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, addr, &a.sin_addr);
  if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
    perror("blast connect");
    exit(1);
  }
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return s;
}

/* One request for /bytes; returns the body bytes received. */
static long long request(const char *host, int port, long long bytes, int proxy, int tunnel)
{
  int s = proxy ? dial("127.0.0.1", proxy) : dial(host, port);
  char req[1024];
  char buf[1 << 16];
  int n;
  /* PROXY_AUTH: base64 user:password for proxies that want it (sandbox-runtime's) */
  const char *auth = getenv("PROXY_AUTH");
  char auth_line[600] = "";
  if (proxy && auth && *auth)
    snprintf(auth_line, sizeof auth_line, "Proxy-Authorization: Basic %.500s\r\n", auth);
  if (proxy && tunnel) {
    n = snprintf(req, sizeof req, "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n%s\r\n", host, port, host,
                 port, auth_line);
    send(s, req, (size_t)n, 0);
    ssize_t got = recv(s, buf, sizeof buf, 0); /* "200 Connection established" */
    if (got <= 0 || strncmp(buf, "HTTP/1.1 200", 12) != 0) {
      fprintf(stderr, "blast: the proxy refused the tunnel: %.*s\n", (int)(got > 0 ? got : 0), buf);
      exit(1);
    }
  }
  if (proxy && !tunnel)
    n = snprintf(req, sizeof req, "GET http://%s:%d/%lld HTTP/1.1\r\nHost: %s:%d\r\n%s\r\n", host, port,
                 bytes, host, port, auth_line);
  else
    n = snprintf(req, sizeof req, "GET /%lld HTTP/1.1\r\nHost: %s:%d\r\n\r\n", bytes, host, port);
  send(s, req, (size_t)n, 0);
  /* the response: to the end of its Content-Length body, since a proxy may
   * keep the connection open afterwards */
  long long total = 0, want = -1;
  size_t head = 0;
  ssize_t r;
  while ((r = recv(s, buf + head, sizeof buf - head - 1, 0)) > 0) {
    if (want < 0) {
      head += (size_t)r;
      buf[head] = '\0';
      char *end = strstr(buf, "\r\n\r\n");
      if (!end) {
        if (head == sizeof buf - 1)
          break;
        continue;
      }
      char *cl = strcasestr(buf, "\r\nContent-Length:");
      want = cl && cl < end ? atoll(cl + 17) : 0;
      total = (long long)head - (end + 4 - buf);
      head = 0;
    } else {
      total += r;
    }
    if (total >= want)
      break;
  }
  close(s);
  return total;
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
  if (argc >= 3 && strcmp(argv[1], "serve") == 0)
    return argc >= 4 ? serve(argv[2], atoi(argv[3])) : serve("127.0.0.1", atoi(argv[2]));
  if (argc < 5)
    return fprintf(stderr, "usage: blast serve PORT | fetch|rate HOST PORT N [PROXY_PORT [connect]]\n"), 2;
  const char *host = argv[2];
  int port = atoi(argv[3]);
  long long n = atoll(argv[4]);
  int proxy = argc > 5 ? atoi(argv[5]) : 0;
  int tunnel = argc > 6 && strcmp(argv[6], "connect") == 0;
  if (strcmp(argv[1], "fetch") == 0) {
    double t = now();
    long long got = request(host, port, n, proxy, tunnel);
    double dt = now() - t;
    if (got < n) {
      fprintf(stderr, "blast: short transfer (%lld of %lld bytes)\n", got, n);
      return 1;
    }
    printf("%.1f MB/s\n", (double)n / dt / 1e6);
    return 0;
  }
  double *lat = calloc((size_t)n, sizeof *lat);
  for (long long i = 0; i < n; i++) {
    double t = now();
    request(host, port, 0, proxy, tunnel);
    lat[i] = (now() - t) * 1e6;
  }
  qsort(lat, (size_t)n, sizeof *lat, cmp);
  printf("median %.1f us p90 %.1f us\n", lat[n / 2], lat[n * 9 / 10]);
  return 0;
}
