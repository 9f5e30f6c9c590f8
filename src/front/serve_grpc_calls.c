/* The calls of `serve --grpc` (serve_internal.h): the gRPC process hands
 * each call to a call process forked before the server's threads started
 * in it (a child of a process with threads inherits their locks, held or
 * not, and none of the threads), which forks one child per call: the pipeline, as `capsule call`
 * runs it, with a state connection of its own. The request travels in a
 * memfd and the answer in a pipe, both passed with SCM_RIGHTS over a
 * SOCK_SEQPACKET socket (one message per call, whatever its size). The
 * call process keeps the registry serve held when it started, reloaded
 * when serve says it reloaded (a byte on reload_fd), and maps the Selu
 * gRPC module once (not started), so its children do not each load it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cancel.h"
#include "core/cleanup.h"
#include "core/io.h"
#include "front/grpc_serve.h"
#include "front/serve_internal.h"
#include "gateway/artifact_store.h"
#include "gateway/call.h"
#include "gateway/ready.h"
#include "gateway/registry.h"
#include "gateway/state.h"
#include "image/image.h"
#include "runtime/selu_rpc.h"

enum {
  FIELD_TOOL,
  FIELD_PARAMETERS,
  FIELD_USER,
  FIELD_SESSION,
  FIELD_THREAD,
  FIELD_DEADLINE, /* the client's, in ms as text ("0": none) */
  N_FIELDS
};

#define CANCEL_GRACE_MS 5000 /* a cancelled call's run: SIGTERM, then SIGKILL this later */

/* ---- the gRPC process's side ---- */

static void put_field(struct cap_buf *b, const char *s)
{
  uint32_t n = s ? (uint32_t)strlen(s) : 0;
  cap_buf_append(b, (const char *)&n, sizeof n);
  cap_buf_append(b, s ? s : "", n);
}

int serve_grpc_send(int sock, const struct grpc_serve_call *call, const char *user, int out)
{
  struct cap_buf b = {0};
  uint8_t health = call->health;
  cap_buf_append(&b, (const char *)&health, 1);
  put_field(&b, call->tool_name);
  put_field(&b, call->parameters);
  put_field(&b, user);
  put_field(&b, call->session_id);
  put_field(&b, call->thread_id);
  char deadline[24];
  snprintf(deadline, sizeof deadline, "%llu", (unsigned long long)call->deadline_ms);
  put_field(&b, deadline);
  int mfd = memfd_create("capsule-grpc-call", MFD_CLOEXEC);
  int r = mfd >= 0 ? cap_write_all(mfd, b.data, b.len, 0) : 0;
  cap_buf_free(&b);
  if (mfd < 0)
    return -errno;
  if (r == 0) {
    int fds[2] = {mfd, out};
    char ctl[CMSG_SPACE(sizeof fds)];
    memset(ctl, 0, sizeof ctl);
    char one = 'c';
    struct iovec iov = {.iov_base = &one, .iov_len = 1};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    while (sendmsg(sock, &m, MSG_NOSIGNAL) < 0)
      if (errno != EINTR) {
        r = -errno;
        break;
      }
  }
  close(mfd);
  return r;
}

/* ---- the call process's side ---- */

/* What the child sends back: its outcome and errno, then the result or
 * the error's message. */
static void send_back(int fd, enum gw_outcome o, int code, const char *text)
{
  struct serve_grpc_head h = {.outcome = (int32_t)o, .code = code};
  size_t len = text ? strlen(text) : 0;
  if (write(fd, &h, sizeof h) != (ssize_t)sizeof h)
    return;
  for (size_t off = 0; off < len;) {
    ssize_t n = write(fd, text + off, len - off);
    if (n <= 0)
      return;
    off += (size_t)n;
  }
}

const struct cap_spec *serve_grpc_resolve(const struct gw_registry *reg, const char *only,
                                          const char *name, const char **tool)
{
  if (only) {
    *tool = name;
    return gw_registry_find(reg, only);
  }
  const struct cap_spec *found = NULL;
  for (const char *dot = strchr(name, '.'); dot; dot = strchr(dot + 1, '.')) {
    _cleanup_free_ char *cap = cap_xstrndup(name, (size_t)(dot - name));
    const struct cap_spec *spec = gw_registry_find(reg, cap);
    if (spec) {
      found = spec;
      *tool = dot + 1;
    }
  }
  return found;
}

