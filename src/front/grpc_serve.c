/* The gRPC server, built as the shared module capsule-grpc-serve.so (see
 * grpc_serve_module.h): HTTP/2 over nghttp2 (grpc_serve_conn.c), TLS over
 * OpenSSL, the messages grpc_serve_msg.c's.
 *
 * Threads: an acceptor, and a pool that runs tasks: a connection to read
 * (one thread at a time reads a connection), a call to answer. A call
 * that came alone on its connection (none of its calls in progress, and
 * the reader had waited for it) is answered by the thread that read it,
 * with no hand-off: waking another thread on the other CPU cost a warm
 * call 0.05-0.07 ms on a 2-vCPU machine. That thread hands the reading
 * to another (gs_stream.lead, core/wait_hook.h) as soon as the call is
 * about to wait long: a call process, a stream, an instance slow to
 * answer, a socket that does not take the answer; until then the
 * connection's next frames wait in its socket. Calls that come together
 * each go to a thread of the pool. A pool thread idle for
 * WORKER_IDLE_MS ends.
 *
 * A call is refused (RESOURCE_EXHAUSTED) past max_calls, UNAUTHENTICATED
 * before its body is kept when the options' authenticate says no;
 * a request larger than max_message, RESOURCE_EXHAUSTED, and so is one
 * whose body would take the bytes the server holds of requests not yet
 * answered past max_calls of max_message (server-wide). Its first
 * message, and a stream's next, must come within stream_idle_ms. */
#include "front/grpc_serve_module.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "front/grpc_serve_h2.h"
#include "front/grpc_serve_msg.h"

#define DEFAULT_MAX_CALLS 64
#define DEFAULT_MAX_MESSAGE (4u << 20)
#define WORKER_IDLE_MS 10000
#define QUEUED_US 50        /* a reader that waited less than this was reading calls back to back */
#define MAX_CONNS 1024      /* connections at once; more are closed as they come */
#define ACCEPT_PAUSE_MS 100 /* the listeners rest this long when descriptors run out */
#define CONN_PER_ADDRESS 64 /* of them, from one remote address */

const struct gs_limits *gs_server_limits(const struct grpc_serve *srv) { return &srv->lim; }

struct timespec gs_in_ms(int ms)
{
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_sec += ms / 1000;
  t.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec++;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}

/* ---- the pool ---- */

static void *pool_thread(void *arg);

static int start_thread(struct grpc_serve *s)
{
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int e = pthread_create(&t, &attr, pool_thread, s);
  pthread_attr_destroy(&attr);
  return e;
}

/* Queues a task for a waiting thread, or a new one. A thread starts
 * outside the lock (a thread's start allocates: in the ASan build it may
 * wait for a fork, core/fork_gate.h). */
void gs_enqueue(struct grpc_serve *s, struct gs_task *t)
{
  pthread_mutex_lock(&s->lock);
  t->next = NULL;
  *s->tail = t;
  s->tail = &t->next;
  s->queued++;
  bool spawn = s->waiting < s->queued;
  if (spawn)
    s->threads++;
  else
    pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
  if (spawn && start_thread(s) != 0) { /* the threads there take it in turn */
    pthread_mutex_lock(&s->lock);
    s->threads--;
    pthread_mutex_unlock(&s->lock);
  }
}

static void *pool_thread(void *arg)
{
  struct grpc_serve *s = arg;
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE); /* OpenSSL writes with write(2): a gone peer is an error here */
  pthread_sigmask(SIG_BLOCK, &pipe, NULL);
  pthread_mutex_lock(&s->lock);
  for (;;) {
    int r = 0;
    struct timespec until = gs_in_ms(WORKER_IDLE_MS);
    while (!s->head && !s->closing && r != ETIMEDOUT) {
      s->waiting++;
      r = pthread_cond_timedwait(&s->work, &s->lock, &until);
      s->waiting--;
    }
    if (!s->head)
      break;
    struct gs_task *t = s->head;
    s->head = t->next;
    if (!s->head)
      s->tail = &s->head;
    s->queued--;
    pthread_mutex_unlock(&s->lock);
    t->run(t);
    pthread_mutex_lock(&s->lock);
  }
  unsigned left = --s->threads;
  bool stopping = s->stopping;
  pthread_cond_broadcast(&s->idle);
  pthread_mutex_unlock(&s->lock);
  if (!stopping && s->opt.workers_shrank)
    s->opt.workers_shrank(s->opt.arg, left);
  return NULL;
}

