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
 * A setup failure in the child travels to the parent over a CLOEXEC pipe. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/capability.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "net/proxy.h"
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
#ifndef __NR_mount_setattr
#define __NR_mount_setattr 442
#endif
#ifndef __NR_open_tree
#define __NR_open_tree 428
#define __NR_move_mount 429
#endif
#define OPEN_TREE_CLONE_ 1
#define AT_RECURSIVE_ 0x8000
#define MOVE_MOUNT_F_EMPTY_PATH_ 0x00000004
#define MOUNT_ATTR_RDONLY_ 0x00000001
#define MOUNT_ATTR_NOSUID_ 0x00000002
#define MOUNT_ATTR_NODEV_ 0x00000004

struct mount_attr_ {
  uint64_t attr_set;
  uint64_t attr_clr;
  uint64_t propagation;
  uint64_t userns_fd;
};

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

#define SANDBOX_UID_AS_ROOT 65534 /* nobody: never the caller's uid */
#define DEFAULT_TMP_BYTES (64ull << 20)

/* ---- child side: report a failure to the parent and stop ---- */

static int report_fd = -1;

static void __attribute__((noreturn, format(printf, 1, 2))) child_fail(const char *fmt, ...)
{
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n > 0 && report_fd >= 0 && write(report_fd, msg, strlen(msg)) < 0) {
    /* nothing left to tell it with */
  }
  _exit(127);
}

#define CHILD_TRY(expr, ...)                                                   \
  do {                                                                         \
    if ((expr) < 0)                                                            \
      child_fail(__VA_ARGS__);                                                 \
  } while (0)

/* "~/x" -> "$HOME/x"; other paths as they are. */
static char *expand_path(const char *path)
{
  if (path[0] == '~' && (path[1] == '/' || path[1] == '\0')) {
    const char *home = getenv("HOME");
    return cap_xasprintf("%s%s", home ? home : "/", path + 1);
  }
  return cap_xstrdup(path);
}

static void mkdir_p(const char *path, mode_t mode)
{
  char buf[PATH_MAX];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    mkdir(buf, mode);
    *p = '/';
  }
  mkdir(buf, mode);
}

static void touch(const char *path)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
  if (fd >= 0)
    close(fd);
}

/* Binds src (a host path) at dest (inside the new root) with the attributes
 * applied to every submount too (mount_setattr AT_RECURSIVE), so a read-only
 * grant cannot be written through a mount nested below it. */
static int bind_tree(const char *src, const char *dest, bool read_only, bool allow_dev)
{
  /* AT_SYMLINK_NOFOLLOW: a grant checked as a directory cannot have been
   * swapped for a symlink to somewhere else since */
  _cleanup_close_ int fd = (int)syscall(__NR_open_tree, AT_FDCWD, src,
                                        OPEN_TREE_CLONE_ | AT_RECURSIVE_ | O_CLOEXEC |
                                            AT_SYMLINK_NOFOLLOW);
  if (fd < 0)
    return -1;
  struct mount_attr_ attr = {.attr_set = MOUNT_ATTR_NOSUID_, .propagation = MS_PRIVATE};
  if (!allow_dev)
    attr.attr_set |= MOUNT_ATTR_NODEV_;
  if (read_only)
    attr.attr_set |= MOUNT_ATTR_RDONLY_;
  if (syscall(__NR_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE_, &attr, sizeof attr) <
      0)
    return -1;
  return (int)syscall(__NR_move_mount, fd, "", AT_FDCWD, dest, MOVE_MOUNT_F_EMPTY_PATH_);
}

/* Creates in root what the host path is (directory, file, or the same
 * symlink) and binds it. Paths the host lacks grant nothing: skipped. */
