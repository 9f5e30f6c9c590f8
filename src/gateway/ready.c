#include "gateway/ready.h"

#include "net/http.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/io.h"
#include "net/http.h"
#include "gateway/volumes.h"
#include "gateway/selu.h"
#include "image/image.h"
#include "gateway/grants.h"
#include "gateway/plugin_state.h"
#include "runtime/talos.h"
#include "sandbox/sandbox.h"

/* What must hold inside the sandbox, as pairs: "exec" PROGRAM (a name is
 * looked up in PATH) or "read" FILE. The first failure is printed. */
static const char probe_script[] =
    "while [ $# -ge 2 ]; do\n"
    "  k=$1 p=$2; shift 2\n"
    "  if [ \"$k\" = exec ] && [ \"${p#*/}\" = \"$p\" ]; then\n"
    "    command -v \"$p\" >/dev/null 2>&1 && continue\n"
    "    echo \"$p is not on the sandbox's PATH\"; exit 1\n"
    "  fi\n"
    "  [ -e \"$p\" ] || { echo \"$p does not exist in the sandbox, or its user cannot reach it\"; "
    "exit 1; }\n"
    "  [ -f \"$p\" ] || { echo \"$p is not a regular file\"; exit 1; }\n"
    "  if [ \"$k\" = exec ]; then [ -x \"$p\" ] || { echo \"$p is not executable by the sandbox's "
    "user\"; exit 1; }\n"
    "  else [ -r \"$p\" ] || { echo \"$p is not readable by the sandbox's user\"; exit 1; }; fi\n"
    "done\n";

static const char *const interpreters[] = {"node", "python3", "python", "deno", "bun",
                                           "ruby", "perl",    "sh",     "bash", NULL};

static bool is_interpreter(const char *prog)
{
  const char *base = strrchr(prog, '/');
  base = base ? base + 1 : prog;
  for (size_t i = 0; interpreters[i]; i++)
    if (strcmp(base, interpreters[i]) == 0)
      return true;
  return false;
}

static void probe(struct cap_strv *checks, const char *kind, const char *path)
{
  cap_strv_push(checks, kind);
  cap_strv_push(checks, path);
}

/* A Selu or MCP server: its program ("./x" is the package's) and, for an
 * interpreter, the script it is given (relative to the package, where the
 * server starts). */
static void selu_probes(const struct cap_spec *spec, struct cap_strv *checks)
{
  const struct cap_strv *cmd = &spec->runtime.command;
  const char *prog = cmd->v[0];
  _cleanup_free_ char *abs = strncmp(prog, "./", 2) == 0
                                 ? cap_xasprintf("%s/%s", spec->package_dir, prog + 2)
                                 : cap_xstrdup(prog);
  probe(checks, "exec", abs);
  if (!is_interpreter(prog) || cmd->len < 2 || cmd->v[1][0] == '-')
    return;
  const char *script = cmd->v[1];
  _cleanup_free_ char *path =
      script[0] == '/' ? cap_xstrdup(script) : cap_xasprintf("%s/%s", spec->package_dir, script);
  probe(checks, "read", path);
}

/* The entry points to check, or an outcome (with why) when there is
 * nothing the sandbox could check. */
static enum gw_outcome entry_probes(const struct cap_spec *spec, struct cap_strv *checks,
                                    struct cap_error *why)
{
  const struct cap_runtime *rt = &spec->runtime;
  switch (rt->kind) {
  case CAP_RUNTIME_HERMES:
    return cap_error_set(why, ENOTSUP, "the hermes runtime is not supported"),
           GW_OUTCOME_HOST_CANNOT_ENFORCE;
  case CAP_RUNTIME_EXEC:
    return cap_error_set(why, ENOTSUP, "no tools: a command sandbox for `capsule run`"),
           GW_OUTCOME_FAILED;
  case CAP_RUNTIME_GRPC: selu_probes(spec, checks); return GW_OUTCOME_OK;
  case CAP_RUNTIME_MCP: /* started like a Selu server: from its package */
    selu_probes(spec, checks);
    return GW_OUTCOME_OK;
  case CAP_RUNTIME_TALOS_NODE: {
    _cleanup_free_ char *module = talos_module_path(spec);
    probe(checks, "exec", "node");
    probe(checks, "read", module);
    return GW_OUTCOME_OK;
  }
  case CAP_RUNTIME_JSONL: break;
  }
  if (rt->command.len) {
    probe(checks, "exec", rt->command.v[0]);
    return GW_OUTCOME_OK;
  }
  if (!rt->entry)
    return cap_error_set(why, EINVAL, "the manifest names no program to run"), GW_OUTCOME_FAILED;
  _cleanup_free_ char *entry = rt->entry[0] == '/'
                                   ? cap_xstrdup(rt->entry)
                                   : cap_xasprintf("%s/%s", spec->package_dir, rt->entry);
  if (rt->interpreter)
    probe(checks, "exec", rt->interpreter);
  probe(checks, rt->interpreter ? "read" : "exec", entry);
  return GW_OUTCOME_OK;
}

