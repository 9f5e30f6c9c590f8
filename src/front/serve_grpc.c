/* `capsule serve --grpc ADDR`: Selu's two gRPC services (front/grpc_serve.h:
 * the seed's CapabilityService and the orchestrator's Capability) in front
 * of the call pipeline, so a Selu orchestrator can use capsule as one
 * capability. Every call carries a bearer token (`authorization:
 * Bearer TOKEN` metadata; `capsule access issue`), loopback included: the
 * call is made as the token's user. A tool is named CAPABILITY.TOOL (the
 * capability's id as the longest known prefix before a '.'), or TOOL
 * alone under --capability. Each Invoke runs the pipeline (policy,
 * validation, credentials, the sandbox, audit) in a child process of its
 * own, forked under the state lock (no other thread is then inside SQLite
 * or replacing the registry), which opens its own state and reads the
 * registry serve held at the fork: the serve's own connection is never
 * shared across threads. A health check is healthy while serve serves;
 * under --capability, when that capability is ready (gw_ready, in a child
 * as well). The orchestrator's config_json is not read: the credentials
 * are the ones capsule holds, injected as each manifest says. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "front/grpc_serve.h"
#include "front/serve_internal.h"
#include "gateway/call.h"
#include "gateway/registry.h"
#include "gateway/ready.h"
#include "gateway/state.h"
#include "image/image.h"

struct serve_grpc {
  struct serve *sv;
  const struct serve_options *opt;
  struct grpc_serve *srv;
};

/* What the child sends back: its outcome and errno, then the result or
 * the error's message. */
struct child_head {
  int32_t outcome;
  int32_t code;
};

/* The capability and tool a gRPC tool name means: --capability's tool, or
 * the longest prefix before a '.' that is a known capability. */
