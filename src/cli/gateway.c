/* The gateway's verbs: list, call (cred in cred.c), and the table of them all (policy in
 * policy.c, approvals in approvals.c, audit in audit.c). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pwd.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/gateway.h"
#include "cli/listing.h"
#include "cli/plugin.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "core/diag.h"
#include "core/escape.h"
#include "core/json.h"
#include "core/text.h"
#include "gateway/approval.h"
#include "gateway/call.h"
#include "gateway/listing.h"
#include "gateway/ready.h"
#include "gateway/registry.h"
#include "gateway/selu.h"
#include "gateway/state.h"
#include "image/image.h"

enum {
  OPT_CAPS = 256,
  OPT_STATE,
  OPT_USER,
  OPT_JSON,
  OPT_FOLLOW,
  OPT_SCOPE,
  OPT_TIMEOUT,
  OPT_SESSION,
  OPT_THREAD,
  OPT_ATTACH,
  OPT_ARTIFACTS,
  OPT_SHARED,
  OPT_APPROVAL_TTL,
  OPT_WAIT_APPROVAL,
  OPT_SINCE,
  OPT_TAIL,
  OPT_FORCE,
  OPT_CAPABILITY,
  OPT_OPERATOR
};

static const struct option common_options[] = {
    {"caps", required_argument, NULL, OPT_CAPS},
    {"state", required_argument, NULL, OPT_STATE},
    {"user", required_argument, NULL, OPT_USER},
    {"json", no_argument, NULL, OPT_JSON},
    {"follow", no_argument, NULL, OPT_FOLLOW},
    {"scope", required_argument, NULL, OPT_SCOPE},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"session", required_argument, NULL, OPT_SESSION},
    {"thread", required_argument, NULL, OPT_THREAD},
    {"attach", required_argument, NULL, OPT_ATTACH},
    {"artifacts", required_argument, NULL, OPT_ARTIFACTS},
    {"shared", no_argument, NULL, OPT_SHARED},
    {"approval-ttl", required_argument, NULL, OPT_APPROVAL_TTL},
    {"wait-approval", required_argument, NULL, OPT_WAIT_APPROVAL},
    {"since", required_argument, NULL, OPT_SINCE},
    {"tail", required_argument, NULL, OPT_TAIL},
    {"force", no_argument, NULL, OPT_FORCE},
    {"capability", required_argument, NULL, OPT_CAPABILITY},
    {"operator", no_argument, NULL, OPT_OPERATOR},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The caller's login: its passwd entry, not $USER, which the caller sets
 * as it likes ($USER only when the uid has no entry). */
const char *cli_login_name(void)
{
  struct passwd *pw = getpwuid(geteuid());
  const char *u = getenv("USER");
  return pw ? pw->pw_name : u && *u ? u : "local";
}

