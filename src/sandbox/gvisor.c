/* sandbox.backend = gvisor (Covenant's `linux-gvisor`): the command runs
 * under gVisor's runsc, from an OCI bundle holding the same grants
 * (oci_config.c: the grants bound read-only or read-write, a read-only
 * empty root, the private /tmp, the environment, rlimits, memory and CPU
 * through the cgroup runsc makes, capsule's state masked), in the order
 * the host sees it:
 *   1. runsc found ($CAPSULE_RUNSC, else PATH; else fail closed: -ENOTSUP),
 *      a killed capsule's leftovers cleaned (clean_leftovers);
 *   2. the run's private directory (its lock, the bundle: rootfs with the
 *      mount points, config.json; in proxy mode the proxy's trust bundle,
 *      resolv.conf and hosts), as root a CPU cgroup of capsule's;
 *   3. a child: a network namespace of its own with loopback up (blocked
 *      as root, proxy mode), in proxy mode the proxy's listeners made
 *      there and handed over (pid1.c), the command's stdio, then exec
 *      runsc (--rootless unprivileged): --network=none when the network
 *      is off, host (the Sentry's sockets in that namespace, so
 *      127.0.0.1:3128 is the proxy) in proxy mode and when unrestricted;
 *   4. the parent serves the proxy, copies the tool's output to a terminal
 *      (escaped) or a log (bounded) as relay.h does, passes SIGINT,
 *      SIGTERM and SIGHUP on (`runsc kill`), and kills runsc at the wall
 *      clock or when the sandbox's CPU passes cpu_ms_per_task (runsc's
 *      sandbox and gofer die with it: PR_SET_PDEATHSIG);
 *   5. `runsc delete --force` when runsc was killed, the CPU counted, the
 *      directory and the cgroup removed.
 * Not carried: Landlock and capsule's seccomp filter (gVisor's Sentry is
 * the kernel the tool talks to; the deny-list goes in with --oci-seccomp):
 * what needs Landlock alone (write-only grants, command lists) is refused
 * (check_landlock_only). The private /tmp's size is runsc's tmpfs size=;
 * the pids limit is RLIMIT_NPROC inside the Sentry. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/diag.h"
#include "core/fs.h"
#include "core/json.h"
#include "sandbox/mount_plan.h"
#include "sandbox/relay.h"
#include "sandbox/spawn_internal.h"

#define GVISOR_TICK_MS 100
#define GVISOR_DELETE_MS 10000

char *sandbox_runsc_path(void)
{
  const char *named = getenv("CAPSULE_RUNSC"); /* the operator's own, off PATH */
  if (named && *named)
    return named[0] == '/' && access(named, X_OK) == 0 ? cap_xstrdup(named) : NULL;
  const char *path = getenv("PATH");
  for (const char *p = path && *path ? path : "/usr/local/bin:/usr/bin:/bin"; p && *p;) {
    const char *colon = strchr(p, ':');
    size_t n = colon ? (size_t)(colon - p) : strlen(p);
    char *candidate = cap_xasprintf("%.*s/runsc", (int)n, p);
    if (n && candidate[0] == '/' && access(candidate, X_OK) == 0)
      return candidate;
    free(candidate);
    p = colon ? colon + 1 : NULL;
  }
  return NULL;
}

/* One run's host side, released in one place (gv_release). */
struct gv {
  char dir[PATH_MAX]; /* the private directory: lock, bundle/, state/, etc/, ca-bundle.pem */
  char id[64];        /* the container's name, also its cgroup's */
  char cgroup[96];
  /* as root, the cgroup runsc puts the sandbox in for CPU accounting, made
   * here so that runsc leaves it (it removes only those it made): its
   * count outlives the run, ptrace's stub processes included, which no
   * wait of capsule's reaps ("" when none) */
  char cpu_dir[160];
  uint64_t cpu_seen; /* the most CPU seen while it ran (ms) */
  char *runsc;
  struct proxy *proxy;
  int report[2], pass[2];
  struct relay_stdio io; /* the command's stdio: a terminal or a log through a relay */
  bool own_netns;        /* runsc runs in a network namespace of the child's making */
  int lock_fd;           /* dir/lock, flocked while the run lives (clean_leftovers) */
  pid_t pid;
  int pidfd;
};

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
  (void)sb;
  (void)ftw;
  return (type == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT ? -1 : 0;
}

