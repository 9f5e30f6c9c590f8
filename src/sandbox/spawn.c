/* Spawning the sandbox, one straight sequence in the order the kernel sees
 * it (bubblewrap's shape):
 *   parent: a private base directory; clone into new user, mount, pid, ipc,
 *           uts, cgroup (and, unless the network is unrestricted, net)
 *           namespaces; write the id maps; put the child in its cgroup;
 *           release it; supervise (wall clock, signals) and reap.
 *   child (pid 1 of the new pid namespace): tmpfs root, grants bound as
 *           declared (read-only, nosuid, nodev, recursively), deny entries
 *           masked, /proc, a minimal /dev, private /tmp, pivot_root, root
 *           read-only; then fork the command and stay as a reaping init.
 *   command: drop to the sandbox uid, empty capability bounding set,
 *           rlimits, no_new_privs, Landlock, seccomp, clean environment, exec.
 * A setup failure in the child travels to the parent over a CLOEXEC pipe.
 * This file is the parent's side and the clone; the child's steps live in
 * mount.c (the root), pid1.c (the init and the connector) and exec.c (the
 * command), declared in spawn_internal.h. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "net/proxy.h"
#include "sandbox/limits.h"
#include "sandbox/spawn_internal.h"
#include "sandbox/supervise.h"

#ifndef __NR_clone3
#define __NR_clone3 435
#endif
#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

struct clone_args_ {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

/* clone3 with a pidfd for the supervisor (no pid-reuse race); plain clone
 * on kernels before 5.3, with the pidfd opened after the fact. */
static pid_t clone_sandbox(int flags, int *ret_pidfd)
{
  int pidfd = -1;
  struct clone_args_ args = {.flags = (uint64_t)flags | CLONE_PIDFD,
                             .pidfd = (uint64_t)(uintptr_t)&pidfd,
                             .exit_signal = SIGCHLD};
  pid_t pid = (pid_t)syscall(__NR_clone3, &args, sizeof args);
  if (pid < 0 && errno == ENOSYS) {
    pid = (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL);
    if (pid > 0)
      pidfd = (int)syscall(__NR_pidfd_open, pid, 0);
  }
  if (pid > 0)
    *ret_pidfd = pidfd;
  return pid;
}

/* ---- the child's side: report a failure to the parent and stop ---- */

int sandbox_report_fd = -1;

void sandbox_child_fail(const char *fmt, ...)
{
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n > 0 && sandbox_report_fd >= 0 && write(sandbox_report_fd, msg, strlen(msg)) < 0) {
    /* nothing left to tell it with */
  }
  _exit(127);
}

/* ---- parent side ---- */

static int write_file(const char *path, const char *text)
{
  _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  ssize_t n = write(fd, text, strlen(text));
  return n == (ssize_t)strlen(text) ? 0 : -(errno ? errno : EIO);
}

static int write_id_maps(pid_t pid, uid_t inside_uid, uid_t outside_uid, gid_t inside_gid,
                         gid_t outside_gid, struct cap_error *err)
{
  char path[64], map[64];
  snprintf(path, sizeof path, "/proc/%d/setgroups", pid);
  int r = write_file(path, "deny");
  if (r < 0 && r != -ENOENT)
    return cap_error_errno(err, -r, "cannot write %s", path);
  snprintf(path, sizeof path, "/proc/%d/uid_map", pid);
  snprintf(map, sizeof map, "%u %u 1\n", inside_uid, outside_uid);
  if ((r = write_file(path, map)) < 0)
    return cap_error_errno(err, -r, "cannot write the user namespace's uid map");
  snprintf(path, sizeof path, "/proc/%d/gid_map", pid);
  snprintf(map, sizeof map, "%u %u 1\n", inside_gid, outside_gid);
  if ((r = write_file(path, map)) < 0)
    return cap_error_errno(err, -r, "cannot write the user namespace's gid map");
  return 0;
}

