#include "gateway/call.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/diag.h"
#include "core/json.h"
#include "gateway/selu.h"
#include "jsonschema/jsonschema.h"
#include "sandbox/sandbox.h"

enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_HOST = 3, EXIT_DENIED = 4 };

static const char *const policy_names[] = {"allow", "ask", "block"};

static uint64_t now_ms(clockid_t clock)
{
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int gw_effective_policy(struct gw_state *st, const char *cap, const struct cap_tool *tool,
                        const char *user, enum cap_policy *policy, const char **source,
                        struct cap_error *err)
{
  bool found = false;
  int r = 0;
  if (user && *user) {
    r = gw_policy_get(st, cap, tool->name, user, policy, &found, err);
    if (r < 0 || found) {
      *source = "user";
      return r;
    }
  }
  r = gw_policy_get(st, cap, tool->name, "", policy, &found, err);
  if (r < 0 || found) {
    *source = "operator";
    return r;
  }
  *policy = tool->policy; /* the manifest's recommendation, or block */
  *source = tool->policy_source ? tool->policy_source : "default";
  return 0;
}

/* Asks on the controlling terminal; false when there is none (*asked
 * false) or the answer is not yes. */
static bool prompt_tty(const struct gw_call *call, bool *asked)
{
  *asked = false;
  int fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return false;
  if (!isatty(fd)) {
    close(fd);
    return false;
  }
  *asked = true;
  dprintf(fd, "capsule: %s wants to call %s.%s with %.*s%s\nAllow this call? [y/N] ", call->user,
          call->capability, call->tool, (int)(call->args_len > 400 ? 400 : call->args_len),
          call->args, call->args_len > 400 ? "..." : "");
  char answer[16] = "";
  ssize_t n = read(fd, answer, sizeof answer - 1);
  close(fd);
  return n > 0 && (answer[0] == 'y' || answer[0] == 'Y');
}

/* ---- the Covenant runtime: one JSON line in, one JSON line out ---- */

void gw_uuid4(char out[37])
{
  unsigned char b[16];
  randombytes_buf(b, sizeof b);
  b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
  b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
  snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
           b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
           b[14], b[15]);
}

/* The line the agent reads: the fields the seed gives, capsule filling id,
 * issuer and issued_at. */
