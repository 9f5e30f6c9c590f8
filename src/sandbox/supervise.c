/* The supervisor's notification loop and pool, and the unix-socket
 * supervisor (see supervise.h; the opens of exec_strategy "supervised" are
 * supervise_open.c's, served by the same pool). Why it performs the connect
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
 * The connect can block (a full backlog, a slow peer), so the connects run
 * in a pool of threads of their own, never in the supervise loop: the idle
 * threads wait for notifications together (the listener in an epoll set of
 * each, EPOLLEXCLUSIVE: one is woken per notification), the one woken
 * takes it and performs the connect itself, and a new thread is made only
 * when no other is left waiting: a connect costs no thread creation and
 * no hand-off. The pool's threads keep capsule's ids: an inet connect needs
 * none (nothing checks the caller's on a TCP connect: the socket, its
 * owner and its namespace are the tool's); a unix connect as root, which
 * must be made with the tool's ids, and no thread can take root's back
 * after that, is finished in a thread of its own that a pool thread makes
 * (a thread inherits its maker's ids). */
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
#include <sys/epoll.h>
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

#ifndef __NR_pidfd_getfd
#define __NR_pidfd_getfd 438
#endif
#ifndef __NR_openat2
#define __NR_openat2 437
#endif
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS /* 6.6 */
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

int supervise_pass_fd = -1;
unsigned supervise_traps;

void supervise_unref(struct supervise *sup)
{
  if (atomic_fetch_sub(&sup->refs, 1) != 1)
    return;
  supervise_open_free(sup);
  for (int i = 0; i < 2; i++) {
    if (sup->channel[i] >= 0)
      close(sup->channel[i]);
    if (sup->stop[i] >= 0)
      close(sup->stop[i]);
  }
  if (sup->listener >= 0)
    close(sup->listener);
  for (size_t i = 0; i < sup->n_pidfds; i++)
    close(sup->pidfds[i].fd);
  pthread_mutex_destroy(&sup->pidfd_lock);
  pthread_mutex_destroy(&sup->proxy_lock);
  pthread_mutex_destroy(&sup->lock);
  pthread_mutex_destroy(&sup->recv_lock);
  free(sup);
}

/* What the connect supervisor needs (below Landlock ABI 9). */
static void setup_connects(struct supervise *sup, const struct cap_spec *spec, int abi)
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
  sup->listener = -1;
  sup->stop[0] = sup->stop[1] = -1;
  pthread_mutex_init(&sup->lock, NULL);
  pthread_mutex_init(&sup->recv_lock, NULL);
  pthread_mutex_init(&sup->pidfd_lock, NULL);
  pthread_mutex_init(&sup->proxy_lock, NULL);
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sup->channel) < 0 ||
      pipe2(sup->stop, O_CLOEXEC) < 0) {
    int e = errno;
    supervise_unref(sup);
    return cap_error_errno(err, e, "cannot create the supervisor's channel");
  }
  sup->drop_creds = geteuid() == 0;
  sup->tool_uid = tool_uid;
  sup->tool_gid = tool_gid;
  if (abi < SUPERVISE_LANDLOCK_UNIX_ABI)
    setup_connects(sup, spec, abi);
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

static bool spawn_locked(struct supervise *sup);

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
  /* 6.6: the tool and the thread serving it hand the CPU to each other
   * (the wake-ups on the current CPU), instead of waking an idle one: a
   * connect's round trip costs a switch, not two cross-CPU wake-ups.
   * Older kernels: EINVAL, the usual wake-ups. */
  ioctl(sup->listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
  return 0;
}

int supervise_fd(const struct supervise *sup)
{
  return sup && !sup->pool_started ? sup->listener : -1;
}

