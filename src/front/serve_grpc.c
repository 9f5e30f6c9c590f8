/* `capsule serve --grpc ADDR`: Selu's two gRPC services (front/grpc_serve.h:
 * the seed's CapabilityService and the orchestrator's Capability) in front
 * of the call pipeline, so a Selu orchestrator can use capsule as one
 * capability. Every call carries a bearer token (`authorization:
 * Bearer TOKEN` metadata; `capsule access issue`), loopback included: the
 * call is made as the token's user. A tool is named CAPABILITY.TOOL (the
 * capability's id as the longest known prefix before a '.'), or TOOL
 * alone under --capability.
 *
 * gRPC runs in a process of its own, forked by serve: a process running
 * the server's threads does not fork (a child inherits their locks, not
 * the threads), and serve's MCP calls fork their children from serve's
 * main thread. The gRPC process first forks its call process
 * (serve_grpc_calls.c), which forks a child per call, then serves; it
 * checks tokens on a state connection of its own. A health check is
 * healthy while serve serves; under --capability, when that capability
 * is ready (gw_ready, in a child). The orchestrator's config_json is not
 * read: the credentials are the ones capsule holds, injected as each
 * manifest says. The artifact calls are serve_grpc_artifacts.c's. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/io.h"
#include "front/grpc_serve.h"
#include "front/serve_core.h"
#include "front/serve_grpc_artifacts.h"
#include "front/serve_internal.h"
#include "gateway/access.h"
#include "gateway/artifact_store.h"
#include "gateway/call.h"
#include "gateway/registry.h"
#include "gateway/state.h"

/* serve's handle on its gRPC process */
struct serve_grpc {
  pid_t pid;
  int reload_fd;      /* a byte here: the call process reloads its registry */
  int warm_reload_fd; /* and one here: the warm path reloads its own */
};

/* The gRPC process's own state */
struct grpc_proc {
  struct serve *sv; /* serve's memory as it was at the fork: its options and log */
  const struct serve_options *opt;
  pthread_mutex_t mu; /* around st */
  struct gw_state *st;
  int calls; /* the call process's socket */
  struct serve_grpc_warm *warm;
  struct serve_grpc_artifacts artifacts; /* the artifact calls (serve_grpc_artifacts.h) */
  struct serve_grpc_streams streams;     /* the artifact streams open, per user */
  bool stopping;
};

/* Reads the child's answer (until it closes the pipe). */
static bool read_back(int fd, struct serve_grpc_head *h, struct cap_buf *text)
{
  if (cap_read_all(fd, h, sizeof *h) < 0)
    return false;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    cap_buf_append(text, buf, (size_t)n);
  }
  return true;
}

/* The gRPC answer for what the call's child said. */
static void answer_from(const struct grpc_serve_call *call, const struct serve_grpc_head *h,
                        const char *msg, struct grpc_serve_answer *a)
{
  if (call->health) { /* not ready is an answer, not a failed call */
    a->success = h->outcome == GW_OUTCOME_OK;
    a->error = a->success ? NULL : cap_xstrdup(msg);
  } else if (h->outcome == GW_OUTCOME_OK) {
    a->success = true;
    a->result = cap_xstrdup(msg);
  } else if (h->outcome == GW_OUTCOME_DENIED || h->outcome == GW_OUTCOME_AWAITING_APPROVAL) {
    a->status = GRPC_SERVE_PERMISSION_DENIED;
    a->status_message = cap_xstrdup(msg);
  } else if (h->outcome == GW_OUTCOME_HOST_CANNOT_ENFORCE) {
    a->status = GRPC_SERVE_UNAVAILABLE;
    a->status_message = cap_xstrdup(msg);
  } else if (h->code == ENOENT) {
    a->status = GRPC_SERVE_NOT_FOUND;
    a->status_message = cap_xstrdup(msg);
  } else { /* the tool failed, or its arguments did not validate: the call's answer */
    a->error = cap_xstrdup(msg);
  }
}

/* A call's log line, stamped with the call's arrival: a warm call's
 * written once its answer went (a write to serve's log is not on the
 * call's path), any other's before it runs. */
struct call_line {
  struct grpc_proc *g;
  struct timespec asked; /* CLOCK_REALTIME */
  const char *tool, *user;
  struct gw_audit_later *record; /* a warm call's, appended once its answer went */
};