static void mount_grant(const char *root, const struct cap_fs_grant *g)
{
  _cleanup_free_ char *host = expand_path(g->path);
  if (host[0] != '/')
    child_fail("grant \"%s\" is not an absolute path", g->path);
  struct stat st;
  if (lstat(host, &st) < 0)
    return;
  _cleanup_free_ char *dest = cap_xasprintf("%s%s", root, host);
  _cleanup_free_ char *parent = cap_xstrdup(dest);
  char *slash = strrchr(parent, '/');
  if (slash && slash != parent) {
    *slash = '\0';
    mkdir_p(parent, 0755);
  }
  if (S_ISLNK(st.st_mode)) {
    /* merged-/usr links such as /bin -> usr/bin: the same link inside,
     * resolved against the sandbox's own tree */
    char target[PATH_MAX];
    ssize_t n = readlink(host, target, sizeof target - 1);
    if (n > 0) {
      target[n] = '\0';
      if (symlink(target, dest) < 0 && errno != EEXIST)
        child_fail("cannot create the link %s in the sandbox: %s", g->path, strerror(errno));
    }
    return;
  }
  if (S_ISDIR(st.st_mode))
    mkdir_p(dest, 0755);
  else
    touch(dest);
  CHILD_TRY(bind_tree(host, dest, g->access == CAP_ACCESS_READ, false),
            "cannot bind %s into the sandbox: %s", g->path, strerror(errno));
}

/* Deny wins: an empty read-only tmpfs over a denied directory, the empty
 * /dev/null over a denied file. */
static void mount_deny(const char *root, const char *path)
{
  _cleanup_free_ char *host = expand_path(path);
  _cleanup_free_ char *dest = cap_xasprintf("%s%s", root, host);
  struct stat st;
  if (lstat(dest, &st) < 0)
    return;
  if (S_ISDIR(st.st_mode))
    CHILD_TRY(mount("tmpfs", dest, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                    "mode=0000,size=4k"),
              "cannot mask the denied %s: %s", path, strerror(errno));
  else if (!S_ISLNK(st.st_mode))
    CHILD_TRY(bind_tree("/dev/null", dest, true, false), "cannot mask the denied %s: %s", path,
              strerror(errno));
}

/* A blocked command is masked where it is installed (/dev/null, which
 * cannot be executed); Landlock keeps the tool from running a copy. */
static void mask_blocked_commands(const struct cap_spec *spec, const char *root)
{
  char paths[8][4096];
  for (size_t i = 0; i < spec->process.blocked_commands.len; i++) {
    size_t n = sandbox_command_paths(spec->process.blocked_commands.v[i], paths, 8);
    for (size_t k = 0; k < n; k++)
      mount_deny(root, paths[k]);
  }
}

static void mount_dev(const char *root)
{
  _cleanup_free_ char *dev = cap_xasprintf("%s/dev", root);
  mkdir_p(dev, 0755);
  CHILD_TRY(mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k"),
            "cannot mount /dev: %s", strerror(errno));
  static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
  for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
    _cleanup_free_ char *src = cap_xasprintf("/dev/%s", nodes[i]);
    _cleanup_free_ char *dest = cap_xasprintf("%s/%s", dev, nodes[i]);
    if (access(src, F_OK) < 0)
      continue;
    touch(dest);
    CHILD_TRY(bind_tree(src, dest, false, true), "cannot bind %s: %s", src, strerror(errno));
  }
  static const char *const links[][2] = {{"/proc/self/fd", "fd"},   {"/proc/self/fd/0", "stdin"},
                                         {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}};
  for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
    _cleanup_free_ char *dest = cap_xasprintf("%s/%s", dev, links[i][1]);
    if (symlink(links[i][0], dest) < 0)
      child_fail("cannot create /dev/%s: %s", links[i][1], strerror(errno));
  }
  _cleanup_free_ char *shm = cap_xasprintf("%s/shm", dev);
  mkdir_p(shm, 01777);
  CHILD_TRY(mount("tmpfs", shm, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777,size=16m"),
            "cannot mount /dev/shm: %s", strerror(errno));
}

/* The id changes in the child are raw system calls: glibc's wrappers would
 * signal every thread of the process to change ids with it (POSIX
 * semantics), and a child cloned from a multi-threaded caller has the
 * other threads' bookkeeping but not the threads, so it would wait for
 * them forever. */
static long raw_setresgid(gid_t gid) { return syscall(SYS_setresgid, gid, gid, gid); }
static long raw_setresuid(uid_t uid) { return syscall(SYS_setresuid, uid, uid, uid); }

