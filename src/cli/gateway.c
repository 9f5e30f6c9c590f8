/* The gateway's verbs: list, call, policy, cred, approve, deny, audit. */
#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "core/diag.h"
#include "core/json.h"
#include "core/text.h"
#include "gateway/call.h"
#include "gateway/registry.h"
#include "gateway/selu.h"
#include "gateway/state.h"

/* Options every gateway verb takes. */
struct common {
  const char *caps;
  const char *state;
  const char *user;
  bool json, follow;
  const char *scope;
  uint64_t timeout_s;
  const char *session;
};

enum { OPT_CAPS = 256, OPT_STATE, OPT_USER, OPT_JSON, OPT_FOLLOW, OPT_SCOPE, OPT_TIMEOUT, OPT_SESSION };

static const struct option common_options[] = {
    {"caps", required_argument, NULL, OPT_CAPS},   {"state", required_argument, NULL, OPT_STATE},
    {"user", required_argument, NULL, OPT_USER},   {"json", no_argument, NULL, OPT_JSON},
    {"follow", no_argument, NULL, OPT_FOLLOW},     {"scope", required_argument, NULL, OPT_SCOPE},
    {"timeout", required_argument, NULL, OPT_TIMEOUT}, {"session", required_argument, NULL, OPT_SESSION},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static const char gateway_help[] =
    "usage:\n"
    "  capsule list   [--caps DIR] [--state DIR] [--user U] [--json]\n"
    "  capsule call   [--caps DIR] [--state DIR] [--user U] [--timeout S] [--session ID] [--json]\n"
    "                 CAPABILITY TOOL [JSON|-]\n"
    "  capsule policy set CAPABILITY TOOL allow|ask|block [--user U]; capsule policy list\n"
    "  capsule cred   set NAME --scope system|user [--user U]   (the value on stdin or the terminal)\n"
    "  capsule cred   list; capsule cred rm NAME --scope system|user [--user U]\n"
    "  capsule approve ID; capsule deny ID\n"
    "  capsule audit  [--json] [--follow]; capsule audit verify\n"
    "\n"
    "--caps: the capabilities directory (default ./capabilities); --state: the state\n"
    "directory (default $XDG_STATE_HOME/capsule or ~/.local/state/capsule); --user:\n"
    "who calls (default the login name). Exit: 0 ok, 1 invalid or failed, 2 usage,\n"
    "3 the host cannot run it, 4 denied by policy or awaiting approval.\n";

/* Parses the common options; positional arguments stay in argv[optind..]. */
static int parse_common(const char *verb, int argc, char **argv, struct common *o)
{
  int c;
  /* options may follow the positional arguments (`policy set A T allow --user U`) */
  while ((c = getopt_long(argc, argv, "h", common_options, NULL)) != -1) {
    switch (c) {
    case OPT_CAPS: o->caps = optarg; break;
    case OPT_STATE: o->state = optarg; break;
    case OPT_USER: o->user = optarg; break;
    case OPT_JSON: o->json = true; break;
    case OPT_SESSION: o->session = optarg; break;
    case OPT_FOLLOW: o->follow = true; break;
    case OPT_SCOPE:
      if (strcmp(optarg, "system") && strcmp(optarg, "user"))
        return cli_usage_error(verb, "--scope takes system or user, not '%s'", optarg);
      o->scope = optarg;
      break;
    case OPT_TIMEOUT: {
      char *end;
      unsigned long long v = strtoull(optarg, &end, 10);
      if (*end || !v || v > 31536000)
        return cli_usage_error(verb, "--timeout takes a number of seconds from 1 to 31536000, not '%s'",
                               optarg);
      o->timeout_s = v;
      break;
    }
    case 'h': fputs(gateway_help, stdout); return -1;
    default: return cli_usage_error(verb, "unknown option");
    }
  }
  if (!o->user || !*o->user) {
    const char *u = getenv("USER");
    struct passwd *pw = (!u || !*u) ? getpwuid(getuid()) : NULL;
    o->user = u && *u ? u : pw ? pw->pw_name : "local";
  }
  return 0;
}

static int open_state(const struct common *o, struct gw_state **st)
{
  _cleanup_free_ char *dflt = o->state ? NULL : gw_state_default_dir();
  struct cap_error err = {0};
  if (gw_state_open(o->state ? o->state : dflt, st, &err) < 0) {
    fprintf(stderr, "capsule: %s\n", err.message);
    cap_error_clear(&err);
    return CLI_EXIT_INVALID;
  }
  return 0;
}

/* Loads --caps (default ./capabilities); prints what did not load. */
static int load_registry(const struct common *o, struct gw_registry *reg, bool *had_errors)
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

static const char *readiness(const struct cap_spec *spec, struct gw_state *st, const char *user,
                             char *buf, size_t size)
{
  switch (spec->runtime.kind) {
  case CAP_RUNTIME_GRPC: break; /* warm instances */
  case CAP_RUNTIME_TALOS_NODE: break; /* the Node shim */
  case CAP_RUNTIME_HERMES: return "not ready: the hermes runtime is not supported";
  case CAP_RUNTIME_EXEC: return "no tools: a command sandbox for `capsule run`";
  case CAP_RUNTIME_JSONL: break;
  }
  if (spec->sandbox.backend && strcmp(spec->sandbox.backend, "gvisor") == 0)
    return "not ready: it asks for linux-gvisor, which capsule does not run";
  if (spec->runtime.kind == CAP_RUNTIME_GRPC && !spec->runtime.command.len)
    return "not ready: it names an image, which capsule does not run yet (give x-capsule.command)";
  for (size_t i = 0; st && i < spec->n_secrets; i++) {
    const struct cap_secret *s = &spec->secrets[i];
    char *v = NULL;
    bool found = false;
    struct cap_error err = {0};
    if (user)
      gw_cred_get(st, s->name, CAP_SCOPE_USER, user, &v, &found, &err);
    if (!found)
      gw_cred_get(st, s->name, CAP_SCOPE_SYSTEM, NULL, &v, &found, &err);
    cap_error_clear(&err);
    gw_secret_free(v);
    if (!found && s->required) {
      snprintf(buf, size, "not ready: credential %s is not set", s->name);
      return buf;
    }
  }
  return "ready";
}

static int cmd_list(int argc, char **argv)
{
  struct common o = {0};
  int r = parse_common("list", argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  struct gw_registry reg;
  bool bad = false;
  if ((r = load_registry(&o, &reg, &bad)))
    return r;
  struct gw_state *st = NULL;
  if (open_state(&o, &st))
    fprintf(stderr, "capsule list: without the state, policies are the manifests' own\n");
  _cleanup_free_ char *dflt = o.state ? NULL : gw_state_default_dir();
  _cleanup_free_ char *cache = cap_xasprintf("%s/cache", o.state ? o.state : dflt);
  struct cap_buf out = {0};
  struct cap_jw w;
  cap_jw_init(&w, &out, true);
  if (o.json)
    cap_jw_begin_array(&w);
  for (size_t i = 0; i < reg.n; i++) {
    const struct cap_spec *spec = reg.caps[i];
    char buf[256];
    const char *ready = readiness(spec, st, o.user, buf, sizeof buf);
    if (o.json) {
      cap_jw_begin_object(&w);
      cap_jw_key(&w, "id");
      cap_jw_string(&w, spec->id);
      cap_jw_key(&w, "format");
      cap_jw_string(&w, cap_format_name(spec->format));
      cap_jw_key(&w, "runtime");
      cap_jw_string(&w, cap_runtime_kind_name(spec->runtime.kind));
      cap_jw_key(&w, "source");
      cap_jw_string(&w, spec->source_path);
      cap_jw_key(&w, "readiness");
      cap_jw_string(&w, ready);
      cap_jw_key(&w, "tools");
      cap_jw_begin_array(&w);
    } else {
      printf("%s  (%s, %s)  %s\n", spec->id, cap_format_name(spec->format),
             cap_runtime_kind_name(spec->runtime.kind), ready);
    }
    /* a dynamic capability's tools: as last discovered */
    struct gw_tools discovered = {0};
    const struct cap_tool *tools = spec->tools;
    size_t n_tools = spec->n_tools;
    if (spec->tool_source && strcmp(spec->tool_source, "dynamic") == 0) {
      struct cap_error err = {0};
      gw_selu_cached_tools(cache, spec, &discovered, &err);
      cap_error_clear(&err);
      tools = discovered.tools;
      n_tools = discovered.n;
      if (!n_tools && !o.json)
        printf("  (tool_source dynamic: tools are discovered through %s on the first call)\n",
               spec->discovery_tool_name);
    }
    for (size_t t = 0; t < n_tools; t++) {
      const struct cap_tool *tool = &tools[t];
      enum cap_policy policy = tool->policy;
      const char *source = tool->policy_source ? tool->policy_source : "default";
      struct cap_error err = {0};
      if (st && gw_effective_policy(st, spec->id, tool, o.user, &policy, &source, &err) < 0)
        cap_error_clear(&err);
      static const char *const names[] = {"allow", "ask", "block"};
      if (o.json) {
        cap_jw_begin_object(&w);
        cap_jw_key(&w, "name");
        cap_jw_string(&w, tool->name);
        cap_jw_key(&w, "policy");
        cap_jw_string(&w, names[policy]);
        cap_jw_key(&w, "policy_source");
        cap_jw_string(&w, source);
        cap_jw_end_object(&w);
      } else {
        printf("  %-28s %-5s (%s)\n", tool->name, names[policy], source);
      }
    }
    gw_tools_free(&discovered);
    if (o.json) {
      cap_jw_end_array(&w);
      cap_jw_end_object(&w);
    }
  }
  if (o.json) {
    cap_jw_end_array(&w);
    printf("%s\n", out.data);
  } else if (reg.n == 0) {
    printf("no capabilities in %s\n", reg.dir);
  }
  cap_buf_free(&out);
  gw_state_close(st);
  gw_registry_free(&reg);
  return bad ? CLI_EXIT_INVALID : CLI_EXIT_OK;
}

/* ---- call ---- */

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
  _cleanup_free_ char *dflt = o.state ? NULL : gw_state_default_dir();
  const char *state_dir = o.state ? o.state : dflt;
  _cleanup_free_ char *logs = cap_xasprintf("%s/logs", state_dir);
  _cleanup_free_ char *run = cap_xasprintf("%s/run", state_dir);
  _cleanup_free_ char *cache = cap_xasprintf("%s/cache", state_dir);
  struct gw_call call = {
      .capability = cap,
      .tool = tool,
      .args = args,
      .args_len = args_len,
      .user = o.user,
      .deadline_ms = o.timeout_s * 1000,
      .may_prompt = true,
      .log_dir = logs,
      .run_dir = run,
      .cache_dir = cache,
      .session_id = o.session,
  };
  char **hidden = NULL;
  call.n_hidden = gw_state_private_paths(state_dir, &hidden);
  call.hidden = (const char *const *)hidden;
  struct gw_result result = {0};
  struct cap_error err = {0};
  int code = gw_call(&call, &reg, st, &result, &err);
  if (code == 0 && o.json)
    printf("{\"result\":%s,\"terminal_on_success\":%s}\n", result.json,
           result.terminal_on_success ? "true" : "false");
  else if (code == 0)
    printf("%s\n", result.json);
  else
    fprintf(stderr, "capsule call: %s\n", err.message ? err.message : "failed");
  cap_error_clear(&err);
  free(result.json);
  gw_state_private_paths_free(hidden, call.n_hidden);
  free(args);
  gw_state_close(st);
  gw_registry_free(&reg);
  return code;
}

/* ---- policy ---- */

static void print_policy(void *arg, const char *cap, const char *tool, const char *user,
                         enum cap_policy policy)
{
  (void)arg;
  static const char *const names[] = {"allow", "ask", "block"};
  printf("%-20s %-24s %-6s %s\n", cap, tool, names[policy], *user ? user : "(operator default)");
}

static int cmd_policy(int argc, char **argv)
{
  if (argc < 2)
    return cli_usage_error("policy", "policy set CAPABILITY TOOL allow|ask|block [--user U], or policy list");
  struct common o = {0};
  const char *sub = argc > 1 ? argv[1] : "";
  int r = parse_common("policy", argc - 1, argv + 1, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  int rest = argc - 1 - optind;
  char **pos = argv + 1 + optind;
  bool user_given = false;
  for (int i = 1; i < argc; i++)
    user_given |= strcmp(argv[i], "--user") == 0 || strncmp(argv[i], "--user=", 7) == 0;
  if (strcmp(sub, "set") == 0) {
    if (rest != 3)
      return cli_usage_error("policy", "policy set CAPABILITY TOOL allow|ask|block [--user U]");
    int p = strcmp(pos[2], "allow") == 0 ? CAP_POLICY_ALLOW
            : strcmp(pos[2], "ask") == 0 ? CAP_POLICY_ASK
            : strcmp(pos[2], "block") == 0 ? CAP_POLICY_BLOCK
                                           : -1;
    if (p < 0)
      return cli_usage_error("policy", "the decision is allow, ask or block, not '%s'", pos[2]);
    struct gw_state *st = NULL;
    if ((r = open_state(&o, &st)))
      return r;
    struct cap_error err = {0};
    r = gw_policy_set(st, pos[0], pos[1], user_given ? o.user : "", (enum cap_policy)p, &err);
    if (r < 0)
      fprintf(stderr, "capsule policy: %s\n", err.message);
    cap_error_clear(&err);
    gw_state_close(st);
    return r < 0 ? CLI_EXIT_INVALID : CLI_EXIT_OK;
  }
  if (strcmp(sub, "list") == 0) {
    struct gw_state *st = NULL;
    if ((r = open_state(&o, &st)))
      return r;
    struct cap_error err = {0};
    r = gw_policy_list(st, print_policy, NULL, &err);
    if (r < 0)
      fprintf(stderr, "capsule policy: %s\n", err.message);
    cap_error_clear(&err);
    gw_state_close(st);
    return r < 0 ? CLI_EXIT_INVALID : CLI_EXIT_OK;
  }
  return cli_usage_error("policy", "policy set CAPABILITY TOOL allow|ask|block [--user U], or policy list");
}

/* ---- cred ---- */

/* The secret from the terminal (echo off) or stdin; never from argv. */
static char *read_secret(size_t *len)
{
  bool tty = isatty(STDIN_FILENO);
  struct termios old, quiet;
  if (tty) {
    fprintf(stderr, "value (not echoed): ");
    tcgetattr(STDIN_FILENO, &old);
    quiet = old;
    quiet.c_lflag &= ~(tcflag_t)ECHO;
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
  }
  struct cap_buf b = {0};
  char buf[4096];
  ssize_t n;
  while ((n = read(STDIN_FILENO, buf, sizeof buf)) > 0) {
    cap_buf_append(&b, buf, (size_t)n);
    if (tty && memchr(buf, '\n', (size_t)n))
      break;
    if (b.len > 65536)
      break;
  }
  if (tty) {
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
    fprintf(stderr, "\n");
  }
  sodium_memzero(buf, sizeof buf);
  while (b.len && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == '\r'))
    b.data[--b.len] = '\0';
  *len = b.len;
  return b.data;
}

static void print_cred(void *arg, const char *name, enum cap_secret_scope scope, const char *user,
                       const char *updated)
{
  (void)arg;
  printf("%-28s %-6s %-16s %s\n", name, scope == CAP_SCOPE_USER ? "user" : "system",
         *user ? user : "-", updated);
}

static int cmd_cred(int argc, char **argv)
{
  if (argc < 2)
    return cli_usage_error("cred", "cred set|list|rm");
  struct common o = {0};
  const char *sub = argc > 1 ? argv[1] : "";
  int r = parse_common("cred", argc - 1, argv + 1, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  int rest = argc - 1 - optind;
  char **pos = argv + 1 + optind;
  enum cap_secret_scope scope = o.scope && strcmp(o.scope, "user") == 0 ? CAP_SCOPE_USER : CAP_SCOPE_SYSTEM;
  if ((strcmp(sub, "set") == 0 || strcmp(sub, "rm") == 0) && (rest != 1 || !o.scope))
    return cli_usage_error("cred", "cred %s NAME --scope system|user [--user U]%s", sub,
                           strcmp(sub, "set") == 0 ? " (the value on stdin, never as an argument)" : "");
  if (strcmp(sub, "set") && strcmp(sub, "rm") && strcmp(sub, "list"))
    return cli_usage_error("cred", "cred set|list|rm");
  struct gw_state *st = NULL;
  if ((r = open_state(&o, &st)))
    return r;
  struct cap_error err = {0};
  if (strcmp(sub, "set") == 0) {
    size_t len = 0;
    char *value = read_secret(&len);
    if (!value || !len) {
      fprintf(stderr, "capsule cred: no value given on stdin\n");
      r = -EINVAL;
    } else {
      r = gw_cred_set(st, pos[0], scope, o.user, value, len, &err);
    }
    gw_secret_free(value);
  } else if (strcmp(sub, "rm") == 0) {
    bool found = false;
    r = gw_cred_rm(st, pos[0], scope, o.user, &found, &err);
    if (r == 0 && !found) {
      fprintf(stderr, "capsule cred: no %s credential %s\n", o.scope, pos[0]);
      r = -ENOENT;
    }
  } else {
    r = gw_cred_list(st, print_cred, NULL, &err);
  }
  if (err.message)
    fprintf(stderr, "capsule cred: %s\n", err.message);
  cap_error_clear(&err);
  gw_state_close(st);
  return r < 0 ? CLI_EXIT_INVALID : CLI_EXIT_OK;
}

/* ---- approve / deny ---- */

static int resolve_approval(const char *verb, int argc, char **argv, bool approve)
{
  struct common o = {0};
  int r = parse_common(verb, argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  char *end = NULL;
  long long id = optind < argc ? strtoll(argv[optind], &end, 10) : 0;
  if (optind + 1 != argc || !end || *end || id <= 0)
    return cli_usage_error(verb, "give the approval's number, as `capsule call` printed it");
  struct gw_state *st = NULL;
  if ((r = open_state(&o, &st)))
    return r;
  struct cap_error err = {0};
  bool found = false;
  r = gw_approval_resolve(st, id, approve, &found, &err);
  if (r < 0)
    fprintf(stderr, "capsule %s: %s\n", verb, err.message);
  else if (!found)
    fprintf(stderr, "capsule %s: no pending approval #%lld\n", verb, id);
  else
    printf("approval #%lld %s; repeat the call to %s\n", id, approve ? "approved" : "denied",
           approve ? "run it (once)" : "see it refused");
  cap_error_clear(&err);
  gw_state_close(st);
  return r < 0 || !found ? CLI_EXIT_INVALID : CLI_EXIT_OK;
}

static int cmd_approve(int argc, char **argv) { return resolve_approval("approve", argc, argv, true); }
static int cmd_deny(int argc, char **argv) { return resolve_approval("deny", argc, argv, false); }

/* ---- audit ---- */

struct audit_print {
  bool json;
  int64_t last;
};

static void print_record(void *arg, const struct gw_audit_record *r)
{
  struct audit_print *ap = arg;
  ap->last = r->seq;
  if (!ap->json) {
    printf("%lld %s %s %s.%s %s %lldms %s\n", (long long)r->seq, r->time, r->user, r->capability,
           r->tool, r->decision, (long long)r->duration_ms, r->outcome);
    return;
  }
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "seq");
  cap_jw_int(&w, r->seq);
  cap_jw_key(&w, "time");
  cap_jw_string(&w, r->time);
  cap_jw_key(&w, "user");
  cap_jw_string(&w, r->user);
  cap_jw_key(&w, "capability");
  cap_jw_string(&w, r->capability);
  cap_jw_key(&w, "tool");
  cap_jw_string(&w, r->tool);
  cap_jw_key(&w, "args_sha256");
  cap_jw_string(&w, r->args_hash);
  cap_jw_key(&w, "decision");
  cap_jw_string(&w, r->decision);
  cap_jw_key(&w, "duration_ms");
  cap_jw_int(&w, r->duration_ms);
  cap_jw_key(&w, "outcome");
  cap_jw_string(&w, r->outcome);
  cap_jw_key(&w, "result_sha256");
  cap_jw_string_or_null(&w, r->result_hash[0] ? r->result_hash : NULL);
  cap_jw_key(&w, "prev");
  cap_jw_string(&w, r->prev);
  cap_jw_key(&w, "hash");
  cap_jw_string(&w, r->hash);
  cap_jw_end_object(&w);
  printf("%s\n", b.data);
  cap_buf_free(&b);
}

static int cmd_audit(int argc, char **argv)
{
  struct common o = {0};
  bool verify = argc > 1 && strcmp(argv[1], "verify") == 0;
  int r = parse_common("audit", argc - verify, argv + verify, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  if (optind != argc - verify)
    return cli_usage_error("audit", "audit [--json] [--follow], or audit verify");
  struct gw_state *st = NULL;
  if ((r = open_state(&o, &st)))
    return r;
  struct cap_error err = {0};
  if (verify) {
    size_t n = 0;
    r = gw_audit_verify(st, &n, &err);
    if (r < 0)
      fprintf(stderr, "capsule audit verify: %s\n", err.message);
    else
      printf("audit log verified: %zu records, chain and head intact\n", n);
  } else {
    struct audit_print ap = {.json = o.json};
    r = gw_audit_each(st, 0, print_record, &ap, &err);
    fflush(stdout);
    while (r == 0 && o.follow) {
      sleep(1);
      r = gw_audit_each(st, ap.last, print_record, &ap, &err);
      fflush(stdout);
    }
    if (r < 0)
      fprintf(stderr, "capsule audit: %s\n", err.message);
  }
  cap_error_clear(&err);
  gw_state_close(st);
  return r < 0 ? CLI_EXIT_INVALID : CLI_EXIT_OK;
}

int cmd_gateway(int argc, char **argv)
{
  static const struct {
    const char *name;
    int (*run)(int, char **);
  } verbs[] = {{"list", cmd_list},       {"call", cmd_call},   {"policy", cmd_policy},
               {"cred", cmd_cred},       {"approve", cmd_approve}, {"deny", cmd_deny},
               {"audit", cmd_audit}};
  for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
    if (strcmp(argv[0], verbs[i].name) == 0)
      return verbs[i].run(argc, argv);
  return cli_usage_error(NULL, "unknown verb '%s'", argv[0]);
}