/* A connection's last reference went (under its mu, released): freed. */
static void conn_release(struct gs_conn *c)
{
  struct grpc_serve *s = c->srv;
  pthread_mutex_lock(&s->lock);
  if (c->prev)
    c->prev->next = c->next;
  else
    s->list = c->next;
  if (c->next)
    c->next->prev = c->prev;
  s->conns--;
  pthread_cond_broadcast(&s->idle);
  pthread_mutex_unlock(&s->lock);
  gs_conn_free(c);
}

/* Drops a reference taken under c->mu (held): frees the connection at
 * the last. */
void gs_conn_unref_locked(struct gs_conn *c)
{
  bool last = --c->refs == 0;
  pthread_mutex_unlock(&c->mu);
  if (last)
    conn_release(c);
}

/* ---- reading a connection ---- */

static void read_conn(struct gs_task *t);

/* The reading handed over by a call answered on its reader's thread */
static void hand_reading(void *arg)
{
  struct gs_conn *c = arg;
  c->read_task.run = read_conn;
  gs_enqueue(c->srv, &c->read_task);
}

/* Reads the connection until it ends, or its reading is handed over
 * with a call answered here. */
static void read_conn(struct gs_task *t)
{
  struct gs_conn *c = (struct gs_conn *)((char *)t - offsetof(struct gs_conn, read_task));
  for (;;) {
    pthread_mutex_lock(&c->mu);
    int ms = gs_conn_poll_ms(c);
    pthread_mutex_unlock(&c->mu);
    bool alive = gs_conn_pump(c, ms); /* returns under mu */
    if (alive)
      gs_conn_sweep(c, cap_now_us(CLOCK_MONOTONIC));
    struct gs_stream *ready = c->ready;
    c->ready = NULL;
    c->ready_tail = &c->ready;
    unsigned n = 0;
    for (struct gs_stream *k = ready; k; k = k->ready_next, n++) {
      k->dispatched = true;
      c->refs++;
      c->calls++;
    }
    /* alone: none of its calls in progress, and the reader had waited for it */
    bool alone = n == 1 && c->calls == 1 && c->waited_us >= QUEUED_US;
    if (!ready && !alive) {
      gs_conn_unref_locked(c);
      return;
    }
    pthread_mutex_unlock(&c->mu);
    if (alone) {
      ready->lead = (struct cap_wait_hook){.fn = hand_reading, .arg = c};
      if (gs_answer(ready))
        return; /* another thread reads it now */
    } else {
      for (struct gs_stream *k = ready, *next; k; k = next) {
        next = k->ready_next;
        k->task.run = gs_answer_task;
        gs_enqueue(c->srv, &k->task);
      }
    }
    if (!alive) {
      pthread_mutex_lock(&c->mu);
      gs_conn_unref_locked(c);
      return;
    }
  }
}

/* ---- listening ---- */

/* The client's name as gRPC gives it (out), its address alone (host, ""
 * on a unix socket): whether it is this host's (a unix socket, loopback). */
static bool peer_name(int fd, const char *unix_path, char *out, size_t n, char host[64])
{
  struct sockaddr_storage a;
  socklen_t len = sizeof a;
  *host = '\0';
  if (unix_path || getpeername(fd, (struct sockaddr *)&a, &len) != 0) {
    snprintf(out, n, "unix:%s", unix_path ? unix_path : "?");
    return true;
  }
  if (a.ss_family == AF_INET6) {
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&a;
    inet_ntop(AF_INET6, &v6->sin6_addr, host, 64);
    snprintf(out, n, "ipv6:[%s]:%u", host, ntohs(v6->sin6_port));
    return IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr) ||
           (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr) && v6->sin6_addr.s6_addr[12] == 127);
  }
  const struct sockaddr_in *v4 = (const struct sockaddr_in *)&a;
  inet_ntop(AF_INET, &v4->sin_addr, host, 64);
  snprintf(out, n, "ipv4:%s:%u", host, ntohs(v4->sin_port));
  return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
}

