/* The command line: one function per verb; each takes the verb's argv
 * (argv[0] is the verb) and returns the process exit status. Only the CLI
 * prints. The exit codes are a contract (docs/cli.md). */
#ifndef CAPSULE_CLI_CLI_H
#define CAPSULE_CLI_CLI_H

#include <stddef.h>
#include <stdio.h>

enum {
  CLI_EXIT_OK = 0,
  CLI_EXIT_INVALID = 1,  /* invalid input, or the call failed */
  CLI_EXIT_USAGE = 2,    /* bad command line */
  CLI_EXIT_HOST = 3,     /* the host cannot enforce what is required */
  CLI_EXIT_DENIED = 4,   /* denied by policy or awaiting approval */
};

int cmd_check(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
/* list, call, policy, cred, approve, deny, audit (argv[0] names which) */
int cmd_gateway(int argc, char **argv);

/* Writes s to f for a person to read, escaped as cap_text_escape does
 * (core/text.h), at most max bytes of it. */
void cli_put_escaped(FILE *f, const char *s, size_t max);

/* Prints "capsule VERB: MESSAGE" and a pointer to --help; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
