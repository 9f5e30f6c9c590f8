/* A connection of the gRPC server (grpc_serve_h2.h): its socket, TLS,
 * nghttp2 session and streams. Whoever holds the connection's mu writes:
 * nghttp2's output is gathered and sent with one write where it fits (an
 * answer's HEADERS, DATA and trailers in one segment); what the socket
 * does not take waits in out for the reader's poll. Flow control is
 * manual: a request's bytes are consumed as they come, an upload's as
 * its chunks are taken once UPLOAD_QUEUE_MAX of them wait, so a client
 * faster than the handler is held back by its window. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/grpc_wire.h"
#include "front/grpc_serve_h2.h"
#include "front/grpc_serve_msg.h"

#define READ_CHUNK (16 * 1024)
#define READS_PER_PUMP 64           /* then the ready calls go before more is read */
#define WRITE_GATHER (64 * 1024)    /* output collected before it is written */
#define HEADER_LIST_MAX (64 * 1024) /* a request's headers (on_header counts) */
#define UPLOAD_QUEUE_MAX                                                                           \
  (1u << 20) /* an upload's whole chunks not taken before its window shuts                         \
              */
#define STREAM_WINDOW (1u << 20)
#define CONN_WINDOW (16u << 20)
#define MAX_STREAMS 100 /* a connection's streams at once (SETTINGS_MAX_CONCURRENT_STREAMS) */
#define REFUSED_MAX 32  /* calls a connection may have refused a token for: then it ends */

static uint64_t now_us(void) { return cap_now_us(CLOCK_MONOTONIC); }

static struct gs_stream *stream_of(nghttp2_session *s, int32_t id)
{
  return nghttp2_session_get_stream_user_data(s, id);
}

/* ---- bytes: > 0 moved, 0 the peer's end (read), -1 would block, -2 lost ---- */

static ssize_t tls_result(struct gs_conn *c, int r)
{
  int e = SSL_get_error(c->ssl, r);
  if (e == SSL_ERROR_WANT_READ)
    return -1;
  if (e == SSL_ERROR_WANT_WRITE) {
    c->want_out = true;
    return -1;
  }
  ERR_clear_error();
  return e == SSL_ERROR_ZERO_RETURN ? 0 : -2;
}

static ssize_t sock_read(struct gs_conn *c, uint8_t *buf, size_t n)
{
  if (c->ssl) {
    int r = SSL_read(c->ssl, buf, (int)n);
    return r > 0 ? r : tls_result(c, r);
  }
  ssize_t r = recv(c->fd, buf, n, 0);
  if (r >= 0)
    return r;
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -1 : -2;
}

