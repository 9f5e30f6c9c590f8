#include "net/proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "net/dns_client.h"
#include "net/hostaddr.h"
#include "net/proxy_internal.h"
#include "net/tls.h"

/* ---- threads ---- */

void proxy_slot_set_upstream(struct worker *w, int fd)
{
  pthread_mutex_lock(&w->px->lock);
  w->px->slots[w->slot].upstream = fd;
  pthread_mutex_unlock(&w->px->lock);
}

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
  int up = proxy_connect_bounded(&ai, &w->spare_up);
  if (up < 0) {
    proxy_log_event(w->px, &ev, false, "nothing accepts on this port of the host's loopback");
    return;
  }
  proxy_slot_set_upstream(w, up);
  proxy_relay(w, fd, up, &ev);
  proxy_log_event(w->px, &ev, true, "forward closed");
}

/* Workers live until proxy_stop (a thread per connection would pay for
 * creating and unmapping a stack, with TLB shootdowns, on every one).
 * A few workers (up to MAX_ACCEPTORS) wait at once for connections on the
 * listeners that carry most of them (the proxy's, the transparent path's,
 * the resolver's TCP), each in an epoll set of its own where they are
 * registered EPOLLEXCLUSIVE: the kernel wakes one waiter per connection,
 * which serves the first it accepts itself (no hand-off) and queues any
 * others it finds pending. The last acceptor to leave calls on an idle
 * worker (or makes one). Other idle workers wait for queued work, and the
 * poll thread accepts ports.localhost connections and answers the
 * resolver's datagrams. */

#define MAX_ACCEPTORS 4

static bool spawn_worker(struct proxy *px);
static enum slot_kind listener_kind(const struct proxy *px, size_t i, size_t *arg);

#define STOP_INDEX UINT32_MAX /* the epoll data of accept_stop */
#define ACCEPT_BATCH 64       /* connections one wake-up accepts at most */

/* Whether acceptors (not the poll thread) watch listen_fds[i]: all but the
 * ports.localhost forwards and the resolver's UDP socket. */
static bool accepted_by_workers(const struct proxy *px, size_t i)
{
  return i == 0 || i >= 2 + px->spec->network.localhost.len;
}

/* A free slot for fd (locked), or SIZE_MAX after answering 503. */
static size_t claim_slot(struct proxy *px, int fd, enum slot_kind kind, size_t arg)
{
  size_t slot = 0;
  while (slot < MAX_CONNS && px->slots[slot].used)
    slot++;
  if (slot == MAX_CONNS) {
    struct stream s = {.fd = fd};
    if (kind == SLOT_PROXY)
      proxy_respond(&s, "503 Service Unavailable", "too many connections through the proxy");
    close(fd);
    return SIZE_MAX;
  }
  px->slots[slot] =
      (struct slot){.used = true, .client = fd, .upstream = -1, .kind = kind, .arg = arg};
  px->active++;
  return slot;
}

/* A connection accepted on listen_fds[i], queued for an idle worker (or a
 * new one). */
static void queue_connection(struct proxy *px, int fd, size_t i)
{
  size_t arg;
  enum slot_kind kind = listener_kind(px, i, &arg);
  pthread_mutex_lock(&px->lock);
  size_t slot = claim_slot(px, fd, kind, arg);
  if (slot != SIZE_MAX) {
    px->queue[(px->q_head + px->q_len) % MAX_CONNS] = slot;
    px->q_len++;
    if (px->idle_workers < px->q_len)
      spawn_worker(px);
    pthread_cond_signal(&px->work);
  }
  pthread_mutex_unlock(&px->lock);
}

/* An acceptor's wait: the first connection it accepts (*index: on which
 * listener), any others pending then queued; -1 once the proxy stops. */
