/* What Covenant's verbs share (covenant.c: budget, dispatch, audit
 * --format covenant and the options; token.c: token). Internal to src/cli. */
#ifndef CAPSULE_CLI_COVENANT_H
#define CAPSULE_CLI_COVENANT_H

#include "cli/gateway.h"
#include "core/error.h"

struct cov_opts {
  struct common c;
  const char *scope, *expires, *issuer, *agent, *priority, *parent, *format;
  bool caps_given;
};

enum {
  O_CAPS = 300,
  O_STATE,
  O_JSON,
  O_SCOPE,
  O_EXPIRES,
  O_ISSUER,
  O_AGENT,
  O_PRIORITY,
  O_PARENT,
  O_TIMEOUT,
  O_USER,
  O_FORMAT
};

/* Parses the options of a Covenant verb; help is its --help text.
 * Returns 0, -1 after --help, or an exit status. */
int cov_parse(const char *verb, const char *help, int argc, char **argv, struct cov_opts *o);
/* Prints err as VERB's error, clears it, returns code. */
int cov_fail(const char *verb, struct cap_error *err, int code);
int cmd_token(int argc, char **argv);

#endif