static ssize_t sock_write(struct gs_conn *c, const char *buf, size_t n)
{
  if (c->ssl) {
    int r = SSL_write(c->ssl, buf, (int)(n > INT32_MAX ? INT32_MAX : n));
    if (r > 0)
      return r;
    ssize_t x = tls_result(c, r);
    return x == 0 ? -2 : x;
  }
  ssize_t r = send(c->fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (r >= 0)
    return r;
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -1 : -2;
}

void gs_conn_wake(struct gs_conn *c)
{
  char b = 1;
  ssize_t r = write(c->wake[1], &b, 1); /* a full pipe wakes the reader already */
  (void)r;
}

static void stream_wake(struct gs_stream *k) { pthread_cond_broadcast(&k->cv); }

/* The stream is gone (reset, or its connection lost): its thread woken,
 * and a handler still at work told (grpc_serve_call's cancel). */
static void stream_gone(struct gs_stream *k)
{
  k->closed = true;
  stream_wake(k);
  if (k->handling)
    cap_cancel_fire(&k->cancel);
}

void gs_conn_kill(struct gs_conn *c, const char *why)
{
  if (c->dead)
    return;
  c->dead = true;
  snprintf(c->reason, sizeof c->reason, "%s", why);
  shutdown(c->fd, SHUT_RDWR);
  for (struct gs_stream *k = c->streams; k; k = k->next)
    stream_gone(k);
}

void gs_conn_flush(struct gs_conn *c)
{
  if (c->ssl && !c->handshaken)
    return;
  while (!c->dead) {
    while (c->out.len - c->out_off < WRITE_GATHER) {
      const uint8_t *p = NULL;
      ssize_t n = nghttp2_session_mem_send(c->h2, &p);
      if (n < 0) {
        gs_conn_kill(c, nghttp2_strerror((int)n));
        return;
      }
      if (n == 0)
        break;
      cap_buf_append(&c->out, (const char *)p, (size_t)n);
    }
    if (c->out_off == c->out.len) {
      c->out.len = c->out_off = 0;
      c->want_out = false;
      c->stuck_us = 0;
      return;
    }
    c->want_out = false;
    ssize_t w = sock_write(c, c->out.data + c->out_off, c->out.len - c->out_off);
    if (w == -1) {
      c->want_out = true;
      if (!c->stuck_us) {
        c->stuck_us = now_us();
        c->stuck_sent = 0;
      }
      return;
    }
    if (w < 0) {
      gs_conn_kill(c, "the connection was lost while capsule wrote to it");
      return;
    }
    c->out_off += (size_t)w;
    c->stuck_sent += (size_t)w; /* a trickle does not unstick it (the kernel takes bits) */
    if (c->stuck_sent >= WRITE_GATHER)
      c->stuck_us = 0;
    if (c->out_off > WRITE_GATHER) { /* keep the buffer from growing with what went */
      memmove(c->out.data, c->out.data + c->out_off, c->out.len - c->out_off);
      c->out.len -= c->out_off;
      c->out_off = 0;
    }
  }
}

/* ---- the session's callbacks ---- */

static void make_ready(struct gs_conn *c, struct gs_stream *k)
{
  if (k->ready)
    return;
  k->ready = true;
  k->ready_next = NULL;
  *c->ready_tail = k;
  c->ready_tail = &k->ready_next;
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
  struct gs_conn *c = user;
  if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
    return 0;
  struct gs_stream *k = cap_xcalloc(1, sizeof *k);
  k->c = c;
  k->id = f->hd.stream_id;
  k->started_us = now_us();
  k->status = -1;
  pthread_cond_init(&k->cv, NULL);
  cap_cancel_init(&k->cancel);
  k->next = c->streams;
  if (c->streams)
    c->streams->prev = k;
  c->streams = k;
  nghttp2_session_set_stream_user_data(s, k->id, k);
  return 0;
}

/* grpc-timeout: up to 8 digits and a unit (gRPC's PROTOCOL-HTTP2) */
static uint64_t timeout_us(const uint8_t *v, size_t n)
{
  int x = n >= 2 ? grpc_wire_digits(v, n - 1, 99999999) : -1;
  if (x < 0)
    return 0;
  uint64_t t = (uint64_t)x, us;
  switch (v[n - 1]) {
  case 'H': us = t * 3600000000ull; break;
  case 'M': us = t * 60000000ull; break;
  case 'S': us = t * 1000000ull; break;
  case 'm': us = t * 1000ull; break;
  case 'u': us = t; break;
  case 'n': us = t / 1000; break;
  default: return 0;
  }
  return us ? us : 1; /* a deadline of 0 (in any unit) has passed, as grpc-go takes it */
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
  (void)flags, (void)user;
  struct gs_stream *k = stream_of(s, f->hd.stream_id);
  /* The limit holds for the trailers too, and the headers of a stream
   * given up are refused: nghttp2 checks each field (its value's every
   * byte) before this callback, and a block of HPACK references to one
   * 4 KiB field expands 4000-fold, 0.2 s of CPU for 150 KB sent. Refused,
   * the rest of the block is decoded without the checks. */
  if (!k)
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
  k->headers += nlen + vlen + 32;
  if (k->headers > HEADER_LIST_MAX)
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  if (f->headers.cat != NGHTTP2_HCAT_REQUEST)
    return 0; /* a client's trailers carry nothing capsule reads */
  if (grpc_wire_named(name, nlen, ":path")) {
    free(k->path);
    k->path = cap_xstrndup((const char *)value, vlen);
  } else if (grpc_wire_named(name, nlen, "authorization") && vlen > 7 &&
             strncasecmp((const char *)value, "Bearer ", 7) == 0) {
    free(k->bearer);
    k->bearer = cap_xstrndup((const char *)value + 7, vlen - 7);
  } else if (grpc_wire_named(name, nlen, "content-type")) {
    k->grpc_type = vlen >= 16 && memcmp(value, "application/grpc", 16) == 0 &&
                   (vlen == 16 || value[16] == '+' || value[16] == ';');
  } else if (grpc_wire_named(name, nlen, "grpc-encoding")) {
    k->encoding = (int)grpc_serve_encoding_of(value, vlen);
  } else if (grpc_wire_named(name, nlen, "grpc-timeout")) {
    uint64_t t = timeout_us(value, vlen);
    k->deadline_us = t ? now_us() + t : 0;
  }
  return 0;
}

/* The request's headers are all here: the method, and the token checked
 * before any of its body is kept. An upload is answered from now on
 * (the handler takes its chunks); a request that is refused is answered
 * at once, its body dropped. */
static void request_headers(struct gs_conn *c, struct gs_stream *k)
{
  const struct gs_limits *lim = gs_server_limits(c->srv);
  k->known = k->path && grpc_serve_method_of(k->path, strlen(k->path), &k->method);
  if (k->known && k->grpc_type && lim->authenticate) {
    k->user = lim->authenticate(lim->arg, k->bearer);
    k->admitted = k->user != NULL;
    c->refused += !k->admitted;
  } else {
    k->admitted = !lim->authenticate;
  }
  if (k->admitted && k->known)
    c->ingoing = true;
  if (!k->known || !k->grpc_type || !k->admitted || k->method == GRPC_SERVE_CAP_UPLOAD)
    make_ready(c, k);
}

static void ended(struct gs_conn *c, struct gs_stream *k)
{
  k->remote_end = true;
  if (k->ready)
    stream_wake(k);
  else
    make_ready(c, k);
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
  struct gs_conn *c = user;
  struct gs_stream *k = stream_of(s, f->hd.stream_id);
  if (!k)
    return 0;
  if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
    request_headers(c, k);
  if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
      (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
    ended(c, k);
  return 0;
}

/* Counts each whole message as its prefix and bytes arrive. A unary
 * request holds one message of at most max_message; an upload's each
 * chunk is held to it. */
static void scan_messages(struct gs_conn *c, struct gs_stream *k)
{
  size_t max = gs_server_limits(c->srv)->max_message;
  while (!k->too_big && !k->compressed && k->in.len >= k->scan + 5) {
    const uint8_t *p = (const uint8_t *)k->in.data + k->scan;
    uint32_t len = grpc_wire_prefix_len(p);
    /* compressed (flag 1) in the request's grpc-encoding, one capsule
     * inflates; any other flag is refused */
    if (p[0] > 1 ||
        (p[0] == 1 && k->encoding != GRPC_ENC_GZIP && k->encoding != GRPC_ENC_DEFLATE)) {
      k->compressed = true;
      break;
    }
    bool unary = k->method != GRPC_SERVE_CAP_UPLOAD;
    if (len > max || (unary && k->scan > 0)) {
      k->too_big = true; /* its bytes dropped as a message past the limit's */
      k->second = unary && k->scan > 0;
      break;
    }
    if (k->in.len - k->scan - 5 < len)
      break;
    k->scan += 5 + (size_t)len;
  }
}

/* A unary request's body bytes counted in the server's budget (held_max:
 * max_calls requests of max_message, what the calls at once may hold):
 * false past it. Each connection's window alone bounds nothing, its
 * bytes consumed as they come, nor does the count of connections. */
static bool hold(struct gs_conn *c, struct gs_stream *k, size_t n)
{
  size_t *held = &c->srv->held;
  if (__atomic_add_fetch(held, n, __ATOMIC_RELAXED) > gs_server_limits(c->srv)->held_max) {
    __atomic_sub_fetch(held, n, __ATOMIC_RELAXED);
    return false;
  }
  k->held += n;
  return true;
}

static void unhold(struct gs_stream *k)
{
  if (k->held)
    __atomic_sub_fetch(&k->c->srv->held, k->held, __ATOMIC_RELAXED);
  k->held = 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *user)
{
  (void)flags;
  struct gs_conn *c = user;
  struct gs_stream *k = stream_of(s, id);
  /* an upload refused (unauthenticated, not gRPC) keeps none of its body */
  bool upload = k && k->known && k->admitted && k->grpc_type && k->method == GRPC_SERVE_CAP_UPLOAD;
  if (!k || k->closed || k->answered || k->too_big || k->compressed || k->crowded ||
      (k->ready && !upload)) {
    nghttp2_session_consume(s, id, len); /* dropped */
    return 0;
  }
  if (!upload && !hold(c, k, len)) {
    k->crowded = true;
  } else {
    cap_buf_append(&k->in, (const char *)data, len);
    scan_messages(c, k);
  }
  if (!upload && (k->too_big || k->compressed || k->crowded)) {
    cap_buf_free(&k->in);
    k->scan = k->in_off = 0;
    unhold(k);
    make_ready(c, k);
  }
  if (upload && k->scan - k->in_off > UPLOAD_QUEUE_MAX)
    k->deferred += len;
  else
    nghttp2_session_consume(s, id, len);
  if (upload)
    stream_wake(k);
  return 0;
}

static void stream_free(struct gs_stream *k)
{
  unhold(k);
  free(k->path);
  free(k->bearer);
  free(k->user);
  free(k->status_message);
  cap_buf_free(&k->in);
  cap_buf_free(&k->out);
  pthread_cond_destroy(&k->cv);
  cap_cancel_destroy(&k->cancel);
  free(k);
}

static void unlink_stream(struct gs_conn *c, struct gs_stream *k)
{
  if (k->prev)
    k->prev->next = k->next;
  else
    c->streams = k->next;
  if (k->next)
    k->next->prev = k->prev;
  k->prev = k->next = NULL;
}

static void unlink_ready(struct gs_conn *c, struct gs_stream *k)
{
  struct gs_stream **p = &c->ready;
  while (*p && *p != k)
    p = &(*p)->ready_next;
  if (!*p)
    return;
  *p = k->ready_next;
  if (c->ready_tail == &k->ready_next)
    c->ready_tail = p;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t code, void *user)
{
  (void)code;
  struct gs_conn *c = user;
  struct gs_stream *k = stream_of(s, id);
  if (!k)
    return 0;
  nghttp2_session_set_stream_user_data(s, id, NULL);
  if (k->deferred) /* the window of a stream gone is the connection's to give back */
    nghttp2_session_consume_connection(s, k->deferred);
  k->deferred = 0;
  if (k->dispatched) {
    stream_gone(k); /* its thread frees it */
    return 0;
  }
  k->closed = true;
  unlink_ready(c, k);
  unlink_stream(c, k);
  stream_free(k);
  return 0;
}

/* The answer ended while the client's side is still open (a refusal
 * before its body): RST_STREAM(NO_ERROR) tells it to stop sending
 * (RFC 9113 8.1), after the trailers. */
static int on_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
  (void)user;
  if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) ||
      !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
    return 0;
  struct gs_stream *k = stream_of(s, f->hd.stream_id);
  if (k && !k->remote_end)
    nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_NO_ERROR);
  return 0;
}

