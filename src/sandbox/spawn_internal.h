/* What the sandbox's files share and nobody outside src/sandbox uses: the
 * child's way to report a setup failure, raw system calls Debian's headers
 * lack, and the steps spawn.c runs in the child (mount.c builds the root,
 * pid1.c is the init and the connector, exec.c drops to the command). */
#ifndef CAPSULE_SANDBOX_SPAWN_INTERNAL_H
#define CAPSULE_SANDBOX_SPAWN_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "net/egress_plan.h"
#include "sandbox/limits.h"
#include "sandbox/sandbox.h"

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434
#endif
#ifndef __NR_close_range
#define __NR_close_range 436
#endif

#define SANDBOX_UID_AS_ROOT 65534 /* nobody: never the caller's uid */

/* ---- the child's side: report a failure to the parent and stop ---- */

/* The CLOEXEC pipe end a setup failure travels on (-1: none). */
extern int sandbox_report_fd;

/* The first byte of a report that the command itself could not be run
 * (exec failed): the parent turns it into CAP_OUTCOME_NOT_FOUND. */
#define SANDBOX_REPORT_EXEC '\x01'

void __attribute__((noreturn, format(printf, 1, 2))) sandbox_child_fail(const char *fmt, ...);
/* The parent's side: reads what the child reported on fd until EOF (its
 * exec) into msg (NUL-terminated, empty for none), within the setup's
 * bound (30 s; CAPSULE_TEST_SETUP_BOUND_MS in a test build), pidfd the
 * child: when it ends and the report's end does not follow within a
 * second, or the bound passes, an error naming what ("sandbox setup"),
 * and the caller kills what is left. Used by spawn.c and gvisor.c. */
int sandbox_await_report(int fd, int pidfd, const char *what, char *msg, size_t size,
                         struct cap_error *err);
/* A test build's stuck setup (CAPSULE_TEST_STALL_SETUP_MS): the child
 * sleeps before its exec (spawn.c: pid 1 before it forks the command,
 * where a lock a fork kept once held it; gvisor.c: before runsc), its
 * report pipe open. Nothing in other builds. */
void sandbox_test_stall_setup(void);

#define CHILD_TRY(expr, ...)                                                                       \
  do {                                                                                             \
    if ((expr) < 0)                                                                                \
      sandbox_child_fail(__VA_ARGS__);                                                             \
  } while (0)

/* The id changes in the child are raw system calls: glibc's wrappers would
 * signal every thread of the process to change ids with it (POSIX
 * semantics), and a child cloned from a multi-threaded caller has the
 * other threads' bookkeeping but not the threads, so it would wait for
 * them forever. */
long sandbox_raw_setresgid(gid_t gid);
long sandbox_raw_setresuid(uid_t uid);

struct sandbox_mount_plan; /* mount_plan.h: made by the parent before the clone */

/* mount.c: builds the new root at `root` (a tmpfs) from the plan and
 * moves into it (pivot_root; the root read-only); closes the plan's
 * trees. */
void sandbox_build_root(const struct cap_spec *spec, struct sandbox_mount_plan *plan,
                        const char *root, const struct proxy *px);

/* pid1.c: loopback up in the sandbox's network namespace. */
void sandbox_loopback_up(void);
/* pid1.c: the proxy's listening sockets (and one per ports.localhost),
 * made in this namespace and sent over pass_fd (closed after). */
void sandbox_make_proxy_listeners(const struct cap_spec *spec, int pass_fd);
/* pid1.c: the listeners sent by sandbox_make_proxy_listeners: how many
 * (<= max), or -1. */
int sandbox_receive_fds(int sock, int *fds, size_t max);
/* pid1.c: how many listeners sandbox_make_proxy_listeners makes for spec. */
size_t sandbox_listener_count(const struct cap_spec *spec);
/* pid1.c: reap everything; when the command ends, kill and reap the rest,
 * write its status (one byte) to status_fd (>= 0) and leave with it; serve
 * the connector (fd >= 0) until its end, which stops the command; when
 * life_fd (the read end of a pipe only the supervisor writes) hangs up,
 * capsule is gone: kill everything and leave. */
void __attribute__((noreturn))
sandbox_run_init(pid_t command, int connector, int life_fd, int status_fd);

/* exec.c: take the sandbox's ids right away, keeping the capabilities the
 * new user namespace gave. */
void sandbox_become_ids(uid_t uid, gid_t gid);
/* exec.c: the command: drop everything, then exec. */
void __attribute__((noreturn))
sandbox_exec_command(const struct cap_spec *spec, const struct sandbox_options *opt,
                     const struct sandbox_mount_plan *plan, struct sandbox_limits *lim,
                     const struct proxy *px, uid_t uid, gid_t gid, bool refuse_setid);

/* --- layers, used inside the new namespaces --- */