/* Takes the sandbox's own ids right away, keeping the capabilities the new
 * user namespace gave: files the setup creates then belong to a mapped id
 * (as root, capsule's uid 0 is deliberately not mapped). */
static void become_sandbox_ids(uid_t uid, gid_t gid)
{
  CHILD_TRY(prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0), "keepcaps: %s", strerror(errno));
  CHILD_TRY(raw_setresgid(gid), "cannot switch to the sandbox gid: %s", strerror(errno));
  CHILD_TRY(raw_setresuid(uid), "cannot switch to the sandbox uid: %s", strerror(errno));
  struct __user_cap_header_struct head = {.version = _LINUX_CAPABILITY_VERSION_3};
  struct __user_cap_data_struct data[2];
  CHILD_TRY(syscall(SYS_capget, &head, data), "capget: %s", strerror(errno));
  data[0].effective = data[0].permitted;
  data[1].effective = data[1].permitted;
  CHILD_TRY(syscall(SYS_capset, &head, data), "capset: %s", strerror(errno));
}

static void mount_private_tmp(const struct cap_spec *spec, const char *root)
{
  _cleanup_free_ char *tmp = cap_xasprintf("%s/tmp", root);
  mkdir_p(tmp, 01777);
  char opts[64];
  uint64_t size = spec->limits.disk_bytes ? spec->limits.disk_bytes : DEFAULT_TMP_BYTES;
  snprintf(opts, sizeof opts, "mode=1777,size=%llu", (unsigned long long)size);
  CHILD_TRY(mount("tmpfs", tmp, "tmpfs", MS_NOSUID | MS_NODEV, opts),
            "cannot mount the private /tmp: %s", strerror(errno));
}

static const char *grant_path(const struct cap_spec *spec, size_t i)
{
  return i < spec->n_grants ? spec->grants[i].path : "/tmp";
}

static size_t path_depth(const char *p)
{
  size_t d = 0;
  for (; *p; p++)
    d += *p == '/';
  return d;
}

/* The grants and the private /tmp, parents before children, so a narrower
 * grant is never hidden by a wider one mounted after it (a read-only
 * /home/x stays read-only under a writable /home). */
static void mount_tree(const struct cap_spec *spec, const char *root)
{
  size_t n = spec->n_grants + (spec->sandbox.private_tmp ? 1 : 0);
  size_t *order = cap_xcalloc(n + 1, sizeof(size_t));
  for (size_t i = 0; i < n; i++)
    order[i] = i; /* index n_grants stands for the private /tmp */
  for (size_t i = 1; i < n; i++) { /* stable insertion sort by depth */
    size_t cur = order[i], j = i;
    while (j > 0 && path_depth(grant_path(spec, order[j - 1])) >
                        path_depth(grant_path(spec, cur))) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = cur;
  }
  for (size_t k = 0; k < n; k++) {
    if (order[k] == spec->n_grants)
      mount_private_tmp(spec, root);
    else
      mount_grant(root, &spec->grants[order[k]]);
  }
  free(order);
}

/* The trust bundle for intercepted TLS, on the sandbox's own root (made
 * read-only with it): the tool can read it, not change it. */
static void write_ca_bundle(const struct proxy *px, const char *root)
{
  size_t len;
  const char *pem = proxy_ca_bundle(px, &len);
  if (!pem)
    return;
  _cleanup_free_ char *dir = cap_xasprintf("%s%s", root, PROXY_CA_DIR);
  _cleanup_free_ char *file = cap_xasprintf("%s%s", root, PROXY_CA_FILE);
  CHILD_TRY(mkdir(dir, 0755), "cannot create %s for the session CA: %s", PROXY_CA_DIR, strerror(errno));
  _cleanup_close_ int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
  CHILD_TRY(fd, "cannot write %s: %s", PROXY_CA_FILE, strerror(errno));
  while (len) {
    ssize_t w = write(fd, pem, len);
    CHILD_TRY(w <= 0 ? -1 : 0, "cannot write %s: %s", PROXY_CA_FILE, strerror(errno));
    pem += w;
    len -= (size_t)w;
  }
}