void supervise_serve(struct supervise *sup, short revents)
{
  if (!sup || sup->pool_started)
    return;
  if (!(revents & POLLIN)) { /* POLLHUP: the tool is gone without a connect */
    sup->pool_started = true;
    return;
  }
  pthread_mutex_lock(&sup->lock);
  sup->pool_started = spawn_locked(sup);
  pthread_mutex_unlock(&sup->lock);
  if (sup->pool_started)
    return;
  /* no thread to be had: this one refuses the connect, and polls again */
  struct seccomp_notif req = {0};
  if (ioctl(sup->listener, SECCOMP_IOCTL_NOTIF_RECV, &req) == 0)
    supervise_answer(sup, req.id, -EAGAIN);
}

/* ---- one connect, in a thread of the pool ---- */

struct view;

struct job {
  struct supervise *sup;
  struct seccomp_notif req;
  /* what prepare_connect took, with capsule's rights */
  int sock, domain;
  struct sockaddr_storage addr;
  socklen_t len;
  struct view *view;
};

bool supervise_still_waiting(const struct supervise *sup, uint64_t id)
{
  return ioctl(sup->listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

static bool still_waiting(const struct job *j)
{
  return supervise_still_waiting(j->sup, j->req.id);
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

static int sock_type(int sock)
{
  int type = 0;
  socklen_t ol = sizeof type;
  getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &ol);
  return type;
}

static int decide_and_connect(const struct job *j, const struct view *v, int sock, int domain,
                              const struct sockaddr_storage *addr, socklen_t len)
{
  bool unix_named = domain == AF_UNIX && len > offsetof(struct sockaddr_un, sun_path) &&
                    addr->ss_family == AF_UNIX;
  if (unix_named && ((const struct sockaddr_un *)addr)->sun_path[0] != '\0')
    return connect_unix_path(j, v, sock, (const struct sockaddr_un *)addr, len);
  if (unix_named && !j->sup->own_netns)
    return -EPERM; /* the host's abstract names: Landlock's scoping answer */
  if (j->sup->check_tcp && (domain == AF_INET || domain == AF_INET6) &&
      len >= sizeof(struct sockaddr_in) && addr->ss_family == domain &&
      !tcp_port_allowed(j->sup, addr) && sock_type(sock) == SOCK_STREAM)
    return -EACCES;
  /* netlink: a peer or groups need CAP_NET_ADMIN, which capsule may hold
   * over the sandbox's namespace (it owns its user namespace) */
  const struct sockaddr_nl *nl = (const struct sockaddr_nl *)addr;
  if (domain == AF_NETLINK && len >= sizeof *nl && addr->ss_family == AF_NETLINK &&
      (nl->nl_pid || nl->nl_groups))
    return -EPERM;
  return connect(sock, (const struct sockaddr *)addr, len) < 0 ? -errno : 0;
}

/* The connect the tool asked for, its first half, with capsule's rights:
 * its socket and address taken once (and, for a unix socket, the tool's
 * view of its files). 0, or -errno to answer; j->sock is then closed. */
static int prepare_connect(struct job *j)
{
  int fd = (int)(uint32_t)j->req.data.args[0]; /* the kernel reads ints */
  int len = (int)(uint32_t)j->req.data.args[2];
  if (len < 0 || (size_t)len > sizeof j->addr)
    return -EINVAL;
  j->len = (socklen_t)len;
  j->sock = supervise_take_socket(j->sup, (pid_t)j->req.pid, j->req.id, fd);
  if (j->sock < 0)
    return j->sock;
  socklen_t ol = sizeof j->domain;
  int r = getsockopt(j->sock, SOL_SOCKET, SO_DOMAIN, &j->domain, &ol) < 0 ? -errno : 0;
  struct iovec local = {.iov_base = &j->addr, .iov_len = (size_t)len};
  struct iovec remote = {.iov_base = (void *)(uintptr_t)j->req.data.args[1],
                         .iov_len = (size_t)len};
  if (r == 0 && len && process_vm_readv((pid_t)j->req.pid, &local, 1, &remote, 1, 0) != len)
    r = -EFAULT;
  if (r == 0 && j->domain == AF_UNIX) {
    j->view = cap_xcalloc(1, sizeof *j->view);
    *j->view = (struct view){.root = -1, .cwd = -1};
    r = view_open(j, j->view);
  }
  if (r == 0 && !still_waiting(j)) /* the memory read was the asking task's */
    r = -ESRCH;
  if (r < 0) { /* ENOTSOCK from SO_DOMAIN, as the tool's connect would say */
    close(j->sock);
    j->sock = -1;
  }
  return r;
}

/* What prepare_connect took, released without a connect. */
static void finish_connect_abandon(struct job *j)
{
  if (j->view)
    view_close(j->view);
  free(j->view);
  j->view = NULL;
  close(j->sock);
  j->sock = -1;
}

/* A unix path resolves with the tool's permissions and a unix peer sees
 * the tool's uid; nothing reads the caller's ids on an inet connect. */
static bool needs_tool_ids(const struct job *j)
{
  return j->sup->drop_creds && j->domain != AF_INET && j->domain != AF_INET6;
}

/* Its second half: the decision and the connect on what was taken (as the
 * tool's ids when needs_tool_ids: then this thread keeps them). Releases
 * what prepare_connect took but the socket, which the caller closes once
 * the tool is answered (finish_release): the tool waits for no close. */
static int finish_connect(struct job *j)
{
  struct view none = {.root = -1, .cwd = -1};
  struct view *v = j->view ? j->view : &none;
  int r = needs_tool_ids(j) ? become_tool(j->sup) : 0;
  if (r == 0)
    r = decide_and_connect(j, v, j->sock, j->domain, &j->addr, j->len);
  view_close(v);
  free(j->view);
  j->view = NULL;
  return r;
}

static void finish_release(struct job *j)
{
  close(j->sock);
  j->sock = -1;
}

void supervise_answer(const struct supervise *sup, uint64_t id, int result)
{
  struct seccomp_notif_resp resp = {
      .id = id, .error = result < 0 ? result : 0, .val = result > 0 ? result : 0};
  /* ENOENT: the task is gone or was interrupted; nothing to answer */
  ioctl(sup->listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
}

/* One thread's wait: 1 with a notification in req, 0 with none (another
 * thread took it, or the task left or was interrupted), -1 when serving
 * ends (every filtered task is gone, or supervise_free). RECV waits while
 * no notification is pending, and nothing would end that wait: it is made
 * only under recv_lock, right after poll said one is pending. */
static int receive(struct supervise *sup, int ep, struct seccomp_notif *req)
{
  struct epoll_event ev[2];
  int n = epoll_wait(ep, ev, 2, -1);
  if (n < 0)
    return errno == EINTR ? 0 : -1;
  bool ready = false;
  for (int i = 0; i < n; i++) {
    if (ev[i].data.u32 == 1 || !(ev[i].events & EPOLLIN))
      return -1; /* stopped, or POLLHUP: every filtered task is gone */
    ready = true;
  }
  if (!ready)
    return 0;
  pthread_mutex_lock(&sup->recv_lock);
  struct pollfd p = {.fd = sup->listener, .events = POLLIN};
  int got = 0;
  if (poll(&p, 1, 0) == 1 && (p.revents & POLLIN)) {
    memset(req, 0, sizeof *req); /* the kernel wants it zeroed */
    if (ioctl(sup->listener, SECCOMP_IOCTL_NOTIF_RECV, req) == 0)
      got = 1;
    else if (errno != EINTR && errno != ENOENT)
      got = -1;
  }
  pthread_mutex_unlock(&sup->recv_lock);
  return got;
}

/* This thread's epoll set: the listener (one waiter woken per
 * notification) and the stop pipe (all of them); -1 on failure. */
static int pool_epoll(const struct supervise *sup)
{
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event l = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.u32 = 0};
  struct epoll_event s = {.events = EPOLLIN, .data.u32 = 1};
  if (ep >= 0 && (epoll_ctl(ep, EPOLL_CTL_ADD, sup->listener, &l) < 0 ||
                  epoll_ctl(ep, EPOLL_CTL_ADD, sup->stop[0], &s) < 0)) {
    close(ep);
    return -1;
  }
  return ep;
}

/* A connect that needs the tool's ids (as root) ends in a thread of its
 * own, made by a pool thread (which keeps root's: a thread inherits its
 * maker's ids), since no thread can take root's back. */
static void *tool_ids_main(void *p)
{
  struct job *j = p;
  struct supervise *sup = j->sup;
  supervise_answer(sup, j->req.id, finish_connect(j));
  finish_release(j);
  free(j);
  supervise_worker_done(sup);
  return NULL;
}

/* j, prepared, finished in a thread of its own; false when none could be
 * made (then it is answered EAGAIN). */
static bool finish_in_thread(struct job *j)
{
  struct job *copy = cap_xcalloc(1, sizeof *copy);
  *copy = *j;
  pthread_attr_t attr;
  pthread_t t;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 << 10); /* sanitizer builds need room */
  atomic_fetch_add(&j->sup->refs, 1);
  bool ok = pthread_create(&t, &attr, tool_ids_main, copy) == 0;
  pthread_attr_destroy(&attr);
  if (!ok) {
    atomic_fetch_sub(&j->sup->refs, 1);
    free(copy);
  }
  return ok;
}

bool supervise_spawn(struct supervise *sup, void *(*fn)(void *), void *arg)
{
  pthread_mutex_lock(&sup->lock);
  bool ok = sup->busy < SUPERVISE_MAX_IN_FLIGHT && !sup->stopping;
  if (ok) {
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 << 10); /* sanitizer builds need room */
    atomic_fetch_add(&sup->refs, 1);
    ok = pthread_create(&t, &attr, fn, arg) == 0;
    pthread_attr_destroy(&attr);
    if (ok)
      sup->busy++;
    else
      atomic_fetch_sub(&sup->refs, 1);
  }
  pthread_mutex_unlock(&sup->lock);
  return ok;
}