int gs_stream_take(struct gs_stream *k, struct cap_buf *msg, bool *packed)
{
  msg->len = 0;
  *packed = false;
  if (k->scan == k->in_off) {
    if (k->in_off) { /* what was taken goes; a partial message moves to the front */
      memmove(k->in.data, k->in.data + k->in_off, k->in.len - k->in_off);
      k->in.len -= k->in_off;
      k->scan -= k->in_off;
      k->in_off = 0;
    }
    if (!k->remote_end)
      return -1;
    return k->in.len ? -2 : 0; /* a message cut short by the end */
  }
  uint32_t len = grpc_wire_prefix_len((const uint8_t *)k->in.data + k->in_off);
  *packed = k->in.data[k->in_off] == 1;
  cap_buf_append(msg, k->in.data + k->in_off + 5, len);
  k->in_off += 5 + (size_t)len;
  if (k->deferred && k->scan - k->in_off <= UPLOAD_QUEUE_MAX) {
    nghttp2_session_consume(k->c->h2, k->id, k->deferred);
    k->deferred = 0;
  }
  return 1;
}

void gs_stream_done(struct gs_stream *k)
{
  struct gs_conn *c = k->c;
  if (!k->closed && !c->dead && k->out_end) {
    /* the answer is on its way (a socket slower than the handler, a
     * download's last chunks): the stream is the connection's again,
     * freed when it closes, or reset by the sweep past stream_idle_ms
     * (a client that never opens its window) */
    k->answered = true;
    k->answered_us = now_us();
    k->dispatched = false;
    cap_buf_free(&k->in); /* the request's body is done with */
    k->in_off = k->scan = 0;
    unhold(k);
    if (k->deferred) {
      nghttp2_session_consume(c->h2, k->id, k->deferred);
      k->deferred = 0;
    }
    /* a reader that saw the call dispatched polls without a beat: woken,
     * it sweeps again (rare: an answer not all gone) */
    gs_conn_wake(c);
    return;
  }
  if (!k->closed && !c->dead) /* the answer never went: the stream ends here */
    nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, k->id, NGHTTP2_CANCEL);
  if (!k->closed)
    nghttp2_session_set_stream_user_data(c->h2, k->id, NULL);
  if (k->deferred && !c->dead)
    nghttp2_session_consume_connection(c->h2, k->deferred);
  unlink_stream(c, k);
  stream_free(k);
}

