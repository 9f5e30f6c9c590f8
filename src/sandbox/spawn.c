/* Spawning the sandbox, one straight sequence in the order the kernel sees
 * it (bubblewrap's shape):
 *   parent: a private base directory; the grants resolved (as root, their
 *           trees opened and the writable ones made idmapped mounts, so
 *           the caller's files there are the tool's: idmap.c); clone into
 *           new user, mount, pid, ipc, uts, cgroup (and, unless the
 *           network is unrestricted, net) namespaces; write the id maps;
 *           put the child in its cgroup; release it; supervise (wall
 *           clock, signals) and reap.
 *   child (pid 1 of the new pid namespace): tmpfs root, grants bound as
 *           declared (read-only, nosuid, nodev, recursively), deny entries
 *           masked, /proc, a minimal /dev, private /tmp, pivot_root, root
 *           read-only; then fork the command and stay as a reaping init.
 *   command: drop to the sandbox uid, empty capability bounding set,
 *           rlimits, no_new_privs, Landlock, seccomp, clean environment, exec.
 * Ids: unprivileged, the caller's uid and gid map onto themselves; as root,
 * 65534 inside maps to the capability's own host ids, id_base + 65534
 * (sandbox_options.id_base, a range recorded in the state), never root
 * and never the host's nobody.
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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/fork_gate.h"
#include "core/io.h"
#include "core/text.h"
#include "net/proxy.h"
#include "sandbox/capture.h"
#include "sandbox/limits.h"
#include "sandbox/relay.h"
#include "sandbox/rundir.h"
#include "sandbox/mount_plan.h"
#include "sandbox/spawn_internal.h"
#include "sandbox/supervise.h"

#ifndef __NR_clone3
#define __NR_clone3 435
#endif
#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

#define SUPERVISE_TICK_MS 200 /* also the tick for the CPU projection */

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
  cap_fork_prepare();
  pid_t pid = (pid_t)syscall(__NR_clone3, &args, sizeof args);
  if (pid < 0 && errno == ENOSYS)
    pid = (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL);
  if (pid == 0) {
    cap_fork_child();
    return 0;
  }
  cap_fork_parent();
  if (pid > 0 && pidfd < 0)
    pidfd = (int)syscall(__NR_pidfd_open, pid, 0);
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

/* One id each way: the sandbox's uid and gid (inside) are the caller's
 * own ids unprivileged; as root they are 65534 inside and outside
 * id_base + 65534, the capability's own host ids (sandbox_host_ids). */
static int write_id_maps(pid_t pid, uid_t inside_uid, uid_t outside_uid, gid_t inside_gid,
                         gid_t outside_gid, struct cap_error *err)
{
  char path[64], map[64];
  snprintf(path, sizeof path, "/proc/%d/setgroups", pid);
  int r = cap_write_text(path, "deny");
  if (r < 0 && r != -ENOENT)
    return cap_error_errno(err, -r, "cannot write %s", path);
  snprintf(path, sizeof path, "/proc/%d/uid_map", pid);
  snprintf(map, sizeof map, "%u %u 1\n", inside_uid, outside_uid);
  if ((r = cap_write_text(path, map)) < 0)
    return cap_error_errno(err, -r, "cannot write the user namespace's uid map");
  snprintf(path, sizeof path, "/proc/%d/gid_map", pid);
  snprintf(map, sizeof map, "%u %u 1\n", inside_gid, outside_gid);
  if ((r = cap_write_text(path, map)) < 0)
    return cap_error_errno(err, -r, "cannot write the user namespace's gid map");
  return 0;
}

/* What the supervisor tracks while it waits. */
struct watch {
  uint64_t start, deadline, kill_at, next_tick;
};

/* The limits, looked at once per tick: the wall clock (SIGTERM, a grace
 * second, then SIGKILL to pid 1, which takes the whole pid namespace with
 * it) and the CPU budget (SIGKILL at once: the grace would be CPU the
 * sandbox does not have). */