/* Builds the new root at `root` (a tmpfs) and moves into it. */
static void build_root(const struct cap_spec *spec, const struct sandbox_options *opt,
                       const char *root, const struct proxy *px)
{
  CHILD_TRY(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL),
            "cannot make the mount tree private: %s", strerror(errno));
  CHILD_TRY(mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m"),
            "cannot mount the sandbox root: %s", strerror(errno));
  mount_tree(spec, root);
  /* the sandbox's own /dev and /proc go on top of everything */
  mount_dev(root);
  _cleanup_free_ char *proc = cap_xasprintf("%s/proc", root);
  mkdir_p(proc, 0555);
  CHILD_TRY(mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
            "cannot mount /proc: %s", strerror(errno));
  for (size_t i = 0; i < spec->deny.len; i++)
    mount_deny(root, spec->deny.v[i]);
  for (size_t i = 0; i < opt->n_hidden; i++) /* capsule's own state, whatever was granted */
    mount_deny(root, opt->hidden[i]);
  mask_blocked_commands(spec, root);
  if (px)
    write_ca_bundle(px, root);

  CHILD_TRY(chdir(root), "cannot enter the sandbox root: %s", strerror(errno));
  CHILD_TRY(syscall(SYS_pivot_root, ".", "."), "pivot_root failed: %s", strerror(errno));
  CHILD_TRY(umount2(".", MNT_DETACH), "cannot detach the host's root: %s", strerror(errno));
  CHILD_TRY(chdir("/"), "chdir / failed: %s", strerror(errno));
  CHILD_TRY(mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL),
            "cannot make the sandbox root read-only: %s", strerror(errno));
  sethostname("capsule", 7);
}

/* A listening TCP socket on 127.0.0.1:port in this namespace. */
static int loopback_listener(uint16_t port)
{
  int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 4096) < 0)
    child_fail("cannot listen on 127.0.0.1:%u: %s", port, strerror(errno));
  return l;
}

/* Loopback up in the sandbox's own network namespace: the only interface
 * it has, for the proxy's listeners, a Selu server's port, and tools that
 * talk to themselves. */
static void loopback_up(void)
{
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq ifr = {0};
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
  if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
    child_fail("cannot read the loopback interface: %s", strerror(errno));
  ifr.ifr_flags |= IFF_UP;
  CHILD_TRY(ioctl(s, SIOCSIFFLAGS, &ifr), "cannot bring up loopback: %s", strerror(errno));
  close(s);
}

/* One message on a SOCK_SEQPACKET socket: `data` and up to max fds. */
static ssize_t send_with_fds(int sock, const void *data, size_t len, const int *fds, size_t n)
{
  struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
  char control[CMSG_SPACE(sizeof(int) * (1 + SANDBOX_MAX_FORWARDS))];
  memset(control, 0, sizeof control);
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (n) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(n * sizeof(int));
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(n * sizeof(int));
    memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
  }
  return sendmsg(sock, &msg, MSG_NOSIGNAL);
}

/* The message send_with_fds sent: its data in buf (returns its length, or
 * -1), up to max fds in fds (*n_fds of them; any beyond max are closed). */
static ssize_t receive_with_fds(int sock, void *buf, size_t len, int *fds, size_t max,
                                size_t *n_fds, int flags)
{
  struct iovec iov = {.iov_base = buf, .iov_len = len};
  char control[CMSG_SPACE(sizeof(int) * (1 + SANDBOX_MAX_FORWARDS))];
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                       .msg_controllen = sizeof control};
  *n_fds = 0;
  ssize_t got = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
  if (got < 0)
    return -1;
  struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
  if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
    size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    int all[(sizeof control - CMSG_LEN(0)) / sizeof(int)]; /* as many as control can hold */
    memcpy(all, CMSG_DATA(cm), n * sizeof(int));
    for (size_t i = max; i < n; i++)
      close(all[i]);
    *n_fds = n < max ? n : max;
    memcpy(fds, all, *n_fds * sizeof(int));
  }
  return got;
}