static void request_line(const struct gw_call *call, const struct cap_node *args, struct cap_buf *out)
{
  struct cap_jw w;
  cap_jw_init(&w, out, false);
  char id[37];
  gw_uuid4(id);
  const struct cap_node *text = NULL, *priority = NULL, *parent = NULL;
  for (size_t i = 0; i < args->u.obj.len; i++) {
    const struct cap_member *m = &args->u.obj.items[i];
    if (strcmp(m->key, "text") == 0)
      text = m->value;
    else if (strcmp(m->key, "priority") == 0)
      priority = m->value;
    else if (strcmp(m->key, "parent") == 0)
      parent = m->value;
  }
  _cleanup_free_ char *display = cap_xasprintf("%s@local", call->user);
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
  cap_jw_string(&w, "");
  cap_jw_end_object(&w);
  cap_jw_key(&w, "issued_at");
  cap_jw_int(&w, (int64_t)now_ms(CLOCK_REALTIME));
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

static int run_once(const struct gw_call *call, const struct cap_spec *spec, char **cmd,
                    const struct cap_buf *line, char *const *env, size_t n_env, char **result,
                    struct cap_error *err);

/* A Covenant agent, once; *result is its JSON line. Returns an exit code. */
static int run_jsonl(const struct gw_call *call, const struct cap_spec *spec,
                     const struct cap_node *args, char *const *env, size_t n_env, char **result,
                     struct cap_error *err)
{
  if (spec->runtime.kind == CAP_RUNTIME_HERMES)
    return cap_error_set(err, ENOTSUP, "capability %s uses the hermes runtime (an HTTP endpoint), which "
                         "capsule does not call yet", spec->id), EXIT_HOST;
  struct cap_strv argv = {0};
  _cleanup_free_ char *entry = NULL;
  if (spec->runtime.command.len) {
    for (size_t i = 0; i < spec->runtime.command.len; i++)
      cap_strv_push(&argv, spec->runtime.command.v[i]);
  } else if (spec->runtime.entry) {
    entry = spec->runtime.entry[0] == '/' ? cap_xstrdup(spec->runtime.entry)
                                          : cap_xasprintf("%s/%s", spec->package_dir, spec->runtime.entry);
    if (spec->runtime.interpreter)
      cap_strv_push(&argv, spec->runtime.interpreter);
    cap_strv_push(&argv, entry);
  } else {
    return cap_error_set(err, EINVAL, "capability %s names no program to run", spec->id), EXIT_FAILED;
  }
  char **cmd = cap_xcalloc(argv.len + 1, sizeof *cmd); /* NULL-terminated for exec */
  memcpy(cmd, argv.v, argv.len * sizeof *cmd);
  struct cap_buf line = {0};
  request_line(call, args, &line);
  int code = run_once(call, spec, cmd, &line, env, n_env, result, err);
  cap_buf_free(&line);
  free(cmd);
  cap_strv_free(&argv);
  return code;
}

/* Runs cmd in spec's sandbox with line on stdin; *result is the one JSON
 * object it wrote on one line of stdout. Returns an exit code. */
static int run_once(const struct gw_call *call, const struct cap_spec *spec, char **cmd,
                    const struct cap_buf *line_in, char *const *env, size_t n_env, char **result,
                    struct cap_error *err)
{
  const struct cap_buf *line = line_in;
  /* stdout goes to a memory file, read when the agent is done: no thread
   * (the sandbox is cloned from this process, which must then be
   * single-threaded), and the agent's own memory limit pays for it */
  int in = memfd_create("capsule-agent-stdin", MFD_CLOEXEC),
      out = memfd_create("capsule-agent-stdout", MFD_CLOEXEC);
  _cleanup_free_ char *log_path = NULL;
  int log_fd = -1;
  if (call->log_dir) {
    mkdir(call->log_dir, 0700);
    log_path = cap_xasprintf("%s/%s.log", call->log_dir, spec->id);
    log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  }
  if (log_fd < 0)
    log_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  int code = EXIT_FAILED;
  if (in < 0 || out < 0 || log_fd < 0) {
    cap_error_errno(err, errno, "cannot set up the agent's stdio");
    goto done;
  }
  /* the request fits the pipe: written before the agent starts */
  /* the request, in a memory file the agent reads from the start */
  if (write(in, line->data, line->len) != (ssize_t)line->len || lseek(in, 0, SEEK_SET) != 0) {
    cap_error_errno(err, errno, "cannot prepare the agent's stdin");
    goto done;
  }

  struct cap_spec run_spec = *spec; /* shallow: only the wall clock changes */
  uint64_t deadline = call->deadline_ms ? call->deadline_ms : GW_DEFAULT_DEADLINE_MS;
  if (!run_spec.limits.wall_ms || run_spec.limits.wall_ms > deadline)
    run_spec.limits.wall_ms = deadline;
  struct sandbox_options opt = {
      .argv = cmd,
      .workdir = NULL,
      .extra_env = env,
      .n_extra_env = n_env,
      .redirect_stdio = true,
      .stdio = {in, out, log_fd},
      .hidden = call->hidden,
      .n_hidden = call->n_hidden,
  };
  size_t cap = call->output_cap ? call->output_cap : GW_DEFAULT_OUTPUT_CAP;
  struct sandbox_result res;
  int r = sandbox_run(&run_spec, &opt, &res, err);
  struct stat sb;
  bool overflow = r == 0 && (fstat(out, &sb) < 0 || (size_t)sb.st_size > cap);
  struct cap_buf got = {0};
  if (r == 0 && !overflow && sb.st_size > 0) {
    got.data = cap_xmalloc((size_t)sb.st_size + 1);
    ssize_t n = pread(out, got.data, (size_t)sb.st_size, 0);
    got.len = n > 0 ? (size_t)n : 0;
    got.data[got.len] = '\0';
  }
  if (r < 0) {
    code = r == -ENOTSUP ? EXIT_HOST : EXIT_FAILED;
  } else if (res.killed_by) {
    cap_error_set(err, ETIMEDOUT, "the agent was stopped: %s exceeded%s%s", res.killed_by,
                  log_path ? "; its stderr is in " : "", log_path ? log_path : "");
  } else if (res.exit_status != 0) {
    cap_error_set(err, EIO, "the agent failed with exit status %d%s%s", res.exit_status,
                  log_path ? "; its stderr is in " : "", log_path ? log_path : "");
  } else if (overflow) {
    cap_error_set(err, EFBIG, "the agent wrote more than %zu bytes to stdout (the output cap)", cap);
  } else {
    /* exactly one JSON line (an object), a final newline allowed */
    size_t len = got.len;
    if (len && got.data[len - 1] == '\n')
      len--;
    struct cap_doc *doc = cap_doc_new();
    struct cap_diags diags = {0};
    if (len == 0 || memchr(got.data, '\n', len) ||
        cap_json_parse(doc, got.data, len, "stdout", 0, &diags) < 0 ||
        doc->root->kind != CAP_NODE_OBJECT) {
      cap_error_set(err, EPROTO,
                    "the agent's stdout is not one JSON object on one line (%zu bytes): a runtime "
                    "failure",
                    got.len);
    } else {
      *result = cap_xstrndup(got.data, len);
      code = EXIT_OK;
    }
    cap_diags_free(&diags);
    cap_doc_free(doc);
  }
  cap_buf_free(&got);
done:
  if (in >= 0)
    close(in);
  if (out >= 0)
    close(out);
  if (log_fd >= 0)
    close(log_fd);
  return code;
}

/* ---- Talos: the tool's JS module, through a Node shim ---- */

/* Imports the module, calls the export named by the function with (args,
 * context) and writes one line: {"ok": true, "result": ...} or {"ok":
 * false, "error": "..."} for a thrown Error. The context carries config
 * (settings and credentials merged), dataDir, settings and credentials. */
static const char talos_shim[] =
    "import { pathToFileURL } from 'node:url';\n"
    "import { mkdirSync } from 'node:fs';\n"
    "let input = '';\n"
    "for await (const chunk of process.stdin) input += chunk;\n"
    "const req = JSON.parse(input);\n"
    "const done = (o) => process.stdout.write(JSON.stringify(o) + '\\n', () => process.exit(0));\n"
    "try {\n"
    "  mkdirSync(req.dataDir, { recursive: true });\n"
    "  const mod = await import(pathToFileURL(req.module).href);\n"
    "  const fn = typeof mod[req.function] === 'function' ? mod[req.function]\n"
    "    : mod.default && typeof mod.default[req.function] === 'function' ? mod.default[req.function] : null;\n"
    "  if (!fn) throw new Error(`the module exports no function named ${req.function}`);\n"
    "  const config = { ...req.settings, ...req.credentials };\n"
    "  const result = await fn(req.args, { config, dataDir: req.dataDir, settings: req.settings,\n"
    "                                       credentials: req.credentials });\n"
    "  done({ ok: true, result: result === undefined ? null : result });\n"
    "} catch (e) {\n"
    "  done({ ok: false, error: e instanceof Error ? e.message : String(e) });\n"
    "}\n";

static int run_talos(const struct gw_call *call, const struct cap_spec *spec,
                     const struct cap_tool *tool, const struct cap_node *args, char *const *handler,
                     char **result, struct cap_error *err)
{
  _cleanup_free_ char *module = cap_xasprintf("%s/%s", spec->package_dir,
                                               spec->runtime.entry ? spec->runtime.entry : "index.js");
  struct cap_buf line = {0};
  struct cap_jw w;
  cap_jw_init(&w, &line, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "module");
  cap_jw_string(&w, module);
  cap_jw_key(&w, "function");
  cap_jw_string(&w, tool->name);
  cap_jw_key(&w, "args");
  cap_jw_node(&w, args);
  cap_jw_key(&w, "settings");
  cap_jw_begin_object(&w);
  for (size_t i = 0; i < spec->n_settings; i++) {
    cap_jw_key(&w, spec->settings[i].name);
    if (spec->settings[i].default_value)
      cap_jw_node(&w, spec->settings[i].default_value);
    else
      cap_jw_null(&w);
  }
  cap_jw_end_object(&w);
  cap_jw_key(&w, "credentials");
  cap_jw_begin_object(&w);
  for (size_t i = 0; i < spec->n_secrets; i++)
    if (handler[i]) {
      cap_jw_key(&w, spec->secrets[i].name);
      cap_jw_string(&w, handler[i]);
    }
  cap_jw_end_object(&w);
  cap_jw_key(&w, "dataDir");
  cap_jw_string(&w, "/tmp/capsule-data");
  cap_jw_end_object(&w);
  cap_buf_putc(&line, '\n');
  char *cmd[] = {"node", "--input-type=module", "-e", (char *)talos_shim, NULL};
  char *raw = NULL;
  int code = run_once(call, spec, cmd, &line, NULL, 0, &raw, err);
  sodium_memzero(line.data, line.len); /* it held the credentials */
  cap_buf_free(&line);
  if (code != EXIT_OK)
    return code;
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  cap_json_parse(doc, raw, strlen(raw), "shim", 0, &diags);
  const struct cap_node *ok = NULL, *value = NULL, *error = NULL;
  for (size_t i = 0; doc->root && doc->root->kind == CAP_NODE_OBJECT && i < doc->root->u.obj.len; i++) {
    const struct cap_member *m = &doc->root->u.obj.items[i];
    if (strcmp(m->key, "ok") == 0)
      ok = m->value;
    else if (strcmp(m->key, "result") == 0)
      value = m->value;
    else if (strcmp(m->key, "error") == 0)
      error = m->value;
  }
  if (ok && ok->kind == CAP_NODE_BOOL && ok->u.boolean && value) {
    struct cap_buf b = {0};
    struct cap_jw rw;
    cap_jw_init(&rw, &b, false);
    cap_jw_node(&rw, value);
    *result = cap_buf_steal(&b);
  } else {
    cap_error_set(err, EIO, "the tool failed: %s",
                  error && error->kind == CAP_NODE_STRING ? error->u.str.ptr : "no result");
    code = EXIT_FAILED;
  }
  cap_diags_free(&diags);
  cap_doc_free(doc);
  free(raw);
  return code;
}

/* ---- the pipeline ---- */

static void free_env(char **env, size_t n)
{
  for (size_t i = 0; i < n; i++)
    gw_secret_free(env[i]);
  free(env);
}

/* Required secrets, found in gw_cred_lookup's order; delivered as environment
 * variables NAME=value. Returns an exit code. */
static int resolve_credentials(const struct gw_call *call, const struct cap_spec *spec,
                               struct gw_state *st, char ***env, size_t *n_env,
                               char **handler, struct cap_error *err)
{
  *env = cap_xcalloc(spec->n_secrets + 1, sizeof **env);
  *n_env = 0;
  for (size_t i = 0; i < spec->n_secrets; i++) {
    const struct cap_secret *sec = &spec->secrets[i];
    char *value = NULL;
    bool found = false;
    int r = gw_cred_lookup(st, spec->id, sec->name, call->user, &value, &found, err);
    if (r < 0)
      return EXIT_FAILED;
    if (!found) {
      if (!sec->required)
        continue;
      if (sec->scope == CAP_SCOPE_USER)
        cap_error_set(err, ENOENT,
                      "credential %s is not set for user %s; set it with `capsule cred set %s %s "
                      "--scope user --user %s` (the value on stdin)",
                      sec->name, call->user, spec->id, sec->name, call->user);
      else
        cap_error_set(err, ENOENT,
                      "credential %s is not set; set it with `capsule cred set %s %s --scope "
                      "system` (the value on stdin)",
                      sec->name, spec->id, sec->name);
      return EXIT_FAILED;
    }
    if (sec->delivery && strcmp(sec->delivery, "handler") == 0)
      handler[i] = value; /* Talos: in the handler's context, not the environment */
    else {
      (*env)[(*n_env)++] = cap_xasprintf("%s=%s", sec->name, value);
      gw_secret_free(value);
    }
  }
  return EXIT_OK;
}

static void validation_message(const struct cap_js_errors *errs, struct cap_buf *b)
{
  cap_buf_puts(b, "the arguments do not match the tool's input schema:");
  for (size_t i = 0; i < errs->len && i < 20; i++) {
    const struct cap_js_error *e = &errs->items[i];
    cap_buf_printf(b, "\n  args: %s: %s (keyword %s)", e->instance_location[0] ? e->instance_location : "/",
                   e->message, e->keyword_location[0] ? e->keyword_location : "/");
  }
}

static bool is_dynamic(const struct cap_spec *spec)
{
  return spec->runtime.kind == CAP_RUNTIME_GRPC && spec->tool_source &&
         strcmp(spec->tool_source, "dynamic") == 0;
}

int gw_call(const struct gw_call *call, const struct gw_registry *reg, struct gw_state *st,
            struct gw_result *res, struct cap_error *err)
{
  *res = (struct gw_result){0};
  uint64_t start = now_ms(CLOCK_MONOTONIC);
  struct gw_audit_record rec = {.user = call->user, .capability = call->capability,
                                .tool = call->tool, .decision = "error", .outcome = "ok"};
  gw_sha256_hex(call->args, call->args_len, rec.args_hash);
  int code = EXIT_OK;
  char *out = NULL;
  struct cap_doc *doc = NULL;
  char **env = NULL, **handler = NULL;
  size_t n_env = 0;
  struct gw_tools dynamic = {0};

  /* resolve */
  const struct cap_spec *spec = gw_registry_find(reg, call->capability);
  const struct cap_tool *tool = spec ? gw_spec_tool(spec, call->tool) : NULL;
  if (spec && !tool && is_dynamic(spec)) {
    /* the cached discovery, else ask the capability (it needs its credentials to start) */
    struct cap_error ignored = {0};
    gw_selu_cached_tools(call->cache_dir, spec, &dynamic, &ignored);
    cap_error_clear(&ignored);
    tool = gw_tools_find(&dynamic, call->tool);
    if (!tool) {
      gw_tools_free(&dynamic);
      handler = cap_xcalloc(spec->n_secrets + 1, sizeof *handler);
      code = resolve_credentials(call, spec, st, &env, &n_env, handler, err);
      if (code == EXIT_OK)
        code = gw_selu_discover(call, spec, env, n_env, &dynamic, err);
      free_env(env, n_env);
      env = NULL;
      n_env = 0;
      if (code != EXIT_OK)
        goto audit;
      tool = gw_tools_find(&dynamic, call->tool);
    }
  }
  if (!spec) {
    struct cap_buf have = {0};
    for (size_t i = 0; i < reg->n && i < 20; i++)
      cap_buf_printf(&have, "%s%s", i ? ", " : "", reg->caps[i]->id);
    cap_error_set(err, ENOENT, "no capability \"%s\" in %s (it has: %s); `capsule list` shows them",
                  call->capability, reg->dir, have.data ? have.data : "none");
    cap_buf_free(&have);
    code = EXIT_FAILED;
    goto audit;
  }
  if (!tool) {
    struct cap_buf have = {0};
    const struct cap_tool *tools = dynamic.n ? dynamic.tools : spec->tools;
    size_t n_tools = dynamic.n ? dynamic.n : spec->n_tools;
    for (size_t i = 0; i < n_tools && i < 20; i++)
      cap_buf_printf(&have, "%s%s", i ? ", " : "", tools[i].name);
    cap_error_set(err, ENOENT, "capability %s has no tool \"%s\" (it has: %s)", spec->id, call->tool,
                  have.data ? have.data : "none");
    cap_buf_free(&have);
    code = EXIT_FAILED;
    goto audit;
  }

  /* policy */
  enum cap_policy policy;
  const char *source;
  if (gw_effective_policy(st, spec->id, tool, call->user, &policy, &source, err) < 0) {
    code = EXIT_FAILED;
    goto audit;
  }
  rec.decision = policy_names[policy];
  if (policy == CAP_POLICY_BLOCK) {
    cap_error_set(err, EPERM,
                  "%s.%s is blocked by policy (%s); allow it with `capsule policy set %s %s allow`",
                  spec->id, tool->name, source, spec->id, tool->name);
    code = EXIT_DENIED;
    goto audit;
  }
  if (policy == CAP_POLICY_ASK) {
    enum gw_approval status;
    int64_t id;
    if (gw_approval_take(st, spec->id, tool->name, call->user, rec.args_hash, &status, &id, err) < 0) {
      code = EXIT_FAILED;
      goto audit;
    }
    bool asked = false;
    if (status == GW_APPROVAL_APPROVED) {
      rec.decision = "ask-approved";
    } else if (status == GW_APPROVAL_DENIED) {
      rec.decision = "ask-denied";
      cap_error_set(err, EPERM, "approval #%lld for this call was denied", (long long)id);
      code = EXIT_DENIED;
      goto audit;
    } else if (call->may_prompt && prompt_tty(call, &asked)) {
      rec.decision = "ask-approved";
    } else if (asked) {
      rec.decision = "ask-denied";
      cap_error_set(err, EPERM, "the call was not approved at the prompt");
      code = EXIT_DENIED;
      goto audit;
    } else {
      if (status != GW_APPROVAL_PENDING &&
          gw_approval_create(st, spec->id, tool->name, call->user, rec.args_hash, call->args, &id,
                             err) < 0) {
        code = EXIT_FAILED;
        goto audit;
      }
      rec.decision = "approval-pending";
      cap_error_set(err, EAGAIN,
                    "approval required: %s.%s asks before running and there is no terminal to "
                    "ask on; approval #%lld is pending: `capsule approve %lld` (or `capsule deny "
                    "%lld`), then repeat the call",
                    spec->id, tool->name, (long long)id, (long long)id, (long long)id);
      code = EXIT_DENIED;
      goto audit;
    }
  }

  /* arguments */
  doc = cap_doc_new();
  struct cap_diags diags = {0};
  if (cap_json_parse(doc, call->args, call->args_len, "args", 0, &diags) < 0) {
    const struct cap_diag *d = diags.len ? &diags.items[0] : NULL;
    cap_error_set(err, EINVAL, "the arguments are not JSON: %s%s", d ? d->message : "",
                  d ? "" : "parse error");
    cap_diags_free(&diags);
    rec.outcome = "invalid arguments";
    code = EXIT_FAILED;
    goto audit;
  }
  cap_diags_free(&diags);
  if (tool->validator) {
    struct cap_js_errors errs = {0};
    if (!cap_js_validate(tool->validator, doc->root, 0, &errs)) {
      struct cap_buf b = {0};
      validation_message(&errs, &b);
      cap_error_set(err, EINVAL, "%s", b.data);
      cap_buf_free(&b);
      cap_js_errors_free(&errs);
      rec.outcome = "invalid arguments";
      code = EXIT_FAILED;
      goto audit;
    }
    cap_js_errors_free(&errs);
  }

  /* credentials */
  if (!handler)
    handler = cap_xcalloc(spec->n_secrets + 1, sizeof *handler);
  code = resolve_credentials(call, spec, st, &env, &n_env, handler, err);
  if (code != EXIT_OK) {
    rec.outcome = "missing credential";
    goto audit;
  }

  /* run */
  switch (spec->runtime.kind) {
  case CAP_RUNTIME_JSONL:
  case CAP_RUNTIME_HERMES:
    if (doc->root->kind != CAP_NODE_OBJECT) {
      cap_error_set(err, EINVAL, "a Covenant dispatch takes a JSON object with \"text\"");
      code = EXIT_FAILED;
      break;
    }
    code = run_jsonl(call, spec, doc->root, env, n_env, &out, err);
    break;
  case CAP_RUNTIME_GRPC: {
    _cleanup_free_ char *args = cap_xstrndup(call->args, call->args_len);
    code = gw_selu_invoke(call, spec, tool->name, args, env, n_env, &out, err);
    break;
  }
  case CAP_RUNTIME_TALOS_NODE:
    code = run_talos(call, spec, tool, doc->root, handler, &out, err);
    break;
  case CAP_RUNTIME_EXEC:
    cap_error_set(err, ENOTSUP, "capability %s is a nono command sandbox without tools; run it with "
                  "`capsule run --config`", spec->id);
    code = EXIT_FAILED;
    break;
  }
  if (code != EXIT_OK)
    rec.outcome = err->message ? err->message : "failed";

audit:
  rec.duration_ms = (int64_t)(now_ms(CLOCK_MONOTONIC) - start);
  if (code != EXIT_OK && rec.outcome && strcmp(rec.outcome, "ok") == 0)
    rec.outcome = err->message ? err->message : "failed";
  if (out)
    gw_sha256_hex(out, strlen(out), rec.result_hash);
  struct cap_error aerr = {0};
  if (gw_audit_append(st, &rec, &aerr) < 0) {
    /* a call that cannot be audited does not hand out its result */
    cap_error_clear(err);
    cap_error_set(err, EIO, "%s; the call's result is withheld", aerr.message);
    cap_error_clear(&aerr);
    free(out);
    out = NULL;
    code = EXIT_FAILED;
  }
  res->json = out;
  res->terminal_on_success = out && tool && tool->terminal_on_success;
  if (env)
    free_env(env, n_env);
  for (size_t i = 0; handler && spec && i < spec->n_secrets; i++)
    gw_secret_free(handler[i]);
  free(handler);
  cap_doc_free(doc);
  gw_tools_free(&dynamic);
  return code;
}