static void call_line_write(const struct call_line *l)
{
  serve_log_at(l->g->sv, &l->asked, "info", "grpc call", "tool", l->tool, "user", l->user);
}

/* A cancelled call's answer socket shut for writing: its child sees the
 * end (POLLRDHUP) and stops the call, and this process reads on until the
 * child is gone (its run stopped, its record in): a cancelled call counts
 * among the calls at once and serve's drain waits for it until its work
 * ended, which the child's SIGKILL after the grace bounds. */
static void shut_answer(void *arg) { shutdown(*(int *)arg, SHUT_WR); }

/* The call answered in a: true when the warm path made it (its line not
 * yet written, its record in line->record when still to append). */
static bool answer_call(struct grpc_proc *g, const struct grpc_serve_call *call,
                        struct call_line *line, struct grpc_serve_answer *a)
{
  const char *user = line->user;
  struct serve_grpc_head warm_head;
  char *warm_text = NULL;
  if (!call->health &&
      serve_grpc_warm_call(g->warm, call, user, &warm_head, &warm_text, &line->record)) {
    answer_from(call, &warm_head, warm_text, a);
    free(warm_text);
    return true;
  }
  if (!call->health)
    call_line_write(line);
  cap_wait_hook_run(call->wait); /* a process of its own: it lasts */
  int p[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0) {
    a->status = GRPC_SERVE_INTERNAL;
    a->status_message = cap_xstrdup("cannot start the call: no socket");
    return false;
  }
  /* cancelled: the socket shut, which the child watches (this read ends
   * with the child) */
  bool armed = cap_cancel_arm(call->cancel, shut_answer, &p[0]);
  int r = armed ? serve_grpc_send(g->calls, call, user, p[1]) : -ECANCELED;
  close(p[1]);
  struct serve_grpc_head h = {.outcome = GW_OUTCOME_FAILED, .code = EIO};
  struct cap_buf text = {0};
  bool ok = r == 0 && read_back(p[0], &h, &text);
  cap_cancel_disarm(call->cancel);
  close(p[0]);
  if (r == -ECANCELED || cap_cancel_fired(call->cancel)) { /* whatever the child said */
    a->status = GRPC_SERVE_CANCELLED;
    a->status_message = cap_xstrdup("the client cancelled the call");
  } else if (!ok) {
    a->status = GRPC_SERVE_INTERNAL;
    a->status_message = cap_xstrdup(r < 0 ? "the call process of serve --grpc is gone"
                                          : "the call's process ended without an answer");
  } else {
    answer_from(call, &h, text.data ? text.data : "", a);
  }
  cap_buf_free(&text);
  return false;
}

/* A warm call's answer went (or the client gave up on it): its record
 * is appended and the lease its call parked ends now, off the call's
 * path, and its line is written. */
static void warm_answered(void *ctx, bool delivered)
{
  (void)delivered;
  struct call_line *l = ctx;
  serve_grpc_warm_commit(l->g->warm, l->record);
  serve_grpc_warm_flush(l->g->warm);
  call_line_write(l);
  free((char *)l->tool);
  free((char *)l->user);
  free(l);
}

static char *authenticate(struct grpc_proc *g, const char *token)
{
  char *user = NULL;
  int r = serve_grpc_warm_access(g->warm, token, &user);
  if (r == 0 || r == -EACCES)
    return user;
  bool op = false;
  struct cap_error err = {0};
  pthread_mutex_lock(&g->mu);
  r = gw_access_check(g->st, token, &user, &op, &err);
  pthread_mutex_unlock(&g->mu);
  cap_error_clear(&err);
  return r == 0 ? user : NULL;
}

#define UNAUTHENTICATED                                                                            \
  "a bearer token is needed (metadata `authorization: Bearer TOKEN`; `capsule access issue NAME` " \
  "makes one)"

/* The server's authenticate: before the call's first message is read. */
static char *admit(void *arg, const char *bearer)
{
  return bearer ? authenticate(arg, bearer) : NULL;
}

/* A burst's pooled state connections end with its workers: one kept per
 * worker left, each worker's call holding one at a time. */
static void workers_shrank(void *arg, unsigned workers)
{
  struct grpc_proc *g = arg;
  serve_grpc_warm_trim_states(g->warm, workers);
}

