/* What the gateway verbs share (gateway.c): their common options, the
 * state they open, the operator check. Internal to src/cli. */
#ifndef CAPSULE_CLI_GATEWAY_H
#define CAPSULE_CLI_GATEWAY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/buf.h"
#include "gateway/approval.h"
#include "gateway/call.h"
#include "gateway/state.h"

/* Options every gateway verb takes. */
struct common {
  const char *caps;
  const char *state;
  const char *user;
  bool json, follow, shared, user_given;
  const char *scope;
  uint64_t timeout_s;
  uint64_t approval_ttl_s;
  uint64_t wait_approval_s; /* call --wait-approval S: wait for the operator's decision */
  const char *session;
  const char *thread; /* call --thread: Selu's thread_id within the session */
#define CLI_MAX_ATTACH 16
  const char *attach[CLI_MAX_ATTACH]; /* call --attach FILE: Selu artifacts in */
  size_t n_attach;
  const char *artifacts;  /* call --artifacts DIR: where Selu artifacts out go */
  const char *login;      /* who runs this command (its passwd entry), for change records */
  const char *since;      /* audit --since: RFC 3339, or 10m, 2h, 1d back from now */
  int64_t tail;           /* audit --tail N: the last N records; -1 when not given */
  bool force;             /* policy set: even when --caps cannot be read */
  const char *capability; /* mcp: serve this capability alone */
  bool operator_;         /* access issue: the token may act as the operator */
};

/* Who runs this command: its passwd entry's name ($USER only without one). */
const char *cli_login_name(void);

/* Parses the common options; positional arguments stay in argv[optind..].
 * Returns 0, -1 after --help (exit 0), or an exit status. */
int parse_common(const char *verb, int argc, char **argv, struct common *o);
/* Opens --state (or the default); prints why not and returns an exit
 * status, or 0. */
int open_state(const struct common *o, struct gw_state **st);
/* Approvals and policy changes only from the operator: an exit status
 * when refused, else 0. */
int require_operator(const char *verb, const char *what);
/* A change's own audit record (gw_audit_change) by o->login; prints why
 * not and returns an exit status, or 0. */
int audit_change(struct gw_state *st, const struct common *o, const char *kind, const char *cap,
                 const char *tool, const char *what);

/* Loads --caps (default ./capabilities) into reg, printing what did not
 * load; an exit status when the directory cannot be read, else 0. */
struct gw_registry;
int load_registry(const struct common *o, struct gw_registry *reg, bool *had_errors);

/* One call through the gateway, its result or error printed (`call`,
 * `dispatch`); issuer NULL but for a Covenant dispatch. An exit status. */
struct gw_issuer;
int cli_call_run(const char *verb, const struct common *o, struct gw_registry *reg,
                 struct gw_state *st, const char *cap, const char *tool, const char *args,
                 size_t args_len, const struct gw_issuer *issuer);
/* A call's outcome printed as `call` prints it (the result, or the error
 * and the tool's stderr since log_before); its exit status. */
int cli_call_print(const char *verb, const struct common *o, enum gw_outcome outcome,
                   const char *json, bool terminal, const char *error, const char *log,
                   off_t log_before);
/* The capability's stderr log in the state and its size now (NULL for a
 * name that cannot be a file's); the caller frees it. */
char *cli_tool_log(const struct common *o, const char *cap, off_t *size);
/* `call` through a running `capsule serve` on the same state and
 * capabilities (via_serve.c): true when it was made there (*code: the
 * exit status), false when there is none, or the call asks for what only
 * a call alone does (then the caller runs it itself). */
/* `approve`/`deny` through a running `capsule serve` on the same state
 * (via_serve.c; the capabilities do not matter to approvals): 1 when
 * decided there (*was, *a as gw_approval_resolve gives them, *audit_error
 * allocated when serve could not audit the change), 0 when there is none
 * or --user names someone else (then the caller decides alone), -errno
 * when serve failed (the error printed). The caller has checked the
 * operator's rights as alone. */
int cli_approve_via_serve(const struct common *o, const char *verb, const char *id, bool approve,
                          enum gw_approval_status *was, struct gw_approval *a, char **audit_error);
/* `capsule list` through a running serve on the same state serving the
 * same --caps (via_serve.c): the listing's JSON (gateway/listing.h) into
 * out, the manifests' diagnostics printed here (*bad when one is an
 * error); false when there is no such serve (the caller lists alone);
 * *code non-zero when it failed (printed) */
bool cli_list_via_serve(const struct common *o, struct cap_buf *out, bool *bad, int *code);
bool cli_call_via_serve(const struct common *o, const char *cap, const char *tool, const char *args,
                        int *code);

int cmd_policy(int argc, char **argv);
int cmd_cred(int argc, char **argv); /* cred.c */
int cmd_approvals(int argc, char **argv);
int cmd_approve(int argc, char **argv);
int cmd_deny(int argc, char **argv);
int cmd_audit(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
int cmd_access(int argc, char **argv);

#endif