/* A health check under --capability: whether it is ready. */
static _Noreturn void child_health(const struct serve_options *opt, const struct gw_registry *reg,
                                   struct gw_state *st, const char *user, int out)
{
  const struct cap_spec *spec = gw_registry_find(reg, opt->only);
  if (!spec) {
    _cleanup_free_ char *msg =
        cap_xasprintf("no capability \"%s\" in %s", opt->only, opt->caps_dir);
    send_back(out, GW_OUTCOME_FAILED, ENOENT, msg);
    _exit(0);
  }
  _cleanup_free_ char *images = image_store_dir(opt->state_dir);
  _cleanup_free_ char *cache = cap_xasprintf("%s/cache", opt->state_dir);
  char **hidden = NULL;
  size_t n_hidden = gw_state_private_paths(opt->state_dir, &hidden);
  struct cap_error why = {0};
  enum gw_outcome o = gw_ready(spec, images, (const char *const *)hidden, n_hidden, &why);
  if (o == GW_OUTCOME_OK)
    o = gw_ready_module(spec, st, user, (const char *const *)hidden, n_hidden, cache, &why);
  send_back(out, o, why.code, o == GW_OUTCOME_OK ? "ready" : why.message);
  _exit(0);
}

/* The child's watch on its answer's socket: the gRPC process shut it
 * (the client cancelled the call, its connection was lost, or the gRPC
 * process is gone), and the call stops: its cancel fired (a call not
 * yet run is not run; a Selu call on an instance is cancelled there),
 * then SIGTERM, which the child's thread keeps blocked but for a run's
 * sandbox supervisor, which forwards it to the tool (the pipeline then
 * records what the run became, the record never cut short by the
 * signal); SIGKILL CANCEL_GRACE_MS later (a tool that ignores SIGTERM:
 * the sandbox dies with the child, whose in-flight marker is the record,
 * "interrupted"). */
struct answer_watch {
  int fd;
  struct cap_cancel cancel; /* the call's (gw_call.cancel): fired first */
};

static void *watch_answer(void *arg)
{
  struct answer_watch *w = arg;
  struct pollfd p = {.fd = w->fd, .events = POLLRDHUP};
  while (poll(&p, 1, -1) < 0)
    if (errno != EINTR)
      return NULL;
  cap_cancel_fire(&w->cancel);
  kill(getpid(), SIGTERM);
  struct timespec grace = {.tv_sec = CANCEL_GRACE_MS / 1000};
  while (nanosleep(&grace, &grace) < 0 && errno == EINTR)
    ;
  kill(getpid(), SIGKILL);
  return NULL;
}

/* The watch started, with every signal blocked in it: a SIGTERM goes to
 * the pipeline's thread, whose sandbox supervisor may forward it. */
static struct cap_cancel *watch_start(int out)
{
  static struct answer_watch w; /* the child's one call */
  w.fd = out;
  cap_cancel_init(&w.cancel);
  sigset_t all, was;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &was);
  pthread_t t;
  bool started = pthread_create(&t, NULL, watch_answer, &w) == 0;
  if (started)
    pthread_detach(t);
  pthread_sigmask(SIG_SETMASK, &was, NULL);
  return started ? &w.cancel : NULL;
}

/* The child: the pipeline for one call, made as user. */
static _Noreturn void child(const struct serve_options *opt, const struct gw_registry *reg,
                            bool health, char *const f[N_FIELDS], int out)
{
  signal(SIGPIPE, SIG_DFL);
  signal(SIGCHLD, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  sigset_t term; /* for a run's supervisor alone (watch_answer) */
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_SETMASK, &term, NULL);
  struct cap_cancel *cancel = watch_start(out);
  struct cap_error err = {0};
  struct gw_state *st = NULL;
  if (gw_state_open(opt->state_dir, &st, &err) < 0) {
    send_back(out, GW_OUTCOME_FAILED, err.code, err.message);
    _exit(0);
  }
  if (health)
    child_health(opt, reg, st, f[FIELD_USER], out);
  const char *tool = NULL;
  const struct cap_spec *spec = serve_grpc_resolve(reg, opt->only, f[FIELD_TOOL], &tool);
  if (!spec) {
    _cleanup_free_ char *msg =
        cap_xasprintf("no capability for tool \"%s\" (name it CAPABILITY.TOOL)", f[FIELD_TOOL]);
    send_back(out, GW_OUTCOME_FAILED, ENOENT, msg);
    _exit(0);
  }
  _cleanup_free_ char *logs = cap_xasprintf("%s/logs", opt->state_dir);
  _cleanup_free_ char *run = cap_xasprintf("%s/run", opt->state_dir);
  _cleanup_free_ char *cache = cap_xasprintf("%s/cache", opt->state_dir);
  _cleanup_free_ char *volumes = cap_xasprintf("%s/volumes", opt->state_dir);
  _cleanup_free_ char *images = image_store_dir(opt->state_dir);
  _cleanup_free_ char *artifacts = gw_artifact_store_dir(opt->state_dir);
  const char *args = *f[FIELD_PARAMETERS] ? f[FIELD_PARAMETERS] : "{}";
  struct gw_call c = {
      .capability = spec->id,
      .tool = tool,
      .args = args,
      .args_len = strlen(args),
      .user = f[FIELD_USER],
      .deadline_ms = serve_grpc_deadline(opt->deadline_ms, strtoull(f[FIELD_DEADLINE], NULL, 10)),
      .log_dir = logs,
      .run_dir = run,
      .cache_dir = cache,
      .volumes_dir = volumes,
      .image_dir = images,
      .artifact_store = artifacts,
      .session_id = *f[FIELD_SESSION] ? f[FIELD_SESSION] : NULL,
      .thread_id = *f[FIELD_THREAD] ? f[FIELD_THREAD] : NULL,
      .warn = serve_call_warn,
      .warn_ctx = (void *)opt,
      .cancel = cancel,
  };
  char **hidden = NULL;
  c.n_hidden = gw_state_private_paths(opt->state_dir, &hidden);
  c.hidden = (const char *const *)hidden;
  struct gw_result res = {0};
  enum gw_outcome o = gw_call(&c, reg, st, &res, &err);
  send_back(out, o, err.code, o == GW_OUTCOME_OK ? res.json : err.message);
  _exit(0);
}