static const struct cap_spec *resolve_name(const struct gw_registry *reg, const char *only,
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

static void send_back(int fd, enum gw_outcome o, int code, const char *text)
{
  struct child_head h = {.outcome = (int32_t)o, .code = code};
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

/* The child of a health check under --capability: whether it is ready. */
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

/* The child: the pipeline, as `capsule call` runs it, for user. */
static _Noreturn void child(const struct serve_options *opt, const struct gw_registry *reg,
                            const struct grpc_serve_call *call, const char *user, int out)
{
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  pthread_sigmask(SIG_SETMASK, &none, NULL);
  struct cap_error err = {0};
  struct gw_state *st = NULL;
  if (gw_state_open(opt->state_dir, &st, &err) < 0) {
    send_back(out, GW_OUTCOME_FAILED, err.code, err.message);
    _exit(0);
  }
  if (call->health)
    child_health(opt, reg, st, user, out);
  const char *tool = NULL;
  const struct cap_spec *spec = resolve_name(reg, opt->only, call->tool_name, &tool);
  if (!spec) {
    _cleanup_free_ char *msg =
        cap_xasprintf("no capability for tool \"%s\" (name it CAPABILITY.TOOL)", call->tool_name);
    send_back(out, GW_OUTCOME_FAILED, ENOENT, msg);
    _exit(0);
  }
  _cleanup_free_ char *logs = cap_xasprintf("%s/logs", opt->state_dir);
  _cleanup_free_ char *run = cap_xasprintf("%s/run", opt->state_dir);
  _cleanup_free_ char *cache = cap_xasprintf("%s/cache", opt->state_dir);
  _cleanup_free_ char *volumes = cap_xasprintf("%s/volumes", opt->state_dir);
  _cleanup_free_ char *images = image_store_dir(opt->state_dir);
  const char *args = *call->parameters ? call->parameters : "{}";
  struct gw_call c = {
      .capability = spec->id,
      .tool = tool,
      .args = args,
      .args_len = strlen(args),
      .user = user,
      .deadline_ms = opt->deadline_ms,
      .log_dir = logs,
      .run_dir = run,
      .cache_dir = cache,
      .volumes_dir = volumes,
      .image_dir = images,
      .session_id = call->session_id,
      .thread_id = call->thread_id,
  };
  char **hidden = NULL;
  c.n_hidden = gw_state_private_paths(opt->state_dir, &hidden);
  c.hidden = (const char *const *)hidden;
  struct gw_result res = {0};
  enum gw_outcome o = gw_call(&c, reg, st, &res, &err);
  send_back(out, o, err.code, o == GW_OUTCOME_OK ? res.json : err.message);
  _exit(0);
}

/* Reads the child's answer (until it closes the pipe). */
static bool read_back(int fd, struct child_head *h, struct cap_buf *text)
{
  size_t got = 0;
  while (got < sizeof *h) {
    ssize_t n = read(fd, (char *)h + got, sizeof *h - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    got += (size_t)n;
  }
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

static void answer_call(struct serve_grpc *g, const struct grpc_serve_call *call, const char *user,
                        struct grpc_serve_answer *a)
{
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0) {
    a->status = GRPC_SERVE_INTERNAL;
    a->status_message = cap_xstrdup("cannot start the call: no pipe");
    return;
  }
  serve_lock_state(g->sv); /* no other thread inside SQLite, nor reloading, while forking */
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    child(g->opt, serve_registry(g->sv), call, user, p[1]);
  }
  serve_unlock_state(g->sv);
  close(p[1]);
  struct child_head h = {.outcome = GW_OUTCOME_FAILED, .code = EIO};
  struct cap_buf text = {0};
  bool ok = pid > 0 && read_back(p[0], &h, &text);
  close(p[0]);
  if (pid > 0)
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
      ;
  const char *msg = text.data ? text.data : "";
  if (!ok) {
    a->status = GRPC_SERVE_INTERNAL;
    a->status_message = cap_xstrdup("the call's process ended without an answer");
  } else if (call->health) { /* not ready is an answer, not a failed call */
    a->success = h.outcome == GW_OUTCOME_OK;
    a->error = a->success ? NULL : cap_xstrdup(msg);
  } else if (h.outcome == GW_OUTCOME_OK) {
    a->success = true;
    a->result = cap_xstrdup(msg);
  } else if (h.outcome == GW_OUTCOME_DENIED || h.outcome == GW_OUTCOME_AWAITING_APPROVAL) {
    a->status = GRPC_SERVE_PERMISSION_DENIED;
    a->status_message = cap_xstrdup(msg);
  } else if (h.outcome == GW_OUTCOME_HOST_CANNOT_ENFORCE) {
    a->status = GRPC_SERVE_UNAVAILABLE;
    a->status_message = cap_xstrdup(msg);
  } else if (h.code == ENOENT) {
    a->status = GRPC_SERVE_NOT_FOUND;
    a->status_message = cap_xstrdup(msg);
  } else { /* the tool failed, or its arguments did not validate: the call's answer */
    a->error = cap_xstrdup(msg);
  }
  cap_buf_free(&text);
}

static void handler(void *arg, const struct grpc_serve_call *call, struct grpc_serve_answer *a)
{
  struct serve_grpc *g = arg;
  _cleanup_free_ char *user = call->bearer ? serve_authenticate(g->sv, call->bearer) : NULL;
  if (!user) {
    a->status = GRPC_SERVE_UNAUTHENTICATED;
    a->status_message = cap_xstrdup(
        "a bearer token is needed (metadata `authorization: Bearer TOKEN`; `capsule access "
        "issue NAME` makes one)");
    return;
  }
  if (call->health && (serve_stopping(g->sv) || !g->opt->only)) {
    a->success = !serve_stopping(g->sv);
    a->error = a->success ? NULL : cap_xstrdup("capsule serve is stopping");
    return;
  }
  if (serve_stopping(g->sv)) {
    a->status = GRPC_SERVE_UNAVAILABLE;
    a->status_message = cap_xstrdup("capsule serve is stopping");
    return;
  }
  if (!call->health)
    serve_log(g->sv, "info", "grpc call", "tool", call->tool_name, "user", user);
  answer_call(g, call, user, a);
}

int serve_grpc_start(struct serve *sv, const struct serve_options *opt, struct serve_grpc **ret,
                     struct cap_error *err)
{
  *ret = NULL;
  struct serve_grpc *g = cap_xcalloc(1, sizeof *g);
  g->sv = sv;
  g->opt = opt;
  struct grpc_serve_options o = {.address = opt->grpc_addr,
                                 .tls_cert = opt->tls_cert,
                                 .tls_key = opt->tls_key,
                                 .handler = handler,
                                 .arg = g};
  int port = 0;
  int r = grpc_serve_start(&o, &g->srv, &port, err);
  if (r < 0) {
    free(g);
    return r;
  }
  *ret = g;
  return 0;
}

void serve_grpc_stop(struct serve_grpc *g, int drain_ms)
{
  if (!g)
    return;
  grpc_serve_stop(g->srv, drain_ms);
  free(g);
}