/* Parses the common options; positional arguments stay in argv[optind..]. */
int parse_common(const char *verb, int argc, char **argv, struct common *o)
{
  int c;
  o->tail = -1;
  /* options may follow the positional arguments (`policy set A T allow --user U`) */
  while ((c = getopt_long(argc, argv, "h", common_options, NULL)) != -1) {
    switch (c) {
    case OPT_CAPS: o->caps = optarg; break;
    case OPT_STATE: o->state = optarg; break;
    case OPT_USER:
      o->user = optarg;
      o->user_given = true;
      break;
    case OPT_SHARED: o->shared = true; break;
    case OPT_JSON: o->json = true; break;
    case OPT_SESSION: o->session = optarg; break;
    case OPT_THREAD: o->thread = optarg; break;
    case OPT_ARTIFACTS: o->artifacts = optarg; break;
    case OPT_ATTACH:
      if (o->n_attach == CLI_MAX_ATTACH)
        return cli_usage_error(verb, "at most %d --attach files", CLI_MAX_ATTACH);
      o->attach[o->n_attach++] = optarg;
      break;
    case OPT_FOLLOW: o->follow = true; break;
    case OPT_SINCE: o->since = optarg; break;
    case OPT_FORCE: o->force = true; break;
    case OPT_CAPABILITY: o->capability = optarg; break;
    case OPT_OPERATOR: o->operator_ = true; break;
    case OPT_TAIL: {
      char *end;
      unsigned long long v = strtoull(optarg, &end, 10);
      if (*end || !*optarg || v > 1000000000)
        return cli_usage_error(verb, "--tail takes a number of records, not '%s'", optarg);
      o->tail = (int64_t)v;
      break;
    }
    case OPT_SCOPE:
      if (strcmp(optarg, "system") && strcmp(optarg, "user"))
        return cli_usage_error(verb, "--scope takes system or user, not '%s'", optarg);
      o->scope = optarg;
      break;
    case OPT_TIMEOUT:
    case OPT_APPROVAL_TTL:
    case OPT_WAIT_APPROVAL: {
      const char *name = c == OPT_TIMEOUT        ? "--timeout"
                         : c == OPT_APPROVAL_TTL ? "--approval-ttl"
                                                 : "--wait-approval";
      char *end;
      unsigned long long v = strtoull(optarg, &end, 10);
      if (*end || !v || v > 31536000)
        return cli_usage_error(verb, "%s takes a number of seconds from 1 to 31536000, not '%s'",
                               name, optarg);
      *(c == OPT_TIMEOUT        ? &o->timeout_s
        : c == OPT_APPROVAL_TTL ? &o->approval_ttl_s
                                : &o->wait_approval_s) = v;
      break;
    }
    case 'h': fputs(cli_gateway_help(verb), stdout); return -1;
    default: return cli_option_error(verb, argv, "h");
    }
  }
  if (o->capability && strcmp(verb, "mcp") != 0)
    return cli_usage_error(verb, "--capability belongs to mcp (and serve)");
  if (o->operator_ && strcmp(verb, "access") != 0)
    return cli_usage_error(verb, "--operator belongs to access issue");
  o->caps = cli_default(o->caps, "CAPSULE_CAPS");
  o->state = cli_default(o->state, "CAPSULE_STATE");
  if (!o->user || !*o->user)
    o->user = cli_login_name();
  o->login = cli_login_name();
  return 0;
}

int audit_change(struct gw_state *st, const struct common *o, const char *kind, const char *cap,
                 const char *tool, const char *what)
{
  struct cap_error err = {0};
  if (gw_audit_change(st, kind, o->login, cap, tool, what, &err) == 0)
    return 0;
  fprintf(stderr, "capsule: the change was made but cannot be audited: %s\n", err.message);
  cap_error_clear(&err);
  return CLI_EXIT_INVALID;
}

/* Acting as another user is the operator's: root's or the state
 * directory's owner's (a tool's shell that reaches capsule is neither). */
static int check_user_rights(const struct common *o, const char *dir)
{
  struct stat sb;
  uid_t me = geteuid();
  bool mine = stat(dir, &sb) < 0 ? errno == ENOENT : sb.st_uid == me; /* else it becomes mine */
  if (strcmp(o->user, cli_login_name()) == 0 || me == 0 || mine)
    return 0;
  fprintf(stderr,
          "capsule: --user %s needs the operator's rights (root, or the owner of the state "
          "directory %s); you are %s\n",
          o->user, dir, cli_login_name());
  return CLI_EXIT_DENIED;
}

int open_state(const struct common *o, struct gw_state **st)
{
  _cleanup_free_ char *dflt = o->state ? NULL : gw_state_default_dir();
  const char *dir = o->state ? o->state : dflt;
  int r = check_user_rights(o, dir);
  if (r)
    return r;
  struct cap_error err = {0};
  if (gw_state_open(dir, st, &err) < 0) {
    cli_error(NULL, err.message);
    cap_error_clear(&err);
    return CLI_EXIT_INVALID;
  }
  size_t shared = 0;
  if (gw_state_take_migrated_shared(*st, &shared, &err) < 0)
    cap_error_clear(&err); /* a warning that cannot be read is not a reason to stop */
  if (shared)
    fprintf(
        stderr,
        "capsule: warning: %zu stored credential%s became shared (every capability that "
        "declares the name may use %s); move each to its capability with `capsule cred set "
        "CAPABILITY NAME ...` and `capsule cred rm --shared NAME ...` (see `capsule cred list`)\n",
        shared, shared == 1 ? "" : "s", shared == 1 ? "it" : "them");
  return 0;
}

