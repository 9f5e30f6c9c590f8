/* The gRPC server (front/grpc_serve.h, the module) against hostile
 * peers: raw HTTP/2 written by hand over TCP loopback, whatever a client
 * may send. An answer larger than the client's flow-control window
 * arrives whole (it is not cancelled when its handler returns); a client
 * that never opens its window does not hold the answer's stream past the
 * idle limit; a stream reset, or a connection lost, while its call is in
 * the handler (its cancel fires); bodies of refused, reset and unknown streams give the
 * connection's window back (else it stalls); an unauthenticated upload's
 * body is not kept; no call reaches the handler without authenticate's
 * yes; malformed requests are refused; the stop ends with calls, streams
 * and idle connections in every state. Every wait is bounded (an alarm
 * fails a hang). */
#include <arpa/inet.h>
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cancel.h"
#include "front/grpc_serve.h"
#include "../unit/unit.h"

int unit_failures, unit_checks;

#define TOKEN "tok"
#define BIG (300 * 1024) /* an answer past the client's default window (65535) */
#define HUGE (12 << 20)  /* one past the sockets' buffers (4 MiB each way here) */
#define IDLE_MS 1000     /* the server's stream_idle_ms */
#define WAIT_MS 15000    /* the bound of every wait for the server */

/* ---- the server's handler ---- */

static pthread_mutex_t hmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hcv = PTHREAD_COND_INITIALIZER;
static int in_block, released, unadmitted, handled;

static char *authenticate(void *arg, const char *bearer)
{
  (void)arg;
  return bearer && strcmp(bearer, TOKEN) == 0 ? strdup("user") : NULL;
}

/* "block" waits (the wait hook run first) until the test releases it */
static void block(const struct grpc_serve_call *call)
{
  cap_wait_hook_run(call->wait);
  pthread_mutex_lock(&hmu);
  int ticket = ++in_block;
  pthread_cond_broadcast(&hcv);
  while (released < ticket)
    pthread_cond_wait(&hcv, &hmu);
  pthread_mutex_unlock(&hmu);
}

/* The stop armed on a call's cancel: counted */
static int stops_run, in_cancel;
static void stop_counted(void *arg)
{
  (void)arg;
  pthread_mutex_lock(&hmu);
  stops_run++;
  pthread_cond_broadcast(&hcv);
  pthread_mutex_unlock(&hmu);
}

/* "cancel" arms its call's cancel and waits (bounded) for it to fire:
 * CANCELLED then; "quick" arms and disarms it at once */
static void cancellable(const struct grpc_serve_call *call, bool wait, struct grpc_serve_answer *a)
{
  cap_wait_hook_run(call->wait);
  pthread_mutex_lock(&hmu);
  int seen = stops_run;
  in_cancel++;
  pthread_cond_broadcast(&hcv);
  pthread_mutex_unlock(&hmu);
  bool armed = cap_cancel_arm(call->cancel, stop_counted, NULL);
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += WAIT_MS / 1000;
  pthread_mutex_lock(&hmu);
  while (wait && armed && stops_run == seen)
    if (pthread_cond_timedwait(&hcv, &hmu, &until) == ETIMEDOUT)
      break;
  pthread_mutex_unlock(&hmu);
  cap_cancel_disarm(call->cancel);
  if (cap_cancel_fired(call->cancel))
    a->status = GRPC_SERVE_CANCELLED;
  else
    a->result = strdup("{}");
}

static void handler(void *arg, const struct grpc_serve_call *call, struct grpc_serve_answer *a)
{
  (void)arg;
  pthread_mutex_lock(&hmu);
  handled++;
  if (!call->user || !call->bearer || strcmp(call->bearer, TOKEN) != 0)
    unadmitted++;
  pthread_mutex_unlock(&hmu);
  if (call->method == GRPC_SERVE_CAP_UPLOAD) { /* takes no chunk: returns at once */
    a->result = strdup("none");
    return;
  }
  a->success = true;
  if (call->method == GRPC_SERVE_HEALTH)
    return;
  if (strcmp(call->tool_name, "block") == 0)
    block(call);
  if (strcmp(call->tool_name, "cancel") == 0 || strcmp(call->tool_name, "quick") == 0) {
    cancellable(call, call->tool_name[0] == 'c', a);
    return;
  }
  size_t n = strcmp(call->tool_name, "big") == 0    ? BIG
             : strcmp(call->tool_name, "huge") == 0 ? HUGE
                                                    : 0;
  if (n) {
    a->result = malloc(n + 1);
    memset(a->result, 'x', n);
    a->result[n] = '\0';
  } else {
    a->result = strdup("{}");
  }
}

static void release_blocked(void)
{
  pthread_mutex_lock(&hmu);
  released = in_block;
  pthread_cond_broadcast(&hcv);
  pthread_mutex_unlock(&hmu);
}

/* Waits until n calls are in "block" (bounded): whether they are */
static bool wait_blocked(int n)
{
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += WAIT_MS / 1000;
  pthread_mutex_lock(&hmu);
  while (in_block < n)
    if (pthread_cond_timedwait(&hcv, &hmu, &until) == ETIMEDOUT)
      break;
  bool ok = in_block >= n;
  pthread_mutex_unlock(&hmu);
  return ok;
}

