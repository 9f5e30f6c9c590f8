/* gRPC's client side over nghttp2 (selu_h2.h). A connection's session is
 * touched only under its mutex. Whoever waits (for a message, the status,
 * room to send) and finds no one reading the socket becomes the reader:
 * it polls the socket without the mutex, hands what came to nghttp2 under
 * it (whose callbacks fill the calls), writes what nghttp2 queued, and
 * wakes the others. A call's cancel and a write that would block wake the
 * reader's poll through a pipe. Frames go out gathered: nghttp2's output
 * is collected and written with one send() where it fits (a unary call's
 * HEADERS and DATA in one segment). */
#include "runtime/selu_h2.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/grpc_wire.h"

#define WRITE_GATHER (64 * 1024)    /* output collected before it is written */
#define STREAM_WINDOW (1u << 20)    /* each answer's flow-control window */
#define CONN_WINDOW (16u << 20)     /* the connection's */
#define MESSAGE_TEXT_MAX 1024       /* of grpc-message kept */
#define HEADER_LIST_MAX (64 * 1024) /* headers a server may send a call (on_header counts) */

struct h2_conn {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* a reader's round ended */
  nghttp2_session *s;
  int fd;
  int wake[2]; /* a byte interrupts the reader's poll */
  bool synced; /* mu and cv are set up */
  bool reading;
  bool failed; /* the connection is lost: why says how */
  bool goaway; /* the server said it goes away */
  char why[160];
  char h2_error[120]; /* nghttp2's last word on what the server broke */
  struct cap_buf out; /* frames not written yet, from off */
  size_t out_off;
  size_t max_message;
};

struct h2_call {
  struct h2_conn *c;
  int32_t id; /* <= 0: never started (start_error says why) */
  char start_error[120];
  struct cap_cancel *cancel;
  struct cap_wait_hook *wait; /* run once a wait lasts CAP_WAIT_SOON_US */
  atomic_bool cancelled;
  int timeout_ms;
  uint64_t deadline;  /* CLOCK_MONOTONIC ms */
  uint64_t wait_from; /* CLOCK_MONOTONIC µs: its first wait began (for wait) */
  struct cap_buf out; /* framed messages to send, from out_off */
  size_t out_off;
  bool out_last;     /* the client's side ends after out */
  bool out_deferred; /* nghttp2 waits for resume_data */
  struct cap_buf in; /* DATA received, from in_off */
  size_t in_off;
  size_t scan;    /* in: where the next message's prefix starts (not yet counted) */
  size_t total;   /* message bytes announced so far, each prefix's 5 with them */
  size_t headers; /* header bytes received (RFC 9113's size: name, value, 32) */
  bool remote_end, closed;
  uint32_t reset; /* the stream's close code */
  int http_status;
  int grpc_status; /* -1: none */
  char *grpc_message;
  bool too_big, bad;
  char bad_why[120];
};

static void wake(struct h2_conn *c)
{
  char b = 1;
  ssize_t n = write(c->wake[1], &b, 1);
  (void)n; /* a full pipe wakes as well */
}

static void fail(struct h2_conn *c, const char *why)
{
  if (!c->failed)
    snprintf(c->why, sizeof c->why, "%s", why);
  c->failed = true;
}

/* Collects nghttp2's output and writes what the socket takes. */
static void flush(struct h2_conn *c)
{
  while (!c->failed) {
    while (c->out.len - c->out_off < WRITE_GATHER) {
      const uint8_t *d = NULL;
      ssize_t n = nghttp2_session_mem_send(c->s, &d);
      if (n < 0) {
        fail(c, nghttp2_strerror((int)n));
        return;
      }
      if (n == 0)
        break;
      cap_buf_append(&c->out, (const char *)d, (size_t)n);
    }
    if (c->out_off == c->out.len)
      break;
    ssize_t w =
        send(c->fd, c->out.data + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (c->reading)
        wake(c); /* its poll asks for room to write */
      break;
    }
    if (w < 0) {
      char why[120];
      snprintf(why, sizeof why, "writing to it failed: %s", strerror(errno));
      fail(c, why);
      return;
    }
    c->out_off += (size_t)w;
    if (c->out_off == c->out.len)
      c->out.len = c->out_off = 0;
  }
}

static bool want_write(struct h2_conn *c)
{
  return c->out_off < c->out.len || nghttp2_session_want_write(c->s);
}

