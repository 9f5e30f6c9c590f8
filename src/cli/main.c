/* capsule: the command-line front door. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/plugin.h"
#include "core/escape.h"
#include "core/proctitle.h"
#include "gateway/db.h"

static const char usage_text[] =
    "usage: capsule [--help] [--version] VERB [ARGS...]\n"
    "\n"
    "capsule runs AI-agent tools in a kernel-enforced sandbox that grants exactly\n"
    "what their manifest declares. It reads Selu manifest.yaml, Covenant agent.toml,\n"
    "Talos manifest.json and nono capability manifests.\n"
    "\n"
    "verbs:\n"
    "  check PATH...                 validate manifests or capability directories\n"
    "  show PATH                     print the resolved capability manifest (JSON)\n"
    "  validate --schema S INST...   validate JSON instances (JSON Schema 2020-12)\n"
    "  run [--config M|--profile P] -- CMD...  run a command in the sandbox M grants\n"
    "  doctor                        what this host can enforce\n"
    "  list [--caps DIR]             capabilities, tools, effective policies, readiness\n"
    "  call CAPABILITY TOOL [JSON|-] one tool call through policy, validation, sandbox, audit\n"
    "  policy set|list, cred set|list|rm, approvals, approve ID, deny ID, audit [verify]\n"
    "  mcp [--capability ID]         every capability's tools to an MCP client on stdio\n"
    "  serve [--mcp-http ADDR]       a long-running gateway: MCP on a unix socket and HTTP\n"
    "  access issue|list|revoke      bearer tokens for serve's network front doors\n"
    "  config set|list|rm CAPABILITY  a capability's settings (Talos)\n"
    "  grant CAPABILITY --host H|--read P|--write P|--rw P, grant list, revoke\n"
    "  triggers poll|enable|disable|on|run, events [--follow]   Talos triggers\n"
    "  plugin install DIR            npm ci for a Talos plugin\n"
    "  state migrate --from DIR --to postgres://...  an SQLite state into PostgreSQL\n"
    "  ps [--json]                   running warm instances (Selu servers)\n"
    "  stop CAPABILITY               stop that capability's warm instances\n"
    "  dispatch TEXT                 route an intent to a Covenant agent and run it\n"
    "  token ..., budget ...         Covenant capability tokens and budgets\n"
    "  workspace ls|rm NAME          Selu session workspaces and caches\n"
    "  image import|pull|ls|inspect|rm  the local OCI image store (Selu images)\n"
    "  rollback list|show|diff|restore|verify|prune  runs' snapshots (rollback.enabled)\n"
    "  export oci CAPABILITY DIR     the capability as an OCI runtime bundle (runc)\n"
    "\n"
    "Options may come anywhere before `--`; --caps and --state default to\n"
    "$CAPSULE_CAPS and $CAPSULE_STATE, then to caps and state in the config file\n"
    "(${XDG_CONFIG_HOME:-~/.config}/capsule/config, `key = value` lines).\n"
    "exit status: 0 ok, 1 invalid input, 2 usage, 3 host cannot enforce,\n"
    "4 denied by policy. `capsule VERB --help` or `capsule help VERB` describes a verb.\n";

int cli_usage_error(const char *verb, const char *fmt, ...)
{
  fprintf(stderr, "capsule%s%s: ", verb ? " " : "", verb ? verb : "");
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (see 'capsule %s%s--help')\n", verb ? verb : "", verb ? " " : "");
  return CLI_EXIT_USAGE;
}

void cli_error(const char *verb, const char *message)
{
  fprintf(stderr, "capsule%s%s: ", verb ? " " : "", verb ? verb : "");
  cap_escape_fput(stderr, message ? message : "failed", SIZE_MAX);
  fputc('\n', stderr);
}

int cli_option_error(const char *verb, char **argv, const char *optstring)
{
  const char *given = optind > 0 ? argv[optind - 1] : "";
  if (optopt > 0 && optopt < 256 && !strchr(optstring, optopt))
    return cli_usage_error(verb, "unknown option '-%c'", optopt);
  if (optopt > 0 && strncmp(given, "--", 2) == 0 && strchr(given, '='))
    return cli_usage_error(verb, "%.*s takes no value", (int)(strchr(given, '=') - given), given);
  if (optopt > 0) /* a known option, but its value is missing */
    return cli_usage_error(verb, "%s needs a value", given);
  return cli_usage_error(verb, "unknown option '%s'", given);
}

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
} verbs[] = {
    {"check", cmd_check},         {"show", cmd_show},
    {"validate", cmd_validate},   {"run", cmd_run},
    {"doctor", cmd_doctor},       {"list", cmd_gateway},
    {"call", cmd_gateway},        {"policy", cmd_gateway},
    {"cred", cmd_gateway},        {"approvals", cmd_gateway},
    {"approve", cmd_gateway},     {"deny", cmd_gateway},
    {"audit", cmd_gateway},       {"ps", cmd_ps},
    {"stop", cmd_stop},           {"token", cmd_covenant},
    {"budget", cmd_covenant},     {"dispatch", cmd_covenant},
    {"workspace", cmd_workspace}, {"image", cmd_image},
    {"mcp", cmd_gateway},         {"access", cmd_gateway},
    {"serve", cmd_serve},         {"rollback", cmd_rollback},
    {"export", cmd_export},       {"config", cmd_config},
    {"triggers", cmd_triggers},   {"events", cmd_events},
    {"grant", cmd_grant},         {"revoke", cmd_revoke},
    {"plugin", cmd_plugin},       {"state", cmd_state},
};

