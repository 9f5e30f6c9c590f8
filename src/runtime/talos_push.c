/* A Talos push trigger's sandbox run (talos.h's talos_subscribe): the
 * shim reads its request from a memory file, as for every exchange, but
 * keeps running, writing one JSON line per event on a pipe; a thread
 * started once the sandbox runs (sandbox_options.on_started: the sandbox
 * is cloned from a single-threaded process) reads the lines and hands
 * each to the caller's function. The run ends when the tool exits: SIGTERM
 * to this process reaches it through the sandbox's supervisor, and the
 * shim then calls the plugin's unsubscribe. No wall clock: a subscription
 * runs until it is stopped. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "runtime/talos_internal.h"
#include "sandbox/sandbox.h"

#define LINE_MAX_BYTES (4u << 20) /* an event larger than this is dropped */

struct stream {
  int fd; /* the pipe's read end */
  int write_end;
  talos_line_fn *fn;
  void *arg;
  pthread_t thread;
  bool started;
  sigset_t mask; /* the caller's, restored after the run */
};

static void *read_lines(void *p)
{
  struct stream *s = p;
  struct cap_buf line = {0};
  char buf[65536];
  bool dropping = false;
  for (;;) {
    ssize_t k = read(s->fd, buf, sizeof buf);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      break;
    for (ssize_t i = 0; i < k; i++) {
      if (buf[i] != '\n') {
        if (line.len < LINE_MAX_BYTES)
          cap_buf_append(&line, &buf[i], 1);
        else
          dropping = true;
        continue;
      }
      if (!dropping && line.len) {
        cap_buf_append(&line, "", 1);
        s->fn(s->arg, line.data);
      }
      line.len = 0;
      dropping = false;
    }
  }
  cap_buf_free(&line);
  return NULL;
}

static void on_started(void *ctx, struct sandbox_running *running)
{
  (void)running;
  struct stream *s = ctx;
  close(s->write_end); /* the tool holds it now: its exit is our end of file */
  s->write_end = -1;
  /* the signals the supervisor forwards to the tool stay blocked here
   * (the reader inherits the mask): it takes them through its signalfd,
   * none reaches a thread where they would end the process */
  sigset_t fwd;
  sigemptyset(&fwd);
  sigaddset(&fwd, SIGINT);
  sigaddset(&fwd, SIGTERM);
  sigaddset(&fwd, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &fwd, &s->mask);
  s->started = pthread_create(&s->thread, NULL, read_lines, s) == 0;
}

enum gw_outcome talos_stream_run(const struct gw_call *call, const struct cap_spec *run_spec,
                                 char *const *cmd, const struct cap_buf *line, talos_line_fn *fn,
                                 void *arg, struct cap_error *err)
{
  _cleanup_close_ int in = memfd_create("capsule-talos-stdin", MFD_CLOEXEC);
  int out[2] = {-1, -1};
  _cleanup_free_ char *log_path = gw_tool_log_prepare(call->log_dir, run_spec);
  _cleanup_close_ int log_fd = log_path
                                   ? open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)
                                   : open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (in < 0 || log_fd < 0 || pipe2(out, O_CLOEXEC) < 0)
    return cap_error_errno(err, errno, "cannot set up the subscription's stdio"), GW_OUTCOME_FAILED;
  if (write(in, line->data, line->len) != (ssize_t)line->len || lseek(in, 0, SEEK_SET) != 0) {
    close(out[0]);
    close(out[1]);
    return cap_error_errno(err, errno, "cannot prepare the shim's stdin"), GW_OUTCOME_FAILED;
  }
  struct stream s = {.fd = out[0], .write_end = out[1], .fn = fn, .arg = arg};
  struct sandbox_options opt = {
      .argv = cmd,
      .redirect_stdio = true,
      .stdio = {in, out[1], log_fd},
      .hidden = call->hidden,
      .n_hidden = call->n_hidden,
      .id_base = call->id_base,
      .log_max_bytes = gw_tool_log_bound(run_spec),
      .on_started = on_started,
      .on_started_ctx = &s,
      .proxy = {.sink = call->egress_sink}, /* the subscription's egress log */
  };
  struct sandbox_result res;
  int r = sandbox_run(run_spec, &opt, &res, err);
  if (s.write_end >= 0)
    close(s.write_end);
  if (s.started) {
    pthread_join(s.thread, NULL);
    pthread_sigmask(SIG_SETMASK, &s.mask, NULL);
  }
  close(out[0]);
  if (r < 0)
    return r == -ENOTSUP ? GW_OUTCOME_HOST_CANNOT_ENFORCE : GW_OUTCOME_FAILED;
  if (res.exit_status != 0 || res.term_signal)
    return cap_error_set(err, EIO, "the subscription's shim ended with %s %d%s%s",
                         res.term_signal ? "signal" : "exit status",
                         res.term_signal ? res.term_signal : res.exit_status,
                         log_path ? "; its stderr is in " : "", log_path ? log_path : ""),
           GW_OUTCOME_FAILED;
  return GW_OUTCOME_OK;
}