/* ---- nghttp2's callbacks (under the connection's mutex) ---- */

static struct h2_call *call_of(nghttp2_session *s, int32_t id)
{
  return nghttp2_session_get_stream_user_data(s, id);
}

static void set_bad(struct h2_call *k, const char *why)
{
  if (!k->bad)
    snprintf(k->bad_why, sizeof k->bad_why, "%s", why);
  k->bad = true;
}

static ssize_t on_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                       nghttp2_data_source *src, void *user)
{
  (void)src, (void)user;
  struct h2_call *k = call_of(s, id);
  if (!k) { /* the call was freed: its reset follows */
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    return 0;
  }
  size_t left = k->out.len - k->out_off;
  if (!left && !k->out_last) {
    k->out_deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  size_t n = left < length ? left : length;
  if (n)
    memcpy(buf, k->out.data + k->out_off, n);
  k->out_off += n;
  if (k->out_off == k->out.len) {
    k->out.len = k->out_off = 0;
    if (k->out_last)
      *flags |= NGHTTP2_DATA_FLAG_EOF;
  }
  return (ssize_t)n;
}

static int hex(uint8_t ch)
{
  return ch >= '0' && ch <= '9'   ? ch - '0'
         : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
         : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                  : -1;
}

/* grpc-message is percent-encoded (gRPC's PROTOCOL-HTTP2); kept short. */
static char *percent_decoded(const uint8_t *v, size_t n)
{
  struct cap_buf b = {0};
  for (size_t i = 0; i < n && b.len < MESSAGE_TEXT_MAX; i++) {
    int hi, lo;
    if (v[i] == '%' && i + 2 < n && (hi = hex(v[i + 1])) >= 0 && (lo = hex(v[i + 2])) >= 0) {
      cap_buf_putc(&b, (char)(hi << 4 | lo));
      i += 2;
    } else {
      cap_buf_putc(&b, (char)v[i]);
    }
  }
  for (size_t i = 0; i < b.len; i++) /* a NUL decoded would cut it; controls are not text */
    if ((unsigned char)b.data[i] < 0x20)
      b.data[i] = ' ';
  return cap_buf_steal(&b);
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
  (void)flags, (void)user;
  struct h2_call *k = call_of(s, f->hd.stream_id);
  if (!k)
    return 0;
  k->headers += nlen + vlen + 32; /* HPACK lets a few bytes stand for a long header */
  if (k->headers > HEADER_LIST_MAX) {
    set_bad(k, "the server sent more headers than capsule takes (64 KiB)");
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
  }
  if (grpc_wire_named(name, nlen, ":status")) {
    k->http_status = grpc_wire_digits(value, vlen, 999);
  } else if (grpc_wire_named(name, nlen, "grpc-status")) {
    int st = grpc_wire_digits(value, vlen, INT_MAX);
    k->grpc_status = st < 0 ? H2_GRPC_UNKNOWN : st;
  } else if (grpc_wire_named(name, nlen, "grpc-message")) {
    free(k->grpc_message);
    k->grpc_message = percent_decoded(value, vlen);
  } else if (grpc_wire_named(name, nlen, "grpc-encoding") &&
             !(vlen == 8 && !memcmp(value, "identity", 8))) {
    set_bad(k, "the server compressed its answer, which capsule did not offer");
  }
  return 0;
}

/* Counts each message as its prefix arrives: a stream's messages together
 * stay within max_message, and a prefix announcing more stops the call
 * before its bytes come. Each message counts its 5-byte prefix too (the
 * budget is max_message + 5, so one message of max_message fits): what
 * the call holds stays bounded however many empty messages come (nghttp2
 * hands the server window back as soon as the bytes are here). */
static void scan_messages(struct h2_conn *c, struct h2_call *k)
{
  while (!k->too_big && !k->bad && k->in.len >= k->scan + 5) {
    const uint8_t *p = (const uint8_t *)k->in.data + k->scan;
    uint32_t len = grpc_wire_prefix_len(p);
    if (p[0] != 0) {
      set_bad(k, p[0] == 1 ? "the server sent a compressed message, which capsule did not offer"
                           : "the server sent a message with a malformed prefix");
      break;
    }
    size_t budget = c->max_message > SIZE_MAX - 5 ? SIZE_MAX : c->max_message + 5;
    if (len > budget - k->total || 5 > budget - k->total - len) {
      k->too_big = true;
      break;
    }
    k->total += 5 + (size_t)len;
    k->scan += 5 + (size_t)len;
  }
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *user)
{
  (void)flags;
  struct h2_conn *c = user;
  struct h2_call *k = call_of(s, id);
  if (!k || k->too_big || k->bad)
    return 0;
  cap_buf_append(&k->in, (const char *)data, len);
  scan_messages(c, k);
  if (k->too_big || k->bad)
    nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  return 0;
}

static int on_frame(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
  struct h2_conn *c = user;
  if (f->hd.type == NGHTTP2_GOAWAY) {
    c->goaway = true;
    return 0;
  }
  if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
      (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
    struct h2_call *k = call_of(s, f->hd.stream_id);
    if (k)
      k->remote_end = true;
  }
  return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t code, void *user)
{
  (void)user;
  struct h2_call *k = call_of(s, id);
  if (k) {
    k->closed = true;
    k->reset = code;
  }
  return 0;
}

/* nghttp2 saw the server break HTTP/2 (its GOAWAY follows for a connection
 * error): kept to say why when the session ends (read_round). */
static int on_error(nghttp2_session *s, int code, const char *msg, size_t len, void *user)
{
  (void)s, (void)code;
  struct h2_conn *c = user;
  snprintf(c->h2_error, sizeof c->h2_error, "%.*s", (int)(len < 100 ? len : 100), msg);
  return 0;
}

/* ---- the connection ---- */

int h2_open(int fd, size_t max_message, struct h2_conn **ret, struct cap_error *err)
{
  *ret = NULL;
  int one = 1; /* a TCP socket (inside the sandbox's namespace); a unix one has no Nagle */
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct h2_conn *c = cap_xcalloc(1, sizeof *c);
  c->fd = fd;
  c->max_message = max_message;
  c->wake[0] = c->wake[1] = -1;
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
      pipe2(c->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
    int e = errno;
    h2_close(c);
    return cap_error_errno(err, e, "cannot set up the connection to the capability's server");
  }
  pthread_mutex_init(&c->mu, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&c->cv, &attr);
  pthread_condattr_destroy(&attr);
  c->synced = true;
  nghttp2_session_callbacks *cb = NULL;
  nghttp2_option *opt = NULL;
  int r = nghttp2_session_callbacks_new(&cb);
  if (r == 0)
    r = nghttp2_option_new(&opt);
  if (r == 0) {
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    nghttp2_session_callbacks_set_error_callback2(cb, on_error);
    nghttp2_option_set_max_send_header_block_length(opt, HEADER_LIST_MAX);
    r = nghttp2_session_client_new2(&c->s, cb, c, opt);
  }
  nghttp2_session_callbacks_del(cb);
  nghttp2_option_del(opt);
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                 {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
                                 {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, HEADER_LIST_MAX}};
  if (r == 0)
    r = nghttp2_submit_settings(c->s, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof *iv);
  if (r == 0)
    r = nghttp2_session_set_local_window_size(c->s, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW);
  if (r != 0) {
    h2_close(c);
    return cap_error_set(err, EIO, "cannot start HTTP/2 on the capability's socket: %s",
                         nghttp2_strerror(r));
  }
  flush(c); /* the preface and settings; a failure shows at the first call */
  *ret = c;
  return 0;
}

void h2_close(struct h2_conn *c)
{
  if (!c)
    return;
  if (c->s)
    nghttp2_session_del(c->s);
  if (c->synced) {
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
  }
  close(c->fd);
  if (c->wake[0] >= 0)
    close(c->wake[0]);
  if (c->wake[1] >= 0)
    close(c->wake[1]);
  cap_buf_free(&c->out);
  free(c);
}

bool h2_usable(struct h2_conn *c)
{
  pthread_mutex_lock(&c->mu);
  bool ok = !c->failed && !c->goaway;
  pthread_mutex_unlock(&c->mu);
  struct pollfd p = {.fd = c->fd, .events = POLLRDHUP};
  return ok && poll(&p, 1, 0) >= 0 && !(p.revents & (POLLHUP | POLLERR | POLLRDHUP));
}

/* ---- a call ---- */

static void stop(void *arg) /* the cancel's: under its lock, never the connection's */
{
  struct h2_call *k = arg;
  atomic_store(&k->cancelled, true);
  wake(k->c);
}

struct h2_call *h2_call_start(struct h2_conn *c, const char *path, int timeout_ms,
                              struct cap_cancel *cancel)
{
  struct h2_call *k = cap_xcalloc(1, sizeof *k);
  k->c = c;
  k->cancel = cancel;
  k->timeout_ms = timeout_ms;
  k->deadline = cap_now_ms(CLOCK_MONOTONIC) + (uint64_t)(timeout_ms > 0 ? timeout_ms : 1);
  k->grpc_status = -1;
  char timeout[24]; /* gRPC's TimeoutValue: at most 8 digits */
  int ms = timeout_ms > 0 ? timeout_ms : 1;
  snprintf(timeout, sizeof timeout, ms <= 99999999 ? "%dm" : "%dS",
           ms <= 99999999 ? ms : ms / 1000);
#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE}
  nghttp2_nv nv[] = {NV(":method", "POST"),
                     NV(":scheme", "http"),
                     NV(":path", path),
                     NV(":authority", "capsule-selu"),
                     NV("content-type", "application/grpc"),
                     NV("te", "trailers"),
                     NV("grpc-timeout", timeout),
                     NV("user-agent", "capsule")};
#undef NV
  nghttp2_data_provider data = {.source.ptr = k, .read_callback = on_read};
  pthread_mutex_lock(&c->mu);
  if (c->failed || c->goaway) {
    snprintf(k->start_error, sizeof k->start_error, "the connection is %s",
             c->failed ? "lost" : "going away");
  } else {
    k->id = nghttp2_submit_request(c->s, NULL, nv, sizeof nv / sizeof *nv, &data, k);
    if (k->id < 0)
      snprintf(k->start_error, sizeof k->start_error, "%s", nghttp2_strerror(k->id));
  }
  pthread_mutex_unlock(&c->mu);
  if (!cap_cancel_arm(cancel, stop, k)) /* fired before it started */
    atomic_store(&k->cancelled, true);
  return k;
}

void h2_call_on_wait(struct h2_call *k, struct cap_wait_hook *wait) { k->wait = wait; }

/* The reason the call cannot go on, as an error; 0 while it can. */
static int call_error(struct h2_call *k, struct cap_error *err)
{
  struct h2_conn *c = k->c;
  if (k->id <= 0)
    return cap_error_set(err, ECONNRESET, "the capability's server went away during the call (%s)",
                         k->start_error);
  if (atomic_load(&k->cancelled))
    return cap_error_set(err, ECANCELED, "the call was cancelled by the client");
  if (k->too_big)
    return cap_error_set(err, EFBIG, "the answer is larger than the output cap (%zu bytes)",
                         c->max_message);
  if (k->bad)
    return cap_error_set(err, EPROTO, "%s", k->bad_why);
  if (c->failed && !k->closed)
    return cap_error_set(err, ECONNRESET, "the capability's server went away during the call (%s)",
                         c->why);
  if (cap_now_ms(CLOCK_MONOTONIC) >= k->deadline)
    return cap_error_set(err, ETIMEDOUT, "no answer within %d ms (the deadline)", k->timeout_ms);
  return 0;
}

/* One round of the reader's (at most wait_us), the mutex held on entry
 * and exit. */
static void read_round(struct h2_conn *c, uint64_t wait_us)
{
  c->reading = true;
  short events = POLLIN | (want_write(c) ? POLLOUT : 0);
  pthread_mutex_unlock(&c->mu);
  struct pollfd p[2] = {{.fd = c->fd, .events = events}, {.fd = c->wake[0], .events = POLLIN}};
  uint8_t buf[16384];
  ssize_t got = -1;
  int e = EAGAIN;
  struct timespec wait = {.tv_sec = (time_t)(wait_us / 1000000),
                          .tv_nsec = (long)(wait_us % 1000000) * 1000};
  if (ppoll(p, 2, &wait, NULL) > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
    got = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
    e = got < 0 ? errno : 0;
  }
  char drain[64];
  while ((p[1].revents & POLLIN) && read(c->wake[0], drain, sizeof drain) > 0)
    ;
  pthread_mutex_lock(&c->mu);
  c->reading = false;
  if (got > 0) {
    ssize_t used = nghttp2_session_mem_recv(c->s, buf, (size_t)got);
    if (used < 0) {
      char why[120];
      snprintf(why, sizeof why, "it broke HTTP/2: %s", nghttp2_strerror((int)used));
      fail(c, why);
    }
  } else if (got == 0) {
    fail(c, "it closed the connection");
  } else if (e != EAGAIN && e != EWOULDBLOCK && e != EINTR) {
    char why[120];
    snprintf(why, sizeof why, "reading from it failed: %s", strerror(e));
    fail(c, why);
  }
  flush(c);
  /* A connection error nghttp2 found (the server broke HTTP/2) is not an
   * error of mem_recv's: nghttp2 queues its GOAWAY, then wants neither to
   * read nor to write, and no call on the session would ever end. */
  if (!c->failed && !nghttp2_session_want_read(c->s) && !nghttp2_session_want_write(c->s)) {
    char why[160];
    if (*c->h2_error || !c->goaway)
      snprintf(why, sizeof why, "it broke HTTP/2: %s",
               *c->h2_error ? c->h2_error : "session ended");
    else
      snprintf(why, sizeof why, "it went away (GOAWAY)");
    fail(c, why);
  }
  pthread_cond_broadcast(&c->cv);
}

/* Waits, the mutex held, until ready(k) or the call cannot go on. */
static int pump(struct h2_call *k, bool (*ready)(const struct h2_call *), struct cap_error *err)
{
  struct h2_conn *c = k->c;
  for (;;) {
    if (ready(k))
      return 0;
    int r = call_error(k, err);
    if (r < 0)
      return r;
    uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
    uint64_t wait_us = (k->deadline > now ? k->deadline - now : 0) * 1000;
    bool soon = cap_wait_hook_armed(k->wait) && wait_us > CAP_WAIT_SOON_US;
    if (soon) { /* a short wait first: the hook runs only when the answer is slow */
      if (!k->wait_from)
        k->wait_from = cap_now_us(CLOCK_MONOTONIC);
      uint64_t waited = cap_now_us(CLOCK_MONOTONIC) - k->wait_from;
      if (waited >= CAP_WAIT_SOON_US) {
        pthread_mutex_unlock(&c->mu); /* the hook may take other locks */
        cap_wait_hook_run(k->wait);
        pthread_mutex_lock(&c->mu);
        continue;
      }
      wait_us = CAP_WAIT_SOON_US - waited;
    }
    if (!c->reading) {
      read_round(c, wait_us);
    } else {
      struct timespec until;
      clock_gettime(CLOCK_MONOTONIC, &until);
      until.tv_sec += (time_t)(wait_us / 1000000);
      until.tv_nsec += (long)(wait_us % 1000000) * 1000L;
      if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
      }
      pthread_cond_timedwait(&c->cv, &c->mu, &until);
    }
  }
}