static int acceptor_wait(struct worker *w, size_t *index)
{
  struct proxy *px = w->px;
  for (;;) {
    struct epoll_event ev[8];
    int n = epoll_wait(w->epfd, ev, 8, -1);
    if (__atomic_load_n(&px->stopping, __ATOMIC_ACQUIRE))
      return -1;
    if (n < 0 && errno != EINTR)
      usleep(50000); /* not expected: back off, do not spin */
    int mine = -1, taken = 0;
    for (int k = 0; k < n && taken < ACCEPT_BATCH; k++) {
      uint32_t i = ev[k].data.u32;
      while (i != STOP_INDEX && taken < ACCEPT_BATCH) {
        int fd = accept4(px->listen_fds[i], NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
            usleep(50000); /* out of descriptors or memory: back off, do not spin */
          break;           /* EAGAIN: another acceptor took it; the rest pass */
        }
        taken++;
        if (mine < 0) {
          mine = fd;
          *index = i;
        } else {
          queue_connection(px, fd, i);
        }
      }
    }
    if (mine >= 0)
      return mine;
  }
}

/* Serves slot with the lock dropped, then frees it (locked again). */
static void serve_slot(struct worker *w, size_t slot)
{
  struct proxy *px = w->px;
  w->slot = slot;
  w->bulk[0] = w->bulk[1] = false;
  int fd = px->slots[slot].client;
  enum slot_kind kind = px->slots[slot].kind;
  size_t arg = px->slots[slot].arg;
  pthread_mutex_unlock(&px->lock);
  switch (kind) {
  case SLOT_PROXY: proxy_serve_one(w, fd); break;
  case SLOT_FORWARD: serve_forward(w, fd, (uint16_t)arg); break;
  case SLOT_DNS: proxy_dns_tcp(w, fd); break;
  case SLOT_TRANSPARENT: proxy_serve_transparent(w, fd, arg); break;
  case SLOT_CAPTURE: proxy_serve_captured(w, fd); break;
  }
  for (int i = 0; i < 2; i++) /* descriptors are the scarce thing: not kept idle */
    if (w->pipes[i][0] >= 0) {
      close(w->pipes[i][0]);
      close(w->pipes[i][1]);
      w->pipes[i][0] = w->pipes[i][1] = -1;
    }
  /* the next connection's upstream socket, made now (one per thread) */
  if (w->spare_up < 0)
    w->spare_up = proxy_spare_socket();
  pthread_mutex_lock(&px->lock);
  close(px->slots[slot].client);
  if (px->slots[slot].upstream >= 0)
    close(px->slots[slot].upstream);
  px->slots[slot].used = false;
  px->active--;
}

/* w's CPU time added to the retired count (locked): the thread is about
 * to end, and its clock with it. */
