/* Resource limits for one sandbox: a cgroup (v2 where the host delegates
 * one to us, else the v1 memory/pids/cpu/cpuacct controllers when we may
 * write them, as root on hosts like this one), rlimits as the fallback.
 * Used by spawn.c; the struct lives on the caller's stack. */
#ifndef CAPSULE_SANDBOX_LIMITS_H
#define CAPSULE_SANDBOX_LIMITS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "manifest/model.h"

enum limits_kind { LIMITS_NONE, LIMITS_CGROUP2, LIMITS_CGROUP1 };

struct sandbox_limits {
  enum limits_kind kind;
  char v2[704];    /* the sandbox's cgroup directory (v2) */
  char v1[4][512]; /* memory, pids, cpu, cpuacct directories (v1); "" when unused */
  bool memory_enforced, pids_enforced, cpu_enforced;
  bool pids_by_rlimit;  /* RLIMIT_NPROC in the sandbox's user namespace */
  char unenforced[256]; /* limits the host could not enforce, for a warning */
  int64_t cpu_base_ms;  /* CPU used when supervision began (the sandbox's setup); -1: unread */
  pid_t pid;            /* pid 1 of the sandbox (limits_attach): its CPU without a cgroup */
  int v1_tasks[4];      /* v1: the groups' `tasks` files, open for limits_join; -1 when not */
  bool holds_init;      /* pid 1 itself was moved in (v2): the groups empty only once it is gone */
  /* CPU spent for the sandbox outside it (ms so far; the egress proxy's
   * threads in capsule's own process), counted as the sandbox's own; NULL
   * when there is none */
  int64_t (*outside_cpu_ms)(void *arg);
  void *outside_cpu_arg;
};

/* Creates the cgroup(s) and writes the limits. count_cpu: a caller reads
 * the sandbox's CPU (sandbox_cpu_ms; a warm instance's per-call budget)
 * though spec has no budget of its own, so a v1 cpuacct group is made
 * anyway. Fails (-ENOTSUP) only when spec->sandbox.required and a limit
 * cannot be enforced. */
int limits_prepare(struct sandbox_limits *lim, const struct cap_spec *spec, bool count_cpu,
                   struct cap_error *err);
/* Moves pid (pid 1, before it runs anything) into the cgroup(s) that the
 * command does not join itself (limits_join; sets holds_init). Closes the
 * caller's copies of what limits_join uses: call it after the sandbox is
 * cloned. */
int limits_attach(struct sandbox_limits *lim, pid_t pid, struct cap_error *err);
/* In the command, before it runs anything of the tool, while it is the
 * only thread of its process: moves itself into the v1 groups through the
 * `tasks` files limits_prepare opened. Pid 1 stays out of them, so they
 * are empty once it has reaped the tool's processes, before its own exit
 * (the namespaces' teardown) ends. -errno on failure. */
int limits_join(struct sandbox_limits *lim);
/* In the command, before exec: the rlimit fallbacks for what no cgroup holds. */
void limits_apply_rlimits(const struct sandbox_limits *lim, const struct cap_spec *spec);
/* True when the CPU used so far, projected one tick ahead, exceeds the
 * per-task CPU budget. */
bool limits_cpu_overshoot(struct sandbox_limits *lim, const struct cap_spec *spec,
                          uint64_t elapsed_ms);
/* The CPU (ms) of root and every process below it, from /proc (each
 * one's own and its reaped children's), or -1: where no cgroup counts. */
int64_t limits_tree_cpu_ms(pid_t root);
/* CPU used by the sandbox so far (ms): the cgroup's count, else the sum
 * over its processes from /proc, plus what outside_cpu_ms reports; -1
 * before limits_attach. */
int64_t limits_cpu_ms(struct sandbox_limits *lim);
/* Which limit killed the command (from the cgroup's records), or NULL. */
const char *limits_verdict(struct sandbox_limits *lim, int term_signal);
/* Kills what is left in the cgroup and removes it. */
void limits_release(struct sandbox_limits *lim);

#endif