/* Runs the probe in the capability's sandbox: its grants, masks and
 * limits, the network blocked (nothing is fetched), a short wall clock. */
static enum gw_outcome dry_run(const struct cap_spec *spec, const struct cap_strv *checks,
                               const char *const *hidden, size_t n_hidden, struct cap_error *why)
{
  struct cap_strv argv = {0};
  cap_strv_push(&argv, "/bin/sh");
  cap_strv_push(&argv, "-c");
  cap_strv_push(&argv, probe_script);
  cap_strv_push(&argv, "capsule-ready");
  for (size_t i = 0; i < checks->len; i++)
    cap_strv_push(&argv, checks->v[i]);
  char **cmd = cap_xcalloc(argv.len + 1, sizeof *cmd);
  memcpy(cmd, argv.v, argv.len * sizeof *cmd);
  _cleanup_close_ int out = memfd_create("capsule-ready", MFD_CLOEXEC);
  _cleanup_close_ int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  struct cap_spec run_spec = *spec; /* shallow: the network and wall clock change */
  /* no session yet: a workspace or cache, made at the call, is left out */
  struct cap_fs_grant *grants = NULL;
  gw_volumes_bind(spec, NULL, NULL, NULL, &grants, &run_spec.n_grants, NULL, NULL, why);
  run_spec.grants = grants;
  run_spec.network.mode = CAP_NET_BLOCKED;
  run_spec.limits.wall_ms = 10000;
  struct sandbox_options opt = {
      .argv = cmd,
      .workdir = spec->runtime.kind == CAP_RUNTIME_GRPC || spec->runtime.kind == CAP_RUNTIME_MCP
                     ? spec->package_dir
                     : NULL,
      .redirect_stdio = true,
      .stdio = {null, out, null},
      .hidden = hidden,
      .n_hidden = n_hidden,
  };
  struct sandbox_result res;
  enum gw_outcome o = GW_OUTCOME_OK;
  int r = out < 0 || null < 0 ? cap_error_errno(why, errno, "cannot set up the dry run")
                              : sandbox_run(&run_spec, &opt, &res, why);
  if (r < 0) {
    cap_error_prefix(why, "its sandbox cannot be set up");
    o = r == -ENOTSUP ? GW_OUTCOME_HOST_CANNOT_ENFORCE : GW_OUTCOME_FAILED;
  } else if (res.killed_by || res.exit_status != 0 || res.term_signal) {
    char line[512] = "";
    ssize_t n = pread(out, line, sizeof line - 1, 0);
    line[n > 0 ? n : 0] = '\0';
    line[strcspn(line, "\n")] = '\0';
    if (line[0])
      cap_error_set(why, ENOENT, "%s", line);
    else
      cap_error_set(why, EIO, "the dry run in its sandbox failed (%s)",
                    res.killed_by ? res.killed_by : "no reason given");
    o = GW_OUTCOME_FAILED;
  }
  free(cmd);
  cap_strv_free(&argv);
  gw_volumes_free(grants, run_spec.n_grants);
  return o;
}

/* A step that starts a sandbox (a dry run, a Talos module's probe), made
 * in a process of its own by glibc's fork(): the sandbox's clone is a raw
 * clone3, which glibc's malloc does not see, and in a process with threads
 * (serve's main thread, its gRPC process, the dashboard) a clone made while
 * another thread held an arena's lock left the sandbox's pid 1 waiting for
 * it forever in its own fork, and the caller with it (serve's main thread:
 * every session stalled). glibc's fork takes those locks around itself:
 * its child has one thread, whose clone is safe. The child keeps none of
 * the caller's descriptors but the pipe that brings back the outcome and
 * the message. */
typedef enum gw_outcome apart_fn(const void *arg, struct cap_error *why);

static _Noreturn void apart_child(apart_fn *fn, const void *arg, int fd)
{
  if (fd != 3 && dup3(fd, 3, O_CLOEXEC) < 0)
    _exit(1);
  syscall(__NR_close_range, 4U, ~0U, 0U); /* another session's sockets not held while it runs */
  struct cap_error e = {0};
  int head[2] = {(int)fn(arg, &e), e.code};
  struct cap_buf b = {0};
  cap_buf_append(&b, (const char *)head, sizeof head);
  if (e.message)
    cap_buf_puts(&b, e.message);
  (void)cap_write_all(3, b.data, b.len, 0);
  _exit(0);
}