/* Runs runsc with args (NULL-terminated after argv[0]) and waits up to
 * ms; its output goes nowhere. */
static void runsc_quiet(const struct gv *g, const char *const *args)
{
  char *argv[12];
  size_t n = 0;
  argv[n++] = g->runsc;
  _cleanup_free_ char *root = cap_xasprintf("--root=%s/state", g->dir);
  argv[n++] = root;
  for (size_t i = 0; args[i] && n < sizeof argv / sizeof argv[0] - 1; i++)
    argv[n++] = (char *)args[i];
  argv[n] = NULL;
  pid_t pid = fork();
  if (pid == 0) {
    /* runsc's control socket is an abstract one: reachable only from the
     * network namespace runsc runs in (unprivileged, joined through the
     * user namespace that owns it) */
    static const char *const ns[] = {"user", "net"};
    for (size_t i = geteuid() == 0 ? 1 : 0; g->own_netns && g->pid > 0 && i < 2; i++) {
      char path[64];
      snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)g->pid, ns[i]);
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0 || setns(fd, 0) < 0)
        _exit(127);
      close(fd);
    }
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    execv(argv[0], argv);
    _exit(127);
  }
  for (uint64_t end = cap_now_ms(CLOCK_MONOTONIC) + GVISOR_DELETE_MS; pid > 0;) {
    if (waitpid(pid, NULL, WNOHANG) != 0)
      return;
    if (cap_now_ms(CLOCK_MONOTONIC) > end) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      return;
    }
    usleep(20000);
  }
}

/* Where the CPU count lives: cgroup v1's cpuacct hierarchy, else v2's
 * unified one. */
static void cpu_cgroup_path(char *out, size_t size, const char *name)
{
  struct stat sb;
  if (stat("/sys/fs/cgroup/cpuacct", &sb) == 0 && S_ISDIR(sb.st_mode))
    snprintf(out, size, "/sys/fs/cgroup/cpuacct/%s", name);
  else if (stat("/sys/fs/cgroup/cgroup.controllers", &sb) == 0)
    snprintf(out, size, "/sys/fs/cgroup/%s", name);
  else
    out[0] = '\0';
}

/* As root: the CPU cgroup made before runsc starts (cpu_dir). */
static void make_cpu_cgroup(struct gv *g)
{
  if (geteuid() != 0)
    return;
  cpu_cgroup_path(g->cpu_dir, sizeof g->cpu_dir, g->id);
  if (g->cpu_dir[0] && mkdir(g->cpu_dir, 0755) < 0)
    g->cpu_dir[0] = '\0'; /* runsc makes its own; the count ends with it */
}

static void remove_cgroup(const char *dir)
{
  for (int i = 0; dir[0] && i < 50 && rmdir(dir) < 0 && errno == EBUSY; i++)
    usleep(10000);
}