void supervise_worker_done(struct supervise *sup)
{
  pthread_mutex_lock(&sup->lock);
  sup->busy--;
  pthread_mutex_unlock(&sup->lock);
  supervise_unref(sup);
}

void supervise_attach_proxy(struct supervise *sup, struct proxy *px)
{
  if (!sup || !(sup->traps & SUPERVISE_TRAP_CONNECT) || !sup->own_netns)
    return;
  pthread_mutex_lock(&sup->proxy_lock);
  sup->proxy = px;
  pthread_mutex_unlock(&sup->proxy_lock);
  if (px)
    proxy_expect_supervisor(px);
}

/* A connection this thread just made for the tool on j's socket, to
 * j's address in the sandbox's namespace: when it is to a listener of the
 * sandbox's proxy, served here to its end, so that no other thread is
 * woken for it (the thread that waits for the next notification is there
 * already). The socket is released either way, before any serving. */
static void serve_made(struct job *j)
{
  struct supervise *sup = j->sup;
  pthread_mutex_lock(&sup->proxy_lock);
  struct proxy *px = sup->proxy && proxy_hold(sup->proxy) ? sup->proxy : NULL;
  pthread_mutex_unlock(&sup->proxy_lock);
  if (px)
    proxy_connected(px, (const struct sockaddr *)&j->addr, j->len, &j->sock);
  if (j->sock >= 0)
    finish_release(j);
}

