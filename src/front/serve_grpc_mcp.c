/* The warm Selu process (serve.h's serve_selu_open, serve_internal.h's
 * serve_selu_*), for serve and for `capsule mcp` on stdio (its host: a
 * struct serve_selu_host, what the host's copies in the spawner and the
 * process read; "serve" below is the host): the MCP
 * doors' Selu calls on a running instance made without a fork, as
 * serve --grpc makes its own (serve_grpc_warm.c: gw_call with
 * selu_warm_only, pooled state connections, a gRPC channel and the
 * keeper's connection kept per instance). gRPC does not survive a fork,
 * and serve forks its other calls' children, so the calls are made in a
 * process of their own, forked by a spawner (itself forked by serve at
 * its start, before any thread, listener or connection) then and again
 * whenever it died:
 * serve's thread for the call (mcp_run.c, a run apart's) hands it over on
 * a connection to this process (kept for the next call, one per call in
 * flight: a thread of this process each), and reads back the outcome.
 * What needs more (no instance running, policy ask, a dynamic tool not
 * known) comes back GW_OUTCOME_NOT_WARM, unaudited, and runs apart as
 * before. A cancellation (mcp_config.selu_warm's cancel_fd) shuts
 * serve's side of the call's connection for writing; the warm process's
 * watcher sees it and cancels the instance's gRPC call, which is audited
 * as cancelled by the client; the connection is not kept. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cancel.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/io.h"
#include "front/serve_core.h"
#include "front/serve_internal.h"
#include "gateway/call.h"
#include "gateway/db.h"
#include "gateway/registry.h"

#define SELU_IDLE_CONNS 16        /* connections kept between calls; more at once make more */
#define SELU_FIELD_MAX (64 << 20) /* a request's or answer's field at most */
#define SELU_RESPAWN_MS 1000      /* a warm process started at most this often */
#define SELU_SPAWN_WAIT_MS 5000   /* the spawner's answer awaited at most */

/* The request's head, then capability, tool, user and args (no NULs). */
struct warm_req {
  uint32_t len[4];
  uint64_t deadline_ms;
};
/* The answer's head, then the error's message and the result. */
struct warm_ans {
  int32_t outcome, code;
  uint32_t terminal, len[2];
};

/* serve's handle, made at its start, kept until serve ends. The
 * process is started at serve's start when the registry has a Selu
 * capability, else by the first Selu call (a capability a reload added);
 * one that died is started again by the spawner (forked at serve's
 * start: no connection or listener of serve's in it) at the next call,
 * at most one a SELU_RESPAWN_MS; meanwhile the calls run apart. */
struct serve_selu {
  pthread_mutex_t mu; /* around all below: serve's main thread and the calls' threads */
  int spawner;        /* to the spawner, or -1 */
  pid_t spawner_pid;
  uint64_t spawned_ms; /* when a process was last asked for */
  unsigned gen;        /* the process's generation: its connections' */
  pid_t pid;           /* 0: no process */
  int ctl;             /* SCM_RIGHTS: a new connection for the process */
  int reload_fd;       /* a byte: serve reloaded */
  int idle[SELU_IDLE_CONNS];
  size_t n_idle;
};

/* A field of len bytes, NUL-terminated (NULL when it cannot be read). */
static char *read_field(int fd, uint32_t len)
{
  if (len > SELU_FIELD_MAX)
    return NULL;
  char *s = cap_xmalloc((size_t)len + 1);
  if (cap_read_all(fd, s, len) < 0) {
    free(s);
    return NULL;
  }
  s[len] = '\0';
  return s;
}

/* ---- in the warm process ---- */

/* A call in flight, watched for its cancellation: serve shuts its side
 * of the connection for writing (or it closes), the connection turns
 * readable, and the watcher fires the call's token (the instance's gRPC
 * call cancelled). seq tells a registration from a later one on the same
 * descriptor number. */
struct watched {
  int fd;
  uint32_t seq;
  struct cap_cancel *cancel;
};

