/* The unix-socket supervisor (see supervise.h). Why it performs the connect
 * itself instead of checking and answering SECCOMP_USER_NOTIF_FLAG_CONTINUE:
 * with CONTINUE the kernel runs the tool's connect afterwards, reading the
 * fd and the address again, and another thread of the tool can by then
 * have rewritten the address (a harmless path checked, the host's socket
 * connected) or put another socket at that fd number (an inet socket
 * checked, a unix one connected). So every connect, whatever its family,
 * is done here: the tool's socket taken with pidfd_getfd (the socket that
 * was at the fd when it asked, whatever the fd table holds later), the
 * address copied once out of its memory, the decision and the connect made
 * on those copies. What the decision mirrors:
 *   pathname unix: resolved in the sandbox's root (openat2 RESOLVE_IN_ROOT
 *     from /proc/PID/root, or RESOLVE_BENEATH from its working directory
 *     for a relative path), with the tool's file permissions (the worker
 *     thread takes the tool's fsuid, fsgid and no groups); reached only
 *     when it is a socket granted itself or lies on the sandbox's private
 *     /tmp or /dev/shm; else EACCES, as Landlock ABI 9 answers.
 *   abstract unix: only in the sandbox's own network namespace (Landlock
 *     scoping would keep it there; this connect is not the tool's own).
 *   TCP: the ports Landlock allows (landlock_connect_ports) where Landlock
 *     handles TCP; a connect from here is not Landlock-checked.
 * The connect can block (a full backlog, a slow peer), so each one runs in
 * a thread of its own and the supervise loop never waits on the tool. */
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "net/proxy.h"
#include "sandbox/sandbox.h"
#include "sandbox/capture.h"
#include "sandbox/supervise.h"
#include "sandbox/supervise_internal.h"

#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434
#endif
#ifndef __NR_pidfd_getfd
#define __NR_pidfd_getfd 438
#endif
#ifndef __NR_openat2
#define __NR_openat2 437
#endif
#define PIDFD_THREAD_ O_EXCL /* 6.9: a pidfd for a thread, not only a leader */

int supervise_pass_fd = -1;
unsigned supervise_traps;

void supervise_unref(struct supervise *sup)
{
  if (atomic_fetch_sub(&sup->refs, 1) != 1)
    return;
  supervise_open_free(sup);
  for (int i = 0; i < 2; i++)
    if (sup->channel[i] >= 0)
      close(sup->channel[i]);
  if (sup->listener >= 0)
    close(sup->listener);
  free(sup);
}

/* What the connect supervisor needs (below Landlock ABI 9). */
static void prepare_connect(struct supervise *sup, const struct cap_spec *spec, int abi)
{
  sup->traps |= SUPERVISE_TRAP_CONNECT;
  sup->own_netns = spec->network.mode != CAP_NET_UNRESTRICTED;
  sup->private_tmp = spec->sandbox.private_tmp;
  sup->check_tcp = abi >= 4 && spec->network.mode != CAP_NET_UNRESTRICTED && !capture_planned(spec);
  sup->n_ports = landlock_connect_ports(spec, sup->ports, sizeof sup->ports / sizeof sup->ports[0]);
  for (size_t i = 0; i < spec->n_grants && sup->n_granted < SUPERVISE_MAX_GRANTED; i++) {
    struct stat st;
    if (sandbox_grant_is_unix_socket(&spec->grants[i]) && lstat(spec->grants[i].path, &st) == 0)
      sup->granted[sup->n_granted++] = (struct socket_id){st.st_dev, st.st_ino};
  }
}

int supervise_prepare(struct supervise **ret, const struct cap_spec *spec,
                      const struct sandbox_options *opt, uid_t tool_uid, gid_t tool_gid,
                      struct cap_error *err)
{
  *ret = NULL;
  int abi = landlock_abi();
  if (abi >= SUPERVISE_LANDLOCK_UNIX_ABI && !spec->process.expand_opens)
    return 0;
  /* ENOSYS before 5.6: without them no connect could be performed, and
   * none may be let through unchecked */
  if ((syscall(__NR_pidfd_getfd, -1, 0, 0) < 0 && errno == ENOSYS) ||
      (syscall(__NR_openat2, -1, "", NULL, 0) < 0 && errno == ENOSYS))
    return cap_error_set(err, ENOTSUP,
                         "this kernel can neither control unix-socket connects with Landlock "
                         "(ABI %d, needs %d) nor supervise them or opens (needs pidfd_getfd "
                         "and openat2, Linux 5.6); refusing to run without that boundary",
                         abi, SUPERVISE_LANDLOCK_UNIX_ABI);
  struct supervise *sup = cap_xcalloc(1, sizeof *sup);
  atomic_init(&sup->refs, 1);
  atomic_init(&sup->in_flight, 0);
  sup->listener = -1;
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sup->channel) < 0) {
    free(sup);
    return cap_error_errno(err, errno, "cannot create the supervisor's channel");
  }
  sup->drop_creds = geteuid() == 0;
  sup->tool_uid = tool_uid;
  sup->tool_gid = tool_gid;
  if (abi < SUPERVISE_LANDLOCK_UNIX_ABI)
    prepare_connect(sup, spec, abi);
  if (spec->process.expand_opens) {
    sup->traps |= SUPERVISE_TRAP_OPEN;
    sup->landlock = abi > 0;
    supervise_open_prepare(sup, spec, opt);
  }
  *ret = sup;
  return 0;
}