static void handler(void *arg, const struct grpc_serve_call *call, struct grpc_serve_answer *a)
{
  struct grpc_proc *g = arg;
  const char *user = call->user; /* admit's */
  bool stopping = __atomic_load_n(&g->stopping, __ATOMIC_ACQUIRE);
  if (!user) {
    a->status = GRPC_SERVE_UNAUTHENTICATED;
    a->status_message = cap_xstrdup(UNAUTHENTICATED);
    return;
  }
  if (call->health && (stopping || !g->opt->only)) {
    a->success = !stopping;
    a->error = a->success ? NULL : cap_xstrdup("capsule serve is stopping");
    return;
  }
  if (stopping) {
    a->status = GRPC_SERVE_UNAVAILABLE;
    a->status_message = cap_xstrdup("capsule serve is stopping");
    return;
  }
  if (call->method == GRPC_SERVE_CAP_UPLOAD || call->method == GRPC_SERVE_CAP_DOWNLOAD) {
    cap_wait_hook_run(call->wait); /* a stream lasts */
    serve_grpc_artifact_stream(&g->artifacts, call, user, a);
    return;
  }
  struct call_line line = {.g = g, .tool = call->tool_name, .user = user};
  clock_gettime(CLOCK_REALTIME, &line.asked);
  if (!call->health && !serve_grpc_artifacts_in(&g->artifacts, call, user, a)) {
    call_line_write(&line);
    return;
  }
  bool warm = answer_call(g, call, &line, a);
  if (!call->health && a->success)
    serve_grpc_artifacts_out(&g->artifacts, call, user, a->result);
  if (warm && !a->finish) {
    struct call_line *later = cap_xmalloc(sizeof *later);
    *later = (struct call_line){.g = g,
                                .asked = line.asked,
                                .tool = call->tool_name ? cap_xstrdup(call->tool_name) : NULL,
                                .user = cap_xstrdup(user),
                                .record = line.record};
    a->finish = warm_answered;
    a->finish_ctx = later;
  } else if (warm) {
    serve_grpc_warm_commit(g->warm, line.record); /* before the answer: no hook after it */
    call_line_write(&line);
    serve_grpc_warm_flush(g->warm);
  }
}

/* Tells serve how the start went: 0, or an errno and its message. */
static void report(int fd, int code, const char *msg)
{
  int32_t c = code;
  if (write(fd, &c, sizeof c) == (ssize_t)sizeof c && msg && write(fd, msg, strlen(msg)) < 0) {
    /* serve reads what came */
  }
  close(fd);
}

/* The gRPC process: its call process, its state, the server; then waits
 * for SIGTERM/SIGINT (blocked since serve's setup) and drains. */
static _Noreturn void grpc_process(struct serve *sv, const struct serve_options *opt, int ready,
                                   int reload_rd, int warm_reload_rd)
{
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  int theirs[] = {sv->listen_fd, sv->watch.fd, sv->signal_fd, sv->wake}; /* serve's, not ours */
  for (size_t i = 0; i < sizeof theirs / sizeof *theirs; i++)
    if (theirs[i] >= 0)
      close(theirs[i]);
  struct grpc_proc g = {.sv = sv, .opt = opt};
  pthread_mutex_init(&g.mu, NULL);
  pthread_mutex_init(&g.streams.mu, NULL);
  int sp[2];
  struct cap_error err = {0};
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
    report(ready, errno, "cannot make the gRPC process's call socket");
    _exit(1);
  }
  struct gw_registry reg = {0};
  struct cap_diags diags = {0};
  gw_registry_load(opt->caps_dir, &reg, &diags); /* before gRPC: the call process's */
  cap_diags_free(&diags);
  pid_t calls = fork();
  if (calls == 0) {
    close(sp[0]);
    close(ready);
    close(warm_reload_rd);
    serve_grpc_calls(opt, &reg, sp[1], reload_rd);
  }
  close(sp[1]);
  close(reload_rd);
  gw_registry_free(&reg);
  g.calls = sp[0];
  if (calls < 0 || gw_state_open(opt->state_dir, &g.st, &err) < 0) {
    report(ready, calls < 0 ? errno : err.code, calls < 0 ? "cannot fork" : err.message);
    _exit(1);
  }
  g.warm = serve_grpc_warm_new(opt, warm_reload_rd);
  g.artifacts = (struct serve_grpc_artifacts){.store = gw_artifact_store_dir(opt->state_dir),
                                              .st = g.st,
                                              .mu = &g.mu,
                                              .only = opt->only,
                                              .streams = &g.streams,
                                              .sv = sv};
  gw_inflight_spares(true); /* a call's marker without a file made per call */
  struct grpc_serve_options o = {.address = opt->grpc_addr,
                                 .tls_cert = opt->tls_cert,
                                 .tls_key = opt->tls_key,
                                 .handler = handler,
                                 .arg = &g,
                                 .authenticate = admit,
                                 .workers_shrank = workers_shrank,
                                 .unauthenticated_message = UNAUTHENTICATED};
  struct grpc_serve *srv = NULL;
  int port = 0;
  if (grpc_serve_start(&o, &srv, &port, &err) < 0) {
    report(ready, err.code ? err.code : EINVAL, err.message);
    _exit(1);
  }
  report(ready, 0, NULL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = 0;
  while (sigwait(&set, &sig) != 0)
    ;
  __atomic_store_n(&g.stopping, true, __ATOMIC_RELEASE);
  grpc_serve_stop(srv, (int)(opt->drain_ms ? opt->drain_ms : SERVE_DRAIN_MS));
  gw_inflight_spares(false);
  serve_grpc_warm_close_states(g.warm);
  gw_state_close(g.st);
  _exit(0);
}