static int gv_release(struct gv *g, int r)
{
  if (g->pid > 0) {
    kill(g->pid, SIGKILL);
    waitpid(g->pid, NULL, 0);
  }
  if (g->pidfd >= 0)
    close(g->pidfd);
  for (int i = 0; i < 2; i++) {
    if (g->report[i] >= 0)
      close(g->report[i]);
    if (g->pass[i] >= 0)
      close(g->pass[i]);
  }
  relay_stdio_release(&g->io);
  proxy_stop(g->proxy);
  if (g->dir[0]) {
    const char *args[] = {"delete", "--force", g->id, NULL};
    _cleanup_free_ char *state = cap_xasprintf("%s/state", g->dir);
    if (access(state, F_OK) == 0)
      runsc_quiet(g, args); /* a run killed midway leaves its sandbox and cgroups */
    nftw(g->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  }
  remove_cgroup(g->cpu_dir);
  if (g->lock_fd >= 0) /* last: until then no clean_leftovers takes the directory */
    close(g->lock_fd);
  free(g->runsc);
  return r;
}

/* The run's directory held: its lock flocked for the run's life, and the
 * container's name beside it, for clean_leftovers. */
static int hold_dir(struct gv *g, struct cap_error *err)
{
  _cleanup_free_ char *lock = cap_xasprintf("%s/lock", g->dir);
  g->lock_fd = open(lock, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (g->lock_fd < 0 || flock(g->lock_fd, LOCK_EX | LOCK_NB) < 0 ||
      write(g->lock_fd, g->id, strlen(g->id)) != (ssize_t)strlen(g->id))
    return cap_error_errno(err, errno, "cannot hold %s", lock);
  return 0;
}

/* What a killed capsule left in tmpdir: each of this user's run
 * directories whose lock is free loses its container (`runsc delete
 * --force`: its state and cgroups; its sandbox died with runsc) and is
 * removed. */
static void clean_leftovers(const char *tmpdir, char *runsc)
{
  DIR *d = opendir(tmpdir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (strncmp(e->d_name, "capsule-gvisor-", 15) != 0)
      continue;
    struct gv old = {.runsc = runsc};
    snprintf(old.dir, sizeof old.dir, "%s/%s", tmpdir, e->d_name);
    struct stat sb;
    if (lstat(old.dir, &sb) < 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid())
      continue;
    _cleanup_free_ char *lock = cap_xasprintf("%s/lock", old.dir);
    _cleanup_close_ int fd = open(lock, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, old.id, sizeof old.id - 1) : -1;
    if (n <= 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
      continue; /* running, or not made by this code */
    old.id[n] = '\0';
    const char *args[] = {"delete", "--force", old.id, NULL};
    runsc_quiet(&old, args);
    cpu_cgroup_path(old.cpu_dir, sizeof old.cpu_dir, old.id);
    remove_cgroup(old.cpu_dir);
    nftw(old.dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  }
  if (d)
    closedir(d);
}

/* A mount point in the read-only root for each grant that exists (runsc
 * cannot create them there): a directory, or an empty file. */
static int mount_point(const char *rootfs, const char *path, bool dir, struct cap_error *err)
{
  _cleanup_free_ char *p = cap_xasprintf("%s%s", rootfs, path);
  char *slash = strrchr(p, '/');
  *slash = '\0';
  int r = cap_mkdir_p(p, 0755);
  *slash = '/';
  if (r == 0 && dir)
    r = mkdir(p, 0755) < 0 && errno != EEXIST ? -errno : 0;
  else if (r == 0) {
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    r = fd < 0 ? -errno : close(fd);
  }
  return r < 0 ? cap_error_errno(err, -r, "cannot create the mount point %s", p) : 0;
}

static int make_mount_points(const struct cap_spec *spec, const char *rootfs, struct cap_error *err)
{
  static const char *const own[] = {"/proc", "/dev", "/tmp"};
  for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
    _cleanup_free_ char *p = cap_xasprintf("%s%s", rootfs, own[i]);
    if (mkdir(p, 0755) < 0 && errno != EEXIST)
      return cap_error_errno(err, errno, "cannot create %s", p);
  }
  for (size_t i = 0; i < spec->n_grants; i++) {
    _cleanup_free_ char *path = sandbox_expand_path(spec->grants[i].path);
    struct stat sb;
    if (path[0] != '/' || stat(path, &sb) < 0)
      continue; /* oci_config.c refuses the first and leaves out the second */
    int r = mount_point(rootfs, path, S_ISDIR(sb.st_mode), err);
    if (r < 0)
      return r;
  }
  return 0;
}

static int write_file(const char *path, const char *data, size_t len, struct cap_error *err)
{
  _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 || write(fd, data, len) != (ssize_t)len)
    return cap_error_errno(err, errno, "cannot write %s", path);
  return 0;
}

/* Step 2: the bundle. The masks are capsule's state and the manifest's
 * deny entries, as the sandbox's mount plan masks them. */
static int write_bundle(struct gv *g, const struct cap_spec *spec,
                        const struct sandbox_options *opt, struct cap_error *err)
{
  _cleanup_free_ char *bundle = cap_xasprintf("%s/bundle", g->dir);
  _cleanup_free_ char *rootfs = cap_xasprintf("%s/rootfs", bundle);
  if (mkdir(bundle, 0700) < 0 || mkdir(rootfs, 0755) < 0)
    return cap_error_errno(err, errno, "cannot create the gVisor bundle in %s", g->dir);
  int r = make_mount_points(spec, rootfs, err);
  if (r < 0)
    return r;
  _cleanup_free_ char *ca = NULL;
  size_t ca_len = 0;
  const char *pem = g->proxy ? proxy_ca_bundle(g->proxy, &ca_len) : NULL;
  if (pem) {
    ca = cap_xasprintf("%s/ca-bundle.pem", g->dir);
    if ((r = write_file(ca, pem, ca_len, err)) < 0)
      return r;
  }
  _cleanup_free_ char *etc = NULL;
  if (g->proxy) { /* the transparent path's resolver, as mount.c gives it */
    etc = cap_xasprintf("%s/etc", g->dir);
    _cleanup_free_ char *resolv = cap_xasprintf("%s/resolv.conf", etc);
    _cleanup_free_ char *hosts = cap_xasprintf("%s/hosts", etc);
    if (mkdir(etc, 0755) < 0)
      return cap_error_errno(err, errno, "cannot create %s", etc);
    if ((r = write_file(resolv, SANDBOX_RESOLV_CONF, sizeof SANDBOX_RESOLV_CONF - 1, err)) < 0 ||
        (r = write_file(hosts, SANDBOX_HOSTS, sizeof SANDBOX_HOSTS - 1, err)) < 0 ||
        (r = mount_point(rootfs, "/etc/resolv.conf", false, err)) < 0 ||
        (r = mount_point(rootfs, "/etc/hosts", false, err)) < 0)
      return r;
  }
  struct cap_strv masks = {0};
  for (size_t i = 0; i < opt->n_hidden; i++)
    cap_strv_push(&masks, opt->hidden[i]);
  for (size_t i = 0; i < spec->deny.len; i++) {
    char *p = sandbox_expand_path(spec->deny.v[i]);
    cap_strv_push(&masks, p);
    free(p);
  }
  struct sandbox_oci_runsc runsc = {.cgroups_path = geteuid() == 0 ? g->cgroup : NULL,
                                    .proxy = g->proxy,
                                    .ca_file = ca,
                                    .etc_dir = etc,
                                    .masks = (const char *const *)masks.v,
                                    .n_masks = masks.len};
  struct cap_buf config = {0};
  r = sandbox_oci_config_for(spec, opt, NULL, &runsc, &config, err);
  cap_strv_free(&masks);
  if (r == 0) {
    _cleanup_free_ char *path = cap_xasprintf("%s/config.json", bundle);
    r = write_file(path, config.data, config.len, err);
  }
  cap_buf_free(&config);
  return r;
}

/* Unprivileged, before a network namespace: a user namespace mapping the
 * caller's ids to themselves. */
static void own_user_namespace(void)
{
  char map[64];
  uid_t uid = geteuid();
  gid_t gid = getegid();
  CHILD_TRY(unshare(CLONE_NEWUSER), "cannot create a user namespace: %s", strerror(errno));
  static const char *const files[] = {"/proc/self/setgroups", "/proc/self/uid_map",
                                      "/proc/self/gid_map"};
  for (size_t i = 0; i < 3; i++) {
    if (i)
      snprintf(map, sizeof map, "%u %u 1\n", i == 1 ? uid : gid, i == 1 ? uid : gid);
    const char *text = i ? map : "deny";
    int fd = open(files[i], O_WRONLY | O_CLOEXEC);
    CHILD_TRY(fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) ? -1 : 0,
              "cannot write %s: %s", files[i], strerror(errno));
    close(fd);
  }
}

/* Step 3, in the child: its own network namespace, the proxy's listeners,
 * stdio, runsc. A failure travels on report (CLOEXEC: EOF at exec). */
static void __attribute__((noreturn)) runsc_child(struct gv *g, const struct cap_spec *spec,
                                                  const struct sandbox_options *opt, pid_t parent)
{
  close(g->report[0]);
  sandbox_report_fd = g->report[1];
  CHILD_TRY(prctl(PR_SET_PDEATHSIG, SIGKILL), "PR_SET_PDEATHSIG: %s", strerror(errno));
  if (getppid() != parent)
    _exit(127);
  bool rootless = geteuid() != 0;
  if (g->own_netns) {
    if (rootless) {          /* the network namespace's owner: the caller's uid alone, as itself */
      proxy_scrub(g->proxy); /* as spawn.c: scrubbed, then dumpable for the maps */
      prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
      own_user_namespace();
    }
    CHILD_TRY(unshare(CLONE_NEWNET), "cannot create a network namespace: %s", strerror(errno));
    sandbox_loopback_up();
  }
  if (g->proxy) {
    close(g->pass[0]);
    sandbox_make_proxy_listeners(spec, g->pass[1]);
  }
  for (int i = 0; i < 3; i++)
    CHILD_TRY(dup2(g->io.stdio[i], i), "cannot set up the command's stdio: %s", strerror(errno));
  signal(SIGPIPE, SIG_DFL);
  _cleanup_free_ char *root = cap_xasprintf("--root=%s/state", g->dir);
  _cleanup_free_ char *bundle = cap_xasprintf("%s/bundle", g->dir);
  const char *network = spec->network.mode == CAP_NET_BLOCKED ? "--network=none" : "--network=host";
  /* unprivileged: runsc maps the caller to root in a user namespace of
   * its own, and makes no cgroup (the rlimits of oci_config.c remain) */
  /* runsc's own messages go to its log (runsc_failure reads it), not
   * into the tool's stderr */
  _cleanup_free_ char *log = cap_xasprintf("--log=%s/runsc.log", g->dir);
  char *argv[14] = {g->runsc, root, log, "--platform=ptrace", (char *)network, "--oci-seccomp"};
  size_t n = 6;
  if (rootless) {
    argv[n++] = "--rootless";
    argv[n++] = "--ignore-cgroups";
  }
  char *run[] = {"run", "--bundle", bundle, g->id, NULL};
  memcpy(argv + n, run, sizeof run);
  syscall(__NR_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
  sandbox_test_stall_setup();
  execv(g->runsc, argv);
  sandbox_child_fail("cannot run %s: %s", g->runsc, strerror(errno));
}

/* What the child reported before exec, or 0 at EOF (runsc runs); bounded
 * as capsule's own sandbox's setup is (sandbox_await_report: on an error
 * gv_release kills the child). */
static int await_exec(struct gv *g, struct cap_error *err)
{
  char msg[512];
  int r =
      sandbox_await_report(g->report[0], g->pidfd, "gVisor sandbox setup", msg, sizeof msg, err);
  if (r < 0 || msg[0] == '\0')
    return r;
  return cap_error_set(err, EPERM, "gVisor sandbox setup failed: %s", msg);
}

/* The CPU the gVisor sandbox has used (its cgroup: the Sentry, the gofer
 * and the tool), in ms, or -1. */
static int64_t cgroup_cpu_ms(const struct gv *g)
{
  char path[256], buf[256], dir[160];
  if (g->cpu_dir[0])
    snprintf(dir, sizeof dir, "%s", g->cpu_dir);
  else
    snprintf(dir, sizeof dir, "/sys/fs/cgroup/cpuacct%s", g->cgroup);
  snprintf(path, sizeof path, "%s/cpuacct.usage", dir);
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = '\0';
    return n > 0 ? (int64_t)(strtoull(buf, NULL, 10) / 1000000) : -1;
  }
  if (g->cpu_dir[0])
    snprintf(path, sizeof path, "%s/cpu.stat", g->cpu_dir);
  else
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.stat", g->cgroup);
  _cleanup_close_ int v2 = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = v2 >= 0 ? read(v2, buf, sizeof buf - 1) : -1;
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  const char *u = strstr(buf, "usage_usec ");
  return u ? (int64_t)(strtoull(u + 11, NULL, 10) / 1000) : -1;
}

/* Step 4: waits for runsc, killing it at a limit. */
static int supervise_runsc(struct gv *g, const struct cap_spec *spec, struct sandbox_result *res,
                           struct cap_error *err)
{
  uint64_t start = cap_now_ms(CLOCK_MONOTONIC);
  uint64_t deadline = spec->limits.wall_ms ? start + spec->limits.wall_ms : 0;
  /* SIGINT, SIGTERM and SIGHUP go to the tool (`runsc kill`), as
   * spawn.c's supervisor passes them: capsule stays to clean up */
  sigset_t fwd, old;
  sigemptyset(&fwd);
  sigaddset(&fwd, SIGINT);
  sigaddset(&fwd, SIGTERM);
  sigaddset(&fwd, SIGHUP);
  sigprocmask(SIG_BLOCK, &fwd, &old);
  _cleanup_close_ int sfd = signalfd(-1, &fwd, SFD_CLOEXEC | SFD_NONBLOCK);
  int status = 0, r = 0;
  for (;;) {
    pid_t got = waitpid(g->pid, &status, WNOHANG);
    if (got == g->pid)
      break;
    if (got < 0 && errno != EINTR) {
      r = cap_error_errno(err, errno, "waitpid");
      break;
    }
    const char *limit = NULL;
    if (deadline && cap_now_ms(CLOCK_MONOTONIC) >= deadline)
      limit = "wall clock";
    int64_t cpu = cgroup_cpu_ms(g);
    if (cpu < 0) /* no cgroup (rootless): the process tree, sampled */
      cpu = limits_tree_cpu_ms(g->pid);
    if (cpu > 0 && (uint64_t)cpu > g->cpu_seen)
      g->cpu_seen = (uint64_t)cpu;
    if (spec->limits.cpu_ms_per_task && cpu >= 0 && (uint64_t)cpu > spec->limits.cpu_ms_per_task)
      limit = "cpu budget";
    if (limit && !res->killed_by) {
      res->killed_by = limit;
      kill(g->pid, SIGKILL);
    }
    struct pollfd p[2 + RELAY_MAX] = {{.fd = g->pidfd, .events = POLLIN},
                                      {.fd = sfd, .events = POLLIN}};
    for (size_t i = 0; i < g->io.n; i++)
      p[2 + i] = (struct pollfd){.fd = g->io.relays[i].from, .events = POLLIN};
    if (poll(p, 2 + g->io.n, GVISOR_TICK_MS) <= 0)
      continue;
    struct signalfd_siginfo si;
    while ((p[1].revents & POLLIN) && read(sfd, &si, sizeof si) == sizeof si) {
      char sig[8];
      snprintf(sig, sizeof sig, "%u", si.ssi_signo);
      const char *args[] = {"kill", g->id, sig, NULL}; /* to the tool, inside */
      runsc_quiet(g, args);
    }
    for (size_t i = 0; i < g->io.n; i++)
      if (p[2 + i].revents)
        relay_pump(&g->io.relays[i]);
  }
  sigprocmask(SIG_SETMASK, &old, NULL);
  if (r < 0)
    return r;
  g->pid = 0;
  for (size_t i = 0; i < g->io.n; i++) /* runsc and its sandbox are gone */
    relay_finish(&g->io.relays[i], 1000);
  int64_t cpu = g->cpu_dir[0] ? cgroup_cpu_ms(g) : -1; /* counted to the end */
  res->cpu_ms = cpu >= 0 ? (uint64_t)cpu : g->cpu_seen;
  res->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  res->term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return 0;
}

/* When runsc itself failed (its exit status 128 and an error in its log,
 * JSON lines), what it said, else NULL (allocated). */
static char *runsc_failure(const struct gv *g, const struct sandbox_result *res)
{
  if (res->killed_by || res->exit_status != 128)
    return NULL;
  _cleanup_free_ char *path = cap_xasprintf("%s/runsc.log", g->dir);
  FILE *f = fopen(path, "re");
  char line[2048];
  char *said = NULL;
  while (f && fgets(line, sizeof line, f)) {
    if (!strstr(line, "\"level\":\"error\"") && !strstr(line, "\"level\":\"fatal\""))
      continue;
    struct cap_doc *doc = cap_doc_new();
    struct cap_diags diags = {0};
    const struct cap_node *msg =
        cap_json_parse(doc, line, strlen(line), "runsc.log", 0, &diags) == 0
            ? cap_node_get(doc->root, "msg")
            : NULL;
    if (msg && msg->kind == CAP_NODE_STRING) {
      free(said);
      said = cap_xstrndup(msg->u.str.ptr, msg->u.str.len);
    }
    cap_diags_free(&diags);
    cap_doc_free(doc);
  }
  if (f)
    fclose(f);
  return said;
}

/* Step 3, the parent's side: the child, then the proxy's listeners. */
static int start_runsc(struct gv *g, const struct cap_spec *spec, const struct sandbox_options *opt,
                       struct cap_error *err)
{
  if (pipe2(g->report, O_CLOEXEC) < 0 ||
      (g->proxy && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, g->pass) < 0))
    return cap_error_errno(err, errno, "cannot create the setup channels");
  pid_t parent = getpid();
  g->own_netns = spec->network.mode == CAP_NET_PROXY ||
                 (geteuid() == 0 && spec->network.mode == CAP_NET_BLOCKED);
  fflush(NULL);
  g->pid = fork();
  if (g->pid < 0)
    return cap_error_errno(err, errno, "fork");
  if (g->pid == 0)
    runsc_child(g, spec, opt, parent);
  g->pidfd = (int)syscall(__NR_pidfd_open, g->pid, 0);
  relay_stdio_close_own(&g->io); /* runsc holds them: a pipe ends when the tool's copies do */
  close(g->report[1]);
  g->report[1] = -1;
  if (g->proxy) {
    close(g->pass[1]);
    g->pass[1] = -1;
  }
  int r = await_exec(g, err);
  if (r < 0 || !g->proxy)
    return r;
  int fds[SANDBOX_MAX_LISTENERS];
  size_t want = sandbox_listener_count(spec);
  int got = sandbox_receive_fds(g->pass[0], fds, want);
  if (got != (int)want) {
    for (int i = 0; i < got; i++)
      close(fds[i]);
    return cap_error_set(err, EPROTO, "the gVisor sandbox did not hand over the proxy sockets");
  }
  return proxy_start(g->proxy, fds, want, err);
}