static void worker_retire(struct worker *w)
{
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
    w->px->retired_cpu_ns += (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  w->ended = true;
}

int64_t proxy_cpu_ms(struct proxy *px)
{
  if (!px)
    return 0;
  pthread_mutex_lock(&px->lock);
  int64_t ns = px->retired_cpu_ns;
  /* a worker not marked ended is running: it marks itself under this lock */
  for (const struct worker *w = px->workers; w; w = w->next) {
    struct timespec ts;
    if (!w->ended && w->cpu_clock != (clockid_t)-1 && clock_gettime(w->cpu_clock, &ts) == 0)
      ns += (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  }
  /* a supervisor's thread serving: what it spent since it began (it adds
   * the whole to retired_cpu_ns and leaves this list under this lock) */
  for (const struct worker *w = px->lent; w; w = w->next) {
    struct timespec ts;
    if (w->cpu_clock != (clockid_t)-1 && clock_gettime(w->cpu_clock, &ts) == 0)
      ns += (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - w->cpu_start;
  }
  pthread_mutex_unlock(&px->lock);
  return ns / 1000000;
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
    if (!px->supervised && px->acceptors < MAX_ACCEPTORS) {
      px->acceptors++;
      pthread_mutex_unlock(&px->lock);
      size_t index = 0;
      int fd = acceptor_wait(w, &index);
      pthread_mutex_lock(&px->lock);
      px->acceptors--;
      if (fd < 0)
        continue; /* stopping */
      /* the listener must not go unwatched: an idle worker, or a new one */
      if (!px->stopping && px->acceptors == 0 && (px->idle_workers == 0 ? !spawn_worker(px) : true))
        pthread_cond_signal(&px->work);
      size_t slot_arg;
      enum slot_kind kind = listener_kind(px, index, &slot_arg);
      size_t slot = claim_slot(px, fd, kind, slot_arg);
      if (slot != SIZE_MAX)
        serve_slot(w, slot);
      continue;
    }
    px->idle_workers++;
    pthread_cond_wait(&px->work, &px->lock);
    px->idle_workers--;
  }
  px->n_workers--;
  worker_retire(w);
  pthread_cond_broadcast(&px->idle);
  pthread_mutex_unlock(&px->lock);
  for (int i = 0; i < 2; i++)
    if (w->pipes[i][0] >= 0) {
      close(w->pipes[i][0]);
      close(w->pipes[i][1]);
    }
  if (w->spare_up >= 0)
    close(w->spare_up);
  close(w->epfd);
  return NULL; /* proxy_stop joins the thread and frees w */
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
  w->spare_up = -1;
  /* its own epoll set: EPOLLEXCLUSIVE wakes one set per connection */
  w->epfd = epoll_create1(EPOLL_CLOEXEC);
  bool watched = w->epfd >= 0;
  for (size_t i = 0; watched && i < px->n_listen; i++) {
    struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.u32 = (uint32_t)i};
    watched = px->supervised || !accepted_by_workers(px, i) ||
              epoll_ctl(w->epfd, EPOLL_CTL_ADD, px->listen_fds[i], &ev) == 0;
  }
  struct epoll_event stop = {.events = EPOLLIN, .data.u32 = STOP_INDEX};
  if (!watched || epoll_ctl(w->epfd, EPOLL_CTL_ADD, px->accept_stop[0], &stop) < 0) {
    if (w->epfd >= 0)
      close(w->epfd);
    free(w);
    return false;
  }
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  bool ok = pthread_create(&t, &attr, worker_main, w) == 0;
  pthread_attr_destroy(&attr);
  if (!ok) {
    close(w->epfd);
    free(w);
    return false;
  }
  /* joinable, so that proxy_stop returns only once every worker is gone,
   * its thread-local state (OpenSSL's) freed too; listed for that and for
   * its CPU clock (without one it is counted only when it ends) */
  w->thread = t;
  if (pthread_getcpuclockid(t, &w->cpu_clock) != 0)
    w->cpu_clock = (clockid_t)-1;
  w->next = px->workers;
  px->workers = w;
  px->n_workers++;
  return true;
}

/* What listen_fds[i] serves, in proxy_start's layout. */
static enum slot_kind listener_kind(const struct proxy *px, size_t i, size_t *arg)
{
  size_t forwards = px->spec->network.localhost.len;
  if (i == 0) {
    *arg = 0;
    return SLOT_PROXY;
  }
  if (i <= forwards) {
    *arg = px->spec->network.localhost.v[i - 1];
    return SLOT_FORWARD;
  }
  if (i == forwards + 2) {
    *arg = 0;
    return SLOT_DNS;
  }
  *arg = i - forwards - 3; /* the plan's listener, or past them the capture */
  return *arg == px->plan.n_listeners ? SLOT_CAPTURE : SLOT_TRANSPARENT;
}

/* With the connect supervisor serving what it connects: whatever waits on
 * the listeners no acceptor watches, queued for a worker (listeners the
 * acceptors would watch are non-blocking). */
static void sweep_listeners(struct proxy *px)
{
  for (size_t i = 0; i < px->n_listen; i++) {
    if (!accepted_by_workers(px, i))
      continue;
    for (int k = 0; k < ACCEPT_BATCH; k++) {
      int fd = accept4(px->listen_fds[i], NULL, NULL, SOCK_CLOEXEC);
      if (fd < 0)
        break;
      queue_connection(px, fd, i);
    }
  }
}

/* The poll thread: every listener but the proxy's; connections queued for
 * a worker, the resolver's datagrams answered here (each is one small
 * parse and one sendto). */
static void *accept_loop(void *arg)
{
  struct proxy *px = arg;
  struct pollfd p[PROXY_MAX_LISTENERS];
  size_t n = 0; /* listen_fds[1..n]: the ones no acceptor watches */
  while (1 + n < px->n_listen && !accepted_by_workers(px, 1 + n))
    n++;
  size_t udp = px->n_listen > 1 + px->spec->network.localhost.len
                   ? px->spec->network.localhost.len /* index into p of the resolver's UDP */
                   : SIZE_MAX;
  for (size_t i = 0; i < n; i++)
    p[i] = (struct pollfd){.fd = px->listen_fds[1 + i], .events = POLLIN};
  p[n] = (struct pollfd){.fd = px->stop_pipe[0], .events = POLLIN};
  for (;;) {
    if (px->supervised)
      sweep_listeners(px);
    if (poll(p, n + 1, px->supervised ? PROXY_SWEEP_MS : -1) < 0 && errno != EINTR)
      return NULL;
    if (p[n].revents)
      return NULL;
    for (size_t i = 0; i < n; i++) {
      if (!(p[i].revents & POLLIN))
        continue;
      if (i == udp) {
        proxy_dns_udp(px, p[i].fd);
        continue;
      }
      int fd = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN)
          usleep(50000); /* out of descriptors: back off, do not spin */
        continue;
      }
      queue_connection(px, fd, 1 + i);
    }
  }
}