/* How long a step apart may take: a dry run's sandbox is bounded (its
 * setup, sandbox/spawn.c, then a 10 s wall clock), a module's probe by
 * its 30 s deadline; past this generous limit the process is stuck, and
 * its caller (serve's main thread) must not be. */
#define APART_LIMIT_MS 120000

static int apart_limit_ms(void)
{
#ifdef CAPSULE_TEST_HOOKS /* tests/sandbox/setup-bound.sh */
  const char *ms = getenv("CAPSULE_TEST_APART_LIMIT_MS");
  if (ms && atoi(ms) > 0)
    return atoi(ms);
#endif
  return APART_LIMIT_MS;
}

/* What the step's process wrote, until it closed the pipe: false when
 * limit_ms passed first. */
static bool read_apart(int fd, int limit_ms, struct cap_buf *b)
{
  uint64_t deadline = cap_now_ms(CLOCK_MONOTONIC) + (uint64_t)limit_ms;
  char buf[4096];
  for (;;) {
    uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
    if (now >= deadline)
      return false;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, (int)(deadline - now));
    if (n < 0 && errno != EINTR)
      return true; /* cannot wait: what came is the answer */
    if (n <= 0)
      continue;
    ssize_t got = cap_read_some(fd, buf, sizeof buf);
    if (got <= 0)
      return true;
    cap_buf_append(b, buf, (size_t)got);
  }
}

static enum gw_outcome apart(apart_fn *fn, const void *arg, const char *what, struct cap_error *why)
{
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return cap_error_errno(why, errno, "cannot set up the %s", what), GW_OUTCOME_FAILED;
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    apart_child(fn, arg, p[1]);
  }
  close(p[1]);
  if (pid < 0) {
    close(p[0]);
    return cap_error_errno(why, errno, "cannot fork the %s", what), GW_OUTCOME_FAILED;
  }
  struct cap_buf b = {0};
  int limit = apart_limit_ms();
  bool done = read_apart(p[0], limit, &b);
  close(p[0]);
  if (!done) /* its sandbox's pid 1 dies with it (PR_SET_PDEATHSIG), the
              * run directory left is removed by the next sandbox's start */
    kill(pid, SIGKILL);
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
    ;
  int head[2];
  enum gw_outcome o = GW_OUTCOME_FAILED;
  if (!done) {
    cap_error_set(why, ETIMEDOUT,
                  "the %s did not finish within %g s (stuck: its process was killed)", what,
                  limit / 1000.0);
  } else if (b.len < sizeof head) {
    cap_error_set(why, EIO, "the %s's process ended without an answer", what);
  } else {
    memcpy(head, b.data, sizeof head);
    o = (enum gw_outcome)head[0];
    if (b.len > sizeof head || head[1])
      cap_error_set(why, head[1] ? head[1] : EIO, "%.*s", (int)(b.len - sizeof head),
                    b.data + sizeof head);
  }
  cap_buf_free(&b);
  return o;
}

struct dry_args {
  const struct cap_spec *spec;
  const struct cap_strv *checks;
  const char *const *hidden;
  size_t n_hidden;
};

static enum gw_outcome dry_run_fn(const void *arg, struct cap_error *why)
{
  const struct dry_args *d = arg;
  return dry_run(d->spec, d->checks, d->hidden, d->n_hidden, why);
}

struct probe_args {
  const struct gw_call *call;
  const struct cap_spec *spec;
  const struct talos_input *in;
};

static enum gw_outcome talos_probe_fn(const void *arg, struct cap_error *why)
{
  const struct probe_args *a = arg;
  return talos_probe(a->call, a->spec, a->in, NULL, why);
}