static void check_limits(pid_t pid, const struct cap_spec *spec, struct sandbox_limits *lim,
                         struct watch *w, struct sandbox_result *res)
{
  uint64_t t = cap_now_ms(CLOCK_MONOTONIC);
  if (t < w->next_tick)
    return;
  w->next_tick = t + SUPERVISE_TICK_MS;
  if (w->deadline && t >= w->deadline && !w->kill_at) {
    res->killed_by = "wall clock";
    kill(pid, SIGTERM);
    w->kill_at = t + 1000;
  }
  if (!res->killed_by && limits_cpu_overshoot(lim, spec, t - w->start)) {
    res->killed_by = "cpu budget";
    kill(pid, SIGKILL);
  }
  if (w->kill_at && t >= w->kill_at)
    kill(pid, SIGKILL);
}

/* The command's status as sandbox_result tells it. */
static void settle_status(int status, struct sandbox_limits *lim, struct sandbox_result *res)
{
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
}

/* pid 1's status pipe: 1 when it gave the command's status (*status set),
 * 0 when there is nothing yet, -1 when it closed without one. */
static int read_init_status(int fd, int *status)
{
  unsigned char code;
  ssize_t n = read(fd, &code, 1);
  if (n == 1)
    *status = code << 8; /* as waitpid tells an exit with that code */
  return n == 1 ? 1 : n < 0 && (errno == EINTR || errno == EAGAIN) ? 0 : -1;
}

/* Waits for pid 1's report of the command's status (status_fd; *reported
 * set: pid 1 is exiting, not reaped) or, without one, for pid 1 itself,
 * forwarding SIGINT/SIGTERM/SIGHUP, enforcing the limits and copying the
 * tool's relayed output; then copies what is left. */
static int supervise(pid_t pid, int pidfd, int status_fd, bool *reported,
                     const struct cap_spec *spec, struct sandbox_limits *lim, struct relay *relays,
                     size_t n_relays, struct supervise *sup, struct sandbox_result *res,
                     struct cap_error *err)
{
  sigset_t fwd;
  sigemptyset(&fwd);
  sigaddset(&fwd, SIGINT);
  sigaddset(&fwd, SIGTERM);
  sigaddset(&fwd, SIGHUP);
  sigset_t old;
  sigprocmask(SIG_BLOCK, &fwd, &old);
  _cleanup_close_ int sfd = signalfd(-1, &fwd, SFD_CLOEXEC | SFD_NONBLOCK);
  struct watch w = {.start = cap_now_ms(CLOCK_MONOTONIC)};
  w.deadline = spec->limits.wall_ms ? w.start + spec->limits.wall_ms : 0;
  int status = 0, r = 0;
  for (;;) {
    pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid)
      break;
    if (got < 0 && errno != EINTR) {
      r = cap_error_errno(err, errno, "waitpid");
      break;
    }
    check_limits(pid, spec, lim, &w, res);
    struct pollfd fds[4 + RELAY_MAX] = {
        {.fd = pidfd, .events = POLLIN},
        {.fd = sfd, .events = POLLIN},
        {.fd = status_fd, .events = POLLIN},
        {.fd = supervise_fd(sup), .events = POLLIN}}; /* -1 (ignored) once its pool runs */
    for (size_t i = 0; i < n_relays; i++)
      fds[4 + i] = (struct pollfd){.fd = relays[i].from, .events = POLLIN};
    uint64_t t = cap_now_ms(CLOCK_MONOTONIC);
    int timeout = w.next_tick > t ? (int)(w.next_tick - t) : 0;
    if (poll(fds, 4 + n_relays, timeout) <= 0)
      continue;
    if (fds[3].revents) /* the command's first connect() or open(): supervise.c */
      supervise_serve(sup, fds[3].revents);
    int told = fds[2].revents ? read_init_status(status_fd, &status) : 0;
    if (told > 0) {
      *reported = true;
      break;
    }
    if (told < 0) /* killed before it could tell: its exit says it */
      status_fd = -1;
    struct signalfd_siginfo si;
    while ((fds[1].revents & POLLIN) && read(sfd, &si, sizeof si) == sizeof si)
      kill(pid, (int)si.ssi_signo);
    for (size_t i = 0; i < n_relays; i++)
      if (fds[4 + i].revents)
        relay_pump(&relays[i]);
  }
  sigprocmask(SIG_SETMASK, &old, NULL);
  /* pid 1 reaped every process of the tool, the writers of the relays */
  for (size_t i = 0; i < n_relays; i++)
    relay_finish(&relays[i], 1000);
  if (r == 0)
    settle_status(status, lim, res);
  return r;
}