int serve_grpc_start(struct serve *sv, const struct serve_options *opt, struct serve_grpc **ret,
                     struct cap_error *err)
{
  *ret = NULL;
  int ready[2], reload[2], warm_reload[2];
  if (pipe2(ready, O_CLOEXEC) < 0)
    return cap_error_errno(err, errno, "cannot start the gRPC process");
  if (pipe2(reload, O_CLOEXEC | O_NONBLOCK) < 0) {
    close(ready[0]);
    close(ready[1]);
    return cap_error_errno(err, errno, "cannot start the gRPC process");
  }
  if (pipe2(warm_reload, O_CLOEXEC | O_NONBLOCK) < 0) {
    int e = errno;
    int fds[] = {ready[0], ready[1], reload[0], reload[1]};
    for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
      close(fds[i]);
    return cap_error_errno(err, e, "cannot start the gRPC process");
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    close(reload[1]);
    close(warm_reload[1]);
    grpc_process(sv, opt, ready[1], reload[0], warm_reload[0]);
  }
  close(ready[1]);
  close(reload[0]);
  close(warm_reload[0]);
  int32_t code = EIO;
  char msg[1024] = "";
  ssize_t n = pid > 0 ? read(ready[0], &code, sizeof code) : -1;
  if (n == (ssize_t)sizeof code && code) {
    ssize_t m = read(ready[0], msg, sizeof msg - 1);
    msg[m > 0 ? m : 0] = '\0';
  }
  close(ready[0]);
  if (pid < 0 || n != (ssize_t)sizeof code || code) {
    close(reload[1]);
    close(warm_reload[1]);
    if (pid > 0)
      waitpid(pid, NULL, 0);
    return cap_error_set(err, code ? code : EIO, "%s",
                         *msg ? msg : "the gRPC process did not start");
  }
  struct serve_grpc *g = cap_xcalloc(1, sizeof *g);
  g->pid = pid;
  g->reload_fd = reload[1];
  g->warm_reload_fd = warm_reload[1];
  *ret = g;
  return 0;
}

void serve_grpc_reloaded(struct serve_grpc *g)
{
  if (!g)
    return;
  int fds[] = {g->reload_fd, g->warm_reload_fd};
  for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
    if (write(fds[i], "r", 1) < 0) {
      /* full: a reload is pending already */
    }
}

void serve_grpc_stop(struct serve_grpc *g, int drain_ms)
{
  if (!g)
    return;
  kill(g->pid, SIGTERM);
  /* its drain is bounded by drain_ms and each call's own deadline; past
   * drain_ms and a grace period, it is killed */
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    pid_t r = waitpid(g->pid, NULL, WNOHANG);
    if (r == g->pid || (r < 0 && errno != EINTR))
      break;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    if (ms > drain_ms + 5000) {
      kill(g->pid, SIGKILL);
      waitpid(g->pid, NULL, 0);
      break;
    }
    nanosleep(&(struct timespec){.tv_nsec = 20 * 1000000}, NULL);
  }
  close(g->reload_fd);
  close(g->warm_reload_fd);
  free(g);
}