void supervise_in_child(struct supervise *sup)
{
  if (!sup)
    return;
  close(sup->channel[0]);
  sup->channel[0] = -1;
  supervise_pass_fd = sup->channel[1];
  supervise_traps = sup->traps;
}

int supervise_send_listener(int listener, struct cap_error *err)
{
  char control[CMSG_SPACE(sizeof(int))];
  memset(control, 0, sizeof control);
  struct iovec iov = {.iov_base = "n", .iov_len = 1};
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &listener, sizeof(int));
  ssize_t n = sendmsg(supervise_pass_fd, &msg, MSG_NOSIGNAL);
  close(supervise_pass_fd);
  supervise_pass_fd = -1;
  if (n != 1)
    return cap_error_errno(err, n < 0 ? errno : EPROTO, "cannot hand the supervisor its listener");
  return 0;
}

int supervise_start(struct supervise *sup, struct cap_error *err)
{
  if (!sup)
    return 0;
  close(sup->channel[1]);
  sup->channel[1] = -1;
  char data, control[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {.iov_base = &data, .iov_len = 1};
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
  ssize_t n = recvmsg(sup->channel[0], &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  struct cmsghdr *cm = n == 1 ? CMSG_FIRSTHDR(&msg) : NULL;
  if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
      cm->cmsg_len != CMSG_LEN(sizeof(int)))
    return cap_error_set(err, EPROTO, "the sandbox did not hand over its unix-socket supervisor");
  memcpy(&sup->listener, CMSG_DATA(cm), sizeof(int));
  return 0;
}

int supervise_fd(const struct supervise *sup) { return sup && !sup->ended ? sup->listener : -1; }

/* ---- one connect, in a worker thread ---- */

struct job {
  struct supervise *sup;
  struct seccomp_notif req;
};

bool supervise_still_waiting(const struct supervise *sup, uint64_t id)
{
  return ioctl(sup->listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

static bool still_waiting(const struct job *j)
{
  return supervise_still_waiting(j->sup, j->req.id);
}

/* The tool's thread group leader, for kernels whose pidfds name leaders only. */
static pid_t thread_group_of(pid_t tid)
{
  char path[64], line[128];
  snprintf(path, sizeof path, "/proc/%d/status", tid);
  FILE *f = fopen(path, "re");
  pid_t tgid = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "Tgid: %d", &tgid) == 1)
      break;
  if (f)
    fclose(f);
  return tgid;
}

/* The tool's socket at fd (the one there now), or -errno. */
static int take_socket(const struct job *j, int fd)
{
  pid_t pid = (pid_t)j->req.pid;
  _cleanup_close_ int pidfd = (int)syscall(__NR_pidfd_open, pid, PIDFD_THREAD_);
  if (pidfd < 0 && errno == EINVAL)
    pidfd = (int)syscall(__NR_pidfd_open, thread_group_of(pid), 0);
  if (pidfd < 0 || !still_waiting(j)) /* the pid named the task that asked */
    return -ESRCH;
  int sock = (int)syscall(__NR_pidfd_getfd, pidfd, fd, 0);
  return sock < 0 ? -EBADF : sock;
}

/* What the decision needs from the sandbox, taken with capsule's rights
 * before the thread gives them up: the tool's root and working directory,
 * and the devices of the filesystems the sandbox mounted for itself (its
 * private /tmp, /dev/shm), where every socket was bound by the tool. */
struct view {
  int root, cwd;
  dev_t devs[2];
  size_t n_devs;
};

static void view_close(struct view *v)
{
  if (v->root >= 0)
    close(v->root);
  if (v->cwd >= 0)
    close(v->cwd);
}

static int view_open(const struct job *j, struct view *v)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/root", (int)j->req.pid);
  v->root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  snprintf(path, sizeof path, "/proc/%d/cwd", (int)j->req.pid);
  v->cwd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  /* the pid named the task that asked; without a working directory only a
   * relative path fails (EBADF from openat2) */
  if (v->root < 0 || !still_waiting(j))
    return -ESRCH;
  static const char *const dirs[] = {"tmp", "dev/shm"};
  v->n_devs = 0;
  for (size_t i = j->sup->private_tmp ? 0 : 1; i < 2; i++) {
    struct stat st;
    if (fstatat(v->root, dirs[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
      v->devs[v->n_devs++] = st.st_dev;
  }
  return 0;
}

/* The thread becomes the tool's host uid and gid with no groups and no
 * capabilities, for good (raw calls change this thread alone; it ends after
 * the connect): paths resolve with the tool's permissions, and the peer of
 * a connection sees the tool's uid in SO_PEERCRED, not capsule's root. */
static int become_tool(const struct supervise *sup)
{
  if (!sup->drop_creds)
    return 0; /* unprivileged: capsule already is the tool's uid */
  if (syscall(SYS_setgroups, 0, NULL) < 0 ||
      syscall(SYS_setresgid, sup->tool_gid, sup->tool_gid, sup->tool_gid) < 0 ||
      syscall(SYS_setresuid, sup->tool_uid, sup->tool_uid, sup->tool_uid) < 0)
    return -EPERM;
  return 0;
}

/* The pathname socket as the sandbox sees it: an O_PATH fd, or -errno. */
static int resolve_in_sandbox(const struct view *v, const char *path)
{
  /* absolute: inside the sandbox's root, as the tool would; relative: below
   * its working directory (the sandbox's root is not reachable from there) */
  struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                         .resolve = RESOLVE_NO_MAGICLINKS |
                                    (path[0] == '/' ? RESOLVE_IN_ROOT : RESOLVE_BENEATH)};
  int fd = (int)syscall(__NR_openat2, path[0] == '/' ? v->root : v->cwd, path, &how, sizeof how);
  if (fd < 0)
    return errno == EXDEV ? -EACCES : -errno;
  return fd;
}

static int connect_unix_path(const struct job *j, const struct view *v, int sock,
                             const struct sockaddr_un *addr, socklen_t len)
{
  if (len > sizeof *addr)
    return -EINVAL; /* as the kernel answers an AF_UNIX address longer than this */
  char path[sizeof addr->sun_path + 1];
  /* the address may be longer than a sockaddr_un (up to a sockaddr_storage):
   * the kernel reads at most sun_path's size, and so does this copy */
  size_t n = len > offsetof(struct sockaddr_un, sun_path)
                 ? len - offsetof(struct sockaddr_un, sun_path)
                 : 0;
  if (n > sizeof addr->sun_path)
    n = sizeof addr->sun_path;
  memcpy(path, addr->sun_path, n);
  path[n] = '\0'; /* the kernel's reading: up to the first NUL or the length */
  _cleanup_close_ int target = resolve_in_sandbox(v, path);
  if (target < 0)
    return target;
  struct stat st;
  if (fstat(target, &st) < 0 || !S_ISSOCK(st.st_mode))
    return -ECONNREFUSED; /* what connect says of a path that is no socket */
  bool allowed = false;
  for (size_t i = 0; i < v->n_devs; i++)
    allowed |= v->devs[i] == st.st_dev;
  for (size_t i = 0; i < j->sup->n_granted && !allowed; i++)
    allowed = j->sup->granted[i].dev == st.st_dev && j->sup->granted[i].ino == st.st_ino;
  if (!allowed)
    return -EACCES;
  struct sockaddr_un via = {.sun_family = AF_UNIX};
  snprintf(via.sun_path, sizeof via.sun_path, "/proc/self/fd/%d", target);
  return connect(sock, (struct sockaddr *)&via, sizeof via) < 0 ? -errno : 0;
}

/* Where Landlock handles TCP, the ports it allows (this connect is not the
 * tool's own, so Landlock does not see it). */
static bool tcp_port_allowed(const struct supervise *sup, const struct sockaddr_storage *addr)
{
  uint16_t port = ntohs(((const struct sockaddr_in *)addr)->sin_port); /* same offset in v6 */
  for (size_t i = 0; i < sup->n_ports; i++)
    if (sup->ports[i] == port)
      return true;
  return false;
}

static int decide_and_connect(const struct job *j, const struct view *v, int sock, int domain,
                              const struct sockaddr_storage *addr, socklen_t len)
{
  int type = 0;
  socklen_t ol = sizeof type;
  getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &ol);
  bool unix_named = domain == AF_UNIX && len > offsetof(struct sockaddr_un, sun_path) &&
                    addr->ss_family == AF_UNIX;
  if (unix_named && ((const struct sockaddr_un *)addr)->sun_path[0] != '\0')
    return connect_unix_path(j, v, sock, (const struct sockaddr_un *)addr, len);
  if (unix_named && !j->sup->own_netns)
    return -EPERM; /* the host's abstract names: Landlock's scoping answer */
  if (j->sup->check_tcp && (domain == AF_INET || domain == AF_INET6) && type == SOCK_STREAM &&
      len >= sizeof(struct sockaddr_in) && addr->ss_family == domain &&
      !tcp_port_allowed(j->sup, addr))
    return -EACCES;
  /* netlink: a peer or groups need CAP_NET_ADMIN, which capsule may hold
   * over the sandbox's namespace (it owns its user namespace) */
  const struct sockaddr_nl *nl = (const struct sockaddr_nl *)addr;
  if (domain == AF_NETLINK && len >= sizeof *nl && addr->ss_family == AF_NETLINK &&
      (nl->nl_pid || nl->nl_groups))
    return -EPERM;
  return connect(sock, (const struct sockaddr *)addr, len) < 0 ? -errno : 0;
}

/* The connect the tool asked for: its socket and address taken once, the
 * decision and the connect made on those, as the tool's uid. Returns 0 or
 * -errno. */
static int perform_connect(const struct job *j)
{
  int fd = (int)(uint32_t)j->req.data.args[0]; /* the kernel reads ints */
  int len = (int)(uint32_t)j->req.data.args[2];
  struct sockaddr_storage addr = {0};
  if (len < 0 || (size_t)len > sizeof addr)
    return -EINVAL;
  _cleanup_close_ int sock = take_socket(j, fd);
  if (sock < 0)
    return sock;
  int domain = 0;
  socklen_t ol = sizeof domain;
  if (getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &domain, &ol) < 0)
    return -errno; /* ENOTSOCK, as the tool's connect would say */
  struct iovec local = {.iov_base = &addr, .iov_len = (size_t)len};
  struct iovec remote = {.iov_base = (void *)(uintptr_t)j->req.data.args[1],
                         .iov_len = (size_t)len};
  if (len && process_vm_readv((pid_t)j->req.pid, &local, 1, &remote, 1, 0) != len)
    return -EFAULT;
  struct view v = {.root = -1, .cwd = -1};
  int r = domain == AF_UNIX ? view_open(j, &v) : 0;
  if (r == 0 && !still_waiting(j)) /* the memory read was the asking task's */
    r = -ESRCH;
  if (r == 0)
    r = become_tool(j->sup);
  if (r == 0)
    r = decide_and_connect(j, &v, sock, domain, &addr, (socklen_t)len);
  view_close(&v);
  return r;
}