struct warm_proc {
  struct serve_grpc_warm *warm;
  pthread_mutex_t mu;
  pthread_cond_t done;
  unsigned conns; /* connection threads running */
  int watch_ep;   /* the calls in flight's connections (EPOLLONESHOT); -1: none watched */
  uint32_t seq;
  struct watched *watched; /* under mu */
  size_t n_watched, cap_watched;
};

struct conn_arg {
  struct warm_proc *p;
  int fd;
};

static bool answer(int fd, enum gw_outcome o, const struct cap_error *err,
                   const struct gw_result *res)
{
  const char *msg = o == GW_OUTCOME_OK ? "" : err->message ? err->message : "failed";
  const char *json = res->json ? res->json : "";
  struct warm_ans a = {.outcome = (int32_t)o,
                       .code = err->code,
                       .terminal = res->terminal_on_success,
                       .len = {(uint32_t)strlen(msg), (uint32_t)strlen(json)}};
  return cap_write_all(fd, &a, sizeof a, CAP_IO_NOSIGPIPE) == 0 &&
         cap_write_all(fd, msg, a.len[0], CAP_IO_NOSIGPIPE) == 0 &&
         cap_write_all(fd, json, a.len[1], CAP_IO_NOSIGPIPE) == 0;
}

/* The watcher: fires the token of a call whose connection turned
 * readable (nothing more comes on it but its end). */
static void *watch_thread(void *arg)
{
  struct warm_proc *p = arg;
  for (;;) {
    struct epoll_event ev[16];
    int n = epoll_wait(p->watch_ep, ev, ARRAY_SIZE(ev), -1);
    if (n < 0 && errno != EINTR)
      return NULL;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < n; i++)
      for (size_t k = 0; k < p->n_watched; k++)
        if (p->watched[k].fd == (int)(uint32_t)ev[i].data.u64 &&
            p->watched[k].seq == (uint32_t)(ev[i].data.u64 >> 32))
          cap_cancel_fire(p->watched[k].cancel);
    pthread_mutex_unlock(&p->mu);
  }
}

/* fd's call watched for its cancellation until unwatch; false when it
 * cannot be (the call then runs uncancellable). */
static bool watch(struct warm_proc *p, int fd, struct cap_cancel *cancel)
{
  pthread_mutex_lock(&p->mu);
  if (p->n_watched == p->cap_watched) {
    p->cap_watched = p->cap_watched ? 2 * p->cap_watched : 16;
    p->watched = cap_xrealloc(p->watched, p->cap_watched * sizeof *p->watched);
  }
  uint32_t seq = ++p->seq;
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT,
                           .data.u64 = ((uint64_t)seq << 32) | (uint32_t)fd};
  bool ok = p->watch_ep >= 0 && epoll_ctl(p->watch_ep, EPOLL_CTL_ADD, fd, &ev) == 0;
  if (ok)
    p->watched[p->n_watched++] = (struct watched){.fd = fd, .seq = seq, .cancel = cancel};
  pthread_mutex_unlock(&p->mu);
  return ok;
}

static void unwatch(struct warm_proc *p, int fd)
{
  pthread_mutex_lock(&p->mu);
  epoll_ctl(p->watch_ep, EPOLL_CTL_DEL, fd, NULL);
  for (size_t k = 0; k < p->n_watched; k++)
    if (p->watched[k].fd == fd) {
      p->watched[k] = p->watched[--p->n_watched];
      break;
    }
  pthread_mutex_unlock(&p->mu);
}

