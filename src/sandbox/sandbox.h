/* The sandbox: runs a command with exactly the rights a resolved capability
 * (struct cap_spec) grants. Setup runs top to bottom in the order the kernel
 * sees it (spawn.c): namespaces, id maps, a private mount tree on a tmpfs
 * root built from the grants, pivot_root, then inside the sandbox the
 * second, independent layers: rlimits, no_new_privs, Landlock (landlock.c),
 * seccomp (seccomp.c), and a small pid-1 init that reaps and forwards
 * signals. The caller owns what it passes; nothing here prints. */
#ifndef CAPSULE_SANDBOX_SANDBOX_H
#define CAPSULE_SANDBOX_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "manifest/model.h"
#include "net/proxy.h"

struct cap_path_cache; /* core/fs.h */

#define SANDBOX_MAX_FORWARDS PROXY_MAX_FORWARDS
#define SANDBOX_MAX_LISTENERS PROXY_MAX_LISTENERS
/* the private /tmp's size when the manifest sets no disk limit */
#define SANDBOX_TMP_DEFAULT_BYTES (64ull << 20)

struct sandbox_running; /* a sandbox while it runs (see on_started) */

/* exec_strategy "supervised" (supervise.h): an open of a path that is not
 * in the sandbox's view but exists on the host, put to the operator. */
struct sandbox_expansion {
  int pid;           /* the asking process, as the host sees it */
  const char *comm;  /* its name as it set it (the tool's text: escape it) */
  const char *path;  /* the host's canonical path of what would be opened */
  const char *asked; /* the path as the tool named it, made absolute */
  enum cap_access access;
};
enum sandbox_expand_verdict {
  SANDBOX_EXPAND_APPROVED,
  SANDBOX_EXPAND_DENIED,       /* by the operator */
  SANDBOX_EXPAND_TIMED_OUT,    /* nobody answered in time: denied */
  SANDBOX_EXPAND_UNASKED,      /* no way to ask (no terminal, no state): denied */
  SANDBOX_EXPAND_RATE_LIMITED, /* past the prompts' rate: denied unasked */
  SANDBOX_EXPAND_PROTECTED,    /* a deny entry or capsule's state: denied unasked */
};
const char *sandbox_expand_verdict_name(enum sandbox_expand_verdict v);

struct sandbox_options {
  char *const *argv;      /* the command; argv[0] is looked up in PATH inside */
  const char *workdir;    /* inside the sandbox; NULL: "/" or the first rw grant */
  char *const *extra_env; /* NAME=VALUE strings added to the safe set */
  size_t n_extra_env;
  struct proxy_options proxy; /* proxy mode: how the egress proxy behaves */
  bool redirect_stdio;        /* give the command stdio[0..2] instead of capsule's */
  int stdio[3];
  /* The caller's terminal for an interactive tool (`capsule run --tty`):
   * the command keeps capsule's session, so the terminal is its
   * controlling one, and terminal stdio reaches it as is. Otherwise the
   * command runs in a session of its own (setsid: no controlling
   * terminal, /dev/tty cannot be opened), a terminal on stdin is replaced
   * by /dev/null, and a terminal on stdout/stderr by a pipe whose bytes
   * capsule escapes (relay.h). Whatever tty says, stderr on a regular file
   * (a log) reaches the tool as a pipe capsule copies to the file. */
  bool tty;
  /* A long-running service (the Selu runtime): the sandbox's end of a
   * SOCK_SEQPACKET socketpair. The sandbox's pid 1 answers
   * sandbox_connect() on the other end with connections made inside the
   * sandbox's network namespace; closing the other end stops the command
   * (SIGTERM, SIGKILL 2 s later). The caller closes its copy of this end
   * once sandbox_run has started the sandbox (on_started). */
  bool has_connector;
  int connector_fd;
  /* Host paths masked inside the sandbox whatever the grants say:
   * capsule's own state (its key, sealed credentials, instance sockets). */
  const char *const *hidden;
  size_t n_hidden;
  /* When hidden was resolved just before (gw_state_private_paths_cached,
   * in the same process, right before sandbox_run): the components found
   * not to be links then, which the mask plan does not ask again. NULL
   * for a list kept from earlier (serve's): every path resolved anew. */
  struct cap_path_cache *hidden_cache;
  /* Called in the caller's process once the sandbox runs, before
   * sandbox_run waits for it: where a caller may start threads. The
   * handle stays valid until sandbox_run returns. */
  void (*on_started)(void *ctx, struct sandbox_running *running);
  void *on_started_ctx;
  /* As root: the first of the 65,536 host uids and gids that belong to
   * this capability alone (gw_state_id_range); the tool runs as host uid
   * and gid id_base + 65534 (65534 inside). 0: host uid 65534 (nobody)
   * itself, shared with the host's daemons. Ignored unprivileged: the
   * tool keeps the caller's ids. */
  uint32_t id_base;
  /* An image's unpacked root (a host directory, image/image.h): the
   * sandbox's root is built from its top-level entries, bound read-only,
   * instead of the host's system directories (the spec's grants should
   * then hold none of those: the gateway drops them); /dev, /proc and a
   * noexec /tmp are the sandbox's own, and Landlock allows reading and
   * executing the whole root. NULL: the host's directories as granted. */
  const char *rootfs;
  /* The uid and gid the command has inside the sandbox (Selu's runner:
   * 1000); 0: the default (the caller's own unprivileged, 65534 as root).
   * The host ids are the same either way. */
  uint32_t inside_id;
  /* A bound on what the supervisor appends to a log (the command's stderr
   * on a regular file) in this run, besides limits.disk_bytes (the smaller
   * of the two holds); 0: limits.disk_bytes alone. The gateway's tool logs
   * use it so that one call cannot fill the state's disk. */
  uint64_t log_max_bytes;
  /* spec->process.expand_opens: asks the operator about one expansion
   * (APPROVED, DENIED, TIMED_OUT or UNASKED); called from a thread of the
   * supervisor, one call at a time, and may block. record is told every
   * decision, the unasked ones too, from any thread (it serialises
   * itself). NULL ask: every expansion is refused. */
  enum sandbox_expand_verdict (*expand_ask)(void *ctx, const struct sandbox_expansion *req);
  void (*expand_record)(void *ctx, const struct sandbox_expansion *req,
                        enum sandbox_expand_verdict verdict);
  void *expand_ctx;
  /* The caller exits as soon as sandbox_run returns (`capsule run`): pid
   * 1, which has by then reaped every process of the tool and reported
   * the command's status, is not waited for while its namespaces are torn
   * down (an RCU grace period or two); the caller's exit hands it to init.
   * Otherwise sandbox_run reaps it before returning. */
  bool caller_exits;
};

