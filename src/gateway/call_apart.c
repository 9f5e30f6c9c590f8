/* A call's run step in a process of its own, the rest of the pipeline
 * (policy, validation, credentials, the audit record) staying in the
 * caller's thread on its state connection (gateway/call.h, gw_call.
 * run_apart): what a long-lived process (serve) does for a tool that runs
 * in a fresh sandbox per call, so that no state is opened per call. The
 * fork happens with the state lock held (no other thread is inside the
 * database then); the child never touches the state: it runs the step,
 * sends back on a pipe what the step produced (the outcome, the error,
 * the result, a relayed server's own answer, the CPU ms a Covenant run
 * used, the egress proxy's decisions for the egress log) and exits. SIGTERM to the child
 * (gw_call.run_pid names it) stops the run as it stops `capsule call`: its sandbox's supervisor
 * forwards it to the tool. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/io.h"
#include "gateway/call.h"
#include "gateway/egress_store.h"

/* The runtimes whose run touches no state: a run apart may carry them (a
 * Talos function's settings are read before the fork; one with OAuth
 * renews its tokens in the state while it runs) */
bool gw_runs_apart(const struct cap_spec *spec)
{
  return spec->runtime.kind == CAP_RUNTIME_JSONL || spec->runtime.kind == CAP_RUNTIME_GRPC ||
         (spec->runtime.kind == CAP_RUNTIME_TALOS_NODE && !spec->talos.has_oauth);
}

static _Noreturn void child(const struct gw_call *call, gw_run_fn fn, void *arg, int fd,
                            pid_t parent)
{
  /* the process that runs the pipeline gone, the run stops */
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
    _exit(1);
  /* nothing of the caller's but the pipe: another call's sockets held
   * here would keep them open while this run lasts */
  if (fd != 3) {
    if (dup3(fd, 3, O_CLOEXEC) < 0) /* never the tool's */
      _exit(1);
    fd = 3;
  }
  syscall(__NR_close_range, 4U, ~0U, 0U);
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null >= 0)
    dup2(null, STDIN_FILENO);
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  sigset_t none; /* the caller's threads may block what a sandbox forwards */
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  char *out = NULL;
  struct cap_error err = {0};
  enum gw_outcome o = fn(arg, &out, &err);
  struct cap_buf b = {0};
  int32_t head[2] = {(int32_t)o, err.code};
  uint64_t cpu = call->cpu_ms ? *call->cpu_ms : 0;
  cap_buf_append(&b, (const char *)head, sizeof head);
  cap_buf_append(&b, (const char *)&cpu, sizeof cpu);
  cap_buf_put_text(&b, err.message);
  cap_buf_put_text(&b, out);
  cap_buf_put_text(&b, call->relay ? call->relay->raw_result : NULL);
  cap_buf_put_text(&b, call->relay ? call->relay->raw_error : NULL);
  gw_egress_batch_encode(gw_egress_batch_of(call->egress_sink), &b); /* the proxy's decisions */
  cap_write_all(fd, b.data, b.len, 0); /* a parent that is gone reads nothing */
  _exit(0);
}

/* What the child sent: false when it ended without a whole report. */
static bool take(const struct cap_buf *b, const struct gw_call *call, enum gw_outcome *o,
                 char **out, struct cap_error *err)
{
  const char *p = b->data, *end = b->data + b->len;
  int32_t head[2];
  uint64_t cpu;
  if (b->len < sizeof head + sizeof cpu)
    return false;
  memcpy(head, p, sizeof head);
  memcpy(&cpu, p + sizeof head, sizeof cpu);
  p += sizeof head + sizeof cpu;
  char *message = NULL, *raw_result = NULL, *raw_error = NULL;
  bool ok = cap_buf_get_text(&p, end, &message) && cap_buf_get_text(&p, end, out) &&
            cap_buf_get_text(&p, end, &raw_result) && cap_buf_get_text(&p, end, &raw_error) &&
            gw_egress_batch_decode(gw_egress_batch_of(call->egress_sink), &p, end);
  if (ok) {
    *o = (enum gw_outcome)head[0];
    if (*o != GW_OUTCOME_OK)
      cap_error_set(err, head[1] ? head[1] : EIO, "%s", message ? message : "failed");
    if (call->cpu_ms)
      *call->cpu_ms = cpu;
    if (call->relay) {
      call->relay->raw_result = steal_pointer(&raw_result);
      call->relay->raw_error = steal_pointer(&raw_error);
    }
  }
  free(message);
  free(raw_result);
  free(raw_error);
  return ok;
}

enum gw_outcome gw_run_apart(const struct gw_call *call, gw_run_fn fn, void *arg, char **out,
                             struct cap_error *err)
{
  *out = NULL;
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return cap_error_errno(err, errno, "cannot create the run's pipe"), GW_OUTCOME_FAILED;
  pid_t parent = getpid(), pid = fork(); /* the state lock is held: see above */
  if (pid == 0) {
    close(p[0]);
    child(call, fn, arg, p[1], parent);
  }
  close(p[1]);
  if (pid < 0) {
    close(p[0]);
    return cap_error_errno(err, errno, "cannot fork the run's process"), GW_OUTCOME_FAILED;
  }
  if (call->run_pid)
    __atomic_store_n(call->run_pid, pid, __ATOMIC_RELEASE);
  if (call->state_lock) /* the run does not touch the state */
    call->state_lock->release(call->state_lock->ctx);
  struct cap_buf b = {0};
  char buf[65536];
  for (;;) {
    ssize_t n = read(p[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    cap_buf_append(&b, buf, (size_t)n);
  }
  close(p[0]);
  if (call->run_pid) /* before it is reaped: a pid read meanwhile is at most a zombie's */
    __atomic_store_n(call->run_pid, 0, __ATOMIC_RELEASE);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (call->state_lock)
    call->state_lock->acquire(call->state_lock->ctx);
  enum gw_outcome o = GW_OUTCOME_FAILED;
  if (!take(&b, call, &o, out, err)) {
    free(*out);
    *out = NULL;
    o = GW_OUTCOME_FAILED;
    cap_error_set(err, EINTR, "the run's process ended without a result (%s %d)",
                  WIFSIGNALED(status) ? "signal" : "status",
                  WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  }
  cap_buf_free(&b);
  return o;
}