/* Reads the request in mfd into f (strings in *buf); false when it is
 * not one serve_grpc_send wrote. */
static bool read_request(int mfd, char **buf, bool *health, char *f[N_FIELDS])
{
  off_t size = lseek(mfd, 0, SEEK_END);
  if (size < 1 || size > (64 << 20))
    return false;
  *buf = cap_xmalloc((size_t)size + N_FIELDS);
  if (pread(mfd, *buf, (size_t)size, 0) != size)
    return false;
  *health = (*buf)[0] != 0;
  /* each field: its length, its bytes; rewritten in place as C strings */
  size_t in = 1, out = 0;
  char *s = *buf;
  for (int i = 0; i < N_FIELDS; i++) {
    uint32_t n;
    if ((size_t)size - in < sizeof n)
      return false;
    memcpy(&n, s + in, sizeof n);
    in += sizeof n;
    if ((size_t)size - in < n || memchr(s + in, '\0', n))
      return false;
    memmove(s + out, s + in, n);
    f[i] = s + out;
    s[out + n] = '\0';
    out += n + 1;
    in += n;
  }
  return in == (size_t)size;
}

/* One message from the gRPC process: forks its call. False when the
 * gRPC process is gone. */
static bool take_call(const struct serve_options *opt, const struct gw_registry *reg, int sock,
                      int reload_fd)
{
  char one;
  char ctl[CMSG_SPACE(2 * sizeof(int))];
  struct iovec iov = {.iov_base = &one, .iov_len = 1};
  struct msghdr m = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
  ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
  if (n < 0)
    return errno == EINTR || errno == EAGAIN;
  if (n == 0)
    return false;
  int fds[2] = {-1, -1};
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
      c->cmsg_len == CMSG_LEN(sizeof fds))
    memcpy(fds, CMSG_DATA(c), sizeof fds);
  else if (c && c->cmsg_type == SCM_RIGHTS) /* a malformed message: close what came */
    for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int) && i < 2; i++)
      memcpy(&fds[i], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
  if (fds[0] >= 0 && fds[1] >= 0 && !(m.msg_flags & MSG_CTRUNC)) {
    pid_t pid = fork();
    if (pid == 0) {
      close(sock);
      close(reload_fd);
      char *buf = NULL, *f[N_FIELDS];
      bool health = false;
      if (!read_request(fds[0], &buf, &health, f)) {
        send_back(fds[1], GW_OUTCOME_FAILED, EINVAL, "a malformed call from the gRPC process");
        _exit(0);
      }
      close(fds[0]);
      child(opt, reg, health, f, fds[1]);
    } /* fork failed: the answer's pipe closes without one, and the call fails */
  }
  for (int i = 0; i < 2; i++)
    if (fds[i] >= 0)
      close(fds[i]);
  return true;
}

_Noreturn void serve_grpc_calls(const struct serve_options *opt, struct gw_registry *reg, int sock,
                                int reload_fd)
{
  signal(SIGCHLD, SIG_DFL);
  struct cap_error err = {0};
  if (selu_rpc_preload(&err) < 0) /* a Selu call then fails with this, clearly */
    cap_error_clear(&err);
  for (;;) {
    struct pollfd p[2] = {{.fd = sock, .events = POLLIN}, {.fd = reload_fd, .events = POLLIN}};
    int n = poll(p, 2, 500);
    while (waitpid(-1, NULL, WNOHANG) > 0)
      ;
    if (n <= 0)
      continue;
    if (p[1].revents & POLLIN) {
      char drain[64];
      while (read(reload_fd, drain, sizeof drain) > 0)
        ;
      struct gw_registry fresh = {0};
      struct cap_diags diags = {0};
      if (gw_registry_load(opt->caps_dir, &fresh, &diags) == 0) {
        gw_registry_free(reg);
        *reg = fresh;
      }
      cap_diags_free(&diags);
    }
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
      if (!take_call(opt, reg, sock, reload_fd))
        _exit(0); /* the gRPC process is gone; calls in flight finish on their own */
  }
}