/* What one launch holds on the host side, released in one place. */
struct launch {
  struct sandbox_limits lim; /* first: sandbox_running points at it */
  struct rundir run;         /* the tmpfs root's mount point and its lock */
  int sync[2], report[2];    /* parent -> child "go"; child -> parent setup failure */
  int status[2];             /* pid 1 -> parent: the command's exit code, the sandbox emptied */
  int pass[2];               /* the proxy's listening socket travels here */
  int life[2];               /* only the supervisor holds [1]: its end is capsule's */
  int ready[2]; /* unprivileged, not dumpable: the child says it is dumpable (and scrubbed) */
  int listen_fds[SANDBOX_MAX_LISTENERS]; /* received, not yet the proxy's */
  size_t n_listen;
  struct proxy *proxy;             /* proxy mode: stopped and freed at the end */
  struct relay_stdio io;           /* the command's stdio (prepare_stdio) */
  struct sandbox_mount_plan *plan; /* the grants and masks, resolved with the caller's rights */
  struct supervise *sup;           /* below Landlock ABI 9: the connect() supervisor */
  bool as_root; /* the tool has host ids of its own; writable grants are idmapped */
  pid_t pid;
  bool init_reported; /* pid 1 sent the status: it is exiting, not yet reaped */
  bool leave_init;    /* sandbox_options.caller_exits: then it is never waited for */
  /* the proxy whose CPU is the sandbox's (proxy_cpu_of), under charge_lock;
   * NULL once it stops, its last count then in charged_ms */
  struct proxy *charged;
  int64_t charged_ms;
};

/* sandbox_cpu_ms may run in another thread (the Selu keeper's) while
 * launch_release stops the proxy: the proxy is read under this lock, and
 * taken away under it before it is freed. */
static pthread_mutex_t charge_lock = PTHREAD_MUTEX_INITIALIZER;

/* The CPU the egress proxy spent for the sandbox (sandbox_limits'
 * outside_cpu_ms). */
static int64_t proxy_cpu_of(void *arg)
{
  struct launch *l = arg;
  pthread_mutex_lock(&charge_lock);
  int64_t ms = l->charged ? proxy_cpu_ms(l->charged) : l->charged_ms;
  pthread_mutex_unlock(&charge_lock);
  return ms;
}

