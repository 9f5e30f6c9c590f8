/* capsule run --dry-run: what would run, and which mechanism enforces
 * each right on this host. */
#include <stdio.h>

#include "cli/cli.h"
#include "cli/run.h"
#include "core/cleanup.h"
#include "manifest/load.h"
#include "sandbox/limits.h"
#include "sandbox/sandbox.h"

/* --dry-run: which mechanism enforces each right on this host. */
static void print_enforcement(const struct cap_spec *spec)
{
  int abi = landlock_abi();
  char landlock[32] = "no Landlock on this host";
  if (abi > 0)
    snprintf(landlock, sizeof landlock, "Landlock ABI %d", abi);
  fprintf(stderr, "# how each right is enforced on this host\n");
  for (size_t i = 0; i < spec->n_grants; i++) {
    const struct cap_fs_grant *g = &spec->grants[i];
    fprintf(stderr, "grant %-10s %s %s: bind mount %s, nosuid, nodev + %s\n",
            cap_access_name(g->access), g->type == CAP_FS_FILE ? "file" : "dir ", g->path,
            g->access == CAP_ACCESS_READ ? "read-only (recursive)" : "read-write", landlock);
  }
  for (size_t i = 0; i < spec->deny.len; i++)
    fprintf(stderr,
            "deny %s: resolved on the host (symlinks followed) and masked by an empty "
            "mount in every grant that shows it; the run fails if it cannot be\n",
            spec->deny.v[i]);
  fprintf(stderr, "network %s: %s\n", cap_net_mode_name(spec->network.mode),
          spec->network.mode == CAP_NET_UNRESTRICTED ? "the host's network"
          : spec->network.mode == CAP_NET_PROXY
              ? "a network namespace with only loopback; the only way out is capsule's "
                "proxy at 127.0.0.1:3128 (CONNECT, allowlist checked, names resolved by "
                "capsule); Landlock allows TCP connect to that port alone"
              : "a network namespace with only loopback + Landlock TCP rules");
  fprintf(stderr,
          "processes: pid namespace, reaping init, seccomp filter, no_new_privs, no "
          "capabilities%s\n",
          spec->process.blocked_commands.len || spec->process.allowed_commands.len
              ? ", command lists by masking + Landlock EXECUTE"
              : "");
  struct sandbox_limits lim;
  struct cap_error err = {0};
  if (limits_prepare(&lim, spec, &err) == 0) {
    const char *kind = lim.kind == LIMITS_CGROUP2   ? "cgroup v2"
                       : lim.kind == LIMITS_CGROUP1 ? "cgroup v1"
                                                    : "rlimit";
    if (spec->limits.memory_bytes)
      fprintf(stderr, "memory %llu bytes: %s\n", (unsigned long long)spec->limits.memory_bytes,
              lim.memory_enforced ? kind : "RLIMIT_DATA per process");
    if (spec->limits.pids)
      fprintf(stderr, "pids %llu: %s\n", (unsigned long long)spec->limits.pids,
              lim.pids_by_rlimit ? "RLIMIT_NPROC in the user namespace" : kind);
    if (spec->limits.cpu_fraction > 0)
      fprintf(stderr, "cpu %.2f cores: %s\n", spec->limits.cpu_fraction,
              lim.cpu_enforced ? kind : "NOT ENFORCED (no writable cgroup)");
    if (spec->limits.cpu_ms_per_task)
      fprintf(stderr, "cpu budget %llu ms: supervisor projection tick + RLIMIT_CPU\n",
              (unsigned long long)spec->limits.cpu_ms_per_task);
    if (spec->limits.wall_ms)
      fprintf(stderr, "wall clock %llu ms: supervisor\n", (unsigned long long)spec->limits.wall_ms);
    limits_release(&lim);
  } else {
    fprintf(stderr, "limits: %s\n", err.message);
    cap_error_clear(&err);
  }
}

int run_dry(const struct cap_spec *spec, const struct run_args *a)
{
  (void)a;
  _cleanup_free_ char *json = cap_spec_to_json(spec, true);
  fputs(json, stdout);
  print_enforcement(spec);
  return CLI_EXIT_OK;
}
