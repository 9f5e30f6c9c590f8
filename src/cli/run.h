/* `capsule run`'s parsed command line, shared by its steps: run.c (parse,
 * build the spec, run and report) and run_dry.c (--dry-run's summary).
 * Strings point into argv; the lists are owned (run_args_free). */
#ifndef CAPSULE_CLI_RUN_H
#define CAPSULE_CLI_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "manifest/model.h"
#include "net/proxy.h"

#define RUN_MAX_RESOLVE 64

struct run_args {
  const char *config;        /* --config, or NULL: the secure default */
  struct cap_strv grants[3]; /* --allow-read, --allow-write, --allow-rw (by cap_access) */
  struct cap_strv deny;      /* --deny: paths masked whatever the grants say */
  int net;                   /* --net as an enum cap_net_mode, -1 when not given */
  struct cap_strv hosts;     /* --allow-host: "name", ".suffix", "*", or "host:port" */
  struct cap_ports ports;    /* --allow-port: host loopback ports forwarded in */
  struct proxy_resolve resolve[RUN_MAX_RESOLVE]; /* --resolve HOST:ADDR (strings owned) */
  size_t n_resolve;
  uint64_t memory, pids, cpu_ms, timeout_s; /* 0: not given */
  const char *workdir;                      /* --workdir as given, or NULL */
  struct cap_strv env;                      /* NAME=VALUE */
  bool dry_run, json, proxy_private, verbose;
  bool tty; /* --tty: the caller's terminal for the command */
  const char *egress_log;
  const char *state;    /* --state, else $CAPSULE_STATE, else NULL */
  char *workdir_inside; /* built: where the command starts (owned), or NULL:
                           the sandbox's default (/tmp, else /) */
  char **command;       /* the command and its arguments (argv's tail) */
};

/* "~/x" -> "$HOME/x"; other paths as they are, as the sandbox expands
 * them (allocated). */
char *run_expand_home(const char *path);

/* The key of `capsule run`'s id range without a manifest. */
#define RUN_ID_KEY "run"

/* As root: the tool's host id range (sandbox_options.id_base) for spec,
 * from the state (gw_state_id_range; recorded now when create). 0 and
 * *base 0 unprivileged. */
int run_id_base(const struct cap_spec *spec, const char *config, const char *state, bool create,
                uint32_t *base, struct cap_error *err);

/* --dry-run: prints what would run and how each right is enforced. */
int run_dry(const struct cap_spec *spec, const struct run_args *a);

#endif
