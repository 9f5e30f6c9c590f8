/* `capsule run`'s parsed command line, shared by its steps: run.c (parse,
 * build the spec, run and report), run_values.c (option values), run_dry.c (--dry-run's summary)
 * and run_state.c (the state directory: credentials, id range, audit). Strings point into argv; the
 * lists are owned (run_args_free). */
#ifndef CAPSULE_CLI_RUN_H
#define CAPSULE_CLI_RUN_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gateway/state.h"
#include "manifest/model.h"
#include "sandbox/sandbox.h"
#include "net/proxy.h"

#define RUN_MAX_RESOLVE 64

struct run_args {
  const char *config;        /* --config, or NULL: the secure default */
  const char *profile;       /* --profile: a nono profile file or name, or NULL */
  struct cap_strv grants[3]; /* --allow-read, --allow-write, --allow-rw (by cap_access) */
  struct cap_strv deny;      /* --deny: paths masked whatever the grants say */
  int net;                   /* --net as an enum cap_net_mode, -1 when not given */
  struct cap_strv hosts;     /* --allow-host: "name", ".suffix", "*", or "host:port" */
  struct cap_ports ports;    /* --allow-port: host loopback ports forwarded in */
  struct proxy_resolve resolve[RUN_MAX_RESOLVE]; /* --resolve HOST:ADDR (strings owned) */
  size_t n_resolve;
  uint64_t memory, pids, cpu_ms, timeout_s; /* 0: not given */
  uint64_t approval_timeout_s;              /* --approval-timeout; 0: 60 s */
  const char *workdir;                      /* --workdir as given, or NULL */
  struct cap_strv env;                      /* NAME=VALUE */
  bool dry_run, json, proxy_private, verbose;
  bool tty; /* --tty: the caller's terminal for the command */
  const char *egress_log;
  const char *state;                /* --state, else $CAPSULE_STATE, else NULL */
  char *workdir_inside;             /* built: where the command starts (owned), or NULL:
                                       the sandbox's default (/tmp, else /) */
  char **command;                   /* the command and its arguments (argv's tail) */
  const struct gw_granted *granted; /* built: the operator's grants applied, or NULL */
};

/* run_values.c: an option's value, 0 (or -1 for the int ones, after a
 * usage error naming it) when it is not one. */
uint64_t run_parse_size(const char *s);                   /* "256M", "1G", bytes */
uint64_t run_parse_count(const char *s);                  /* a positive integer */
uint16_t run_parse_port(const char *s);                   /* 1..65535 */
void run_push_env(struct cap_strv *env, const char *arg); /* NAME or NAME=VALUE */
int run_parse_allow_host(const char *arg, struct cap_strv *hosts);
int run_parse_resolve(const char *arg, struct run_args *a);

/* "~/x" -> "$HOME/x"; other paths as they are, as the sandbox expands
 * them (allocated). */
char *run_expand_home(const char *path);

/* The key of `capsule run`'s id range without a manifest (and its
 * audit records' capability): no capability's key (gw_id_range_key). */
#define RUN_ID_KEY GW_ID_RANGE_ADHOC

/* The run's state directory, opened once (gw_statedir_open): for the id
 * range's peek and the audit marker. fd -1 when it cannot be used (err
 * says why); named when --state or its defaults named it. */
struct run_state {
  char *dir;
  int fd;
  bool named;
};
int run_state_open(struct run_state *rs, const char *state, struct cap_error *err);
void run_state_close(struct run_state *rs);

/* As root: the tool's host id range (sandbox_options.id_base) for spec,
 * from the state (gw_state_id_range; recorded now when create). 0 and
 * *base 0 unprivileged. */
int run_id_base(const struct cap_spec *spec, const char *config, const struct run_state *rs,
                bool create, uint32_t *base, struct cap_error *err);

/* Bare-name credential sources come from capsule's credential store
 * (shared, system scope), opened only when a route asks: run_store_lookup
 * is a proxy_store's lookup with a struct run_store as its argument. */
struct run_store {
  const char *dir; /* NULL: the default state directory */
  struct gw_state *st;
};
int run_store_lookup(void *arg, const char *name, char **value, bool *found, struct cap_error *err);
void run_store_close(struct run_store *ctx);

/* The run as an audit record of the state directory, decision "run":
 * capability the manifest's id ("run" without one), tool the command's
 * name, the hash of the command line (NUL-separated); written as a
 * marker before the sandbox starts and finished with the outcome (the
 * next state open appends it), so a run's start-up opens no database.
 * Best effort: a state directory that cannot be used leaves the run
 * unaudited (a warning when it was named; open_err says why). */
struct run_audit {
  struct gw_inflight marker; /* {.fd = -1} before begin */
  const char *dir;
  char user[16];
  struct gw_audit_record rec;
  char outcome[160];
};
void run_audit_begin(const struct cap_spec *spec, const struct run_args *a,
                     const struct run_state *rs, const struct cap_error *open_err,
                     struct run_audit *au);
void run_audit_finish(struct run_audit *au, int r, const struct sandbox_result *res,
                      const struct cap_error *err);

/* run_expand.c: exec_strategy "supervised": the operator asked about each
 * open outside the grants (a terminal capsule owns, else the approval
 * queue, with a timeout that denies), every decision audited. setup
 * fills opt's expansion hooks (none when the spec does not expand);
 * finish closes what they opened. x must outlive the process's threads
 * (a supervisor's thread may still be asking when the run ends): static
 * storage. */
struct run_expand {
  const char *state, *capability, *tool, *user; /* user: "#UID" */
  char user_name[64];                           /* its login name, looked up on first use */
  bool may_prompt;
  int64_t timeout_ms;
  pthread_mutex_t lock; /* one record at a time */
  size_t rate_limited;
  struct gw_state *st; /* opened on first use */
  bool closing;        /* the run is over: nothing more is asked or recorded */
};
void run_expand_setup(struct run_expand *x, struct sandbox_options *opt,
                      const struct cap_spec *spec, const struct run_args *a,
                      const struct run_audit *au);
void run_expand_finish(struct run_expand *x);

/* The operator's grants (`capsule grant`) for spec's capability, from the
 * state (state, else the default) when it exists, laid over spec as
 * `capsule call` lays them (gateway/grants.h; out borrows from spec, free
 * it first). A state that cannot be read is a warning on stderr and out
 * is spec unchanged. */
struct gw_granted;
int run_operator_grants(const struct cap_spec *spec, const char *state, struct gw_granted *out);

/* --dry-run: prints what would run and how each right is enforced. */
int run_dry(const struct cap_spec *spec, const struct run_args *a);

/* rollback.c: with rollback.enabled, the writable grants snapshotted
 * before the run (0, or an exit status: nothing may run without it) and
 * after it (the record saved, its id printed on stderr). */
struct rb_record;
int run_rollback_before(const struct cap_spec *spec, const char *state, struct rb_record *rec,
                        char **ret_store, char *const *command);
void run_rollback_after(struct rb_record *rec, char *store);

#endif