static void fd_close(int *fd)
{
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

/* Kills the child if it is still there, closes what is open, removes the
 * cgroups and the run directory. Returns r for tail calls. */
static int launch_release(struct launch *l, int r)
{
  if (l->pid > 0 && r < 0 && !l->init_reported) {
    kill(l->pid, SIGKILL);
    waitpid(l->pid, NULL, 0);
    l->pid = 0;
  }
  /* a pid 1 moved into a cgroup by pid leaves it only at its exit */
  if (l->init_reported && l->lim.holds_init) {
    waitpid(l->pid, NULL, 0);
    l->init_reported = false;
  }
  int *fds[] = {&l->sync[0],  &l->sync[1],  &l->report[0], &l->report[1],
                &l->pass[0],  &l->pass[1],  &l->life[0],   &l->life[1],
                &l->ready[0], &l->ready[1], &l->status[0], &l->status[1]};
  for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
    fd_close(fds[i]);
  for (size_t i = 0; i < l->n_listen; i++)
    close(l->listen_fds[i]);
  l->n_listen = 0;
  relay_stdio_release(&l->io);
  pthread_mutex_lock(&charge_lock); /* sandbox_cpu_ms may be reading it */
  l->charged_ms = proxy_cpu_ms(l->charged);
  l->charged = NULL;
  pthread_mutex_unlock(&charge_lock);
  supervise_attach_proxy(l->sup, NULL); /* no thread of its starts serving any more */
  proxy_stop(l->proxy); /* after the child is gone: no connection is left to serve */
  l->proxy = NULL;
  sandbox_mount_plan_free(l->plan);
  l->plan = NULL;
  supervise_free(l->sup);
  l->sup = NULL;
  limits_release(&l->lim);
  rundir_remove(&l->run); /* last: its lock is what keeps a later start off the cgroups */
  /* pid 1 reported and reaped everything of the tool: its own exit (its
   * namespaces' teardown) overlapped the above; a caller that exits now
   * leaves it to init */
  if (l->init_reported && !l->leave_init)
    waitpid(l->pid, NULL, 0);
  l->init_reported = false;
  return r;
}

/* How long the child's setup (the go to the command's exec) may take: it
 * takes milliseconds, a second or two in a sanitizer build on a loaded
 * host. A setup stuck past it (a lock a fork kept, a process that never
 * runs) is killed and reported, so its caller (serve's main thread) is
 * not held with it. */
#define SETUP_BOUND_MS 30000
#define SETUP_GONE_GRACE_MS 1000 /* pid 1 ended: its report's end follows at once */

static int setup_bound_ms(void)
{
#ifdef CAPSULE_TEST_HOOKS /* tests/sandbox/setup-bound.sh */
  const char *ms = getenv("CAPSULE_TEST_SETUP_BOUND_MS");
  if (ms && atoi(ms) > 0)
    return atoi(ms);
#endif
  return SETUP_BOUND_MS;
}

/* Reads the report pipe until its end (every copy of the write end closed:
 * the command's exec, or the setup's failure) or until msg is full: 0.
 * -ETIMEDOUT when bound_ms pass first, -ESRCH when pid 1 (pidfd) ended and
 * the end did not follow within a grace. */
static int read_report_bounded(int fd, int pidfd, char *msg, size_t size, int bound_ms)
{
  size_t got = 0;
  uint64_t deadline = cap_now_ms(CLOCK_MONOTONIC) + (uint64_t)bound_ms;
  bool gone = false;
  msg[0] = '\0';
  for (;;) {
    uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
    if (now >= deadline)
      return gone ? -ESRCH : -ETIMEDOUT;
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
                          {.fd = gone ? -1 : pidfd, .events = POLLIN}};
    int n = poll(p, 2, (int)(deadline - now));
    if (n < 0 && errno != EINTR)
      return -errno;
    if (n > 0 && p[0].revents) {
      ssize_t k = read(fd, msg + got, size - 1 - got);
      if (k < 0 && (errno == EINTR || errno == EAGAIN))
        continue;
      if (k > 0)
        got += (size_t)k;
      msg[got] = '\0';
      if (k <= 0 || got == size - 1)
        return 0; /* what came before a failed read is the report */
    } else if (n > 0 && p[1].revents) {
      gone = true;
      if (deadline > now + SETUP_GONE_GRACE_MS)
        deadline = now + SETUP_GONE_GRACE_MS;
    }
  }
}

int sandbox_await_report(int fd, int pidfd, const char *what, char *msg, size_t size,
                         struct cap_error *err)
{
  int bound = setup_bound_ms();
  int r = read_report_bounded(fd, pidfd, msg, size, bound);
  if (r == -ETIMEDOUT)
    return cap_error_set(err, ETIMEDOUT,
                         "%s failed: it reported nothing within %g s (a stuck setup: killed)", what,
                         bound / 1000.0);
  if (r == -ESRCH)
    return cap_error_set(err, ESRCH, "%s failed: its pid 1 ended and its setup report stayed open",
                         what);
  if (r < 0)
    return cap_error_errno(err, -r, "cannot wait for the %s", what);
  return 0;
}

/* Waits for the child's verdict on its setup: EOF at exec (the pipe is
 * CLOEXEC), or the message child_fail wrote; bounded (sandbox_await_report:
 * on an error launch_release kills what is left). */
static int await_setup(struct launch *l, int pidfd, struct cap_error *err)
{
  char msg[512];
  int r = sandbox_await_report(l->report[0], pidfd, "sandbox setup", msg, sizeof msg, err);
  if (r < 0)
    return r;
  if (msg[0] == '\0')
    return 0;
  if (msg[0] == SANDBOX_REPORT_EXEC) { /* the setup held; the command is not there to run */
    cap_error_set(err, ENOENT, "%s", msg + 1);
    return cap_error_outcome(err, CAP_OUTCOME_NOT_FOUND);
  }
  return cap_error_set(err, EPERM, "sandbox setup failed: %s", msg);
}