/* Waits for pid, forwarding SIGINT/SIGTERM/SIGHUP and enforcing the wall
 * clock (SIGTERM, a grace second, then SIGKILL to pid 1, which takes the
 * whole pid namespace with it). */
static int supervise(pid_t pid, int pidfd, const struct cap_spec *spec, struct sandbox_limits *lim,
                     struct supervise *sup, struct sandbox_result *res, struct cap_error *err)
{
  sigset_t fwd;
  sigemptyset(&fwd);
  sigaddset(&fwd, SIGINT);
  sigaddset(&fwd, SIGTERM);
  sigaddset(&fwd, SIGHUP);
  sigset_t old;
  sigprocmask(SIG_BLOCK, &fwd, &old);
  _cleanup_close_ int sfd = signalfd(-1, &fwd, SFD_CLOEXEC | SFD_NONBLOCK);
  uint64_t start = cap_now_ms(CLOCK_MONOTONIC);
  uint64_t deadline = spec->limits.wall_ms ? start + spec->limits.wall_ms : 0;
  uint64_t kill_at = 0;
  int status = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid)
      break;
    if (w < 0 && errno != EINTR) {
      sigprocmask(SIG_SETMASK, &old, NULL);
      return cap_error_errno(err, errno, "waitpid");
    }
    int timeout = 200; /* also the tick for the CPU projection */
    uint64_t t = cap_now_ms(CLOCK_MONOTONIC);
    if (deadline && t >= deadline && !kill_at) {
      res->killed_by = "wall clock";
      kill(pid, SIGTERM);
      kill_at = t + 1000;
    }
    if (!res->killed_by && limits_cpu_overshoot(lim, spec, t - start)) {
      res->killed_by = "cpu budget";
      kill(pid, SIGTERM);
      kill_at = t + 1000;
    }
    if (kill_at && t >= kill_at)
      kill(pid, SIGKILL);
    struct pollfd fds[3] = {{.fd = pidfd, .events = POLLIN},
                            {.fd = sfd, .events = POLLIN},
                            {.fd = supervise_fd(sup), .events = POLLIN}};
    if (poll(fds, 3, timeout) > 0 && (fds[1].revents & POLLIN)) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == sizeof si)
        kill(pid, (int)si.ssi_signo);
    }
    if (fds[2].revents) /* the command's connect(): supervise.c */
      supervise_serve(sup, fds[2].revents);
  }
  sigprocmask(SIG_SETMASK, &old, NULL);
  if (WIFSIGNALED(status)) {
    res->term_signal = WTERMSIG(status);
    res->exit_status = 128 + res->term_signal;
  } else {
    res->exit_status = WEXITSTATUS(status);
    if (res->exit_status > 128 && res->exit_status < 128 + 65)
      res->term_signal = res->exit_status - 128;
  }
  if (!res->killed_by)
    res->killed_by = limits_verdict(lim, res->term_signal);
  return 0;
}

/* What one launch holds on the host side, released in one place. */
struct launch {
  struct sandbox_limits lim;
  char *base;              /* the tmpfs root's mount point, removed at the end */
  int sync[2], report[2];  /* parent -> child "go"; child -> parent setup failure */
  int pass[2];             /* the proxy's listening socket travels here */
  int listen_fds[1 + SANDBOX_MAX_FORWARDS]; /* received, not yet the proxy's */
  size_t n_listen;
  struct proxy *proxy;     /* proxy mode: stopped and freed at the end */
  struct supervise *sup;   /* below Landlock ABI 9: the connect() supervisor */
  pid_t pid;
};