/* How the command ended. */
struct sandbox_result {
  int exit_status;       /* the command's status when it exited */
  int term_signal;       /* the signal that killed it, or 0 */
  const char *killed_by; /* a limit that capsule enforced ("wall clock"), or NULL */
  char unenforced[256];  /* limits this host could not enforce, "" when none */
  /* the CPU the run used as the sandbox itself counted it (gVisor: its
   * cgroup, else its process tree sampled, ptrace's stub processes
   * included, which no wait of capsule's reaps); 0 when it did not: the
   * caller's getrusage(RUSAGE_CHILDREN) around sandbox_run, the larger */
  uint64_t cpu_ms;
};

/* Runs opt->argv in the sandbox spec describes and waits for it.
 * Returns 0 and fills *res, or a negative errno with err set: -ENOTSUP
 * when the host cannot enforce what spec requires (fail closed).
 * The sandbox dies with the THREAD that called this (PR_SET_PDEATHSIG
 * follows the creating thread): call it from a thread that lives as long
 * as the sandbox (sandbox_run itself waits, so any thread that does not
 * exit in on_started qualifies). */
int sandbox_run(const struct cap_spec *spec, const struct sandbox_options *opt,
                struct sandbox_result *res, struct cap_error *err);

/* The CPU time the whole sandbox has used so far, in ms (its cgroup's
 * count), or -1 when this host gives capsule no cgroup to read it from.
 * Safe from any thread while the sandbox runs. */
int64_t sandbox_cpu_ms(struct sandbox_running *running);

/* Over a connector (see sandbox_options): a TCP connection to
 * 127.0.0.1:port inside the sandbox's network namespace, made by its pid 1
 * and handed over; waits up to timeout_ms for the answer. Returns the
 * connected fd (the caller owns it), or -errno with err set
 * (-ECONNREFUSED: nothing listens there yet). Not thread-safe per
 * connector: one request at a time. */
int sandbox_connect(int connector, uint16_t port, int timeout_ms, struct cap_error *err);

/* Where `name` lives on the sandbox's PATH (a name with a '/' is itself);
 * writes up to max paths that exist, returns how many. */
size_t sandbox_command_paths(const char *name, char (*out)[4096], size_t max);

/* As root: the host uid and gid a tool runs as for id_base
 * (sandbox_options.id_base): id_base + 65534, or 65534 for id_base 0.
 * false when capsule is the root of a user namespace (a container) where
 * that id is not mapped: then 65534. */
bool sandbox_host_ids(uint32_t id_base, uid_t *uid, gid_t *gid);

/* As root: 0 when a read-write grant of path can be an idmapped mount
 * (the tool writes the caller's files, and what it creates is the
 * caller's), else -errno (-EINVAL: the filesystem cannot; -EPERM: `/`,
 * which is never idmapped, sandbox_idmap_excluded). */
int sandbox_idmap_probe(const char *path);
/* A grant never idmapped (its real path): `/` itself, whose files would
 * all be the tool's as root's, and a sticky directory anyone may write
 * (/tmp), where the tool writes anyway and root's links would pass
 * protected_symlinks. */
bool sandbox_idmap_excluded(const char *real);

/* The sandbox spec and opt describe as an OCI runtime-spec config.json,
 * appended to out (`capsule export oci`, oci_config.c): root "rootfs" in
 * the bundle, read-only; opt->argv, workdir, extra_env, inside_id; as root
 * opt->id_base is the capability's id range (mapped to 0..65535 inside).
 * netns: a network namespace to join, else a new one (none when the
 * network is unrestricted). -EINVAL when a grant cannot be carried. */
struct cap_buf;
int sandbox_oci_config(const struct cap_spec *spec, const struct sandbox_options *opt,
                       const char *netns, struct cap_buf *out, struct cap_error *err);

/* linux-gvisor (gvisor.c): where runsc is (allocated): $CAPSULE_RUNSC when
 * set (an absolute path), else on PATH; NULL when it is not there.
 * sandbox_run runs a spec whose backend is gvisor under it, as root;
 * without it, or unprivileged, it fails closed (-ENOTSUP). */
char *sandbox_runsc_path(void);

/* Landlock ABI version the kernel offers (0 when none). */
int landlock_abi(void);

#endif