/* ---- a raw HTTP/2 client ---- */

struct cl {
  int fd;
  nghttp2_hd_deflater *def;
  nghttp2_hd_inflater *inf;
  struct cap_buf in;
  bool update; /* gives each DATA's bytes back to the server's window */
};

static int rcvbuf; /* the next connection's SO_RCVBUF (0: the system's) */

struct outcome {
  int status;        /* grpc-status, -1 none */
  char message[128]; /* grpc-message's start */
  uint32_t rst;      /* RST_STREAM's code + 1, 0 none */
  size_t data;       /* DATA bytes */
  bool goaway, eof, timeout;
};

static void cl_frame(struct cl *c, uint8_t type, uint8_t flags, int32_t id, const void *p, size_t n)
{
  uint8_t h[9] = {(uint8_t)(n >> 16),  (uint8_t)(n >> 8),   (uint8_t)n,         type,       flags,
                  (uint8_t)(id >> 24), (uint8_t)(id >> 16), (uint8_t)(id >> 8), (uint8_t)id};
  struct cap_buf b = {0};
  cap_buf_append(&b, (const char *)h, 9);
  cap_buf_append(&b, p, n);
  size_t off = 0;
  while (off < b.len) {
    ssize_t w = send(c->fd, b.data + off, b.len - off, MSG_NOSIGNAL);
    if (w <= 0)
      break; /* the server may have closed: what it said is read next */
    off += (size_t)w;
  }
  cap_buf_free(&b);
}

static void cl_u32(uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static void cl_window_update(struct cl *c, int32_t id, uint32_t n)
{
  uint8_t p[4];
  cl_u32(p, n);
  cl_frame(c, 8, 0, id, p, 4);
}

static void cl_rst(struct cl *c, int32_t id, uint32_t code)
{
  uint8_t p[4];
  cl_u32(p, code);
  cl_frame(c, 3, 0, id, p, 4);
}

/* A connection: the preface and SETTINGS (initial window `window`, 0:
 * the default 65535) */
static bool cl_next(struct cl *c, int ms, uint8_t *type, uint8_t *flags, int32_t *id,
                    struct cap_buf *payload, struct outcome *o);

static bool cl_open(struct cl *c, int port, uint32_t window)
{
  memset(c, 0, sizeof *c);
  c->update = true;
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (rcvbuf)
    setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0)
    return false;
  nghttp2_hd_deflate_new(&c->def, 4096);
  nghttp2_hd_inflate_new(&c->inf);
  send(c->fd, NGHTTP2_CLIENT_MAGIC, NGHTTP2_CLIENT_MAGIC_LEN, MSG_NOSIGNAL);
  uint8_t s[6] = {0, 4};
  cl_u32(s + 2, window);
  cl_frame(c, 4, 0, 0, s, window ? 6 : 0);
  struct outcome o = {0};
  struct cap_buf p = {0};
  uint8_t type = 0, flags = 0;
  int32_t id;
  while (type != 4 && cl_next(c, WAIT_MS, &type, &flags, &id, &p, &o))
    ; /* the server's SETTINGS, ACKed: its windows in force */
  cap_buf_free(&p);
  cl_frame(c, 4, 1, 0, NULL, 0);
  return type == 4;
}

static void cl_close(struct cl *c)
{
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
  nghttp2_hd_deflate_del(c->def);
  nghttp2_hd_inflate_del(c->inf);
  cap_buf_free(&c->in);
}