/* The private /tmp's size holds: runsc's tmpfs takes size= (and one
 * that did not would refuse the unknown option, failing the run). */
static void note_unenforced(const struct cap_spec *spec, struct sandbox_result *res)
{
  char *u = res->unenforced;
  size_t size = sizeof res->unenforced;
  if (geteuid() != 0 && (spec->limits.memory_bytes || spec->limits.cpu_fraction > 0))
    snprintf(u + strlen(u), size - strlen(u),
             "%sthe memory and CPU share limits (rootless gVisor makes no cgroup; memory as "
             "RLIMIT_DATA)",
             *u ? ", " : "");
}

/* What only Landlock (or capsule's supervisor) enforces in capsule's own
 * sandbox has no counterpart in an OCI bundle for runsc: a write-only
 * grant (a mount is read-only or read-write), command lists, opens put
 * to the operator. Refused rather than run with less. */
static int check_landlock_only(const struct cap_spec *spec, struct cap_error *err)
{
  for (size_t i = 0; i < spec->n_grants; i++)
    if (spec->grants[i].access == CAP_ACCESS_WRITE)
      return cap_error_set(err, ENOTSUP,
                           "the write-only grant %s cannot hold under linux-gvisor: write-only "
                           "needs Landlock, which gVisor's Sentry does not offer, and runsc can "
                           "bind a path only read-only or read-write; grant it read-write "
                           "(`capsule grant AGENT --rw PATH`) or read-only; refusing rather "
                           "than running it with more",
                           spec->grants[i].path);
  if (spec->process.allowed_commands.len || spec->process.blocked_commands.len)
    return cap_error_set(err, ENOTSUP,
                         "allowed_commands/blocked_commands cannot hold under linux-gvisor (they "
                         "need Landlock, which gVisor's Sentry does not offer); refusing");
  if (spec->process.expand_opens)
    return cap_error_set(err, ENOTSUP,
                         "exec_strategy \"supervised\" cannot hold under linux-gvisor (capsule's "
                         "supervisor cannot see the Sentry's opens); refusing");
  return 0;
}