/* Approvals and policy changes only from the operator: refused inside a
 * capsule sandbox (gw_require_operator). */
int require_operator(const char *verb, const char *what)
{
  struct cap_error err = {0};
  if (gw_require_operator(what, &err) == 0)
    return 0;
  cli_error(verb, err.message);
  cap_error_clear(&err);
  return CLI_EXIT_DENIED;
}

/* Loads --caps (default ./capabilities); prints what did not load. */
int load_registry(const struct common *o, struct gw_registry *reg, bool *had_errors)
{
  const char *dir = o->caps ? o->caps : "capabilities";
  struct cap_diags diags = {0};
  int r = gw_registry_load(dir, reg, &diags);
  cap_diags_sort(&diags);
  cap_diags_print(&diags, stderr);
  *had_errors = diags.errors > 0;
  cap_diags_free(&diags);
  return r < 0 ? CLI_EXIT_INVALID : 0;
}

/* ---- list ---- */

static const char *str_of(const struct cap_node *obj, const char *key)
{
  const struct cap_node *n = cap_node_get(obj, key);
  return n && n->kind == CAP_NODE_STRING ? n->u.str.ptr : "";
}

/* One capability of the listing (gateway/listing.h) as text */
static void list_print(const struct cap_node *c)
{
  cap_escape_fput(stdout, str_of(c, "id"), 200);
  printf("  (%s, %s)  ", str_of(c, "format"), str_of(c, "runtime"));
  cap_escape_fput(stdout, str_of(c, "readiness"), 1024);
  putchar('\n');
  const struct cap_node *tools = cap_node_get(c, "tools");
  size_t n = tools && tools->kind == CAP_NODE_ARRAY ? tools->u.arr.len : 0;
  if (!n && cap_node_get(c, "discovery_tool"))
    printf("  (tool_source dynamic: tools are discovered through %s on the first call)\n",
           str_of(c, "discovery_tool"));
  for (size_t i = 0; i < n; i++) {
    const struct cap_node *t = tools->u.arr.items[i];
    const char *name = str_of(t, "name");
    fputs("  ", stdout);
    cap_escape_fput(stdout, name, 200);
    printf("%*s %-5s (%s)\n", (int)(strlen(name) < 28 ? 28 - strlen(name) : 0), "",
           str_of(t, "policy"), str_of(t, "policy_source"));
  }
  const struct cap_node *grants = cap_node_get(c, "grants");
  for (size_t i = 0; grants && grants->kind == CAP_NODE_ARRAY && i < grants->u.arr.len; i++) {
    const struct cap_node *g = grants->u.arr.items[i];
    fputs("  granted: ", stdout);
    cap_escape_fput(stdout, g->kind == CAP_NODE_STRING ? g->u.str.ptr : "", 4096);
    putchar('\n');
  }
}

/* The listing, made here: the registry loaded, the state opened */
static int list_alone(const struct common *o, struct cap_buf *out, bool *bad)
{
  struct gw_registry reg;
  int r = load_registry(o, &reg, bad);
  if (r)
    return r;
  struct gw_state *st = NULL;
  if (open_state(o, &st))
    fprintf(stderr, "capsule list: without the state, policies are the manifests' own\n");
  _cleanup_free_ char *dflt = o->state ? NULL : gw_state_default_dir();
  _cleanup_free_ char *cache = cap_xasprintf("%s/cache", o->state ? o->state : dflt);
  _cleanup_free_ char *images = image_store_dir(o->state ? o->state : dflt);
  char **hidden = NULL;
  size_t n_hidden = gw_state_private_paths(o->state ? o->state : dflt, &hidden);
  struct gw_list_env env = {.st = st,
                            .user = o->user,
                            .cache = cache,
                            .images = images,
                            .hidden = (const char *const *)hidden,
                            .n_hidden = n_hidden};
  struct cap_jw w;
  cap_jw_init(&w, out, false);
  gw_list_write(&reg, &env, &w);
  gw_state_private_paths_free(hidden, n_hidden);
  gw_state_close(st);
  gw_registry_free(&reg);
  return 0;
}