/* ---- the connection ---- */

const char *gs_stream_path(const struct gs_stream *k) { return k->path ? k->path : ""; }

struct gs_conn *gs_conn_new(struct grpc_serve *srv, int fd, SSL *ssl, const char *peer)
{
  struct gs_conn *c = cap_xcalloc(1, sizeof *c);
  c->srv = srv;
  c->fd = fd;
  c->ssl = ssl;
  c->handshaken = !ssl;
  c->opened_us = now_us();
  c->ready_tail = &c->ready;
  snprintf(c->peer, sizeof c->peer, "%s", peer);
  if (pipe2(c->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
    free(c);
    return NULL;
  }
  pthread_mutex_init(&c->mu, NULL);
  nghttp2_session_callbacks *cb = NULL;
  nghttp2_option *o = NULL;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
  nghttp2_option_new(&o);
  nghttp2_option_set_no_auto_window_update(o, 1);
  int r = nghttp2_session_server_new2(&c->h2, cb, c, o);
  nghttp2_option_del(o);
  nghttp2_session_callbacks_del(cb);
  nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, MAX_STREAMS},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, HEADER_LIST_MAX},
  };
  if (r != 0 || nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, 3) != 0 ||
      nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW) != 0) {
    if (c->h2)
      nghttp2_session_del(c->h2);
    close(c->wake[0]);
    close(c->wake[1]);
    pthread_mutex_destroy(&c->mu);
    free(c);
    return NULL;
  }
  return c;
}