#define HV(n, v)                                                                                   \
  {                                                                                                \
    (uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE                     \
  }

/* A request's HEADERS on stream id: path (NULL: none), bearer (NULL:
 * none), content-type application/grpc unless type is NULL */
static void cl_request(struct cl *c, int32_t id, const char *path, const char *bearer,
                       const char *type, bool end)
{
  char auth[256];
  snprintf(auth, sizeof auth, "Bearer %s", bearer ? bearer : "");
  nghttp2_nv nv[8] = {HV(":method", "POST"), HV(":scheme", "http"), HV(":authority", "x")};
  size_t n = 3;
  if (path)
    nv[n++] = (nghttp2_nv)HV(":path", path);
  nv[n++] = (nghttp2_nv)HV("te", "trailers");
  if (type)
    nv[n++] = (nghttp2_nv)HV("content-type", type);
  if (bearer)
    nv[n++] = (nghttp2_nv)HV("authorization", auth);
  uint8_t block[4096];
  ssize_t len = nghttp2_hd_deflate_hd(c->def, block, sizeof block, nv, n);
  cl_frame(c, 1, (uint8_t)(4 | (end ? 1 : 0)), id, block, len > 0 ? (size_t)len : 0);
}

/* A gRPC message (the 5-byte prefix, flag f) in one DATA frame */
static void cl_message(struct cl *c, int32_t id, uint8_t f, const void *msg, size_t n, bool end)
{
  struct cap_buf b = {0};
  uint8_t p[5] = {f};
  cl_u32(p + 1, (uint32_t)n);
  cap_buf_append(&b, (const char *)p, 5);
  cap_buf_append(&b, msg, n);
  for (size_t off = 0; off < b.len || off == 0;) {
    size_t k = b.len - off > 16384 ? 16384 : b.len - off;
    cl_frame(c, 0, end && off + k == b.len ? 1 : 0, id, b.data + off, k);
    off += k;
    if (!k)
      break;
  }
  cap_buf_free(&b);
}

/* CapabilityService/Invoke's request of tool, {} */
static void cl_invoke(struct cl *c, int32_t id, const char *tool)
{
  cl_request(c, id, "/selu.capability.v1.CapabilityService/Invoke", TOKEN, "application/grpc",
             false);
  char m[128];
  size_t n = (size_t)snprintf(m, sizeof m, "\x0a%c%s\x12\x02{}", (char)strlen(tool), tool);
  cl_message(c, id, 0, m, n, true);
}

static void cl_headers_seen(struct cl *c, const uint8_t *p, size_t n, bool last, struct outcome *o)
{
  for (;;) {
    nghttp2_nv nv;
    int fl = 0;
    ssize_t r = nghttp2_hd_inflate_hd2(c->inf, &nv, &fl, p, n, last);
    if (r < 0)
      return;
    p += r, n -= (size_t)r;
    if ((fl & NGHTTP2_HD_INFLATE_EMIT) && nv.namelen == 11 && !memcmp(nv.name, "grpc-status", 11))
      o->status = atoi((const char *)nv.value);
    if ((fl & NGHTTP2_HD_INFLATE_EMIT) && nv.namelen == 12 && !memcmp(nv.name, "grpc-message", 12))
      snprintf(o->message, sizeof o->message, "%.*s", (int)nv.valuelen, (const char *)nv.value);
    if (fl & NGHTTP2_HD_INFLATE_FINAL) {
      nghttp2_hd_inflate_end_headers(c->inf);
      return;
    }
    if (!(fl & NGHTTP2_HD_INFLATE_EMIT) && !n)
      return;
  }
}

/* One frame read (bounded by ms): false at the end, or none in time */
static bool cl_next(struct cl *c, int ms, uint8_t *type, uint8_t *flags, int32_t *id,
                    struct cap_buf *payload, struct outcome *o)
{
  while (c->in.len < 9 ||
         c->in.len < 9 + ((size_t)(uint8_t)c->in.data[0] << 16 |
                          (size_t)(uint8_t)c->in.data[1] << 8 | (uint8_t)c->in.data[2])) {
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0) {
      o->timeout = true;
      return false;
    }
    char buf[65536];
    ssize_t r = recv(c->fd, buf, sizeof buf, 0);
    if (r <= 0) {
      o->eof = true;
      return false;
    }
    cap_buf_append(&c->in, buf, (size_t)r);
  }
  const uint8_t *h = (const uint8_t *)c->in.data;
  size_t n = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
  *type = h[3], *flags = h[4];
  *id =
      (int32_t)((uint32_t)(h[5] & 0x7f) << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8]);
  payload->len = 0;
  cap_buf_append(payload, c->in.data + 9, n);
  memmove(c->in.data, c->in.data + 9 + n, c->in.len - 9 - n);
  c->in.len -= 9 + n;
  return true;
}

/* A frame read for the streams ids[0..n) (their outcomes o): the stream
 * it ended, or -1 */
static int cl_seen(struct cl *c, uint8_t type, uint8_t flags, int32_t sid, const struct cap_buf *p,
                   const int32_t *ids, size_t n, struct outcome *o)
{
  if (type == 4 && !(flags & 1))
    cl_frame(c, 4, 1, 0, NULL, 0); /* SETTINGS' ACK */
  if (type == 0 && p->len && c->update) {
    cl_window_update(c, 0, (uint32_t)p->len);
    cl_window_update(c, sid, (uint32_t)p->len);
  }
  size_t i = 0;
  while (i < n && ids[i] != sid)
    i++;
  if (type == 1 || type == 9)
    cl_headers_seen(c, (const uint8_t *)p->data, p->len, flags & 4,
                    i < n ? &o[i] : &(struct outcome){0});
  if (type == 7)
    for (size_t j = 0; j < n; j++)
      o[j].goaway = true;
  if (i == n)
    return type == 7 ? 0 : -1;
  if (type == 0)
    o[i].data += p->len;
  if (type == 3) {
    const uint8_t *b = (const uint8_t *)p->data;
    o[i].rst = 1 + ((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]);
  }
  return type == 3 || ((type == 1 || type == 0) && (flags & 1)) ? (int)i : -1;
}

/* Reads until the streams ids[0..n) end (trailers with END_STREAM,
 * RST_STREAM, GOAWAY, the connection's end) or ms pass without a frame */
static void cl_wait_many(struct cl *c, const int32_t *ids, size_t n, struct outcome *o, int ms)
{
  for (size_t i = 0; i < n; i++)
    o[i] = (struct outcome){.status = -1};
  struct cap_buf p = {0};
  uint8_t type, flags;
  int32_t sid;
  size_t left = n;
  struct outcome end = {0};
  bool ended[256] = {0};
  while (left && cl_next(c, ms, &type, &flags, &sid, &p, &end)) {
    int i = cl_seen(c, type, flags, sid, &p, ids, n, o);
    if (type == 7)
      break;
    if (i >= 0 && !ended[i]) {
      ended[i] = true;
      left--;
    }
  }
  for (size_t i = 0; i < n; i++)
    o[i].eof = end.eof, o[i].timeout = !ended[i] && end.timeout;
  cap_buf_free(&p);
}