/* One notification taken (locked): performed (a connect here, an open by
 * supervise_open.c), or answered EAGAIN past SUPERVISE_MAX_IN_FLIGHT at
 * once. */
static void serve_locked(struct supervise *sup, const struct seccomp_notif *req)
{
  if (sup->busy >= SUPERVISE_MAX_IN_FLIGHT) {
    pthread_mutex_unlock(&sup->lock);
    supervise_answer(sup, req->id, -EAGAIN);
    pthread_mutex_lock(&sup->lock);
    return;
  }
  sup->busy++;
  if (sup->waiting == 0) /* someone must wait for the next one */
    spawn_locked(sup);
  pthread_mutex_unlock(&sup->lock);
  if (supervise_is_open(req->data.nr)) {
    supervise_open_handle(sup, req);
    pthread_mutex_lock(&sup->lock);
    sup->busy--;
    return;
  }
  struct job j = {.sup = sup, .req = *req, .sock = -1};
  int r = prepare_connect(&j);
  if (r == 0 && needs_tool_ids(&j)) {
    if (finish_in_thread(&j)) {
      pthread_mutex_lock(&sup->lock); /* busy until that thread is done */
      return;
    }
    finish_connect_abandon(&j);
    r = -EAGAIN;
  } else if (r == 0) {
    r = finish_connect(&j);
  }
  supervise_answer(sup, j.req.id, r);
  /* a non-blocking connect (curl's, Node's, Go's) answers EINPROGRESS
   * with the handshake under way on loopback: served here too, or the
   * sweep would find it only up to PROXY_SWEEP_MS later; a UDP connect
   * (glibc's resolver, to 127.0.0.53:53 at each query) has nothing to
   * accept: proxy_connected reads the socket's type before it would wait
   * (only then: a TCP connect's connection is there to accept at once) */
  bool made =
      (r == 0 || r == -EINPROGRESS) && (j.domain == AF_INET || j.domain == AF_INET6) && j.sock >= 0;
  if (!made && j.sock >= 0)
    finish_release(&j);
  pthread_mutex_lock(&sup->lock);
  sup->busy--;
  if (made) {
    pthread_mutex_unlock(&sup->lock);
    serve_made(&j);
    pthread_mutex_lock(&sup->lock);
  }
}