/* The kernel clears PR_SET_PDEATHSIG when the effective ids change, so it
 * is armed after the last change (sandbox_become_ids). Then, in case
 * capsule died before that: getppid() says nothing across a pid namespace
 * (it is 0 for any parent outside), so the supervisor's pipe end decides:
 * a hang-up means capsule is already gone. */
static void arm_parent_death(int life_fd)
{
  bool arm = true;
#ifdef CAPSULE_TEST_HOOKS /* tests/sandbox/orphan.sh: the backstop alone */
  arm = !getenv("CAPSULE_TEST_NO_PDEATHSIG");
#endif
  if (arm)
    CHILD_TRY(prctl(PR_SET_PDEATHSIG, SIGKILL), "PR_SET_PDEATHSIG: %s", strerror(errno));
  struct pollfd p = {.fd = life_fd, .events = POLLIN};
  if (poll(&p, 1, 0) != 0)
    _exit(127); /* the supervisor's end is closed (or unreadable): capsule is gone */
}

void sandbox_test_stall_setup(void)
{
#ifdef CAPSULE_TEST_HOOKS /* tests/sandbox/setup-bound.sh, tests/covenant/gvisor.sh */
  const char *ms = getenv("CAPSULE_TEST_STALL_SETUP_MS");
  if (ms && atoi(ms) > 0)
    nanosleep(&(struct timespec){.tv_sec = atoi(ms) / 1000, .tv_nsec = atoi(ms) % 1000 * 1000000L},
              NULL);
#endif
}

/* pid 1 keeps nothing of capsule's open but the supervisor's pipe (fd 3),
 * the status pipe (fd 4) and the connector (fd 5): a pipe end it held
 * would keep the command's stdin from ever reaching its end. */
static int keep_init_fds(int life_fd, int status_fd, const struct sandbox_options *opt)
{
  int life = fcntl(life_fd, F_DUPFD_CLOEXEC, 10);
  int status = fcntl(status_fd, F_DUPFD_CLOEXEC, 10);
  int conn = opt->has_connector ? fcntl(opt->connector_fd, F_DUPFD_CLOEXEC, 10) : -1;
  if (life < 0 || status < 0 || dup3(life, 3, O_CLOEXEC) != 3 || dup3(status, 4, O_CLOEXEC) != 4 ||
      (conn >= 0 && dup3(conn, 5, O_CLOEXEC) != 5))
    _exit(127);
  syscall(__NR_close_range, conn >= 0 ? 6 : 5, ~0U, 0);
  return conn >= 0 ? 5 : -1;
}

/* The clone's side: wait for the parent's go, take the sandbox's ids, arm
 * the parent-death signal, build the root, fork the command and become its
 * init. */
static void __attribute__((noreturn))
child_main(struct launch *l, const struct cap_spec *spec, const struct sandbox_options *opt,
           int flags, uid_t uid, gid_t gid)
{
  close(l->sync[1]);
  close(l->report[0]);
  close(l->life[1]);
  close(l->status[0]);
  sandbox_report_fd = l->report[1];
  if (l->ready[1] >= 0) { /* see sandbox_run: scrubbed first, then dumpable for the maps */
    close(l->ready[0]);
    proxy_scrub(l->proxy);
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    if (write(l->ready[1], "r", 1) != 1)
      _exit(127);
    close(l->ready[1]);
  }
  supervise_in_child(l->sup);
  char go;
  if (read(l->sync[0], &go, 1) != 1)
    _exit(127); /* the parent gave up */
  close(l->sync[0]);
  /* a copy of capsule's memory: not dumpable from the start (the command
   * regains it at exec), so no window before pid 1's own prctl */
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  sandbox_become_ids(uid, gid);
  arm_parent_death(l->life[0]);
  proxy_scrub(l->proxy); /* this copy of capsule's memory keeps no secret */
  /* before the sandbox's root: the host's nft, in the sandbox's namespace;
   * without it only listed ports of any-port names work (doctor says so) */
  struct cap_error capture_err = {0};
  if (l->proxy && capture_planned(spec))
    capture_install(&capture_err);
  cap_error_clear(&capture_err);
  sandbox_build_root(spec, l->plan, l->run.path, l->proxy);
  if (flags & CLONE_NEWNET)
    sandbox_loopback_up();
  if (l->proxy) {
    close(l->pass[0]);
    sandbox_make_proxy_listeners(spec, l->pass[1]);
  }
  sandbox_test_stall_setup();
  /* every signal blocked before the fork, so a SIGCHLD from a command
   * that ends at once waits for pid 1's signalfd (the command unblocks
   * them before its exec) */
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, NULL);
  pid_t command = fork();
  if (command < 0)
    sandbox_child_fail("fork: %s", strerror(errno));
  if (command == 0)
    sandbox_exec_command(spec, opt, l->plan, &l->lim, l->proxy, uid, gid, l->as_root);
  close(sandbox_report_fd);
  int connector = keep_init_fds(l->life[0], l->status[1], opt);
  sandbox_run_init(command, connector, 3, 4);
}