static int cmd_list(int argc, char **argv)
{
  struct common o = {0};
  int r = parse_common("list", argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  bool bad = false;
  struct cap_buf out = {0};
  int code = 0;
  if (!cli_list_via_serve(&o, &out, &bad, &code))
    code = list_alone(&o, &out, &bad);
  if (code) {
    cap_buf_free(&out);
    return code;
  }
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  if (cap_json_parse(doc, out.data ? out.data : "[]", out.len, "listing", 0, &d) == 0 &&
      doc->root->kind == CAP_NODE_ARRAY) {
    if (o.json) {
      struct cap_buf pretty = {0};
      struct cap_jw w;
      cap_jw_init(&w, &pretty, true);
      cap_jw_node(&w, doc->root);
      printf("%s\n", pretty.data);
      cap_buf_free(&pretty);
    } else if (doc->root->u.arr.len == 0)
      printf("no capabilities in %s\n", o.caps ? o.caps : "capabilities");
    else
      for (size_t i = 0; i < doc->root->u.arr.len; i++)
        list_print(doc->root->u.arr.items[i]);
  }
  cap_diags_free(&d);
  cap_doc_free(doc);
  cap_buf_free(&out);
  return bad ? CLI_EXIT_INVALID : CLI_EXIT_OK;
}

/* ---- call ---- */

/* The one place a call's outcome becomes an exit code (docs/cli.md). */
static int exit_code(enum gw_outcome o)
{
  switch (o) {
  case GW_OUTCOME_OK: return CLI_EXIT_OK;
  case GW_OUTCOME_FAILED:
  case GW_OUTCOME_NOT_WARM: /* never: the command line does not ask for warm_only */
  case GW_OUTCOME_KILLED_BY_LIMIT: return CLI_EXIT_INVALID;
  case GW_OUTCOME_HOST_CANNOT_ENFORCE: return CLI_EXIT_HOST;
  case GW_OUTCOME_DENIED:
  case GW_OUTCOME_AWAITING_APPROVAL: return CLI_EXIT_DENIED;
  }
  return CLI_EXIT_INVALID;
}

/* The tool's stderr log: LOGS/<capability>.log (gateway/toollog.c); NULL
 * for a name that cannot be a file's. */
static char *tool_log_path(const char *logs, const char *cap)
{
  if (!*cap || strchr(cap, '/') || strcmp(cap, ".") == 0 || strcmp(cap, "..") == 0)
    return NULL;
  return cap_xasprintf("%s/%s.log", logs, cap);
}

static off_t file_size(const char *path)
{
  struct stat sb;
  return path && stat(path, &sb) == 0 ? sb.st_size : 0;
}

#define STDERR_TAIL_LINES 10
#define CAP_STR_(x) #x
#define CAP_STR(x) CAP_STR_(x)
#define STDERR_TAIL_BYTES 65536

/* Below a failed call's error: the last lines the tool wrote to its log
 * during this call (from where the log ended before it; from the start
 * when it was rotated meanwhile), escaped: they are the tool's text. */
static void print_stderr_tail(const char *path, off_t before)
{
  _cleanup_close_ int fd = path ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) < 0)
    return;
  off_t from = sb.st_size < before ? 0 : before;
  if (sb.st_size - from > STDERR_TAIL_BYTES)
    from = sb.st_size - STDERR_TAIL_BYTES;
  size_t len = (size_t)(sb.st_size - from);
  _cleanup_free_ char *buf = cap_xmalloc(len + 1);
  ssize_t n = len ? pread(fd, buf, len, from) : 0;
  if (n <= 0)
    return;
  while (n > 0 && buf[n - 1] == '\n')
    n--;
  if (n == 0)
    return;
  size_t start = (size_t)n, lines = 0;
  while (start > 0 && lines < STDERR_TAIL_LINES)
    if (buf[--start] == '\n' && ++lines == STDERR_TAIL_LINES)
      start++;
  bool cut = start > 0 || from > before;
  fprintf(stderr, "  the tool's stderr in this call%s:\n",
          cut ? " (its last " CAP_STR(STDERR_TAIL_LINES) " lines)" : "");
  for (size_t i = start; i < (size_t)n;) {
    char *nl = memchr(buf + i, '\n', (size_t)n - i);
    size_t end = nl ? (size_t)(nl - buf) : (size_t)n;
    struct cap_buf line = {0};
    cap_escape_text(&line, buf + i, end - i > 1000 ? 1000 : end - i);
    fprintf(stderr, "    %s%s\n", line.data ? line.data : "", end - i > 1000 ? "..." : "");
    cap_buf_free(&line);
    i = end + 1;
  }
}