static struct outcome cl_wait(struct cl *c, int32_t id, int ms)
{
  struct outcome o;
  cl_wait_many(c, &id, 1, &o, ms);
  return o;
}

/* ---- the cases ---- */

static int port;

static int counter(const int *n)
{
  pthread_mutex_lock(&hmu);
  int v = *n;
  pthread_mutex_unlock(&hmu);
  return v;
}

/* A well-formed call on c, stream id: OK with its answer */
static bool call_ok(struct cl *c, int32_t id)
{
  cl_invoke(c, id, "echo");
  struct outcome o = cl_wait(c, id, WAIT_MS);
  return o.status == 0 && o.data > 5;
}

/* A fresh connection's call: the server still serves */
static bool serves(void)
{
  struct cl c;
  bool ok = cl_open(&c, port, 0) && call_ok(&c, 1);
  cl_close(&c);
  return ok;
}

/* An answer past the client's window (65535, the default) arrives whole
 * as the client opens its window: it was cancelled (RST_STREAM) once its
 * handler returned, its DATA still waiting for the window. */
static void big_answer(void)
{
  struct cl c;
  CHECK(cl_open(&c, port, 0));
  cl_invoke(&c, 1, "big");
  struct outcome o = cl_wait(&c, 1, WAIT_MS);
  CHECKF(o.status == 0 && o.data > BIG && !o.rst,
         "a %d-byte answer: status %d, %zu bytes, reset %u", BIG, o.status, o.data, o.rst);
  CHECK(call_ok(&c, 3));
  cl_close(&c);
}

/* A client that never opens its window: its answer's stream is reset
 * (not held forever) and the connection serves on. n calls sent
 * together are answered on the pool's threads, not the reader's: the
 * reader, polling without a beat while they ran, must sweep them too. */
static void stalled_answer(int n)
{
  struct cl c;
  CHECK(cl_open(&c, port, 0));
  c.update = false;
  int32_t ids[2];
  struct outcome o[2];
  for (int i = 0; i < n; i++)
    cl_invoke(&c, ids[i] = 1 + 2 * i, "big");
  cl_wait_many(&c, ids, (size_t)n, o, WAIT_MS);
  for (int i = 0; i < n; i++)
    CHECKF(o[i].rst && o[i].status < 0, "a stalled answer (%d of %d): status %d, reset %u", i + 1,
           n, o[i].status, o[i].rst);
  c.update = true;
  cl_window_update(&c, 0, 1 << 20); /* what the stalled DATA took of the connection's */
  CHECK(call_ok(&c, 1 + 2 * n));
  cl_close(&c);
}

/* A client that sends calls and reads nothing: once its socket has
 * taken none of the server's bytes for the idle limit the connection is
 * dropped (it held the connection, a reader and its answers for good).
 * Seen here as the reset a PING meets once the server closed. */
static void deaf_client(void)
{
  struct cl c;
  rcvbuf = 65536;
  CHECK(cl_open(&c, port, 16u << 20)); /* no window holds the answers back: the socket does */
  rcvbuf = 0;
  cl_window_update(&c, 0, 64u << 20);
  cl_invoke(&c, 1, "huge");
  bool dropped = false;
  for (int i = 0; i < WAIT_MS / 100 && !dropped; i++) {
    usleep(100000);
    struct pollfd p = {.fd = c.fd, .events = 0};
    dropped = poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP));
    uint8_t ping[17] = {0, 0, 8, 6};
    if (!dropped && i % 5 == 4)
      dropped = send(c.fd, ping, sizeof ping, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN;
  }
  while (!dropped) { /* the server's end, once what it sent is read (bounded) */
    char b[65536];
    struct pollfd p = {.fd = c.fd, .events = POLLIN};
    ssize_t r = poll(&p, 1, WAIT_MS) > 0 ? recv(c.fd, b, sizeof b, 0) : 1;
    if (r <= 0)
      dropped = true;
    else if (!(p.revents & POLLIN))
      break;
  }
  CHECKF(dropped, "a client reading nothing kept its connection");
  cl_close(&c);
  CHECK(serves());
}

/* The client resets the stream, or goes, while its call is in the
 * handler: the call ends (no use of what was freed), the server serves */
static void gone_in_handler(bool eof)
{
  struct cl c;
  CHECK(cl_open(&c, port, 0));
  int n = counter(&in_block);
  cl_invoke(&c, 1, "block");
  CHECK(wait_blocked(n + 1));
  if (eof) {
    shutdown(c.fd, SHUT_RDWR);
  } else {
    cl_rst(&c, 1, 8 /* CANCEL */);
    CHECK(call_ok(&c, 3)); /* the connection is read while the call waits */
  }
  usleep(50000); /* (not a bound: the reset or the end reaches the server first, usually) */
  release_blocked();
  if (!eof)
    CHECK(call_ok(&c, 5));
  cl_close(&c);
  CHECK(serves());
}