static int check_gvisor(const struct cap_spec *spec, const struct sandbox_options *opt,
                        char **runsc, struct cap_error *err)
{
  if (opt->has_connector || opt->rootfs || opt->on_started || opt->tty)
    return cap_error_set(err, ENOTSUP,
                         "capsule runs only per-call tools (Covenant agents) under linux-gvisor, "
                         "not a server, an image's root or a terminal; refusing rather than "
                         "running it with less isolation");
  int r = check_landlock_only(spec, err);
  if (r < 0)
    return r;
  *runsc = sandbox_runsc_path();
  if (!*runsc)
    return cap_error_set(err, ENOTSUP,
                         "the manifest asks for the linux-gvisor backend and gVisor's runsc is not "
                         "installed%s (on Debian: apt-get install runsc; `capsule doctor` says "
                         "more); refusing rather than running it with less isolation",
                         getenv("CAPSULE_RUNSC") && *getenv("CAPSULE_RUNSC")
                             ? " where CAPSULE_RUNSC says (an absolute path to an executable)"
                             : " on PATH");
  return 0;
}

int sandbox_gvisor_run(const struct cap_spec *spec, const struct sandbox_options *opt,
                       struct sandbox_result *res, struct cap_error *err)
{
  struct gv g = {
      .report = {-1, -1}, .pass = {-1, -1}, .io = RELAY_STDIO_INIT, .lock_fd = -1, .pidfd = -1};
  int r = check_gvisor(spec, opt, &g.runsc, err);
  if (r < 0)
    return gv_release(&g, r);
  static unsigned serial;
  snprintf(g.id, sizeof g.id, "capsule-%d-%u-%llx", (int)getpid(),
           __atomic_add_fetch(&serial, 1, 0), (unsigned long long)cap_now_ms(CLOCK_REALTIME));
  snprintf(g.cgroup, sizeof g.cgroup, "/%s", g.id);
  const char *tmpdir = getenv("TMPDIR");
  tmpdir = tmpdir && *tmpdir ? tmpdir : "/tmp";
  clean_leftovers(tmpdir, g.runsc);
  snprintf(g.dir, sizeof g.dir, "%s/capsule-gvisor-XXXXXX", tmpdir);
  if (!mkdtemp(g.dir)) {
    r = cap_error_errno(err, errno, "cannot create %s", g.dir);
    g.dir[0] = '\0';
    return gv_release(&g, r);
  }
  r = hold_dir(&g, err);
  if (r == 0)
    make_cpu_cgroup(&g);
  if (r == 0 && spec->network.mode == CAP_NET_PROXY)
    r = proxy_new(spec, &opt->proxy, &g.proxy, err);
  if (r == 0)
    r = write_bundle(&g, spec, opt, err);
  if (r == 0)
    r = relay_stdio_prepare(&g.io, opt->redirect_stdio ? opt->stdio : NULL, false,
                            sandbox_log_cap(spec, opt), err);
  if (r == 0)
    r = start_runsc(&g, spec, opt, err);
  if (r == 0)
    r = supervise_runsc(&g, spec, res, err);
  _cleanup_free_ char *failed = r == 0 ? runsc_failure(&g, res) : NULL;
  if (failed) /* not the tool's exit: the sandbox never ran it (escaped when printed) */
    r = cap_error_set(err, EPERM, "gVisor sandbox setup failed: runsc: %s", failed);
  if (r == 0)
    note_unenforced(spec, res);
  return gv_release(&g, r);
}