/* ---- connections the connect supervisor made (proxy.h) ---- */

void proxy_expect_supervisor(struct proxy *px) { px->supervised = true; }

bool proxy_hold(struct proxy *px)
{
  pthread_mutex_lock(&px->lock);
  bool ok = __atomic_load_n(&px->started, __ATOMIC_ACQUIRE) && !px->stopping;
  if (ok)
    px->held++;
  pthread_mutex_unlock(&px->lock);
  return ok;
}

/* The listeners a connection to dest may be waiting on (at most 2, into
 * out): the proxy's, the resolver's TCP, a synthetic address's port or the
 * capture listener (both, when the redirect may or may not be loaded). */
static size_t listeners_at(struct proxy *px, const struct sockaddr_in *dest, size_t out[2])
{
  size_t forwards = px->spec->network.localhost.len, n = 0;
  uint32_t a = ntohl(dest->sin_addr.s_addr);
  uint16_t port = ntohs(dest->sin_port);
  bool planned = px->n_listen > 1 + forwards;
  size_t capture = forwards + 3 + px->plan.n_listeners;
  if (a == INADDR_LOOPBACK && port == PROXY_PORT) {
    out[n++] = 0;
  } else if (planned && a == (INADDR_LOOPBACK | 53) && port == EGRESS_DNS_PORT) {
    out[n++] = forwards + 2; /* 127.0.0.53 */
  } else if (planned && a == INADDR_LOOPBACK && port == EGRESS_CAPTURE_PORT && px->plan.capture) {
    out[n++] = capture;
  } else if (planned && (a >> 16) == (127u << 8 | 77u)) {
    const struct egress_name *name =
        egress_plan_by_addr(&px->plan, (const uint8_t *)&dest->sin_addr);
    if ((name || egress_pool_by_addr(&px->pool, (const uint8_t *)&dest->sin_addr)) &&
        px->plan.capture)
      out[n++] = capture; /* the redirect sends every port there */
    for (size_t k = 0; name && k < px->plan.n_listeners; k++)
      if (&px->plan.names[px->plan.listeners[k].name] == name && px->plan.listeners[k].port == port)
        out[n++] = forwards + 3 + k;
  }
  return n;
}

/* Whether socket fd is a stream socket. */
static bool is_stream(int fd)
{
  int type = 0;
  socklen_t len = sizeof type;
  return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
}

/* The connection just made to dest on socket made, accepted: its fd
 * (*index: on which listener), or -1. The kernel has queued it by the
 * time the connect returned, but for a softirq that runs late: a short
 * wait then, for a stream socket only (a datagram's connect queues
 * nothing). */
static int accept_made(struct proxy *px, const struct sockaddr_in *dest, int made, size_t *index)
{
  size_t at[2];
  size_t n = listeners_at(px, dest, at);
  for (int round = 0; n && round < 2; round++) {
    for (size_t k = 0; k < n; k++) {
      int fd = accept4(px->listen_fds[at[k]], NULL, NULL, SOCK_CLOEXEC);
      if (fd >= 0) {
        *index = at[k];
        return fd;
      }
    }
    if (round == 0 && !is_stream(made))
      break;
    struct pollfd p[2];
    for (size_t k = 0; k < n; k++)
      p[k] = (struct pollfd){.fd = px->listen_fds[at[k]], .events = POLLIN};
    if (round == 0 && poll(p, n, 5) <= 0)
      break; /* taken by another thread, or the sweep's */
  }
  return -1;
}