void supervise_answer(const struct supervise *sup, uint64_t id, int result)
{
  struct seccomp_notif_resp resp = {
      .id = id, .error = result < 0 ? result : 0, .val = result > 0 ? result : 0};
  /* ENOENT: the task is gone or was interrupted; nothing to answer */
  ioctl(sup->listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
}

void supervise_worker_done(struct supervise *sup)
{
  atomic_fetch_sub(&sup->in_flight, 1);
  supervise_unref(sup);
}

bool supervise_spawn(struct supervise *sup, void *(*fn)(void *), void *arg)
{
  pthread_attr_t attr;
  pthread_t t;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 << 10); /* sanitizer builds need room */
  atomic_fetch_add(&sup->refs, 1);
  bool ok = atomic_fetch_add(&sup->in_flight, 1) < SUPERVISE_MAX_IN_FLIGHT &&
            pthread_create(&t, &attr, fn, arg) == 0;
  if (!ok) {
    atomic_fetch_sub(&sup->in_flight, 1);
    atomic_fetch_sub(&sup->refs, 1);
  }
  pthread_attr_destroy(&attr);
  return ok;
}

static void *worker(void *p)
{
  struct job *j = p;
  struct supervise *sup = j->sup;
  supervise_answer(sup, j->req.id, perform_connect(j));
  free(j);
  supervise_worker_done(sup);
  return NULL;
}

void supervise_serve(struct supervise *sup, short revents)
{
  if (!sup || sup->listener < 0 || sup->ended)
    return;
  if (!(revents & POLLIN)) {
    /* POLLHUP: every filtered task is gone (a RECV would wait forever) */
    sup->ended |= (revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
    return;
  }
  struct job *j = cap_xcalloc(1, sizeof *j);
  if (ioctl(sup->listener, SECCOMP_IOCTL_NOTIF_RECV, &j->req) < 0) {
    /* ENOENT: the task left before we took it; anything else (the
     * listener hangs up once every filtered task is gone) ends serving,
     * while workers may still answer through the listener */
    sup->ended |= errno != EINTR && errno != ENOENT;
    free(j);
    return;
  }
  if (supervise_is_open(j->req.data.nr)) { /* supervise_open.c */
    supervise_open_handle(sup, &j->req);
    free(j);
    return;
  }
  j->sup = sup;
  if (!supervise_spawn(sup, worker, j)) {
    supervise_answer(sup, j->req.id, -EAGAIN);
    free(j);
  }
}

void supervise_free(struct supervise *sup)
{
  if (sup)
    supervise_unref(sup);
}