static void *pool_main(void *p)
{
  struct supervise *sup = p;
  int ep = pool_epoll(sup);
  pthread_mutex_lock(&sup->lock);
  while (ep >= 0 && !sup->stopping) {
    sup->waiting++;
    pthread_mutex_unlock(&sup->lock);
    struct seccomp_notif req;
    int got = receive(sup, ep, &req);
    pthread_mutex_lock(&sup->lock);
    sup->waiting--;
    if (got < 0) {
      sup->stopping = true; /* nothing more to serve: every thread leaves */
      break;
    }
    if (got > 0)
      serve_locked(sup, &req);
  }
  sup->threads--;
  pthread_mutex_unlock(&sup->lock);
  if (ep >= 0)
    close(ep);
  supervise_unref(sup);
  return NULL;
}

/* A new thread for the pool (locked); false when none can be made: then
 * the connects wait for a busy one. */
static bool spawn_locked(struct supervise *sup)
{
  if (sup->threads > SUPERVISE_MAX_IN_FLIGHT || sup->stopping)
    return false;
  pthread_attr_t attr;
  pthread_t t;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 << 10); /* sanitizer builds need room */
  atomic_fetch_add(&sup->refs, 1);
  bool ok = pthread_create(&t, &attr, pool_main, sup) == 0;
  pthread_attr_destroy(&attr);
  if (!ok) {
    atomic_fetch_sub(&sup->refs, 1);
    return false;
  }
  sup->threads++;
  return true;
}

void supervise_free(struct supervise *sup)
{
  if (!sup)
    return;
  pthread_mutex_lock(&sup->lock);
  sup->stopping = true;
  pthread_mutex_unlock(&sup->lock);
  if (write(sup->stop[1], "x", 1) < 0) {
    /* a new pipe always takes a byte */
  }
  supervise_unref(sup); /* connects still in flight finish on their own */
}