static bool sent(const struct h2_call *k) { return k->out_off == k->out.len || k->closed; }

int h2_call_send(struct h2_call *k, const uint8_t *msg, size_t len, bool last,
                 struct cap_error *err)
{
  struct h2_conn *c = k->c;
  if (len > UINT32_MAX)
    return cap_error_set(err, EFBIG, "a message of %zu bytes is too large for gRPC", len);
  pthread_mutex_lock(&c->mu);
  int r = call_error(k, err);
  if (r == 0 && k->out_last)
    r = cap_error_set(err, EINVAL, "the call's side of the stream has ended");
  if (r == 0) {
    uint8_t prefix[5] = {0, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
                         (uint8_t)len};
    cap_buf_append(&k->out, (const char *)prefix, 5);
    if (len)
      cap_buf_append(&k->out, (const char *)msg, len);
    k->out_last = last;
    if (k->out_deferred) {
      k->out_deferred = false;
      nghttp2_session_resume_data(c->s, k->id);
    }
    flush(c);
    r = pump(k, sent, err);
  }
  pthread_mutex_unlock(&c->mu);
  return r;
}

static bool has_message(const struct h2_call *k)
{
  if (k->in.len - k->in_off < 5)
    return false;
  const uint8_t *p = (const uint8_t *)k->in.data + k->in_off;
  size_t len = grpc_wire_prefix_len(p);
  return k->in.len - k->in_off - 5 >= len;
}

