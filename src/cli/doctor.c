/* capsule doctor: what this host can enforce, and how. Each line names the
 * mechanism and whether it works here, probed live (a real namespace, a
 * real cgroup directory), not guessed from versions. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "core/json.h"
#include "core/text.h"
#include "front/serve.h"
#include "gateway/state.h"
#include "sandbox/capture.h"
#include "sandbox/limits.h"
#include "sandbox/sandbox.h"

static const char doctor_help[] =
    "usage: capsule doctor\n"
    "\n"
    "Prints what this host can enforce: namespaces, Landlock, seccomp, cgroups,\n"
    "and which fallback capsule uses where a mechanism is missing.\n"
    "exit status: 0 the sandbox works here, 3 it cannot be created\n";

/* Can we create the namespaces the sandbox needs? Tried in a child. */
static bool probe_namespaces(int flags)
{
  pid_t pid = (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL);
  if (pid < 0)
    return false;
  if (pid == 0)
    _exit(0);
  int status;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void row(const char *what, bool ok, const char *detail)
{
  printf("  %-28s %s%-4s%s %s\n", what, cli_colour(stdout, ok ? CLI_COLOUR_OK : CLI_COLOUR_ERROR),
         ok ? "yes" : "NO", cli_colour(stdout, CLI_COLOUR_RESET), detail);
}

/* linux-gvisor: runsc on PATH, which capsule runs such agents under
 * (sandbox/gvisor.c); without it they fail closed. */
static void gvisor_row(void)
{
  _cleanup_free_ char *found = sandbox_runsc_path();
  _cleanup_free_ char *detail =
      found ? cap_xasprintf("%s: linux-gvisor agents run under it (an OCI bundle with the same "
                            "grants; platform ptrace%s)",
                            found, geteuid() == 0 ? "" : ", rootless: no cgroup limits")
            : cap_xstrdup("runsc is not installed: linux-gvisor manifests are refused; install "
                          "gVisor's runsc (Debian 12: apt-get install runsc; or "
                          "https://gvisor.dev/docs/user_guide/install/: the apt repository "
                          "https://storage.googleapis.com/gvisor/releases, package runsc, or the "
                          "runsc binary from that bucket on PATH)");
  row("gvisor backend", found != NULL, detail);
}

static void read_knob(const char *name, char out[32])
{
  _cleanup_free_ char *path = cap_xasprintf("/proc/sys/fs/inotify/%s", name);
  FILE *f = fopen(path, "re");
  if (!f || !fgets(out, 32, f))
    snprintf(out, 32, "?");
  out[strcspn(out, "\n")] = '\0';
  if (f)
    fclose(f);
}

/* The mode of a serve running on the default state (CAPSULE_STATE, else
 * the user's): its serve.json's caps_watch, NULL when none runs there. */
static char *serve_watch_mode(void)
{
  const char *env = getenv("CAPSULE_STATE");
  _cleanup_free_ char *dflt = env && *env ? NULL : gw_state_default_dir();
  _cleanup_free_ char *path = serve_status_path(dflt ? dflt : env);
  char *text = NULL, *mode = NULL;
  size_t len = 0;
  struct cap_error err = {0};
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  if (cap_read_file(path, 65536, &text, &len, &err) == 0 &&
      cap_json_parse(doc, text, len, path, 0, &d) == 0) {
    const struct cap_node *pid = cap_node_get(doc->root, "pid");
    const struct cap_node *w = cap_node_get(doc->root, "caps_watch");
    if (pid && pid->kind == CAP_NODE_INT && pid->u.num.i > 0 &&
        (kill((pid_t)pid->u.num.i, 0) == 0 || errno == EPERM) && w && w->kind == CAP_NODE_STRING)
      mode = cap_xasprintf("%s (pid %lld)", w->u.str.ptr, (long long)pid->u.num.i);
  }
  cap_error_clear(&err);
  cap_diags_free(&d);
  cap_doc_free(doc);
  free(text);
  return mode;
}

/* inotify, which serve's reload and warm keepers' package watches use:
 * an instance and a watch tried as this user, and this user's limits. */
static void inotify_row(void)
{
  int fd = inotify_init1(IN_CLOEXEC);
  int e = fd < 0 ? errno : inotify_add_watch(fd, "/", IN_ATTRIB) < 0 ? errno : 0;
  if (fd >= 0)
    close(fd);
  char inst[32], watches[32];
  read_knob("max_user_instances", inst);
  read_knob("max_user_watches", watches);
  _cleanup_free_ char *serving = serve_watch_mode();
  const char *knob = e == ENOSPC ? "max_user_watches" : e == EMFILE ? "max_user_instances" : NULL;
  _cleanup_free_ char *limit =
      knob ? cap_xasprintf("this user's fs.inotify.%s (%s) is reached; raise it (sysctl -w "
                           "fs.inotify.%s=N)",
                           knob, e == ENOSPC ? watches : inst, knob)
           : cap_xstrdup("no inotify here");
  const char *also = serving ? "; serve here: " : "";
  _cleanup_free_ char *detail =
      e == 0 ? cap_xasprintf("serve reloads on a capability's change, warm keepers watch their "
                             "packages (fs.inotify.max_user_instances %s, max_user_watches %s)%s%s",
                             inst, watches, also, serving ? serving : "")
             : cap_xasprintf("%s: %s: serve rescans the capabilities every 2 s, warm keepers "
                             "digest their package per call%s%s",
                             strerror(e), limit, also, serving ? serving : "");
  row("inotify", e == 0, detail);
}

/* The limits this host enforces, and the workspace bound. */
static void limit_rows(void)
{
  struct cap_error err = {0};
  struct cap_spec probe_spec = {0};
  probe_spec.limits.memory_bytes = 1 << 30;
  probe_spec.limits.pids = 1024;
  probe_spec.limits.cpu_fraction = 1.0;
  struct sandbox_limits lim;
  limits_prepare(&lim, &probe_spec, false, &err);
  const char *kind = lim.kind == LIMITS_CGROUP2   ? "cgroup v2 (delegated)"
                     : lim.kind == LIMITS_CGROUP1 ? "cgroup v1 controllers"
                                                  : "rlimits only";
  row("memory limit", lim.memory_enforced, lim.memory_enforced ? kind : "RLIMIT_DATA per process");
  row("pids limit", lim.pids_enforced,
      lim.pids_by_rlimit ? "RLIMIT_NPROC in the sandbox's user namespace" : kind);
  row("cpu fraction", lim.cpu_enforced,
      lim.cpu_enforced ? kind : "not enforced: no writable cgroup");
  row("cpu budget per task", true,
      lim.kind != LIMITS_NONE ? "cgroup accounting + projection tick" : "RLIMIT_CPU per process");
  row("wall clock", true, "supervisor: SIGTERM, 1 s grace, SIGKILL to the pid namespace");
  row("disk limit", false,
      "/tmp and /dev/shm: sized tmpfs; writable grants: RLIMIT_FSIZE per file only, their "
      "total is not bounded");
  /* docs/gateway.md, "Bounds": a loop-mounted image per volume, as root */
  bool loop = geteuid() == 0 && access("/dev/loop-control", W_OK) == 0 &&
              (access("/usr/sbin/mkfs.ext4", X_OK) == 0 || access("/sbin/mkfs.ext4", X_OK) == 0);
  row("Selu workspace bound", loop,
      loop ? "a quota: each workspace and cache a loop-mounted ext4 image of its bound's size"
      : geteuid() == 0 ? "no /dev/loop-control or mkfs.ext4: a call with a workspace fails"
                       : "a check before each call, not a quota (a quota needs root)");
  limits_release(&lim);
  cap_error_clear(&err);
}

int cmd_doctor(int argc, char **argv)
{
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    fputs(doctor_help, stdout);
    return CLI_EXIT_OK;
  }
  if (argc > 1)
    return cli_usage_error("doctor", "takes no arguments");
  printf("capsule %s on this host (%s):\n", CAPSULE_VERSION, geteuid() ? "unprivileged" : "root");
  bool userns = probe_namespaces(CLONE_NEWUSER);
  row("user namespace", userns,
      userns ? "sandbox runs without privileges"
             : "needed: enable unprivileged user namespaces "
               "(sysctl kernel.unprivileged_userns_clone=1)");
  bool all = userns && probe_namespaces(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
                                        CLONE_NEWUTS | CLONE_NEWNET | 0x02000000);
  row("mount/pid/ipc/uts/net/cgroup", all, all ? "private mounts, processes, network" : "needed");
  int abi = landlock_abi();
  char detail[160];
  snprintf(detail, sizeof detail, "ABI %d: fs rights%s%s%s", abi, abi >= 3 ? ", truncate" : "",
           abi >= 4 ? ", TCP bind/connect" : "",
           abi >= 6 ? ", signal and abstract-socket scoping" : "");
  row("Landlock", abi > 0,
      abi > 0 ? detail
              : "missing: second filesystem layer off, write-only grants and command "
                "lists refused; boot with lsm=landlock");
  row("seccomp", true, "deny-list of escape syscalls, BPF compiled at build time");

  limit_rows();
  row("capability expansion", abi > 0,
      abi > 0 ? "exec_strategy supervised: an open outside the grants asked of the operator, "
                "the file's descriptor injected (seccomp user notification)"
              : "needs Landlock: a supervised run refuses every expansion");
  if (geteuid() == 0) { /* docs/sandbox.md, "Ids" */
    int idmap = sandbox_idmap_probe(".");
    row("tool ids (as root)", true, "each capability its own range of host ids, in the state");
    row("idmapped grants", idmap == 0,
        idmap == 0 ? "read-write grants are the caller's to write (this directory's filesystem)"
                   : "none on this directory's filesystem: root's files in a read-write grant "
                     "there are not writable by the tool");
  }
  /* docs/egress.md, "The transparent path" */
  bool capture = all && capture_probe();
  row("transparent egress", all,
      all ? "proxy mode: a resolver inside the sandbox and a listener per allowed name and port"
          : "needs the network namespace");
  row("any-port names", capture,
      capture ? "an nftables redirect in the sandbox's namespace (nft) sends every port of a "
                "name allowed on any port, and of a pattern's name (an on-demand address), to "
                "capsule; Landlock then leaves TCP connect to it"
      : capture_nft()
          ? "nft cannot load a redirect here (no nf_tables): a name allowed on any port is "
            "reached on 80, 443 and ports.connect only, a pattern's names through the proxy only"
          : "no nft binary: a name allowed on any port is reached on 80, 443 and ports.connect "
            "only, a pattern's names through the proxy only (install nftables)");
  gvisor_row();
  inotify_row();
  return all ? CLI_EXIT_OK : CLI_EXIT_HOST;
}