/* The parent's side of the start: id maps, cgroups, the go, the child's
 * verdict on its setup, the proxy's sockets. */
static int start_child(struct launch *l, int pidfd, const struct cap_spec *spec, uid_t inside_uid,
                       gid_t inside_gid, uid_t outside_uid, gid_t outside_gid,
                       struct cap_error *err)
{
  sandbox_mount_plan_close_trees(l->plan); /* the child has its copies */
  fd_close(&l->ready[1]);
  char ready;
  if (l->ready[0] >= 0 && read(l->ready[0], &ready, 1) != 1)
    return cap_error_set(err, EPROTO, "the sandbox ended before its setup began");
  fd_close(&l->sync[0]);
  fd_close(&l->report[1]);
  fd_close(&l->pass[1]);
  fd_close(&l->life[0]);
  fd_close(&l->status[1]);
  relay_stdio_close_own(&l->io); /* the child has them: a pipe ends when the tool's copies do */
  int r = write_id_maps(l->pid, inside_uid, outside_uid, inside_gid, outside_gid, err);
  if (r == 0)
    r = limits_attach(&l->lim, l->pid, err);
  if (r == 0 && write(l->sync[1], "g", 1) != 1)
    r = cap_error_errno(err, errno, "cannot start the sandbox");
  if (r == 0)
    r = await_setup(l, pidfd, err);
  if (r == 0)
    r = supervise_start(l->sup, err);
  if (r == 0 && l->proxy) {
    size_t want = sandbox_listener_count(spec);
    int got = sandbox_receive_fds(l->pass[0], l->listen_fds, want);
    l->n_listen = got > 0 ? (size_t)got : 0;
    if (l->n_listen != want)
      r = cap_error_set(err, EPROTO, "the sandbox did not hand over the proxy sockets");
  }
  if (r == 0 && l->proxy) {
    supervise_attach_proxy(l->sup, l->proxy); /* its connects served where they are made */
    r = proxy_start(l->proxy, l->listen_fds, l->n_listen, err);
    l->n_listen = 0; /* the proxy owns them now, even when it failed */
  }
  if (r == 0 && l->proxy) { /* the proxy's work is the sandbox's CPU */
    pthread_mutex_lock(&charge_lock);
    l->charged = l->proxy;
    pthread_mutex_unlock(&charge_lock);
    l->lim.outside_cpu_ms = proxy_cpu_of;
    l->lim.outside_cpu_arg = l;
  }
  return r;
}

uint64_t sandbox_log_cap(const struct cap_spec *spec, const struct sandbox_options *opt)
{
  uint64_t cap = spec->limits.disk_bytes;
  if (opt->log_max_bytes && (!cap || opt->log_max_bytes < cap))
    cap = opt->log_max_bytes;
  return cap;
}

/* The command's stdio (relay.h). */
static int prepare_stdio(struct launch *l, const struct cap_spec *spec,
                         const struct sandbox_options *opt, struct cap_error *err)
{
  return relay_stdio_prepare(&l->io, opt->redirect_stdio ? opt->stdio : NULL, opt->tty,
                             sandbox_log_cap(spec, opt), err);
}