static int (*find_verb(const char *name))(int, char **)
{
  for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
    if (strcmp(verbs[i].name, name) == 0)
      return verbs[i].run;
  return NULL;
}

/* The options every verb that has them shares. Given before the verb
 * (`capsule --state D audit`), they move behind it, where the verb's own
 * parser reads them: how people type them either way. Returns how many
 * argv entries option i spans (0: not one of them). */
static int common_option_span(char **argv, int i, int argc)
{
  static const char *const with_value[] = {"--caps", "--state"};
  static const char *const flags[] = {"--json", "-v", "--verbose"};
  for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++) {
    size_t n = strlen(with_value[k]);
    if (strncmp(argv[i], with_value[k], n) == 0 && argv[i][n] == '=')
      return 1;
    if (strcmp(argv[i], with_value[k]) == 0)
      return i + 1 < argc ? 2 : 1; /* the verb's parser reports the missing value */
  }
  for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++)
    if (strcmp(argv[i], flags[k]) == 0)
      return 1;
  return 0;
}

static void print_version(void) { printf("capsule %s\n", CAPSULE_VERSION); }

/* Runs the verb with its argv: the verb, the common options given before
 * it (moved[0..n_moved)), then the rest. */
static int run_verb(int (*run)(int, char **), int argc, char **argv, int verb_at, char **moved,
                    int n_moved)
{
  char **verb_argv = calloc((size_t)argc + 1, sizeof *verb_argv);
  if (!verb_argv)
    return CLI_EXIT_INVALID;
  int n = 0;
  verb_argv[n++] = argv[verb_at];
  for (int k = 0; k < n_moved; k++)
    verb_argv[n++] = moved[k];
  for (int k = verb_at + 1; k < argc; k++)
    verb_argv[n++] = argv[k];
  optind = 0; /* reset getopt for the verb (0 also reinitialises glibc) */
  int status = run(n, verb_argv);
  free(verb_argv);
  return status;
}

/* `capsule call`'s title: the verb, the capability and the tool, never
 * the arguments (they may hold secrets; `ps` shows every process's
 * command line to every user). */
static void title_call(int argc, char **argv, int verb_at)
{
  static const char *const with_value[] = {
      "--caps",   "--state",  "--user",      "--timeout",      "--session",
      "--thread", "--attach", "--artifacts", "--approval-ttl", "--wait-approval"};
  const char *pos[2] = {"", ""};
  int n = 0;
  for (int i = verb_at + 1; i < argc && n < 2; i++) {
    if (argv[i][0] != '-' || strcmp(argv[i], "-") == 0) {
      pos[n++] = argv[i];
      continue;
    }
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
      if (strcmp(argv[i], with_value[k]) == 0)
        i++; /* its value */
  }
  cap_proctitle_set(NULL, "capsule call %s %s", pos[0], pos[1]);
}