/* Room for one more connection from host (under the server's lock): a
 * remote address has at most CONN_PER_ADDRESS of the MAX_CONNS, so a
 * peer, token or not, cannot take them all (as serve's HTTP door). */
static bool room_for(const struct grpc_serve *s, const char *host, bool local)
{
  if (s->stopping || s->conns >= MAX_CONNS)
    return false;
  unsigned same = 0;
  for (const struct gs_conn *c = s->list; c && !local; c = c->next)
    same += strcmp(c->host, host) == 0;
  return same < CONN_PER_ADDRESS;
}

/* false when the process is out of descriptors or memory: the pending
 * connection stays in the backlog, and the listener stays readable */
static bool accept_one(struct grpc_serve *s, int lfd)
{
  int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0)
    return errno != EMFILE && errno != ENFILE && errno != ENOBUFS && errno != ENOMEM;
  int one = 1;
  if (!s->unix_path)
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char peer[96], host[64];
  bool local = peer_name(fd, s->unix_path, peer, sizeof peer, host);
  SSL *ssl = NULL;
  if (s->tls && (!(ssl = SSL_new(s->tls)) || SSL_set_fd(ssl, fd) != 1)) {
    SSL_free(ssl);
    close(fd);
    return true;
  }
  if (ssl)
    SSL_set_accept_state(ssl);
  struct gs_conn *c = gs_conn_new(s, fd, ssl, peer);
  if (!c) {
    SSL_free(ssl);
    close(fd);
    return true;
  }
  snprintf(c->host, sizeof c->host, "%s", host);
  pthread_mutex_lock(&s->lock);
  bool room = room_for(s, host, local);
  if (room) {
    c->refs = 1; /* its reader's */
    c->next = s->list;
    if (s->list)
      s->list->prev = c;
    s->list = c;
    s->conns++;
  }
  pthread_mutex_unlock(&s->lock);
  if (!room) {
    gs_conn_free(c);
    return true;
  }
  c->read_task.run = read_conn;
  gs_enqueue(s, &c->read_task);
  return true;
}

static void *acceptor(void *arg)
{
  struct grpc_serve *s = arg;
  struct pollfd p[GS_MAX_LISTEN + 1];
  for (size_t i = 0; i < s->n_lfd; i++)
    p[i] = (struct pollfd){.fd = s->lfd[i], .events = POLLIN};
  p[s->n_lfd] = (struct pollfd){.fd = s->stop[0], .events = POLLIN};
  int pause_ms = 0; /* out of descriptors: the listeners rest, or poll would spin */
  for (;;) {
    int n = pause_ms ? poll(p + s->n_lfd, 1, pause_ms) : poll(p, s->n_lfd + 1, -1);
    if (n < 0 && errno != EINTR)
      break;
    if (n < 0 || (pause_ms && n == 0)) {
      pause_ms = 0;
      continue;
    }
    if (p[s->n_lfd].revents)
      break;
    for (size_t i = 0; i < s->n_lfd; i++)
      if ((p[i].revents & POLLIN) && !accept_one(s, s->lfd[i]))
        pause_ms = ACCEPT_PAUSE_MS;
  }
  return NULL;
}