static void fd_close(int *fd)
{
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

/* Kills the child if it is still there, closes what is open, removes the
 * base directory and the cgroups. Returns r for tail calls. */
static int launch_release(struct launch *l, int r)
{
  if (l->pid > 0 && r < 0) {
    kill(l->pid, SIGKILL);
    waitpid(l->pid, NULL, 0);
  }
  int *fds[] = {&l->sync[0], &l->sync[1], &l->report[0], &l->report[1],
                &l->pass[0], &l->pass[1]};
  for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
    fd_close(fds[i]);
  for (size_t i = 0; i < l->n_listen; i++)
    close(l->listen_fds[i]);
  l->n_listen = 0;
  proxy_stop(l->proxy); /* after the child is gone: no connection is left to serve */
  l->proxy = NULL;
  supervise_free(l->sup);
  l->sup = NULL;
  if (l->base) {
    rmdir(l->base);
    free(l->base);
    l->base = NULL;
  }
  limits_release(&l->lim);
  return r;
}

/* Waits for the child's verdict on its setup: EOF at exec (the pipe is
 * CLOEXEC), or the message child_fail wrote. */
static int await_setup(struct launch *l, struct cap_error *err)
{
  char msg[512];
  ssize_t n, got = 0;
  while (got < (ssize_t)sizeof msg - 1 &&
         (n = read(l->report[0], msg + got, sizeof msg - 1 - (size_t)got)) != 0) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      break;
    got += n;
  }
  if (got == 0)
    return 0;
  msg[got] = '\0';
  return cap_error_set(err, EPERM, "sandbox setup failed: %s", msg);
}

int sandbox_run(const struct cap_spec *spec, const struct sandbox_options *opt,
                struct sandbox_result *res, struct cap_error *err)
{
  *res = (struct sandbox_result){0};
  if (!opt->argv || !opt->argv[0])
    return cap_error_set(err, EINVAL, "no command to run");
  if (spec->sandbox.backend && strcmp(spec->sandbox.backend, "gvisor") == 0)
    return cap_error_set(err, ENOTSUP,
                         "the manifest asks for the linux-gvisor backend, which capsule does "
                         "not run yet; refusing rather than running it with less isolation");

  if (spec->network.localhost.len > SANDBOX_MAX_FORWARDS)
    return cap_error_set(err, EINVAL, "network.ports.localhost lists %zu ports; capsule forwards at most %d",
                         spec->network.localhost.len, SANDBOX_MAX_FORWARDS);
  uid_t uid = getuid(), euid = geteuid();
  gid_t gid = getgid();
  uid_t inside_uid = uid ? uid : SANDBOX_UID_AS_ROOT;
  gid_t inside_gid = uid ? gid : SANDBOX_UID_AS_ROOT;
  uid_t outside_uid = euid ? euid : SANDBOX_UID_AS_ROOT;
  gid_t outside_gid = euid ? getegid() : SANDBOX_UID_AS_ROOT;
  bool proxied = spec->network.mode == CAP_NET_PROXY;

  struct launch l = {.sync = {-1, -1}, .report = {-1, -1}, .pass = {-1, -1}};
  /* the proxy first: its secrets are read (and a missing one reported)
   * before anything runs, and its CA bundle goes into the sandbox */
  struct proxy *px = NULL;
  int r = proxied ? proxy_new(spec, &opt->proxy, &px, err) : 0;
  if (r < 0)
    return r;
  l.proxy = px;
  r = limits_prepare(&l.lim, spec, err);
  if (r < 0)
    return launch_release(&l, r);
  snprintf(res->unenforced, sizeof res->unenforced, "%s", l.lim.unenforced);
  r = supervise_prepare(&l.sup, spec, outside_uid, outside_gid, err);
  if (r < 0)
    return launch_release(&l, r);

  const char *tmpdir = getenv("TMPDIR");
  l.base = cap_xasprintf("%s/.capsule-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
  if (!mkdtemp(l.base)) {
    r = cap_error_errno(err, errno, "cannot create the sandbox's base directory %s", l.base);
    free(l.base);
    l.base = NULL;
    return launch_release(&l, r);
  }
  if (pipe2(l.sync, O_CLOEXEC) < 0 || pipe2(l.report, O_CLOEXEC) < 0 ||
      (proxied && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, l.pass) < 0))
    return launch_release(&l, cap_error_errno(err, errno, "cannot create the setup channels"));