/* One call through gw_call, its result or error printed: what `call`
 * and `dispatch` share. */
/* gw_call's warnings (what this host cannot enforce): on stderr, once a
 * run, escaped (the text names the capability) */
static void call_warn(void *ctx, const char *text)
{
  bool *said = ctx;
  if (*said)
    return;
  *said = true;
  fprintf(stderr,
          "capsule: %swarning:%s this host cannot enforce: ", cli_colour(stderr, CLI_COLOUR_WARN),
          cli_colour(stderr, CLI_COLOUR_RESET));
  cap_escape_fput(stderr, text, 1024);
  fputc('\n', stderr);
}

int cli_call_run(const char *verb, const struct common *o, struct gw_registry *reg,
                 struct gw_state *st, const char *cap, const char *tool, const char *args,
                 size_t args_len, const struct gw_issuer *issuer)
{
  _cleanup_free_ char *dflt = o->state ? NULL : gw_state_default_dir();
  const char *state_dir = o->state ? o->state : dflt;
  _cleanup_free_ char *logs = cap_xasprintf("%s/logs", state_dir);
  _cleanup_free_ char *run = cap_xasprintf("%s/run", state_dir);
  _cleanup_free_ char *cache = cap_xasprintf("%s/cache", state_dir);
  _cleanup_free_ char *volumes = cap_xasprintf("%s/volumes", state_dir);
  _cleanup_free_ char *images = image_store_dir(state_dir);
  bool warned = false;
  struct gw_call call = {
      .capability = cap,
      .tool = tool,
      .args = args,
      .args_len = args_len,
      .user = o->user,
      .deadline_ms = o->timeout_s * 1000,
      .may_prompt = true,
      .approval_ttl_ms = (int64_t)o->approval_ttl_s * 1000,
      .approval_wait_ms = (int64_t)o->wait_approval_s * 1000,
      .log_dir = logs,
      .run_dir = run,
      .cache_dir = cache,
      .session_id = o->session,
      .thread_id = o->thread,
      .volumes_dir = volumes,
      .image_dir = images,
      .attach = o->attach,
      .n_attach = o->n_attach,
      .artifacts_dir = o->artifacts,
      .issuer = issuer,
      .warn = call_warn,
      .warn_ctx = &warned,
  };
  char **hidden = NULL;
  call.n_hidden = gw_state_private_paths(state_dir, &hidden);
  call.hidden = (const char *const *)hidden;
  struct gw_result result = {0};
  struct cap_error err = {0};
  _cleanup_free_ char *log = tool_log_path(logs, cap);
  off_t log_before = file_size(log);
  enum gw_outcome outcome = gw_call(&call, reg, st, &result, &err);
  int code = cli_call_print(verb, o, outcome, result.json, result.terminal_on_success, err.message,
                            log, log_before);
  cap_error_clear(&err);
  free(result.json);
  gw_state_private_paths_free(hidden, call.n_hidden);
  return code;
}