/* A worker's buffers for a thread of the supervisor's (locked). */
static struct worker *borrow_worker(struct proxy *px)
{
  struct worker *w = px->spare;
  if (w) {
    px->spare = w->next;
    return w;
  }
  w = cap_xcalloc(1, sizeof *w);
  w->px = px;
  w->epfd = -1;
  w->cpu_clock = (clockid_t)-1;
  w->pipes[0][0] = w->pipes[0][1] = w->pipes[1][0] = w->pipes[1][1] = -1;
  w->spare_up = -1;
  return w;
}

static int64_t thread_cpu_ns(void)
{
  struct timespec ts;
  return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0
             ? (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec
             : 0;
}

void proxy_connected(struct proxy *px, const struct sockaddr *dest, socklen_t len, int *made)
{
  size_t index = 0;
  bool tls = false;
  struct sockaddr_in v4 = {.sin_family = AF_INET};
  const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)dest;
  if (dest->sa_family == AF_INET && len >= sizeof v4) {
    memcpy(&v4, dest, sizeof v4);
  } else if (dest->sa_family == AF_INET6 && len >= sizeof *v6 &&
             IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) { /* a dual-stack socket (Java's) */
    memcpy(&v4.sin_addr, &v6->sin6_addr.s6_addr[12], 4);
    v4.sin_port = v6->sin6_port;
  }
  int fd = v4.sin_port ? accept_made(px, &v4, *made, &index) : -1;
  close(*made); /* the tool's close must end its connection: no copy kept */
  *made = -1;
  pthread_mutex_lock(&px->lock);
  if (fd >= 0 && px->stopping) {
    close(fd);
  } else if (fd >= 0 && px->serving_held >= PROXY_MAX_HELD) {
    pthread_mutex_unlock(&px->lock);
    queue_connection(px, fd, index);
    pthread_mutex_lock(&px->lock);
  } else if (fd >= 0) {
    size_t arg;
    enum slot_kind kind = listener_kind(px, index, &arg);
    size_t slot = claim_slot(px, fd, kind, arg);
    if (slot != SIZE_MAX) {
      struct worker *w = borrow_worker(px);
      px->serving_held++;
      if (pthread_getcpuclockid(pthread_self(), &w->cpu_clock) != 0)
        w->cpu_clock = (clockid_t)-1; /* counted when it is done only */
      w->cpu_start = thread_cpu_ns();
      w->next = px->lent;
      px->lent = w;
      w->fresh = true;
      serve_slot(w, slot); /* unlocks while serving */
      w->fresh = false;
      px->retired_cpu_ns += thread_cpu_ns() - w->cpu_start;
      struct worker **at = &px->lent;
      while (*at != w)
        at = &(*at)->next;
      *at = w->next;
      px->serving_held--;
      tls = w->tls;
      w->tls = false;
      w->next = px->spare;
      px->spare = w;
    }
  }
  /* the thread is the supervisor's, detached, and may end as capsule
   * does: OpenSSL's state of this thread is freed now, not at its exit
   * (a leak to LeakSanitizer when capsule exits first) */
  if (tls) {
    pthread_mutex_unlock(&px->lock);
    OPENSSL_thread_stop();
    pthread_mutex_lock(&px->lock);
  }
  px->held--;
  pthread_cond_broadcast(&px->idle);
  pthread_mutex_unlock(&px->lock);
}