  int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
              CLONE_NEWCGROUP;
  if (spec->network.mode != CAP_NET_UNRESTRICTED)
    flags |= CLONE_NEWNET;
  fflush(NULL);
  _cleanup_close_ int pidfd = -1;
  l.pid = clone_sandbox(flags, &pidfd);
  if (l.pid < 0) {
    int e = errno;
    l.pid = 0;
    return launch_release(&l, cap_error_set(err, ENOTSUP,
                                            "cannot create the sandbox's namespaces (%s); this "
                                            "host does not allow %s user namespaces: see "
                                            "`capsule doctor`",
                                            strerror(e), uid ? "unprivileged" : ""));
  }
  if (l.pid == 0) {
    close(l.sync[1]);
    close(l.report[0]);
    sandbox_report_fd = l.report[1];
    supervise_in_child(l.sup);
    char go;
    if (read(l.sync[0], &go, 1) != 1)
      _exit(127); /* the parent gave up */
    close(l.sync[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* a copy of capsule's memory: not dumpable from the start (the command
     * regains it at exec), so no window before pid 1's own prctl */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    sandbox_become_ids(inside_uid, inside_gid);
    proxy_scrub(px); /* this copy of capsule's memory keeps no secret */
    sandbox_build_root(spec, opt, l.base, px);
    if (flags & CLONE_NEWNET)
      sandbox_loopback_up();
    if (proxied) {
      close(l.pass[0]);
      sandbox_make_proxy_listeners(spec, l.pass[1]);
    }
    pid_t command = fork();
    if (command < 0)
      sandbox_child_fail("fork: %s", strerror(errno));
    if (command == 0)
      sandbox_exec_command(spec, opt, &l.lim, px, inside_uid, inside_gid);
    close(sandbox_report_fd);
    /* pid 1 keeps nothing of capsule's open but the connector (as fd 3): a
     * pipe end it held would keep the command's stdin from ever reaching
     * its end */
    int connector = -1;
    if (opt->has_connector && dup2(opt->connector_fd, 3) == 3)
      connector = 3;
    syscall(__NR_close_range, connector < 0 ? 3 : 4, ~0U, 0);
    sandbox_run_init(command, connector);
  }

  fd_close(&l.sync[0]);
  fd_close(&l.report[1]);
  fd_close(&l.pass[1]);
  r = write_id_maps(l.pid, inside_uid, outside_uid, inside_gid, outside_gid, err);
  if (r == 0)
    r = limits_attach(&l.lim, l.pid, err);
  if (r == 0 && write(l.sync[1], "g", 1) != 1)
    r = cap_error_errno(err, errno, "cannot start the sandbox");
  if (r == 0)
    r = await_setup(&l, err);
  if (r == 0)
    r = supervise_start(l.sup, err);
  if (r == 0 && proxied) {
    size_t want = 1 + spec->network.localhost.len;
    int got = sandbox_receive_fds(l.pass[0], l.listen_fds, want);
    l.n_listen = got > 0 ? (size_t)got : 0;
    if (l.n_listen != want)
      r = cap_error_set(err, EPROTO, "the sandbox did not hand over the proxy sockets");
  }
  if (r == 0 && proxied) {
    r = proxy_start(px, l.listen_fds, l.n_listen, err);
    l.n_listen = 0; /* the proxy owns them now, even when it failed */
  }
  if (r < 0)
    return launch_release(&l, r);
  if (opt->on_started)
    opt->on_started(opt->on_started_ctx, (struct sandbox_running *)&l.lim);
  r = supervise(l.pid, pidfd, spec, &l.lim, l.sup, res, err);
  return launch_release(&l, r);
}

int64_t sandbox_cpu_ms(struct sandbox_running *running)
{
  return limits_cpu_ms((struct sandbox_limits *)running);
}