/* The run directory (after removing dead capsules' leftovers) and the
 * cgroups, recorded in its lock file. */
static int prepare_host_side(struct launch *l, const struct cap_spec *spec, bool count_cpu,
                             struct cap_error *err)
{
  /* the root's mount point: on tmpfs (/dev/shm) unless TMPDIR says
   * otherwise; creating and removing it on a disk's /tmp cost ~2 ms */
  const char *tmpdir = getenv("TMPDIR");
  if (!tmpdir || !*tmpdir)
    tmpdir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  rundir_clean_leftovers(tmpdir);
  int r = rundir_create(&l->run, tmpdir, err);
  if (r < 0)
    return r;
  r = limits_prepare(&l->lim, spec, count_cpu, err);
  if (r < 0)
    return r;
  rundir_record_cgroups(&l->run, &l->lim);
  return 0;
}

/* The tool's ids on the host: the caller's unprivileged; as root the
 * capability's own (id_base + 65534), unless capsule is the root of a user
 * namespace (a container) that lacks them: then 65534, and unenforced
 * says so. */
static void tool_host_ids(const struct sandbox_options *opt, uid_t *uid, gid_t *gid,
                          char *unenforced, size_t size)
{
  *uid = geteuid();
  *gid = getegid();
  if (*uid != 0)
    return;
  if (sandbox_host_ids(opt->id_base, uid, gid))
    return;
  size_t len = strlen(unenforced);
  snprintf(unenforced + len, size - len,
           "%sthe tool's own host ids (%u is not mapped in capsule's user namespace: it runs "
           "as uid 65534)",
           len ? ", " : "", opt->id_base + SANDBOX_UID_AS_ROOT);
}

/* What no sandbox can be made for: refused before anything is set up. */
static int check_request(const struct cap_spec *spec, const struct sandbox_options *opt,
                         struct cap_error *err)
{
  if (!opt->argv || !opt->argv[0])
    return cap_error_set(err, EINVAL, "no command to run");
  if (spec->network.localhost.len > SANDBOX_MAX_FORWARDS)
    return cap_error_set(err, EINVAL,
                         "network.ports.localhost lists %zu ports; capsule forwards at most %d",
                         spec->network.localhost.len, SANDBOX_MAX_FORWARDS);
  int r = landlock_check_needed(spec, err); /* what only Landlock holds: exit 3 */
  return r < 0 ? cap_error_outcome(err, CAP_OUTCOME_HOST) : 0;
}

/* The mount plan (resolved with the caller's rights), the connect()
 * supervisor, the idmapped grants as root, and what they cannot enforce. */
static int prepare_layers(struct launch *l, const struct cap_spec *spec,
                          const struct sandbox_options *opt, uid_t tool_uid, gid_t tool_gid,
                          struct sandbox_result *res, struct cap_error *err)
{
  int r = sandbox_mount_plan_new(spec, opt, &l->plan, err);
  if (r == 0)
    r = supervise_prepare(&l->sup, spec, opt, tool_uid, tool_gid, err);
  if (r < 0)
    return r;
  sandbox_mount_note_unenforced(spec, l->plan, res->unenforced, sizeof res->unenforced);
  if (l->as_root) /* the caller's files in writable grants: the tool's (idmap.c) */
    sandbox_idmap_plan(l->plan, tool_uid, tool_gid, res->unenforced, sizeof res->unenforced);
  return 0;
}

/* The pipes and socket between capsule and the child. An unprivileged
 * parent can write the child's id maps only while the child is dumpable
 * (else its /proc files are root's), and a child inherits the flag: a
 * capsule holding keys (cap_secret_hold) stays not dumpable itself, and its
 * child makes itself dumpable once it has scrubbed its copy of the secrets
 * (the state keys are on wipe-on-fork pages), saying so on `ready` before
 * the parent writes the maps. */
static int make_channels(struct launch *l, bool proxied, struct cap_error *err)
{
  if (pipe2(l->sync, O_CLOEXEC) < 0 || pipe2(l->report, O_CLOEXEC) < 0 ||
      pipe2(l->life, O_CLOEXEC) < 0 || pipe2(l->status, O_CLOEXEC) < 0 ||
      (proxied && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, l->pass) < 0) ||
      (!l->as_root && prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0 && pipe2(l->ready, O_CLOEXEC) < 0))
    return cap_error_errno(err, errno, "cannot create the setup channels");
  return 0;
}