/* The client resets the stream, or goes, while its handler waits for its
 * cancel: the cancel fires (the handler's stop runs); then many
 * streams reset, and connections closed, as their handlers arm and
 * disarm their cancels: no use of a stream freed (ASan), the server
 * serves */
static bool wait_stops(int n)
{
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += WAIT_MS / 1000;
  pthread_mutex_lock(&hmu);
  while (stops_run < n)
    if (pthread_cond_timedwait(&hcv, &hmu, &until) == ETIMEDOUT)
      break;
  bool ok = stops_run >= n;
  pthread_mutex_unlock(&hmu);
  return ok;
}

static void cancelled_in_handler(bool eof)
{
  struct cl c;
  CHECK(cl_open(&c, port, 0));
  int n = counter(&in_cancel), stops = counter(&stops_run);
  cl_invoke(&c, 1, "cancel");
  for (int i = 0; i < 200 && counter(&in_cancel) == n; i++)
    usleep(50000); /* until the handler is in (bounded) */
  CHECK(counter(&in_cancel) == n + 1);
  if (eof)
    shutdown(c.fd, SHUT_RDWR);
  else
    cl_rst(&c, 1, 8 /* CANCEL */);
  CHECKF(wait_stops(stops + 1), "the client %s: the handler's cancel fired (%d stops)",
         eof ? "gone" : "reset the stream", counter(&stops_run) - stops);
  if (!eof)
    CHECK(call_ok(&c, 3));
  cl_close(&c);
}

static void cancelled_at_once(void)
{
  struct cl c;
  for (int round = 0; round < 20; round++) {
    CHECK(cl_open(&c, port, 0));
    for (int32_t id = 1; id < 40; id += 2) {
      cl_invoke(&c, id, "quick");
      if (id % 4 == 1)
        cl_rst(&c, id, 8);
    }
    cl_close(&c); /* the rest gone with the connection */
  }
  CHECK(serves());
}

/* A block of headers nv[0..n) with flags (END_HEADERS added) */
static void cl_block(struct cl *c, int32_t id, const nghttp2_nv *nv, size_t n, uint8_t flags)
{
  uint8_t block[4096];
  ssize_t len = nghttp2_hd_deflate_hd(c->def, block, sizeof block, (nghttp2_nv *)nv, n);
  cl_frame(c, 1, (uint8_t)(4 | flags), id, block, len > 0 ? (size_t)len : 0);
}

static int status_of(struct cl *c, int32_t id)
{
  struct outcome o = cl_wait(c, id, WAIT_MS);
  return o.status;
}

/* No call reaches the handler without authenticate's yes: no token, a
 * wrong one, the token in the trailers only, a wrong token after a right
 * one (the last counts, for authenticate and the handler alike) */
static void unauthenticated(void)
{
  struct cl c;
  CHECK(cl_open(&c, port, 0));
  int before = counter(&handled);
  const char *path = "/selu.capability.v1.CapabilityService/Invoke";
  cl_request(&c, 1, path, NULL, "application/grpc", false);
  cl_message(&c, 1, 0, "\x0a\x04\x65\x63\x68\x6f", 6, true);
  CHECK(status_of(&c, 1) == GRPC_SERVE_UNAUTHENTICATED);
  cl_request(&c, 3, path, "wrong", "application/grpc", false);
  cl_message(&c, 3, 0, "\x0a\x04\x65\x63\x68\x6f", 6, true);
  CHECK(status_of(&c, 3) == GRPC_SERVE_UNAUTHENTICATED);
  cl_request(&c, 5, path, NULL, "application/grpc", false);
  cl_message(&c, 5, 0, "\x0a\x04\x65\x63\x68\x6f", 6, false);
  nghttp2_nv tr[] = {HV("authorization", "Bearer " TOKEN)};
  cl_block(&c, 5, tr, 1, 1);
  CHECK(status_of(&c, 5) == GRPC_SERVE_UNAUTHENTICATED);
  nghttp2_nv two[] = {HV(":method", "POST"),
                      HV(":scheme", "http"),
                      HV(":path", path),
                      HV(":authority", "x"),
                      HV("content-type", "application/grpc"),
                      HV("authorization", "Bearer " TOKEN),
                      HV("authorization", "Bearer x")};
  cl_block(&c, 7, two, 7, 0);
  cl_message(&c, 7, 0, "\x0a\x04\x65\x63\x68\x6f", 6, true);
  CHECK(status_of(&c, 7) == GRPC_SERVE_UNAUTHENTICATED);
  /* an upload refused: its body (far past the windows) dropped, not kept */
  cl_request(&c, 9, "/selu.capability.v1.Capability/UploadInputArtifact", NULL, "application/grpc",
             false);
  static uint8_t chunk[200000];
  for (int i = 0; i < 10; i++)
    cl_message(&c, 9, 0, chunk, sizeof chunk, i == 9);
  CHECK(status_of(&c, 9) == GRPC_SERVE_UNAUTHENTICATED);
  CHECK(counter(&handled) == before);
  CHECK(call_ok(&c, 11));
  cl_close(&c);
}

