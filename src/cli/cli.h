/* The command line: one function per verb; each takes the verb's argv
 * (argv[0] is the verb) and returns the process exit status. Only the CLI
 * prints, and only the CLI turns outcomes into exit codes: this enum is
 * the one list of them (a contract, docs/cli.md). */
#ifndef CAPSULE_CLI_CLI_H
#define CAPSULE_CLI_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/error.h"

enum cli_exit {
  CLI_EXIT_OK = 0,
  CLI_EXIT_INVALID = 1,    /* invalid input, or the call failed */
  CLI_EXIT_USAGE = 2,      /* bad command line */
  CLI_EXIT_HOST = 3,       /* the host cannot enforce what is required */
  CLI_EXIT_DENIED = 4,     /* denied by policy or awaiting approval */
  CLI_EXIT_LIMIT = 125,    /* run: killed by a limit capsule enforces */
  CLI_EXIT_NOT_FOUND = 127 /* run: the command cannot be found or run in the sandbox */
};

int cmd_check(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
/* list, call, policy, cred, approve, deny, audit (argv[0] names which) */
int cmd_gateway(int argc, char **argv);
int cmd_state(int argc, char **argv); /* state migrate (state.c) */
int cmd_serve(int argc, char **argv);
/* ps, stop: warm instances (ps.c) */
int cmd_ps(int argc, char **argv);
int cmd_stop(int argc, char **argv);
/* token, budget, dispatch: Covenant (covenant.c) */
int cmd_covenant(int argc, char **argv);
/* audit export|verify --format covenant (covenant.c) */
int cmd_audit_format(int argc, char **argv);
/* workspace ls | rm: Selu workspaces and caches (workspace.c) */
int cmd_workspace(int argc, char **argv);
/* image import|pull|ls|inspect|rm (image.c) */
int cmd_image(int argc, char **argv);
/* rollback list|show|diff|restore|verify|prune (rollback.c) */
int cmd_rollback(int argc, char **argv);
/* export oci (export.c) */
int cmd_export(int argc, char **argv);

/* The exit status for a library failure r (a negative errno) with err:
 * its typed outcome (err->outcome), else -ENOTSUP (the host cannot enforce
 * it) or CLI_EXIT_INVALID. Never decided from the message's text. */
int cli_exit_for(int r, const struct cap_error *err);

/* Prints "capsule VERB: MESSAGE (see 'capsule VERB --help')" as one line on
 * stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "capsule VERB: MESSAGE" as one line on stderr (VERB NULL: no
 * verb), MESSAGE through the one terminal escaper: a library's message may
 * quote a tool's name, output or error, or a caller's argument. */
void cli_error(const char *verb, const char *message);

/* After getopt_long returned '?' or ':' (opterr is 0 for every verb): one
 * line naming the unknown option, or the option that lacks its value.
 * optstring is the one given to getopt_long. Returns CLI_EXIT_USAGE. */
int cli_option_error(const char *verb, char **argv, const char *optstring);

/* value when given, else the environment variable env when set and not
 * empty, else the config file's key for env (CAPSULE_STATE: state), else
 * NULL: CAPSULE_CAPS and CAPSULE_STATE as defaults (config.c). */
const char *cli_default(const char *value, const char *env);
/* The config file's value for key (caps, state), or NULL; the file
 * ($XDG_CONFIG_HOME/capsule/config, else ~/.config/capsule/config) is
 * read once, its bad lines reported on stderr. */
const char *cli_config(const char *key);

/* A verb's own help text (the gateway verbs': help.c), or NULL. */
const char *cli_gateway_help(const char *verb);

enum cli_colour { CLI_COLOUR_OK, CLI_COLOUR_WARN, CLI_COLOUR_ERROR, CLI_COLOUR_RESET };
/* The escape sequence for colour c when f is a terminal (and NO_COLOR is
 * unset, TERM is not dumb), else "": colour on a terminal only. */
const char *cli_colour(FILE *f, enum cli_colour c);

#endif