int sandbox_run(const struct cap_spec *spec, const struct sandbox_options *opt,
                struct sandbox_result *res, struct cap_error *err)
{
  *res = (struct sandbox_result){0};
  int r = check_request(spec, opt, err);
  if (r == 0 && spec->sandbox.backend == CAP_BACKEND_GVISOR)
    return sandbox_gvisor_run(spec, opt, res, err); /* gvisor.c */
  if (r < 0)
    return r;
  uid_t uid = getuid();
  gid_t gid = getgid();
  uid_t inside_uid = opt->inside_id ? opt->inside_id : uid ? uid : SANDBOX_UID_AS_ROOT;
  gid_t inside_gid = opt->inside_id ? opt->inside_id : uid ? gid : SANDBOX_UID_AS_ROOT;
  uid_t outside_uid;
  gid_t outside_gid;
  bool proxied = spec->network.mode == CAP_NET_PROXY;

  struct launch l = {.run = {.lock_fd = -1},
                     .sync = {-1, -1},
                     .report = {-1, -1},
                     .status = {-1, -1},
                     .leave_init = opt->caller_exits,
                     .pass = {-1, -1},
                     .life = {-1, -1},
                     .ready = {-1, -1},
                     .io = RELAY_STDIO_INIT};
  l.as_root = geteuid() == 0;
  /* the proxy first: its secrets are read (and a missing one reported)
   * before anything runs, and its CA bundle goes into the sandbox */
  struct proxy_options popt = opt->proxy;
  popt.pool = capture_planned(spec); /* the redirect that brings on-demand addresses */
  r = proxied ? proxy_new(spec, &popt, &l.proxy, err) : 0;
  if (r < 0)
    return r;
  r = prepare_host_side(&l, spec, opt->on_started != NULL, err); /* a caller counting CPU */
  if (r == 0)
    r = prepare_stdio(&l, spec, opt, err);
  if (r < 0)
    return launch_release(&l, r);
  struct sandbox_options child_opt = *opt; /* the command's stdio as prepare_stdio made it */
  child_opt.redirect_stdio = true;
  memcpy(child_opt.stdio, l.io.stdio, sizeof l.io.stdio);
  snprintf(res->unenforced, sizeof res->unenforced, "%s", l.lim.unenforced);
  tool_host_ids(opt, &outside_uid, &outside_gid, res->unenforced, sizeof res->unenforced);
  r = prepare_layers(&l, spec, opt, outside_uid, outside_gid, res, err);
  if (r == 0)
    r = make_channels(&l, proxied, err);
  if (r < 0)
    return launch_release(&l, r);

  int flags =
      CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
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
  if (l.pid == 0)
    child_main(&l, spec, &child_opt, flags, inside_uid, inside_gid);
  r = start_child(&l, pidfd, spec, inside_uid, inside_gid, outside_uid, outside_gid, err);
  if (r < 0)
    return launch_release(&l, r);
  if (opt->on_started)
    opt->on_started(opt->on_started_ctx, (struct sandbox_running *)&l.lim);
  r = supervise(l.pid, pidfd, l.status[0], &l.init_reported, spec, &l.lim, l.io.relays, l.io.n,
                l.sup, res, err);
  return launch_release(&l, r);
}

bool sandbox_host_ids(uint32_t id_base, uid_t *uid, gid_t *gid)
{
  *uid = *gid = SANDBOX_UID_AS_ROOT;
  if (!id_base)
    return true;
  uint32_t id = id_base + SANDBOX_UID_AS_ROOT;
  if (!sandbox_id_mapped("/proc/self/uid_map", id) || !sandbox_id_mapped("/proc/self/gid_map", id))
    return false; /* root of a user namespace (a container) that lacks the range */
  *uid = *gid = id;
  return true;
}

int64_t sandbox_cpu_ms(struct sandbox_running *running)
{
  return limits_cpu_ms((struct sandbox_limits *)running);
}