/* Inside the sandbox's network namespace: the listening sockets made here,
 * so they exist only in this namespace: the proxy's, then one per
 * ports.localhost entry. The fds go to the supervisor, which serves them
 * from the host's namespace. */
static void make_proxy_listeners(const struct cap_spec *spec, int pass_fd)
{
  int fds[1 + SANDBOX_MAX_FORWARDS];
  size_t n = 0;
  fds[n++] = loopback_listener(PROXY_PORT);
  for (size_t i = 0; i < spec->network.localhost.len && i < SANDBOX_MAX_FORWARDS; i++)
    fds[n++] = loopback_listener(spec->network.localhost.v[i]);
  CHILD_TRY(send_with_fds(pass_fd, "p", 1, fds, n), "cannot hand the proxy sockets over: %s",
            strerror(errno));
  for (size_t i = 0; i < n; i++)
    close(fds[i]);
  close(pass_fd);
}

/* The listeners make_proxy_listeners sent: returns how many (<= max), or -1. */
static int receive_fds(int sock, int *fds, size_t max)
{
  char dummy;
  size_t n = 0;
  if (receive_with_fds(sock, &dummy, 1, fds, max, &n, MSG_DONTWAIT) <= 0 || n == 0)
    return -1;
  return (int)n;
}

/* pid 1's side of the connector: a TCP connection to 127.0.0.1:port made in
 * this namespace, handed back (or the errno of the attempt). */
static void serve_connect(int connector, uint16_t port)
{
  int32_t e = 0;
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct timeval bound = {.tv_sec = 1}; /* a full backlog must not stall pid 1 */
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (s < 0 || setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound) < 0 ||
      connect(s, (struct sockaddr *)&a, sizeof a) < 0)
    e = errno ? errno : EIO;
  send_with_fds(connector, &e, sizeof e, &s, e ? 0 : 1);
  if (s >= 0)
    close(s);
}

int64_t sandbox_cpu_ms(struct sandbox_running *running)
{
  return limits_cpu_ms((struct sandbox_limits *)running);
}

int sandbox_connect(int connector, uint16_t port, int timeout_ms, struct cap_error *err)
{
  if (send(connector, &port, sizeof port, MSG_NOSIGNAL) != (ssize_t)sizeof port)
    return cap_error_errno(err, errno ? errno : EPIPE, "the sandbox is gone (its connector is closed)");
  struct pollfd p = {.fd = connector, .events = POLLIN};
  int r = poll(&p, 1, timeout_ms);
  if (r <= 0)
    return cap_error_set(err, ETIMEDOUT, "the sandbox did not answer a connection request in %d ms",
                         timeout_ms);
  int32_t e = 0;
  int fd = -1;
  size_t n = 0;
  ssize_t got = receive_with_fds(connector, &e, sizeof e, &fd, 1, &n, 0);
  if (got != (ssize_t)sizeof e)
    return cap_error_set(err, EPIPE, "the sandbox is gone (its connector closed)");
  if (e || n != 1) {
    if (n)
      close(fd);
    return cap_error_errno(err, e ? e : EPROTO, "cannot connect to 127.0.0.1:%u inside the sandbox",
                           port);
  }
  return fd;
}

static void set_rlimit(int resource, uint64_t value)
{
  struct rlimit rl = {.rlim_cur = value, .rlim_max = value};
  setrlimit(resource, &rl);
}