/* One request on fd: false when the connection is done. */
static bool serve_one(struct warm_proc *p, int fd)
{
  struct warm_req q;
  if (cap_read_all(fd, &q, sizeof q) < 0)
    return false;
  char *f[4] = {0};
  bool ok = true;
  for (size_t i = 0; i < 4 && ok; i++)
    ok = (f[i] = read_field(fd, q.len[i])) != NULL;
  if (ok) {
    struct serve_warm_call in = {.capability = f[0],
                                 .tool = f[1],
                                 .user = f[2],
                                 .args = f[3],
                                 .args_len = q.len[3],
                                 .deadline_ms = q.deadline_ms};
    struct cap_cancel cancel;
    cap_cancel_init(&cancel);
    bool watched = watch(p, fd, &cancel);
    in.cancel = watched ? &cancel : NULL;
    struct gw_result res = {0};
    struct cap_error err = {0};
    enum gw_outcome o = serve_grpc_warm_run(p->warm, &in, &res, &err);
    if (watched)
      unwatch(p, fd);
    cap_cancel_destroy(&cancel);
    ok = answer(fd, o, &err, &res);
    serve_grpc_warm_flush(p->warm); /* the lease's end, after the answer */
    free(res.json);
    cap_error_clear(&err);
  }
  for (size_t i = 0; i < 4; i++)
    free(f[i]);
  return ok;
}

static void *conn_thread(void *arg)
{
  struct conn_arg *c = arg;
  while (serve_one(c->p, c->fd))
    ;
  close(c->fd);
  pthread_mutex_lock(&c->p->mu);
  c->p->conns--;
  pthread_cond_broadcast(&c->p->done);
  pthread_mutex_unlock(&c->p->mu);
  free(c);
  return NULL;
}

/* A connection passed on ctl: a thread for it. False when ctl is done. */
static bool take_conn(struct warm_proc *p, int ctl)
{
  char byte;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  char control[CMSG_SPACE(sizeof(int))];
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
  ssize_t n = recvmsg(ctl, &msg, MSG_CMSG_CLOEXEC);
  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return true;
  if (n <= 0)
    return false;
  struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
  if (!cm || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(sizeof(int)))
    return true;
  struct conn_arg *c = cap_xmalloc(sizeof *c);
  c->p = p;
  memcpy(&c->fd, CMSG_DATA(cm), sizeof(int));
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_mutex_lock(&p->mu);
  p->conns++;
  pthread_mutex_unlock(&p->mu);
  pthread_t t;
  if (pthread_create(&t, &attr, conn_thread, c) != 0) { /* serve's side sees it closed */
    close(c->fd);
    free(c);
    pthread_mutex_lock(&p->mu);
    p->conns--;
    pthread_mutex_unlock(&p->mu);
  }
  pthread_attr_destroy(&attr);
  return true;
}

/* The calls in flight end (their deadlines bound them), up to drain_ms. */
static void drain(struct warm_proc *p, uint64_t drain_ms)
{
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += (time_t)(drain_ms / 1000);
  until.tv_nsec += (long)(drain_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&p->mu);
  while (p->conns && pthread_cond_timedwait(&p->done, &p->mu, &until) != ETIMEDOUT)
    ;
  pthread_mutex_unlock(&p->mu);
}

/* Takes connections until serve closes ctl or SIGTERM/SIGINT come (they
 * are blocked since serve's setup), then drains. */