int cli_call_print(const char *verb, const struct common *o, enum gw_outcome outcome,
                   const char *json, bool terminal, const char *error, const char *log,
                   off_t log_before)
{
  /* the tool's result, as capsule writes JSON: a C1 or direction character
   * in a string reaches the operator's terminal as a \\u escape */
  _cleanup_free_ char *shown =
      outcome == GW_OUTCOME_OK && json ? cap_json_canonical(json, strlen(json)) : NULL;
  if (outcome == GW_OUTCOME_OK && o->json)
    printf("{\"result\":%s,\"terminal_on_success\":%s}\n", shown ? shown : "null",
           terminal ? "true" : "false");
  else if (outcome == GW_OUTCOME_OK)
    printf("%s\n", shown ? shown : "null");
  else
    cli_error(verb, error ? error : "failed");
  if (outcome == GW_OUTCOME_FAILED || outcome == GW_OUTCOME_KILLED_BY_LIMIT)
    print_stderr_tail(log, log_before);
  return exit_code(outcome);
}

char *cli_tool_log(const struct common *o, const char *cap, off_t *size)
{
  _cleanup_free_ char *dflt = o->state ? NULL : gw_state_default_dir();
  _cleanup_free_ char *logs = cap_xasprintf("%s/logs", o->state ? o->state : dflt);
  char *log = tool_log_path(logs, cap);
  *size = file_size(log);
  return log;
}

static int cmd_call(int argc, char **argv)
{
  struct common o = {0};
  int r = parse_common("call", argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  int rest = argc - optind;
  if (rest < 2 || rest > 3)
    return cli_usage_error("call", "give CAPABILITY TOOL and the arguments (JSON, or - for stdin)");
  const char *cap = argv[optind], *tool = argv[optind + 1];
  const char *args_arg = rest == 3 ? argv[optind + 2] : "{}";
  char *args = NULL;
  size_t args_len = 0;
  if (strcmp(args_arg, "-") == 0) {
    struct cap_error err = {0};
    if (cap_read_file("-", 16u << 20, &args, &args_len, &err) < 0) {
      fprintf(stderr, "capsule call: cannot read the arguments from stdin: %s\n", err.message);
      cap_error_clear(&err);
      return CLI_EXIT_INVALID;
    }
  } else {
    args = cap_xstrdup(args_arg);
    args_len = strlen(args);
  }
  int code;
  if (cli_call_via_serve(&o, cap, tool, args, &code)) { /* a serve runs on this state */
    free(args);
    return code;
  }
  struct gw_registry reg;
  bool bad = false;
  if ((r = load_registry(&o, &reg, &bad))) {
    free(args);
    return r;
  }
  struct gw_state *st = NULL;
  if ((r = open_state(&o, &st))) {
    gw_registry_free(&reg);
    free(args);
    return r;
  }
  r = cli_call_run("call", &o, &reg, st, cap, tool, args, args_len, NULL);
  free(args);
  gw_state_close(st);
  gw_registry_free(&reg);
  return r;
}

int cmd_gateway(int argc, char **argv)
{
  static const struct {
    const char *name;
    int (*run)(int, char **);
  } verbs[] = {{"list", cmd_list},    {"call", cmd_call},           {"policy", cmd_policy},
               {"cred", cmd_cred},    {"approvals", cmd_approvals}, {"approve", cmd_approve},
               {"deny", cmd_deny},    {"audit", cmd_audit},         {"mcp", cmd_mcp},
               {"access", cmd_access}};
  for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
    if (strcmp(argv[0], verbs[i].name) == 0)
      return verbs[i].run(argc, argv);
  return cli_usage_error(NULL, "unknown verb '%s'", argv[0]);
}
