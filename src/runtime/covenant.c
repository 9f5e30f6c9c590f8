#include "runtime/covenant.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/base58.h"
#include "core/cleanup.h"
#include "core/diag.h"
#include "core/json.h"
#include "sandbox/sandbox.h"

static int64_t now_realtime_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The line the agent reads: the fields the Covenant format gives
 * (docs/manifests.md), capsule filling id, issuer and issued_at. */
static void request_line(const struct gw_call *call, const struct cap_node *args,
                         struct cap_buf *out)
{
  struct cap_jw w;
  cap_jw_init(&w, out, false);
  char id[37];
  gw_uuid4(id);
  const struct cap_node *text = cap_node_get(args, "text");
  const struct cap_node *priority = cap_node_get(args, "priority");
  const struct cap_node *parent = cap_node_get(args, "parent");
  _cleanup_free_ char *display =
      call->issuer ? cap_xstrdup(call->issuer->display) : cap_xasprintf("%s@local", call->user);
  char pubkey[CAP_BASE58_SIZE(32)] = "";
  if (call->issuer)
    cap_base58_encode(call->issuer->pubkey, 32, pubkey);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "id");
  cap_jw_string(&w, id);
  cap_jw_key(&w, "text");
  cap_jw_node(&w, text);
  cap_jw_key(&w, "issuer");
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "display");
  cap_jw_string(&w, display);
  cap_jw_key(&w, "pubkey");
  cap_jw_string(&w, pubkey);
  cap_jw_end_object(&w);
  cap_jw_key(&w, "issued_at");
  cap_jw_int(&w, now_realtime_ms());
  cap_jw_key(&w, "priority");
  if (priority)
    cap_jw_node(&w, priority);
  else
    cap_jw_string(&w, "normal");
  cap_jw_key(&w, "parent");
  if (parent)
    cap_jw_node(&w, parent);
  else
    cap_jw_null(&w);
  cap_jw_end_object(&w);
  cap_buf_putc(out, '\n');
}

enum gw_outcome covenant_run(const struct gw_call *call, const struct cap_spec *spec,
                             const struct cap_node *args, char *const *env, size_t n_env,
                             char **result, struct cap_error *err)
{
  if (args->kind != CAP_NODE_OBJECT)
    return cap_error_set(err, EINVAL, "a Covenant dispatch takes a JSON object with \"text\""),
           GW_OUTCOME_FAILED;
  struct cap_strv argv = {0};
  _cleanup_free_ char *entry = NULL;
  if (spec->runtime.command.len) {
    for (size_t i = 0; i < spec->runtime.command.len; i++)
      cap_strv_push(&argv, spec->runtime.command.v[i]);
  } else if (spec->runtime.entry) {
    entry = spec->runtime.entry[0] == '/'
                ? cap_xstrdup(spec->runtime.entry)
                : cap_xasprintf("%s/%s", spec->package_dir, spec->runtime.entry);
    if (spec->runtime.interpreter)
      cap_strv_push(&argv, spec->runtime.interpreter);
    cap_strv_push(&argv, entry);
  } else {
    return cap_error_set(err, EINVAL, "capability %s names no program to run", spec->id),
           GW_OUTCOME_FAILED;
  }
  char **cmd = cap_xcalloc(argv.len + 1, sizeof *cmd); /* NULL-terminated for exec */
  memcpy(cmd, argv.v, argv.len * sizeof *cmd);
  struct cap_buf line = {0};
  request_line(call, args, &line);
  enum gw_outcome o = covenant_run_line(call, spec, cmd, &line, env, n_env, result, err);
  cap_buf_free(&line);
  free(cmd);
  cap_strv_free(&argv);
  return o;
}

static uint64_t tv_ms(const struct timeval *tv)
{
  return (uint64_t)tv->tv_sec * 1000 + (uint64_t)tv->tv_usec / 1000;
}

/* user and system CPU of the children reaped in between */
static uint64_t cpu_ms_between(const struct rusage *a, const struct rusage *b)
{
  uint64_t x = tv_ms(&a->ru_utime) + tv_ms(&a->ru_stime);
  uint64_t y = tv_ms(&b->ru_utime) + tv_ms(&b->ru_stime);
  return y > x ? y - x : 0;
}

/* The tool's stderr: appended to LOG_DIR/<capability>.log, else dropped.
 * *path names the log for messages (NULL when none). */