static enum gw_outcome hermes_ready(struct cap_error *why)
{
  const char *base = getenv("HERMES_API_BASE_URL");
  struct http_url url;
  if (!base || !*base)
    return cap_error_set(why, ENOTSUP, "it runs on Hermes: set HERMES_API_BASE_URL"),
           GW_OUTCOME_HOST_CANNOT_ENFORCE;
  if (!http_parse_url(base, &url))
    return cap_error_set(why, EINVAL, "HERMES_API_BASE_URL is not an http:// or https:// URL"),
           GW_OUTCOME_HOST_CANNOT_ENFORCE;
  static const char *const files[] = {"HERMES_CA_FILE", "HERMES_CLIENT_CERT", "HERMES_CLIENT_KEY"};
  for (size_t i = 0; url.tls && i < ARRAY_SIZE(files); i++) {
    const char *f = getenv(files[i]);
    if (f && *f && access(f, R_OK) < 0)
      return cap_error_set(why, errno, "%s %s cannot be read (%s)", files[i], f, strerror(errno)),
             GW_OUTCOME_HOST_CANNOT_ENFORCE;
  }
  const char *cert = getenv("HERMES_CLIENT_CERT"), *key = getenv("HERMES_CLIENT_KEY");
  if (!(cert && *cert) != !(key && *key))
    return cap_error_set(why, EINVAL, "%s is set without %s: set both or neither",
                         cert && *cert ? "HERMES_CLIENT_CERT" : "HERMES_CLIENT_KEY",
                         cert && *cert ? "HERMES_CLIENT_KEY" : "HERMES_CLIENT_CERT"),
           GW_OUTCOME_HOST_CANNOT_ENFORCE;
  if (!url.tls && cert && *cert)
    return cap_error_set(why, EINVAL,
                         "HERMES_CLIENT_CERT is set but HERMES_API_BASE_URL is http://: a client "
                         "certificate needs https://"),
           GW_OUTCOME_HOST_CANNOT_ENFORCE;
  return GW_OUTCOME_OK;
}

static enum gw_outcome image_ready(const struct cap_spec *spec, const char *image_dir,
                                   struct cap_error *why)
{
  struct image_info info;
  int r = image_dir
              ? gw_selu_image_resolve(image_dir, spec, &info, why)
              : cap_error_set(why, ENOENT, "no image store to run %s from", spec->runtime.image);
  char **argv = r == 0 ? image_command(&info, why) : NULL;
  bool runs = argv != NULL;
  image_strv_free(argv);
  image_info_free(&info);
  if (r < 0)
    return r == -ENOENT ? GW_OUTCOME_HOST_CANNOT_ENFORCE : GW_OUTCOME_FAILED;
  return runs ? GW_OUTCOME_OK : GW_OUTCOME_FAILED;
}

enum gw_outcome gw_ready(const struct cap_spec *spec, const char *image_dir,
                         const char *const *hidden, size_t n_hidden, struct cap_error *why)
{
  _cleanup_free_ char *runsc =
      spec->sandbox.backend == CAP_BACKEND_GVISOR && spec->runtime.kind != CAP_RUNTIME_HERMES
          ? sandbox_runsc_path()
          : NULL;
  if (spec->sandbox.backend == CAP_BACKEND_GVISOR && spec->runtime.kind != CAP_RUNTIME_HERMES &&
      !runsc) /* the dry run below runs under runsc when it is there */
    return cap_error_set(why, ENOTSUP,
                         "it asks for linux-gvisor and gVisor's runsc is not installed "
                         "(apt-get install runsc)"),
           GW_OUTCOME_HOST_CANNOT_ENFORCE;
  if (spec->runtime.kind == CAP_RUNTIME_HERMES) /* nothing runs here: the endpoint must be set */
    return hermes_ready(why);

  if (spec->runtime.kind == CAP_RUNTIME_GRPC && !spec->runtime.command.len)
    return image_ready(spec, image_dir, why);
  struct cap_strv checks = {0};
  enum gw_outcome o = entry_probes(spec, &checks, why);
  if (o == GW_OUTCOME_OK)
    o = apart(dry_run_fn, &(struct dry_args){spec, &checks, hidden, n_hidden}, "dry run", why);
  cap_strv_free(&checks);
  return o;
}

enum gw_outcome gw_ready_module(const struct cap_spec *spec, struct gw_state *st, const char *user,
                                const char *const *hidden, size_t n_hidden, const char *cache_dir,
                                struct cap_error *why)
{
  if (spec->runtime.kind != CAP_RUNTIME_TALOS_NODE)
    return GW_OUTCOME_OK;
  struct gw_talos_config cfg = {0};
  if (st && gw_talos_config_load(st, spec, user, NULL, &cfg, why) < 0)
    return GW_OUTCOME_FAILED;
  struct gw_call call = {
      .capability = spec->id,
      .user = user,
      .deadline_ms = 30000,
      .output_cap = 1u << 20,
      .cache_dir = cache_dir,
      .hidden = hidden,
      .n_hidden = n_hidden,
  };
  struct gw_granted g;
  enum gw_outcome o = GW_OUTCOME_FAILED;
  if (gw_spec_with_grants(st, spec, &g, why) == 0) {
    /* the module's probe starts a sandbox: apart, as the dry run (above);
     * its configuration (tokens refreshed in the state) was read here */
    o = apart(talos_probe_fn, &(struct probe_args){&call, &g.spec, &cfg.in}, "module's probe", why);
    gw_granted_free(&g);
  }
  gw_talos_config_free(&cfg, spec);
  return o;
}