void gs_conn_free(struct gs_conn *c)
{
  while (c->streams) {
    struct gs_stream *k = c->streams;
    unlink_stream(c, k);
    stream_free(k);
  }
  nghttp2_session_del(c->h2);
  if (c->ssl)
    SSL_free(c->ssl);
  close(c->fd);
  close(c->wake[0]);
  close(c->wake[1]);
  cap_buf_free(&c->out);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

static void handshake(struct gs_conn *c)
{
  int r = SSL_do_handshake(c->ssl);
  if (r == 1) {
    const unsigned char *proto = NULL;
    unsigned len = 0;
    SSL_get0_alpn_selected(c->ssl, &proto, &len);
    c->handshaken = true;
    c->want_out = false;
    if (len && !(len == 2 && memcmp(proto, "h2", 2) == 0))
      gs_conn_kill(c, "the client's TLS did not offer HTTP/2 (ALPN h2)");
    return;
  }
  c->want_out = false;
  if (tls_result(c, r) == -1)
    return;
  gs_conn_kill(c, "the TLS handshake failed");
}

static void read_all(struct gs_conn *c)
{
  uint8_t buf[READ_CHUNK];
  for (int i = 0; i < READS_PER_PUMP && !c->dead; i++) {
    ssize_t r = sock_read(c, buf, sizeof buf);
    if (r == -1) {
      c->more = false;
      return;
    }
    if (r <= 0) {
      gs_conn_kill(c, r == 0 ? "the client closed the connection" : "the connection was lost");
      return;
    }
    ssize_t used = nghttp2_session_mem_recv(c->h2, buf, (size_t)r);
    if (used < 0) {
      gs_conn_kill(c, nghttp2_strerror((int)used));
      return;
    }
    if (c->refused > REFUSED_MAX && !c->ending) { /* a token guessed, or none: no more tries here */
      c->ending = true;
      nghttp2_session_terminate_session(c->h2, NGHTTP2_ENHANCE_YOUR_CALM);
    }
    if ((size_t)r < sizeof buf && (!c->ssl || !SSL_has_pending(c->ssl))) {
      c->more = false; /* the socket had no more: its next bytes wake the poll */
      return;
    }
  }
  c->more = true;
}

bool gs_conn_pump(struct gs_conn *c, int ms)
{
  pthread_mutex_lock(&c->mu);
  short ev = POLLIN | (c->want_out ? POLLOUT : 0);
  bool dead = c->dead;
  if (c->more)
    ms = 0;
  pthread_mutex_unlock(&c->mu);
  struct pollfd p[2] = {{.fd = c->fd, .events = ev}, {.fd = c->wake[0], .events = POLLIN}};
  uint64_t asked = now_us();
  int n = dead ? 0 : poll(p, 2, ms);
  c->waited_us = now_us() - asked;
  pthread_mutex_lock(&c->mu);
  if (n > 0 && (p[1].revents & POLLIN)) {
    char drain[64];
    while (read(c->wake[0], drain, sizeof drain) > 0)
      ;
  }
  if (c->dead)
    return false;
  if (n > 0 && p[0].revents) {
    if (!c->handshaken)
      handshake(c);
    if (c->handshaken)
      read_all(c);
  }
  gs_conn_flush(c);
  if (!c->dead && !nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2) &&
      c->out_off == c->out.len)
    gs_conn_kill(c, "the session ended");
  return !c->dead;
}