static bool message_or_end(const struct h2_call *k)
{
  return has_message(k) || k->remote_end || k->closed;
}

int h2_call_recv(struct h2_call *k, struct cap_buf *msg, struct cap_error *err)
{
  struct h2_conn *c = k->c;
  msg->len = 0;
  pthread_mutex_lock(&c->mu);
  int r = k->id > 0 ? 0 : call_error(k, err);
  if (r == 0)
    r = pump(k, message_or_end, err);
  if (r == 0 && (k->too_big || k->bad)) /* what came before the limit is not an answer */
    r = call_error(k, err);
  if (r == 0 && has_message(k)) {
    const uint8_t *p = (const uint8_t *)k->in.data + k->in_off;
    size_t len = grpc_wire_prefix_len(p);
    cap_buf_append(msg, (const char *)p + 5, len);
    if (!msg->data)
      cap_buf_reserve(msg, 0);
    k->in_off += 5 + len;
    if (k->in_off == k->in.len) { /* the usual case: all taken */
      k->scan -= k->in_off;
      k->in.len = k->in_off = 0;
    }
    r = 1;
  } else if (r == 0 && k->in.len > k->in_off) {
    r = cap_error_set(err, EPROTO, "the server ended the stream inside a message");
  }
  pthread_mutex_unlock(&c->mu);
  return r;
}