/* A header block of HPACK references to one 4 KiB field (150 KB that
 * nghttp2 expands to 600 MB, each field's every byte checked): in the
 * trailers it went uncounted (0.2 s of the server's CPU each); now the
 * 64 KiB limit of the request's headers resets the stream there too */
static void trailer_bomb(void)
{
  struct cl c;
  CHECK(cl_open(&c, port, 0));
  cl_invoke(&c, 1, "echo"); /* its HPACK entries taken: the bomb's index is the newest */
  CHECK(cl_wait(&c, 1, WAIT_MS).status == 0);
  cl_request(&c, 3, "/selu.capability.v1.CapabilityService/Invoke", TOKEN, "application/grpc",
             false);
  cl_message(&c, 3, 0, "\x0a\x04\x65\x63\x68\x6f", 6, false);
  struct cap_buf b = {0};
  cap_buf_append(&b, "\x40\x01x\x7f", 4); /* literal, indexed: "x", 4000 bytes */
  for (size_t v = 4000 - 127; v; v >>= 7)
    cap_buf_putc(&b, (char)((v & 0x7f) | (v >> 7 ? 0x80 : 0)));
  for (int i = 0; i < 4000; i++)
    cap_buf_putc(&b, 'a');
  while (b.len < 16384 * 8)
    cap_buf_putc(&b, (char)0xbe); /* the dynamic table's newest: "x" again */
  for (size_t off = 0; off < b.len; off += 16384) {
    size_t n = b.len - off > 16384 ? 16384 : b.len - off;
    uint8_t flags = (uint8_t)((off + n == b.len ? 4 : 0) | (off == 0 ? 1 : 0));
    cl_frame(&c, off == 0 ? 1 : 9, flags, 3, b.data + off, n);
  }
  cap_buf_free(&b);
  struct outcome o = cl_wait(&c, 3, WAIT_MS);
  CHECKF(o.rst && o.status < 0, "trailers of 600 MB: status %d, reset %u", o.status, o.rst);
  cl_close(&c);
  CHECK(serves());
}

/* Bodies the server drops (refused streams, unknown methods, streams the
 * client resets, messages too large) give the connection's window back:
 * 24 MiB of them, past its 16 MiB, then a call on the same connection */
static void window_given_back(void)
{
  struct cl c;
  CHECK(cl_open(&c, port, 0));
  static uint8_t body[500000];
  int32_t id = 1;
  for (int i = 0; i < 48; i++, id += 2) {
    const char *path = i % 3 == 0   ? "/no.Such/Method"
                       : i % 3 == 1 ? "/selu.capability.v1.CapabilityService/Invoke"
                                    : "/selu.capability.v1.Capability/UploadInputArtifact";
    cl_request(&c, id, path, i % 4 == 0 ? NULL : TOKEN, "application/grpc", false);
    if (i % 5 == 0) {
      cl_message(&c, id, 0, body, sizeof body, false); /* reset in its body */
      cl_rst(&c, id, 8);
      continue;
    }
    cl_message(&c, id, 0, body, i % 3 == 1 ? sizeof body : 1000, false);
    cl_message(&c, id, 0, body, sizeof body, true); /* a unary's second: too large */
    struct outcome o = cl_wait(&c, id, WAIT_MS);
    CHECKF(o.status >= 0 || o.rst, "stream %d: status %d, reset %u, goaway %d, eof %d", id,
           o.status, o.rst, o.goaway, o.eof);
  }
  CHECK(call_ok(&c, id));
  cl_close(&c);
}

/* Bodies of requests not yet answered are held within the server's
 * budget (max_calls of max_message: 8 MiB here), not as many as the
 * connections' windows let come (each consumed as it comes): 12 bodies
 * of 900 KiB on one connection, their ends sent after all, some refused
 * RESOURCE_EXHAUSTED, the others answered */
static void bodies_held(void)
{
  enum { N = 12, LEN = 900 * 1024 };
  struct cl c;
  CHECK(cl_open(&c, port, 0));
  cl_window_update(&c, 0, 64u << 20);
  static uint8_t msg[LEN + 16];
  size_t n = 0;
  msg[n++] = 0x0a, msg[n++] = 1, msg[n++] = 'x', msg[n++] = 0x12;
  for (size_t v = LEN; v; v >>= 7)
    msg[n++] = (uint8_t)((v & 0x7f) | (v >> 7 ? 0x80 : 0));
  memset(msg + n, 'a', LEN);
  n += LEN;
  uint8_t prefix[5] = {0};
  cl_u32(prefix + 1, (uint32_t)n);
  int32_t ids[N];
  for (int i = 0; i < N; i++) {
    ids[i] = 1 + 2 * i;
    cl_request(&c, ids[i], "/selu.capability.v1.CapabilityService/Invoke", TOKEN,
               "application/grpc", false);
    cl_frame(&c, 0, 0, ids[i], prefix, 5);
    for (size_t off = 0; off < n - 100; off += 16384)
      cl_frame(&c, 0, 0, ids[i], msg + off, n - 100 - off < 16384 ? n - 100 - off : 16384);
  }
  for (int i = 0; i < N; i++)
    cl_frame(&c, 0, 1, ids[i], msg + n - 100, 100);
  struct outcome o[N];
  cl_wait_many(&c, ids, N, o, WAIT_MS);
  int ok = 0, refused = 0, crowded = 0;
  for (int i = 0; i < N; i++) {
    ok += o[i].status == 0;
    refused += o[i].status == GRPC_SERVE_RESOURCE_EXHAUSTED; /* for the bytes, or the calls */
    crowded += o[i].status == GRPC_SERVE_RESOURCE_EXHAUSTED && strstr(o[i].message, "bytes");
  }
  CHECKF(crowded > 0 && ok > 0 && ok + refused == N,
         "%d bodies of %d bytes: %d answered, %d refused (%d for the bytes)", N, (int)n, ok,
         refused, crowded);
  CHECK(call_ok(&c, 1 + 2 * N));
  cl_close(&c);
}