/* The command: drop everything, then exec. Never returns. */
static void __attribute__((noreturn)) exec_command(const struct cap_spec *spec,
                                                   const struct sandbox_options *opt,
                                                   const struct sandbox_limits *lim,
                                                   const struct proxy *px, uid_t uid, gid_t gid)
{
  for (int cap = 0; cap <= 63; cap++)
    prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  CHILD_TRY(syscall(SYS_setgroups, 0, NULL) < 0 && errno != EPERM ? -1 : 0, "setgroups: %s", strerror(errno));
  CHILD_TRY(raw_setresgid(gid), "cannot switch to the sandbox gid: %s", strerror(errno));
  CHILD_TRY(raw_setresuid(uid), "cannot switch to the sandbox uid: %s", strerror(errno));

  if (spec->limits.nofile)
    set_rlimit(RLIMIT_NOFILE, spec->limits.nofile);
  set_rlimit(RLIMIT_CORE, 0);
  limits_apply_rlimits(lim, spec);

  CHILD_TRY(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs: %s", strerror(errno));
  struct cap_error err = {0};
  if (landlock_apply(spec, opt->argv[0], &err) < 0)
    child_fail("%s", err.message);
  if (seccomp_apply(spec, &err) < 0)
    child_fail("%s", err.message);

  const char *workdir = opt->workdir ? opt->workdir : spec->sandbox.private_tmp ? "/tmp" : "/";
  if (chdir(workdir) < 0)
    child_fail("cannot enter the working directory %s: %s", workdir, strerror(errno));

  /* a clean environment: a safe set plus what the caller passed */
  clearenv();
  setenv("PATH", "/usr/local/bin:/usr/bin:/bin", 1);
  setenv("HOME", spec->sandbox.private_tmp ? "/tmp" : "/", 1);
  setenv("TMPDIR", "/tmp", 1);
  setenv("LANG", "C.UTF-8", 1);
  setenv("CAPSULE_SANDBOX", "1", 1);
  if (spec->network.mode == CAP_NET_PROXY) {
    static const char *const vars[] = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy",
                                       "https_proxy", "all_proxy"};
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", PROXY_PORT);
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
      setenv(vars[i], url, 1);
    setenv("NO_PROXY", "localhost,127.0.0.1", 1);
    setenv("no_proxy", "localhost,127.0.0.1", 1);
    size_t n = 0;
    if (px && proxy_ca_bundle(px, &n)) { /* what common TLS stacks read for their trust */
      static const char *const ca_vars[] = {"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS",
                                            "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                                            "GIT_SSL_CAINFO"};
      for (size_t i = 0; i < sizeof ca_vars / sizeof ca_vars[0]; i++)
        setenv(ca_vars[i], PROXY_CA_FILE, 1);
    }
    char *const *phantoms = px ? proxy_tool_env(px, &n) : NULL;
    for (size_t i = 0; i < n; i++)
      putenv(phantoms[i]);
  }
  for (size_t i = 0; i < opt->n_extra_env; i++)
    putenv(opt->extra_env[i]);

  if (opt->redirect_stdio)
    for (int i = 0; i < 3; i++)
      CHILD_TRY(dup2(opt->stdio[i], i), "cannot set up the command's stdio: %s", strerror(errno));
  signal(SIGPIPE, SIG_DFL); /* capsule may ignore it; the tool gets the default */
  /* nothing inherited beyond stdio crosses into the tool */
  syscall(__NR_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
  execvp(opt->argv[0], opt->argv);
  child_fail("cannot run %s: %s", opt->argv[0], strerror(errno));
}

static uint64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* pid 1: reap everything; leave with the command's status. With a
 * connector (fd >= 0), also make connections in this namespace on request;
 * the connector's end means stop: SIGTERM to the command, SIGKILL two
 * seconds later. */
static void __attribute__((noreturn)) run_init(pid_t command, int connector)
{
  /* this process is a copy of capsule, with the caller's environment and
   * arguments in its memory: not dumpable, so the tool cannot read
   * /proc/1/environ or /proc/1/mem */
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, NULL);
  int sfd = signalfd(-1, &all, SFD_CLOEXEC);
  /* a command that ended before the mask above left no SIGCHLD to read:
   * one queued now makes the first pass reap it (else: a hang) */
  raise(SIGCHLD);
  uint64_t kill_at = 0;
  for (;;) {
    struct pollfd p[2] = {{.fd = sfd, .events = POLLIN}, {.fd = connector, .events = POLLIN}};
    int timeout = -1;
    if (kill_at) {
      uint64_t t = now_ms();
      if (t >= kill_at) {
        kill(command, SIGKILL);
        kill_at = 0;
      } else {
        timeout = (int)(kill_at - t);
      }
    }
    if (poll(p, connector >= 0 ? 2 : 1, timeout) < 0 && errno != EINTR)
      _exit(127);
    if (p[0].revents & POLLIN) {
      struct signalfd_siginfo si;
      if (read(sfd, &si, sizeof si) == sizeof si && si.ssi_signo != SIGCHLD)
        kill(command, (int)si.ssi_signo); /* forward what the supervisor sends */
      int status;
      pid_t w;
      while ((w = waitpid(-1, &status, WNOHANG)) > 0) {
        if (w != command)
          continue;
        if (WIFSIGNALED(status))
          _exit(128 + WTERMSIG(status));
        _exit(WEXITSTATUS(status));
      }
    }
    if (connector >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      uint16_t port;
      ssize_t got = recv(connector, &port, sizeof port, MSG_DONTWAIT);
      if (got == (ssize_t)sizeof port) {
        serve_connect(connector, port);
      } else if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
        close(connector);
        connector = -1;
        kill(command, SIGTERM);
        kill_at = now_ms() + 2000;
      }
    }
  }
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
static int supervise(pid_t pid, int pidfd, const struct cap_spec *spec,
                     struct sandbox_limits *lim, struct sandbox_result *res, struct cap_error *err)
{
  sigset_t fwd;
  sigemptyset(&fwd);
  sigaddset(&fwd, SIGINT);
  sigaddset(&fwd, SIGTERM);
  sigaddset(&fwd, SIGHUP);
  sigset_t old;
  sigprocmask(SIG_BLOCK, &fwd, &old);
  _cleanup_close_ int sfd = signalfd(-1, &fwd, SFD_CLOEXEC | SFD_NONBLOCK);
  uint64_t start = now_ms();
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
    uint64_t t = now_ms();
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
    struct pollfd fds[2] = {{.fd = pidfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
    if (poll(fds, 2, timeout) > 0 && (fds[1].revents & POLLIN)) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == sizeof si)
        kill(pid, (int)si.ssi_signo);
    }
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

  /* the root's mount point: on tmpfs (/dev/shm) unless TMPDIR says
   * otherwise; creating and removing it on a disk's /tmp cost ~2 ms */
  const char *tmpdir = getenv("TMPDIR");
  if (!tmpdir || !*tmpdir)
    tmpdir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  l.base = cap_xasprintf("%s/.capsule-XXXXXX", tmpdir);
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
    report_fd = l.report[1];
    char go;
    if (read(l.sync[0], &go, 1) != 1)
      _exit(127); /* the parent gave up */
    close(l.sync[0]);
    int joined = limits_join(&l.lim); /* before anything runs: see limits.c */
    CHILD_TRY(joined, "cannot move into the sandbox's cgroup: %s", strerror(-joined));
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* a copy of capsule's memory: not dumpable from the start (the command
     * regains it at exec), so no window before pid 1's own prctl */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    become_sandbox_ids(inside_uid, inside_gid);
    proxy_scrub(px); /* this copy of capsule's memory keeps no secret */
    build_root(spec, opt, l.base, px);
    if (flags & CLONE_NEWNET)
      loopback_up();
    if (proxied) {
      close(l.pass[0]);
      make_proxy_listeners(spec, l.pass[1]);
    }
    pid_t command = fork();
    if (command < 0)
      child_fail("fork: %s", strerror(errno));
    if (command == 0)
      exec_command(spec, opt, &l.lim, px, inside_uid, inside_gid);
    close(report_fd);
    /* pid 1 keeps nothing of capsule's open but the connector (as fd 3): a
     * pipe end it held would keep the command's stdin from ever reaching
     * its end */
    int connector = -1;
    if (opt->has_connector && dup2(opt->connector_fd, 3) == 3)
      connector = 3;
    syscall(__NR_close_range, connector < 0 ? 3 : 4, ~0U, 0);
    run_init(command, connector);
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
  if (r == 0 && proxied) {
    size_t want = 1 + spec->network.localhost.len;
    int got = receive_fds(l.pass[0], l.listen_fds, want);
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
  r = supervise(l.pid, pidfd, spec, &l.lim, res, err);
  return launch_release(&l, r);
}