int gs_conn_poll_ms(const struct gs_conn *c)
{
  if (!c->ingoing || c->stuck_us)
    return 100;
  for (const struct gs_stream *k = c->streams; k; k = k->next)
    if ((!k->dispatched && !k->answered) || (k->answered && !k->reset)) /* a sweep may reset it */
      return 100;
  return -1;
}

void gs_conn_sweep(struct gs_conn *c, uint64_t now)
{
  uint64_t idle = (uint64_t)gs_server_limits(c->srv)->stream_idle_ms * 1000;
  if (!c->ingoing && now - c->opened_us > idle) {
    gs_conn_kill(c, "no call came in time");
    return;
  }
  /* A client that reads nothing (or next to nothing) would hold the
   * connection, its reader and its answers (a stream reset cannot go
   * either) for good. */
  if (c->stuck_us && now - c->stuck_us > idle) {
    gs_conn_kill(c, "the client took none of capsule's bytes in time");
    return;
  }
  bool reset = false;
  for (struct gs_stream *k = c->streams; k; k = k->next) {
    bool late = !k->dispatched && !k->ready && now - k->started_us > idle;
    bool stalled = k->answered && now - k->answered_us > idle; /* the client does not take it */
    if ((late || stalled) && !k->closed && !k->reset) {
      k->reset = reset = true;
      nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, k->id, NGHTTP2_CANCEL);
    }
  }
  if (reset) /* now: the reader may wait without a beat once none is left to reset */
    gs_conn_flush(c);
}

void gs_conn_goaway(struct gs_conn *c)
{
  if (!c->dead)
    nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->h2),
                          NGHTTP2_NO_ERROR, NULL, 0);
}

void gs_conn_cancel_all(struct gs_conn *c)
{
  for (struct gs_stream *k = c->streams; k; k = k->next) {
    if (!k->closed && !c->dead)
      nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, k->id, NGHTTP2_CANCEL);
    stream_wake(k);
  }
}