/* Malformed requests are refused, each on its own */
static void malformed(void)
{
  struct cl c;
  CHECK(cl_open(&c, port, 0));
  const char *path = "/selu.capability.v1.CapabilityService/Invoke";
  cl_request(&c, 1, path, TOKEN, "application/grpc", false); /* two messages in a unary */
  cl_message(&c, 1, 0, "\x0a\x01x", 3, false);
  cl_message(&c, 1, 0, "\x0a\x01x", 3, true);
  CHECK(status_of(&c, 1) == GRPC_SERVE_INVALID_ARGUMENT);
  cl_request(&c, 3, path, TOKEN, "application/grpc", false); /* compressed */
  cl_message(&c, 3, 1, "\x0a\x01x", 3, true);
  CHECK(status_of(&c, 3) == GRPC_SERVE_INTERNAL); /* no grpc-encoding: grpc-go's INTERNAL */
  cl_request(&c, 5, path, TOKEN, "text/plain", false);
  cl_message(&c, 5, 0, "\x0a\x01x", 3, true);
  CHECK(status_of(&c, 5) == GRPC_SERVE_INVALID_ARGUMENT);
  cl_request(&c, 7, path, TOKEN, "application/grpc", false); /* a prefix cut short */
  cl_frame(&c, 0, 1, 7, "\0\0\0\0\x09\x0a", 6);
  CHECK(status_of(&c, 7) == GRPC_SERVE_INVALID_ARGUMENT);
  cl_request(&c, 9, path, TOKEN, "application/grpc", true); /* no message */
  CHECK(status_of(&c, 9) == GRPC_SERVE_INVALID_ARGUMENT);
  cl_request(&c, 11, path, TOKEN, "application/grpc", false);
  for (int i = 0; i < 1000; i++) /* empty DATA frames */
    cl_frame(&c, 0, 0, 11, NULL, 0);
  cl_message(&c, 11, 0, "\x0a\x01x", 3, true);
  CHECK(status_of(&c, 11) == 0);
  cl_request(&c, 13, path, TOKEN, "application/grpc", false); /* no end: reset when idle */
  cl_message(&c, 13, 0, "\x0a\x01x", 3, false);
  CHECK(cl_wait(&c, 13, WAIT_MS).rst);
  nghttp2_nv nopath[] = {HV(":method", "POST"), HV(":scheme", "http"), HV(":authority", "x"),
                         HV("content-type", "application/grpc")};
  cl_block(&c, 15, nopath, 4, 1);
  struct outcome o = cl_wait(&c, 15, WAIT_MS);
  CHECK(o.rst || o.status > 0 || o.goaway);
  cl_close(&c);
  CHECK(cl_open(&c, port, 0));
  const char *timeouts[] = {"99999999H", "1x", "S", "", "123456789m", "1n", "0m", "0S"};
  for (int32_t i = 0; i < 8; i++) { /* grpc-timeout: huge, malformed (none), 1 ns, 0 */
    nghttp2_nv nv[] = {HV(":method", "POST"),
                       HV(":scheme", "http"),
                       HV(":path", path),
                       HV(":authority", "x"),
                       HV("content-type", "application/grpc"),
                       HV("authorization", "Bearer " TOKEN),
                       HV("grpc-timeout", timeouts[i])};
    cl_block(&c, 1 + 2 * i, nv, 7, 0);
    cl_message(&c, 1 + 2 * i, 0, "\x0a\x04\x65\x63\x68\x6f", 6, true);
    int st = status_of(&c, 1 + 2 * i);
    /* a deadline of 0 has passed (as grpc-go takes it), in any unit */
    CHECKF(i >= 5 ? st == 4 : st == 0, "grpc-timeout %s: status %d", timeouts[i], st);
  }
  cl_close(&c);
}

/* Compressed requests answered as grpc-go and libgrpc answer them: gzip
 * and deflate inflated; bytes that are not one whole stream INTERNAL (a
 * failed decompression); the compressed flag with no grpc-encoding (or
 * identity), or a flag past 1, INTERNAL; an encoding capsule does not
 * take UNIMPLEMENTED */