/* -ENOTSUP naming what this kernel's Landlock cannot hold (without it: a
 * write-only grant, command lists; below ABI 6: signal_mode
 * allow_same_sandbox), else 0. Refused before set-up (exit 3). */
int landlock_check_needed(const struct cap_spec *spec, struct cap_error *err);
/* Restricts this process (and its children) to the grants; needs
 * no_new_privs. `command` is the program about to be exec'd: with an
 * allowed_commands list, only those programs (and this one) may be
 * executed. The plan's deny masks are kept out of the grants that contain
 * them (plan may be NULL: none). Returns 0, or -errno with err set. */
int landlock_apply(const struct cap_spec *spec, const struct sandbox_mount_plan *plan,
                   const char *command, bool image_root, struct cap_error *err);
/* The main seccomp filter as OCI linux.seccomp.syscalls (a JSON array,
 * allocated), with the semaphore rule when asked (oci_config.c). */
char *sandbox_seccomp_oci_rules(bool semaphores);
#if defined(__x86_64__)
#define SANDBOX_SECCOMP_OCI_ARCH "SCMP_ARCH_X86_64"
#else
#define SANDBOX_SECCOMP_OCI_ARCH "SCMP_ARCH_AARCH64"
#endif

/* Loads the seccomp deny-list filter; needs no_new_privs. refuse_setid:
 * also refuse setuid/setgid mode bits (as root, where the tool's files in
 * a writable grant become the caller's). */
int seccomp_apply(const struct cap_spec *spec, bool refuse_setid, struct cap_error *err);

/* Proxy mode's /etc/resolv.conf (the sandbox's resolver, net/egress_plan.h)
 * and /etc/hosts (localhost alone), mount.c's and gvisor.c's. */
#define SANDBOX_RESOLV_CONF                                                                        \
  "# capsule: the sandbox's resolver (allowlisted names only)\n"                                   \
  "nameserver " EGRESS_DNS_ADDR "\noptions timeout:2 attempts:2\n"
#define SANDBOX_HOSTS "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"

/* ---- oci_config.c and gvisor.c: the linux-gvisor backend ---- */

/* What a config.json for runsc adds to runc's (sandbox_oci_config_for
 * with NULL writes runc's): no user namespace or id maps (the Sentry is
 * the tool's kernel), no pids limit (the Sentry's threads share the
 * cgroup), cgroupsPath, and in proxy mode no network namespace of its
 * own (runsc joins the one it starts in), the proxy's variables, its
 * trust bundle (ca_file, a host file, or NULL) and resolver (etc_dir's
 * files over /etc's), and masks: host paths hidden inside the grants. */
struct sandbox_oci_runsc {
  const char *cgroups_path;
  const struct proxy *proxy;
  const char *ca_file;
  const char *etc_dir; /* proxy mode: a host directory holding resolv.conf and hosts */
  const char *const *masks;
  size_t n_masks;
};
int sandbox_oci_config_for(const struct cap_spec *spec, const struct sandbox_options *opt,
                           const char *netns, const struct sandbox_oci_runsc *runsc,
                           struct cap_buf *out, struct cap_error *err);
/* spawn.c: what a run appends to a log (the command's stderr on a regular
 * file) at most: the disk limit or opt->log_max_bytes, the smaller; 0
 * for no bound. */
uint64_t sandbox_log_cap(const struct cap_spec *spec, const struct sandbox_options *opt);
/* gvisor.c: sandbox_run for sandbox.backend = gvisor. */
int sandbox_gvisor_run(const struct cap_spec *spec, const struct sandbox_options *opt,
                       struct sandbox_result *res, struct cap_error *err);

/* ---- idmap.c: idmapped read-write grants, as root ---- */

/* A user namespace (an fd) whose maps send caller_uid/gid, inside, to
 * tool_uid/gid, outside: as a mount's idmap, the caller's files read as
 * the tool's and the tool's writes land as the caller's. -errno. */
int sandbox_idmap_userns(uid_t caller_uid, gid_t caller_gid, uid_t tool_uid, gid_t tool_gid);
/* Whether id is mapped in this process's user namespace (map_file:
 * /proc/self/uid_map or gid_map): capsule run as root inside a container
 * may have only a few ids. */
bool sandbox_id_mapped(const char *map_file, uint32_t id);
/* Makes a detached tree an idmapped mount (recursively where every
 * submount allows it). 0 or -errno. */
int sandbox_idmap_tree(int tree, int userns_fd);
/* Idmaps every writable grant's tree in the plan (the caller's getuid and
 * getgid to the tool's host ids); a grant that cannot be idmapped stays
 * as it was and is named in unenforced ("NOT WRITABLE"). 0, or -1 when
 * one could not be. */
int sandbox_idmap_plan(struct sandbox_mount_plan *plan, uid_t tool_uid, gid_t tool_gid,
                       char *unenforced, size_t size);

#endif