static _Noreturn void warm_process(const struct serve_selu_host *h, int ctl, int reload_rd)
{
  prctl(PR_SET_PDEATHSIG, SIGTERM); /* the spawner's death */
  prctl(PR_SET_NAME, "capsule-selu");
  const struct serve_options *opt = h->opt;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  struct warm_proc p = {.warm = serve_grpc_warm_new(opt, reload_rd),
                        .watch_ep = epoll_create1(EPOLL_CLOEXEC)};
  pthread_mutex_init(&p.mu, NULL);
  pthread_cond_init(&p.done, NULL);
  pthread_t watcher;
  if (p.watch_ep >= 0 && pthread_create(&watcher, NULL, watch_thread, &p) != 0) {
    close(p.watch_ep); /* calls run, not cancellable */
    p.watch_ep = -1;
  }
  gw_inflight_spares(true);  /* a call's marker without a file made per call */
  gw_db_checkpoints_apart(); /* its states' pooled connections: none waits on a checkpoint */
  for (;;) {
    struct pollfd fds[2] = {{.fd = ctl, .events = POLLIN}, {.fd = sig, .events = POLLIN}};
    if (poll(fds, sig >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
      break;
    if ((fds[1].revents & POLLIN) || (fds[0].revents && !take_conn(&p, ctl)))
      break;
  }
  close(ctl);
  drain(&p, opt->drain_ms ? opt->drain_ms : SERVE_DRAIN_MS);
  gw_inflight_spares(false);
  serve_grpc_warm_close_states(p.warm);
  _exit(0);
}

/* ---- in serve ---- */

/* ---- the spawner: forks the warm processes ---- */

/* Its reply to a request ('s'): the new process's pid, with its ctl and
 * reload descriptors (SCM_RIGHTS); pid 0 when it could not fork. */
static void spawn_one(const struct serve_selu_host *h, int sock, pid_t *last)
{
  int sp[2] = {-1, -1}, reload[2] = {-1, -1};
  pid_t pid = -1;
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0 &&
      pipe2(reload, O_CLOEXEC | O_NONBLOCK) == 0)
    pid = fork();
  if (pid == 0) {
    close(sock);
    close(sp[0]);
    close(reload[1]);
    warm_process(h, sp[1], reload[0]);
  }
  int32_t got = pid > 0 ? (int32_t)pid : 0;
  int fds[2] = {sp[0], reload[1]};
  struct iovec iov = {.iov_base = &got, .iov_len = sizeof got};
  char control[CMSG_SPACE(sizeof fds)];
  memset(control, 0, sizeof control);
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (got) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(cm), fds, sizeof fds);
    *last = pid;
  }
  (void)sendmsg(sock, &msg, MSG_NOSIGNAL);
  int all[4] = {sp[0], sp[1], reload[0], reload[1]};
  for (size_t i = 0; i < ARRAY_SIZE(all); i++)
    if (all[i] >= 0)
      close(all[i]);
}

/* Forked by its host (serve, `capsule mcp`) at its start, before any
 * thread, listener or connection, and single-threaded: each warm process
 * is forked from it, so one forked after the host has listeners and
 * connections holds none of them. Ends when the host closes sock (or
 * dies), its warm process told to stop and waited for (drain_ms, then
 * killed). */