static void compressed(void)
{
  static const char gz[] = "\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\xe3\x62\x49\x4d\xce"
                           "\xc8\x07\x00\x2b\xcb\x99\xd3\x06\x00\x00\x00x";
  static const char zl[] = "\x78\x9c\xe3\x62\x49\x4d\xce\xc8\x07\x00\x04\x52\x01\xae";
  const struct {
    const char *encoding; /* NULL: no grpc-encoding */
    uint8_t flag;
    const char *msg;
    size_t len;
    int status;
  } cases[] = {
      {"gzip", 1, gz, 26, 0},
      {"deflate", 1, zl, 14, 0},
      {"gzip", 1, gz, 20, GRPC_SERVE_INTERNAL}, /* cut short */
      {"gzip", 1, gz, 27, GRPC_SERVE_INTERNAL}, /* a byte past its end */
      {"deflate", 1, "garbage", 7, GRPC_SERVE_INTERNAL},
      {NULL, 1, gz, 26, GRPC_SERVE_INTERNAL},
      {"identity", 1, gz, 26, GRPC_SERVE_INTERNAL},
      {"gzip", 2, gz, 26, GRPC_SERVE_INTERNAL},
      {"br", 1, gz, 26, GRPC_SERVE_UNIMPLEMENTED},
  };
  struct cl c;
  CHECK(cl_open(&c, port, 0));
  for (int32_t i = 0; i < (int32_t)(sizeof cases / sizeof *cases); i++) {
    nghttp2_nv nv[] = {HV(":method", "POST"),
                       HV(":scheme", "http"),
                       HV(":path", "/selu.capability.v1.CapabilityService/Invoke"),
                       HV(":authority", "x"),
                       HV("content-type", "application/grpc"),
                       HV("authorization", "Bearer " TOKEN),
                       HV("grpc-encoding", cases[i].encoding ? cases[i].encoding : "")};
    cl_block(&c, 1 + 2 * i, nv, cases[i].encoding ? 7 : 6, 0);
    cl_message(&c, 1 + 2 * i, cases[i].flag, cases[i].msg, cases[i].len, true);
    int st = status_of(&c, 1 + 2 * i);
    CHECKF(st == cases[i].status, "compressed case %d (%s, flag %d, %zu bytes): status %d, not %d",
           i, cases[i].encoding ? cases[i].encoding : "none", cases[i].flag, cases[i].len, st,
           cases[i].status);
  }
  cl_close(&c);
}

/* The blocked call let go after the stop's drain (not a bound: the stop
 * cancels it first, usually) */
static void *release_later(void *arg)
{
  (void)arg;
  usleep(3000000);
  release_blocked();
  return NULL;
}

/* The stop with a connection in each state: idle, a request's headers
 * only, a slow preface, a call in the handler, an answer the client does
 * not read; it ends (bounded by the alarm) and frees all (ASan) */
static void stop_with_all(struct grpc_serve *s)
{
  struct cl idle, half, pre, busy, deaf;
  CHECK(cl_open(&idle, port, 0) && call_ok(&idle, 1));
  CHECK(cl_open(&half, port, 0));
  cl_request(&half, 1, "/selu.capability.v1.CapabilityService/Invoke", TOKEN, "application/grpc",
             false);
  pre.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(connect(pre.fd, (struct sockaddr *)&a, sizeof a) == 0);
  send(pre.fd, "PRI * HT", 8, MSG_NOSIGNAL);
  CHECK(cl_open(&busy, port, 0));
  int n = counter(&in_block);
  cl_invoke(&busy, 1, "block");
  CHECK(wait_blocked(n + 1));
  CHECK(cl_open(&deaf, port, 16u << 20));
  cl_window_update(&deaf, 0, 64 << 20);
  cl_invoke(&deaf, 1, "huge");
  usleep(200000); /* (not a bound: the deaf client's answers fill its socket) */
  pthread_t t;
  pthread_create(&t, NULL, release_later, NULL);
  grpc_serve_stop(s, 500);
  pthread_join(t, NULL);
  cl_close(&idle);
  cl_close(&half);
  close(pre.fd);
  cl_close(&deaf);
  cl_close(&busy);
}

int main(void)
{
  alarm(240); /* a hang fails the test */
  struct grpc_serve_options opt = {.address = "127.0.0.1:0",
                                   .max_calls = 8,
                                   .max_message = 1 << 20,
                                   .stream_idle_ms = IDLE_MS,
                                   .handler = handler,
                                   .authenticate = authenticate};
  struct grpc_serve *s = NULL;
  struct cap_error err = {0};
  if (grpc_serve_start(&opt, &s, &port, &err) < 0) {
    fprintf(stderr, "grpc_serve_hostile: %s\n", err.message);
    return 1;
  }
  CHECK(serves());
  big_answer();
  stalled_answer(1);
  stalled_answer(2);
  deaf_client();
  gone_in_handler(false);
  gone_in_handler(true);
  cancelled_in_handler(false);
  cancelled_in_handler(true);
  cancelled_at_once();
  unauthenticated();
  trailer_bomb();
  window_given_back();
  bodies_held();
  malformed();
  compressed();
  stop_with_all(s);
  CHECKF(unadmitted == 0, "%d calls reached the handler without the token", unadmitted);
  if (unit_failures) {
    fprintf(stderr, "grpc_serve_hostile: %d failure(s) of %d checks\n", unit_failures, unit_checks);
    return 1;
  }
  printf("grpc_serve_hostile: %d checks passed\n", unit_checks);
  return 0;
}