static void proxy_free(struct proxy *px)
{
  while (px->spare) {
    struct worker *w = px->spare;
    px->spare = w->next;
    if (w->spare_up >= 0)
      close(w->spare_up);
    free(w);
  }
  proxy_wipe_secrets(px);
  free(px->secrets);
  for (size_t i = 0; i < px->n_tool_env; i++)
    free(px->tool_env[i]);
  free(px->tool_env);
  free(px->bundle);
  tls_ca_free(px->ca);
  host_addrs_free(px->host_addrs);
  dns_cache_free(px->dns);
  egress_plan_free(&px->plan);
  egress_pool_free(&px->pool);
  proxy_log_flush(px);
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
  px->accept_stop[0] = px->accept_stop[1] = -1;
  pthread_mutex_init(&px->log_lock, NULL);
  pthread_mutex_init(&px->lock, NULL);
  pthread_cond_init(&px->idle, NULL);
  pthread_cond_init(&px->work, NULL);
  egress_plan_build(spec, &px->plan);
  egress_pool_init(&px->pool);
  px->pool_on = px->plan.pool && px->plan.capture && opt->pool;
  px->secrets = cap_xcalloc(spec->n_routes + 1, sizeof *px->secrets);
  px->tool_env = cap_xcalloc(spec->n_routes + 1, sizeof *px->tool_env);
  for (size_t i = 0; i < spec->n_routes; i++) {
    const struct cap_credential_route *r = &spec->routes[i];
    int e = proxy_read_secret(r, opt->store, &px->secrets[i].secret, err);
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
  proxy_wipe_secrets(p);
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
  size_t forwards = 1 + px->spec->network.localhost.len;
  if (n > sizeof px->listen_fds / sizeof px->listen_fds[0] ||
      (n != forwards && n != forwards + 2 + px->plan.n_listeners + (px->plan.capture ? 1 : 0))) {
    for (size_t i = 0; i < n; i++)
      close(fds[i]);
    return cap_error_set(err, EINVAL, "proxy: %zu listeners do not match the egress plan", n);
  }
  memcpy(px->listen_fds, fds, n * sizeof *fds);
  px->n_listen = n;
  for (size_t i = 0; i < n; i++) /* accepted connections inherit them: no calls per connection */
    proxy_set_timeouts(fds[i], STREAM_TIMEOUT_S);
  /* a proxy client always speaks first: an acceptor is woken with its
   * request there, one wake-up and one empty read fewer per connection (a
   * silent one is accepted after IO_TIMEOUT_MS and then waited for as
   * before); the connect supervisor's thread accepts what it connected at
   * once instead, and waits for the request itself */
  int defer = IO_TIMEOUT_MS / 1000;
  if (!px->supervised)
    setsockopt(fds[0], IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof defer);
  /* made here, after the sandbox was forked: its event socket never
   * exists in the sandbox's pid 1 */
  if (!px->opt.allow_private)
    host_addrs_new(&px->host_addrs);
  struct dns_client_config dns;
  dns_config_read("/etc/resolv.conf", &dns);
  px->dns = dns_cache_new(&dns);
  /* acceptors accept without blocking: another may have taken it */
  for (size_t i = 0; i < n; i++)
    if (accepted_by_workers(px, i))
      fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
  if (pipe2(px->stop_pipe, O_CLOEXEC) < 0 || pipe2(px->accept_stop, O_CLOEXEC) < 0)
    return cap_error_errno(err, errno, "proxy: pipe");
  /* the proxy's threads (and the workers they start) take no signal: a
   * SIGTERM to capsule must reach the supervisor's signalfd, which passes
   * it to the tool, not end capsule in a worker */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  bool ok = pthread_create(&px->thread, NULL, accept_loop, px) == 0;
  if (ok) {
    __atomic_store_n(&px->started, true, __ATOMIC_RELEASE);
    pthread_mutex_lock(&px->lock);
    ok = spawn_worker(px); /* the first acceptor */
    pthread_mutex_unlock(&px->lock);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (!px->started)
    return cap_error_set(err, EAGAIN, "proxy: cannot start its thread");
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
    if (write(px->accept_stop[1], "x", 1) < 0) { /* wakes every acceptor */
      /* a new pipe always takes a byte */
    }
    pthread_cond_broadcast(&px->work);
    while (px->n_workers || px->held)
      pthread_cond_wait(&px->idle, &px->lock);
    pthread_mutex_unlock(&px->lock);
    while (px->workers) {
      struct worker *w = px->workers;
      px->workers = w->next;
      pthread_join(w->thread, NULL);
      free(w);
    }
  }
  for (size_t i = 0; i < px->n_listen; i++)
    close(px->listen_fds[i]);
  for (int i = 0; i < 2; i++) {
    if (px->stop_pipe[i] >= 0)
      close(px->stop_pipe[i]);
    if (px->accept_stop[i] >= 0)
      close(px->accept_stop[i]);
  }
  proxy_free(px);
}