static int open_log(const struct gw_call *call, const struct cap_spec *spec, char **path)
{
  *path = NULL;
  int fd = -1;
  *path = gw_tool_log_prepare(call->log_dir, spec);
  if (*path)
    fd = open(*path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  return fd >= 0 ? fd : open("/dev/null", O_WRONLY | O_CLOEXEC);
}

/* Reads the memory file the agent wrote, up to cap bytes; *overflow when
 * it wrote more. */
static void read_output(int out, size_t cap, struct cap_buf *got, bool *overflow)
{
  struct stat sb;
  *overflow = fstat(out, &sb) < 0 || (size_t)sb.st_size > cap;
  if (*overflow || sb.st_size == 0)
    return;
  got->data = cap_xmalloc((size_t)sb.st_size + 1);
  ssize_t n = pread(out, got->data, (size_t)sb.st_size, 0);
  got->len = n > 0 ? (size_t)n : 0;
  got->data[got->len] = '\0';
}

/* Exactly one JSON line (an object), a final newline allowed. */
static enum gw_outcome judge_line(const struct cap_buf *got, char **result, struct cap_error *err)
{
  size_t len = got->len;
  if (len && got->data[len - 1] == '\n')
    len--;
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  enum gw_outcome o = GW_OUTCOME_FAILED;
  if (len == 0 || memchr(got->data, '\n', len) ||
      cap_json_parse(doc, got->data, len, "stdout", 0, &diags) < 0 ||
      doc->root->kind != CAP_NODE_OBJECT) {
    cap_error_set(err, EPROTO,
                  "the agent's stdout is not one JSON object on one line (%zu bytes): a runtime "
                  "failure",
                  got->len);
  } else {
    *result = cap_xstrndup(got->data, len);
    o = GW_OUTCOME_OK;
  }
  cap_diags_free(&diags);
  cap_doc_free(doc);
  return o;
}

enum gw_outcome covenant_run_line(const struct gw_call *call, const struct cap_spec *spec,
                                  char *const *cmd, const struct cap_buf *line, char *const *env,
                                  size_t n_env, char **result, struct cap_error *err)
{
  /* stdin and stdout are memory files: no thread (the sandbox is cloned
   * from this process, which must then be single-threaded), the request
   * read from the start, and the agent's own memory limit pays for its
   * output */
  _cleanup_close_ int in = memfd_create("capsule-agent-stdin", MFD_CLOEXEC);
  _cleanup_close_ int out = memfd_create("capsule-agent-stdout", MFD_CLOEXEC);
  _cleanup_free_ char *log_path = NULL;
  _cleanup_close_ int log_fd = open_log(call, spec, &log_path);
  if (in < 0 || out < 0 || log_fd < 0)
    return cap_error_errno(err, errno, "cannot set up the agent's stdio"), GW_OUTCOME_FAILED;
  if (write(in, line->data, line->len) != (ssize_t)line->len || lseek(in, 0, SEEK_SET) != 0)
    return cap_error_errno(err, errno, "cannot prepare the agent's stdin"), GW_OUTCOME_FAILED;

  struct cap_spec run_spec = *spec; /* shallow: only the wall clock changes */
  uint64_t deadline = call->deadline_ms ? call->deadline_ms : GW_DEFAULT_DEADLINE_MS;
  if (!run_spec.limits.wall_ms || run_spec.limits.wall_ms > deadline)
    run_spec.limits.wall_ms = deadline;
  struct sandbox_options opt = {
      .argv = cmd,
      .extra_env = env,
      .n_extra_env = n_env,
      .redirect_stdio = true,
      .stdio = {in, out, log_fd},
      .hidden = call->hidden,
      .n_hidden = call->n_hidden,
      .id_base = call->id_base,
      .log_max_bytes = gw_tool_log_bound(spec), /* a call cannot fill the disk */

      .proxy = {.sink = call->egress_sink}, /* the call's egress log */
  };
  struct sandbox_result res;
  struct rusage before, after; /* the sandbox is this process's child, reaped in sandbox_run */
  getrusage(RUSAGE_CHILDREN, &before);
  int r = sandbox_run(&run_spec, &opt, &res, err);
  getrusage(RUSAGE_CHILDREN, &after);
  if (call->cpu_ms && r == 0)
    *call->cpu_ms =
        res.cpu_ms > cpu_ms_between(&before, &after) ? res.cpu_ms : cpu_ms_between(&before, &after);
  if (r < 0)
    return r == -ENOTSUP ? GW_OUTCOME_HOST_CANNOT_ENFORCE : GW_OUTCOME_FAILED;
  const char *see = log_path ? "; its stderr is in " : "";
  if (res.killed_by)
    return cap_error_set(err, ETIMEDOUT, "the agent was stopped: %s exceeded%s%s", res.killed_by,
                         see, log_path ? log_path : ""),
           GW_OUTCOME_KILLED_BY_LIMIT;
  if (res.exit_status != 0)
    return cap_error_set(err, EIO, "the agent failed with exit status %d%s%s", res.exit_status, see,
                         log_path ? log_path : ""),
           GW_OUTCOME_FAILED;
  size_t cap = call->output_cap ? call->output_cap : GW_DEFAULT_OUTPUT_CAP;
  struct cap_buf got = {0};
  bool overflow = false;
  read_output(out, cap, &got, &overflow);
  enum gw_outcome o =
      overflow
          ? (cap_error_set(err, EFBIG,
                           "the agent wrote more than %zu bytes to stdout (the output cap)", cap),
             GW_OUTCOME_FAILED)
          : judge_line(&got, result, err);
  cap_buf_free(&got);
  return o;
}