static _Noreturn void spawner_main(const struct serve_selu_host *h, int sock)
{
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  prctl(PR_SET_NAME, "capsule-spawner"); /* ps tells it from serve's other children */
  /* the host's descriptors, not ours; its state's stay open, as SQLite's
   * memory of them (a warm process opens connections of its own to the
   * same files, and SQLite shares what it knows per file in a process) */
  for (size_t i = 0; i < h->n_foreign; i++)
    if (h->foreign[i] >= 0)
      close(h->foreign[i]);
  /* read through a signalfd here (a host may have handlers for them) */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigprocmask(SIG_BLOCK, &set, NULL);
  int sig = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  pid_t last = 0;
  for (;;) {
    struct pollfd fds[2] = {{.fd = sock, .events = POLLIN}, {.fd = sig, .events = POLLIN}};
    if (poll(fds, sig >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
      break;
    char c;
    if ((fds[1].revents & POLLIN) || (fds[0].revents && recv(sock, &c, 1, 0) <= 0))
      break;
    while (waitpid(-1, NULL, WNOHANG) > 0) /* the processes that died */
      ;
    if (fds[0].revents)
      spawn_one(h, sock, &last);
  }
  if (last)
    kill(last, SIGTERM);
  uint64_t drain_ms = h->opt->drain_ms ? (uint64_t)h->opt->drain_ms : SERVE_DRAIN_MS;
  uint64_t until = cap_now_ms(CLOCK_MONOTONIC) + drain_ms + 4000;
  while (waitpid(-1, NULL, WNOHANG) >= 0) {
    if (last && cap_now_ms(CLOCK_MONOTONIC) > until) {
      kill(last, SIGKILL);
      last = 0;
    }
    nanosleep(&(struct timespec){.tv_nsec = 20 * 1000000}, NULL);
  }
  _exit(0);
}

/* ---- in serve ---- */

/* Forks the spawner into s. */
static int spawner_start(const struct serve_selu_host *h, struct serve_selu *s,
                         struct cap_error *err)
{
  int sp[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
    return cap_error_errno(err, errno, "cannot start serve's warm Selu process");
  pid_t pid = fork();
  if (pid == 0) {
    close(sp[0]);
    spawner_main(h, sp[1]);
  }
  int e = errno;
  close(sp[1]);
  if (pid < 0) {
    close(sp[0]);
    return cap_error_errno(err, e, "cannot fork serve's warm Selu process");
  }
  s->spawner = sp[0];
  s->spawner_pid = pid;
  return 0;
}

/* A new warm process from the spawner into s (no process in it), s->mu
 * held; at most one a SELU_RESPAWN_MS. */
static bool selu_spawn(struct serve_selu *s)
{
  uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
  if (s->spawner < 0 || (s->spawned_ms && now - s->spawned_ms < SELU_RESPAWN_MS))
    return false;
  s->spawned_ms = now;
  struct pollfd p = {.fd = s->spawner, .events = POLLIN};
  int32_t pid = 0;
  int fds[2] = {-1, -1};
  struct iovec iov = {.iov_base = &pid, .iov_len = sizeof pid};
  char control[CMSG_SPACE(sizeof fds)];
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
  if (send(s->spawner, "s", 1, MSG_NOSIGNAL) != 1 || poll(&p, 1, SELU_SPAWN_WAIT_MS) != 1 ||
      recvmsg(s->spawner, &msg, MSG_CMSG_CLOEXEC) != (ssize_t)sizeof pid || pid <= 0)
    return false;
  struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
  if (!cm || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(sizeof fds))
    return false;
  memcpy(fds, CMSG_DATA(cm), sizeof fds);
  s->pid = pid;
  s->ctl = fds[0];
  s->reload_fd = fds[1];
  s->gen++;
  return true;
}

/* The process of generation gen found gone (a connection to it failed):
 * its descriptors closed; the next call asks for a new one. */
static void selu_lost(struct serve_selu *s, unsigned gen)
{
  pthread_mutex_lock(&s->mu);
  if (s->pid && s->gen == gen) {
    for (size_t i = 0; i < s->n_idle; i++)
      close(s->idle[i]);
    s->n_idle = 0;
    close(s->ctl);
    close(s->reload_fd);
    s->pid = 0;
  }
  pthread_mutex_unlock(&s->mu);
}

/* serve stopping: the connections, ctl and the spawner's socket closed (the process drains and
 * ends, the spawner waits for it and ends): nothing in s. */
static void selu_drop(struct serve_selu *s)
{
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < s->n_idle; i++)
    close(s->idle[i]);
  s->n_idle = 0;
  if (s->pid) {
    close(s->ctl);
    close(s->reload_fd);
  }
  s->pid = 0;
  if (s->spawner >= 0) /* no process asked for any more; it waits for the last, then ends */
    close(s->spawner);
  s->spawner = -1;
  pthread_mutex_unlock(&s->mu);
}

static bool has_selu(const struct gw_registry *reg)
{
  for (size_t i = 0; i < reg->n; i++)
    if (reg->caps[i]->runtime.kind == CAP_RUNTIME_GRPC)
      return true;
  return false;
}

struct serve_selu *serve_selu_open(const struct serve_selu_host *h, const struct gw_registry *reg,
                                   struct cap_error *err)
{
  struct serve_selu *s = cap_xcalloc(1, sizeof *s);
  s->spawner = -1;
  pthread_mutex_init(&s->mu, NULL);
  if (spawner_start(h, s, err) < 0)
    return s; /* no process ever: the calls run apart */
  /* with no Selu capability yet, the first Selu call (one a reload
   * added) asks for the process (conn_take), which loads the registry of
   * then */
  if (has_selu(reg) && !selu_spawn(s))
    cap_error_set(err, EAGAIN, "no warm Selu process yet: Selu calls run apart until one starts");
  return s;
}

void serve_selu_start(struct serve *sv, const struct gw_registry *reg)
{
  int foreign[] = {sv->listen_fd, sv->watch.fd, sv->signal_fd, sv->wake};
  struct serve_selu_host h = {.opt = sv->opt, .foreign = foreign, .n_foreign = ARRAY_SIZE(foreign)};
  struct cap_error err = {0};
  struct serve_selu *s = serve_selu_open(&h, reg, &err);
  if (err.message)
    serve_log(sv, "error", "the warm Selu process: Selu calls run apart", "error", err.message,
              NULL, NULL);
  cap_error_clear(&err);
  __atomic_store_n(&sv->selu, s, __ATOMIC_RELEASE);
}

void serve_selu_reloaded(struct serve_selu *s)
{
  if (!s)
    return;
  pthread_mutex_lock(&s->mu);
  if (s->pid && write(s->reload_fd, "r", 1) < 0) {
    /* full: a reload is pending already */
  }
  pthread_mutex_unlock(&s->mu);
}

/* A connection to the warm process (of generation *gen): an idle one, or
 * a new one passed to it, the process started again first if it is
 * gone. */
static int conn_take(struct serve_selu *s, unsigned *gen)
{
  pthread_mutex_lock(&s->mu);
  if (!s->n_idle && !s->pid)
    selu_spawn(s);
  int fd = s->n_idle ? s->idle[--s->n_idle] : -1, ctl = s->pid ? s->ctl : -1;
  *gen = s->gen;
  pthread_mutex_unlock(&s->mu);
  int sp[2];
  if (fd >= 0 || ctl < 0)
    return fd;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
    return -1;
  char byte = 'c';
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  char control[CMSG_SPACE(sizeof(int))];
  memset(control, 0, sizeof control);
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &sp[1], sizeof(int));
  pthread_mutex_lock(&s->mu); /* ctl stays while held: a restart swaps it under mu */
  bool sent = s->pid && s->gen == *gen && sendmsg(ctl, &msg, MSG_NOSIGNAL) == 1;
  pthread_mutex_unlock(&s->mu);
  close(sp[1]);
  if (!sent) {
    close(sp[0]);
    selu_lost(s, *gen);
    return -1;
  }
  return sp[0];
}

static void conn_give(struct serve_selu *s, int fd, unsigned gen)
{
  pthread_mutex_lock(&s->mu);
  bool kept = s->n_idle < SELU_IDLE_CONNS && s->gen == gen && s->pid;
  if (kept)
    s->idle[s->n_idle++] = fd;
  pthread_mutex_unlock(&s->mu);
  if (!kept)
    close(fd);
}

static bool send_request(int fd, const struct gw_call *call)
{
  const char *f[4] = {call->capability, call->tool, call->user ? call->user : "", call->args};
  size_t n[4] = {strlen(f[0]), strlen(f[1]), strlen(f[2]), call->args_len};
  struct warm_req q = {.deadline_ms = call->deadline_ms};
  for (size_t i = 0; i < 4; i++) {
    if (n[i] > SELU_FIELD_MAX || memchr(f[i], '\0', n[i]))
      return false; /* not this path's: the pipeline says why */
    q.len[i] = (uint32_t)n[i];
  }
  bool ok = cap_write_all(fd, &q, sizeof q, CAP_IO_NOSIGPIPE) == 0;
  for (size_t i = 0; i < 4 && ok; i++)
    ok = cap_write_all(fd, f[i], n[i], CAP_IO_NOSIGPIPE) == 0;
  return ok;
}

/* Waits for the answer on fd; cancel_fd readable first (the call
 * cancelled): fd shut for writing, which the warm process's watcher
 * sees, then the answer awaited all the same (the call's record is
 * written there). True when the call was cancelled. */
static bool await_answer(int fd, int cancel_fd)
{
  bool cancelled = false;
  while (cancel_fd >= 0 && !cancelled) {
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = cancel_fd, .events = POLLIN}};
    if (poll(p, 2, -1) < 0 && errno != EINTR)
      break;
    if (p[0].revents)
      break;
    if (p[1].revents) {
      shutdown(fd, SHUT_WR);
      cancelled = true;
    }
  }
  return cancelled;
}