static bool ended(const struct h2_call *k) { return k->remote_end || k->closed; }

/* gRPC's mapping of an HTTP status that came without a gRPC one. */
static int from_http(int status)
{
  switch (status) {
  case 400: return H2_GRPC_INTERNAL;
  case 401: return H2_GRPC_UNAUTHENTICATED;
  case 403: return H2_GRPC_PERMISSION_DENIED;
  case 404: return H2_GRPC_UNIMPLEMENTED;
  case 429:
  case 502:
  case 503:
  case 504: return H2_GRPC_UNAVAILABLE;
  default: return H2_GRPC_UNKNOWN;
  }
}

int h2_call_status(struct h2_call *k, int *code, const char **message, struct cap_error *err)
{
  struct h2_conn *c = k->c;
  pthread_mutex_lock(&c->mu);
  int r = k->id > 0 ? pump(k, ended, err) : call_error(k, err);
  if (r == 0 && (k->too_big || k->bad))
    r = call_error(k, err);
  if (r == 0) {
    char text[80] = "";
    if (k->grpc_status >= 0) {
      *code = k->grpc_status;
    } else if (k->http_status > 0 && k->http_status != 200) {
      *code = from_http(k->http_status);
      snprintf(text, sizeof text, "HTTP status %d", k->http_status);
    } else if (k->closed && k->reset == NGHTTP2_REFUSED_STREAM) {
      *code = H2_GRPC_UNAVAILABLE;
      snprintf(text, sizeof text, "the server refused the stream");
    } else if (k->closed && k->reset == NGHTTP2_CANCEL) {
      *code = H2_GRPC_CANCELLED;
      snprintf(text, sizeof text, "the server cancelled the stream");
    } else if (k->closed && k->reset != NGHTTP2_NO_ERROR) {
      *code = H2_GRPC_INTERNAL;
      snprintf(text, sizeof text, "the server reset the stream (HTTP/2 error %u)", k->reset);
    } else {
      *code = H2_GRPC_UNKNOWN;
      snprintf(text, sizeof text, "the server ended the call without a gRPC status");
    }
    if (!k->grpc_message && *text)
      k->grpc_message = cap_xstrdup(text);
    *message = k->grpc_message ? k->grpc_message : "";
  }
  pthread_mutex_unlock(&c->mu);
  return r;
}

void h2_call_free(struct h2_call *k)
{
  if (!k)
    return;
  cap_cancel_disarm(k->cancel); /* the stop has ended: k is the caller's again */
  struct h2_conn *c = k->c;
  pthread_mutex_lock(&c->mu);
  if (k->id > 0) {
    if (!k->closed && !c->failed)
      nghttp2_submit_rst_stream(c->s, NGHTTP2_FLAG_NONE, k->id, NGHTTP2_CANCEL);
    nghttp2_session_set_stream_user_data(c->s, k->id, NULL);
    flush(c);
  }
  pthread_mutex_unlock(&c->mu);
  cap_buf_free(&k->out);
  cap_buf_free(&k->in);
  free(k->grpc_message);
  free(k);
}
