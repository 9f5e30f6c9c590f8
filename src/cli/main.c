/* capsule: the command-line front door. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

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
    "  run [--config M] -- CMD...    run a command in the sandbox M grants\n"
    "  doctor                        what this host can enforce\n"
    "  list [--caps DIR]             capabilities, tools, effective policies, readiness\n"
    "  call CAPABILITY TOOL [JSON|-] one tool call through policy, validation, sandbox, audit\n"
    "  policy set|list, cred set|list|rm, approvals, approve ID, deny ID, audit [verify]\n"
    "\n"
    "exit status: 0 ok, 1 invalid input, 2 usage, 3 host cannot enforce,\n"
    "4 denied by policy. `capsule VERB --help` describes a verb.\n";

int cli_usage_error(const char *verb, const char *fmt, ...)
{
  fprintf(stderr, "capsule%s%s: ", verb ? " " : "", verb ? verb : "");
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry 'capsule %s%s--help'.\n", verb ? verb : "", verb ? " " : "");
  return CLI_EXIT_USAGE;
}

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
} verbs[] = {
    {"check", cmd_check},
    {"show", cmd_show},
    {"validate", cmd_validate},
    {"run", cmd_run},
    {"doctor", cmd_doctor},
    {"list", cmd_gateway},
    {"call", cmd_gateway},
    {"policy", cmd_gateway},
    {"cred", cmd_gateway},
    {"approvals", cmd_gateway},
    {"approve", cmd_gateway},
    {"deny", cmd_gateway},
    {"audit", cmd_gateway},
};

int main(int argc, char **argv)
{
  static const struct option options[] = {
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0},
  };
  /* stop at the verb: its options are its own */
  int c;
  while ((c = getopt_long(argc, argv, "+hV", options, NULL)) != -1) {
    switch (c) {
    case 'h': fputs(usage_text, stdout); return CLI_EXIT_OK;
    case 'V': printf("capsule %s\n", CAPSULE_VERSION); return CLI_EXIT_OK;
    default: return cli_usage_error(NULL, "unknown option");
    }
  }
  if (optind >= argc) {
    fputs(usage_text, stderr);
    return CLI_EXIT_USAGE;
  }
  const char *verb = argv[optind];
  if (strcmp(verb, "help") == 0) {
    fputs(usage_text, stdout);
    return CLI_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
    if (strcmp(verbs[i].name, verb) == 0) {
      int first = optind;
      optind = 0; /* reset getopt for the verb (0 also reinitialises glibc) */
      return verbs[i].run(argc - first, argv + first);
    }
  }
  return cli_usage_error(NULL, "unknown verb '%s'", verb);
}