/* `capsule help VERB`: exactly what `capsule VERB --help` prints. */
static int help_verb(const char *name)
{
  int (*run)(int, char **) = find_verb(name);
  if (!run)
    return cli_usage_error(NULL, "no help for '%s': it is not a verb", name);
  char *help_argv[] = {(char *)name, "--help", NULL};
  optind = 0;
  return run(2, help_argv);
}

int main(int argc, char **argv)
{
  cap_proctitle_init(argc, argv);  /* a warm instance's keeper renames itself */
  for (int k = 1; k < argc; k++) { /* a state URL's password: out of `ps` (argv holds copies) */
    size_t off, len;
    if (gw_db_url_password_span(argv[k], &off, &len))
      cap_proctitle_mask(k, off, len);
  }
  opterr = 0; /* every verb reports a bad option itself, on one line */
  char *moved[64];
  int n_moved = 0, i = 1;
  for (; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--"); i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(usage_text, stdout);
      return CLI_EXIT_OK;
    }
    if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-V") == 0) {
      print_version();
      return CLI_EXIT_OK;
    }
    int span = common_option_span(argv, i, argc);
    if (!span)
      return cli_usage_error(NULL, "unknown option '%s'", argv[i]);
    if (n_moved + span > (int)(sizeof moved / sizeof moved[0]))
      return cli_usage_error(NULL, "too many options before the verb");
    for (int k = 0; k < span; k++)
      moved[n_moved++] = argv[i + k];
    i += span - 1;
  }
  if (i >= argc || strcmp(argv[i], "--") == 0) {
    fputs(usage_text, stderr);
    return CLI_EXIT_USAGE;
  }
  if (strcmp(argv[i], "help") == 0) {
    if (i + 1 < argc)
      return help_verb(argv[i + 1]);
    fputs(usage_text, stdout);
    return CLI_EXIT_OK;
  }
  int (*run)(int, char **) = find_verb(argv[i]);
  if (!run)
    return cli_usage_error(NULL, "unknown verb '%s'", argv[i]);
  if (strcmp(argv[i], "call") == 0)
    title_call(argc, argv, i);
  return run_verb(run, argc, argv, i, moved, n_moved);
}

int cli_exit_for(int r, const struct cap_error *err)
{
  switch (err ? err->outcome : CAP_OUTCOME_FAILED) {
  case CAP_OUTCOME_HOST: return CLI_EXIT_HOST;
  case CAP_OUTCOME_DENIED: return CLI_EXIT_DENIED;
  case CAP_OUTCOME_LIMIT: return CLI_EXIT_LIMIT;
  case CAP_OUTCOME_NOT_FOUND: return CLI_EXIT_NOT_FOUND;
  case CAP_OUTCOME_FAILED: break;
  }
  return r == -ENOTSUP ? CLI_EXIT_HOST : CLI_EXIT_INVALID;
}

/* Colour only where a person reads it: a terminal, not dumb, and NO_COLOR
 * (no-color.org) unset. Pipes and files get plain text. */
static bool colour_on(FILE *f)
{
  const char *no = getenv("NO_COLOR"), *term = getenv("TERM");
  return isatty(fileno(f)) && !(no && *no) && !(term && strcmp(term, "dumb") == 0);
}

const char *cli_colour(FILE *f, enum cli_colour c)
{
  static const char *const sgr[] = {
      [CLI_COLOUR_OK] = "\033[32m",
      [CLI_COLOUR_WARN] = "\033[33m",
      [CLI_COLOUR_ERROR] = "\033[1;31m",
      [CLI_COLOUR_RESET] = "\033[0m",
  };
  return colour_on(f) ? sgr[c] : "";
}