enum gw_outcome serve_selu_call(void *ctx, const struct gw_registry *reg,
                                const struct gw_call *call, int cancel_fd, struct gw_result *res,
                                struct cap_error *err)
{
  struct serve_selu *s = __atomic_load_n(&((struct serve *)ctx)->selu, __ATOMIC_ACQUIRE);
  return serve_selu_warm(s, reg, call, cancel_fd, res, err);
}

enum gw_outcome serve_selu_warm(void *ctx, const struct gw_registry *reg,
                                const struct gw_call *call, int cancel_fd, struct gw_result *res,
                                struct cap_error *err)
{
  struct serve_selu *s = ctx;
  *res = (struct gw_result){0};
  const struct cap_spec *spec = gw_registry_find(reg, call->capability);
  if (!s || !spec || spec->runtime.kind != CAP_RUNTIME_GRPC || call->mcp_method ||
      call->answer != GW_ANSWER_NONE)
    return GW_OUTCOME_NOT_WARM; /* a client's answer to an ask: the pipeline's own */
  unsigned gen = 0;
  int fd = conn_take(s, &gen);
  if (fd >= 0 && !send_request(fd, call)) { /* nothing ran: its process gone, taken again */
    close(fd);
    selu_lost(s, gen);
    if ((fd = conn_take(s, &gen)) >= 0 && !send_request(fd, call)) {
      close(fd);
      fd = -1;
    }
  }
  if (fd < 0)
    return GW_OUTCOME_NOT_WARM;
  bool cancelled = await_answer(fd, cancel_fd);
  struct warm_ans a;
  char *msg = NULL, *json = NULL;
  if (cap_read_all(fd, &a, sizeof a) < 0 || !(msg = read_field(fd, a.len[0])) ||
      !(json = read_field(fd, a.len[1]))) {
    close(fd); /* it may have run: audited there as interrupted, never run twice */
    selu_lost(s, gen);
    free(msg);
    return cap_error_set(err, ECONNABORTED,
                         "serve's warm Selu process ended during the call; try again"),
           GW_OUTCOME_FAILED;
  }
  if (cancelled) /* shut: never used again */
    close(fd);
  else
    conn_give(s, fd, gen);
  enum gw_outcome o = (enum gw_outcome)a.outcome;
  if (o != GW_OUTCOME_OK && o != GW_OUTCOME_NOT_WARM)
    cap_error_set(err, a.code ? a.code : EIO, "%s", msg);
  if (o == GW_OUTCOME_OK && a.len[1]) {
    res->json = steal_pointer(&json);
    res->terminal_on_success = a.terminal != 0;
  }
  free(msg);
  free(json);
  return o;
}

void serve_selu_stop(struct serve_selu *s, int drain_ms)
{
  if (!s)
    return;
  pid_t pid = s->pid;
  selu_drop(s); /* its connections and ctl closed: the process drains and ends */
  if (pid)      /* and told so, should another process hold a copy of ctl */
    kill(pid, SIGTERM);
  pid = s->spawner_pid;
  if (pid) /* told so too, should a child of serve hold a copy of its socket */
    kill(pid, SIGTERM);
  uint64_t until = cap_now_ms(CLOCK_MONOTONIC) + (uint64_t)drain_ms + 6000;
  while (pid) {
    pid_t r = waitpid(pid, NULL, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR))
      break;
    if (cap_now_ms(CLOCK_MONOTONIC) > until) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      break;
    }
    nanosleep(&(struct timespec){.tv_nsec = 20 * 1000000}, NULL);
  }
  pthread_mutex_destroy(&s->mu);
  free(s);
}