static int serve_start(const struct grpc_serve_options *opt, struct grpc_serve **ret, int *port,
                       struct cap_error *err)
{
  *ret = NULL;
  *port = 0;
  SSL_CTX *tls = NULL;
  if (gs_tls_new(opt, &tls, err) < 0)
    return -(err->code ? err->code : EINVAL);
  struct grpc_serve *s = cap_xcalloc(1, sizeof *s);
  s->opt = *opt;
  s->tls = tls;
  if (!s->opt.max_calls)
    s->opt.max_calls = DEFAULT_MAX_CALLS;
  if (!s->opt.max_message)
    s->opt.max_message = DEFAULT_MAX_MESSAGE;
  if (s->opt.stream_idle_ms <= 0)
    s->opt.stream_idle_ms = GRPC_SERVE_STREAM_IDLE_MS;
  size_t held_max; /* max_calls requests of max_message (SIZE_MAX past its range) */
  if (__builtin_mul_overflow((size_t)s->opt.max_calls, s->opt.max_message + 5, &held_max))
    held_max = SIZE_MAX;
  s->lim = (struct gs_limits){.max_message = s->opt.max_message,
                              .held_max = held_max,
                              .stream_idle_ms = s->opt.stream_idle_ms,
                              .authenticate = s->opt.authenticate,
                              .arg = s->opt.arg};
  s->tail = &s->head;
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->idle, NULL);
  pthread_cond_init(&s->work, NULL);
  int e = 0;
  if (gs_listen(s, err, port) < 0) {
    e = -(err->code ? err->code : EADDRNOTAVAIL);
  } else if (pipe2(s->stop, O_CLOEXEC) != 0) {
    e = cap_error_errno(err, errno, "cannot make the gRPC server's stop pipe");
  } else if ((e = pthread_create(&s->acceptor, NULL, acceptor, s)) != 0) {
    close(s->stop[0]);
    close(s->stop[1]);
    e = cap_error_errno(err, e, "cannot start the gRPC server's thread");
  }
  if (e < 0) {
    gs_close_listeners(s);
    SSL_CTX_free(s->tls);
    pthread_cond_destroy(&s->idle);
    pthread_cond_destroy(&s->work);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return e;
  }
  *ret = s;
  return 0;
}

/* Waits until *n is 0, at most ms (< 0: no bound). */
static void wait_none(struct grpc_serve *s, const unsigned *n, int ms)
{
  struct timespec until = gs_in_ms(ms < 0 ? 0 : ms);
  pthread_mutex_lock(&s->lock);
  while (*n) {
    if (ms < 0)
      pthread_cond_wait(&s->idle, &s->lock);
    else if (pthread_cond_timedwait(&s->idle, &s->lock, &until) == ETIMEDOUT)
      break;
  }
  pthread_mutex_unlock(&s->lock);
}

/* Each connection: fn under its mu, then what it queued written, and its
 * reader woken. */
static void each_conn(struct grpc_serve *s, void (*fn)(struct gs_conn *c))
{
  pthread_mutex_lock(&s->lock);
  for (struct gs_conn *c = s->list; c; c = c->next) {
    pthread_mutex_lock(&c->mu);
    fn(c);
    gs_conn_flush(c);
    pthread_mutex_unlock(&c->mu);
    gs_conn_wake(c);
  }
  pthread_mutex_unlock(&s->lock);
}

static void kill_conn(struct gs_conn *c) { gs_conn_kill(c, "the server stopped"); }

static void serve_stop(struct grpc_serve *s, int drain_ms)
{
  if (!s)
    return;
  pthread_mutex_lock(&s->lock);
  s->stopping = true;
  pthread_mutex_unlock(&s->lock);
  char b = 1;
  if (write(s->stop[1], &b, 1) != 1)
    perror("capsule: the gRPC server's stop");
  pthread_join(s->acceptor, NULL);
  gs_close_listeners(s);
  each_conn(s, gs_conn_goaway); /* no new calls; those in progress go on */
  wait_none(s, &s->calls, drain_ms);
  each_conn(s, gs_conn_cancel_all);
  wait_none(s, &s->calls, -1); /* each handler's own deadline bounds this */
  each_conn(s, kill_conn);
  pthread_mutex_lock(&s->lock);
  s->closing = true;
  pthread_cond_broadcast(&s->work);
  pthread_mutex_unlock(&s->lock);
  wait_none(s, &s->conns, -1);
  wait_none(s, &s->threads, -1);
  close(s->stop[0]);
  close(s->stop[1]);
  SSL_CTX_free(s->tls);
  pthread_cond_destroy(&s->idle);
  pthread_cond_destroy(&s->work);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

__attribute__((visibility("default"))) const struct grpc_serve_module grpc_serve_module_v1 = {
    .size = sizeof(struct grpc_serve_module),
    .start = serve_start,
    .stop = serve_stop,
};
