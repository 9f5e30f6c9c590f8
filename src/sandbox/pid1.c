/* The sandbox's pid 1 and its network side: loopback up in the new network
 * namespace, the proxy's listening sockets made there and handed to the
 * supervisor, and the init that reaps everything, forwards the supervisor's
 * signals, and makes TCP connections inside the namespace on request (the
 * connector of a long-running service). Like nspawn's stub pid 1, it keeps
 * nothing of capsule open but the connector. */
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "net/egress_plan.h"
#include "net/proxy.h"
#include "sandbox/spawn_internal.h"

/* A socket bound to addr:port (network order address) in this namespace,
 * listening when it is a stream. */
static int bound_socket(int type, const uint8_t addr[4], uint16_t port)
{
  int l = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  memcpy(&a.sin_addr, addr, 4);
  if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 ||
      ((type & SOCK_STREAM) && listen(l, 4096) < 0))
    sandbox_child_fail("cannot listen on %u.%u.%u.%u:%u: %s", addr[0], addr[1], addr[2], addr[3],
                       port, strerror(errno));
  return l;
}

/* A listening TCP socket on 127.0.0.1:port in this namespace. */
static int loopback_listener(uint16_t port)
{
  static const uint8_t loopback[4] = {127, 0, 0, 1};
  return bound_socket(SOCK_STREAM, loopback, port);
}

/* Loopback up in the sandbox's own network namespace: the only interface
 * it has, for the proxy's listeners, a Selu server's port, and tools that
 * talk to themselves. */
void sandbox_loopback_up(void)
{
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq ifr = {0};
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
  if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
    sandbox_child_fail("cannot read the loopback interface: %s", strerror(errno));
  ifr.ifr_flags |= IFF_UP;
  CHILD_TRY(ioctl(s, SIOCSIFFLAGS, &ifr), "cannot bring up loopback: %s", strerror(errno));
  close(s);
}

/* One message on a SOCK_SEQPACKET socket: `data` and up to max fds. */
static ssize_t send_with_fds(int sock, const void *data, size_t len, const int *fds, size_t n)
{
  struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
  char control[CMSG_SPACE(sizeof(int) * SANDBOX_MAX_LISTENERS)];
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
  char control[CMSG_SPACE(sizeof(int) * SANDBOX_MAX_LISTENERS)];
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
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
 * so they exist only in this namespace: the proxy's, one per
 * ports.localhost entry, the resolver's UDP and TCP sockets, and one per
 * listener of the egress plan (proxy.h's proxy_start has the layout). The
 * fds go to the supervisor, which serves them from the host's namespace. */
void sandbox_make_proxy_listeners(const struct cap_spec *spec, int pass_fd)
{
  int fds[SANDBOX_MAX_LISTENERS];
  size_t n = 0;
  fds[n++] = loopback_listener(PROXY_PORT);
  for (size_t i = 0; i < spec->network.localhost.len && i < SANDBOX_MAX_FORWARDS; i++)
    fds[n++] = loopback_listener(spec->network.localhost.v[i]);
  struct egress_plan plan;
  egress_plan_build(spec, &plan);
  struct in_addr dns;
  inet_pton(AF_INET, EGRESS_DNS_ADDR, &dns);
  fds[n++] = bound_socket(SOCK_DGRAM | SOCK_NONBLOCK, (const uint8_t *)&dns, EGRESS_DNS_PORT);
  fds[n++] = bound_socket(SOCK_STREAM, (const uint8_t *)&dns, EGRESS_DNS_PORT);
  for (size_t i = 0; i < plan.n_listeners; i++)
    fds[n++] =
        bound_socket(SOCK_STREAM, plan.names[plan.listeners[i].name].addr, plan.listeners[i].port);
  static const uint8_t loopback[4] = {127, 0, 0, 1};
  if (plan.capture) /* sandbox/capture.h: where the any-port redirect leads */
    fds[n++] = bound_socket(SOCK_STREAM, loopback, EGRESS_CAPTURE_PORT);
  egress_plan_free(&plan);
  CHILD_TRY(send_with_fds(pass_fd, "p", 1, fds, n), "cannot hand the proxy sockets over: %s",
            strerror(errno));
  for (size_t i = 0; i < n; i++)
    close(fds[i]);
  close(pass_fd);
}

_Static_assert(SANDBOX_MAX_LISTENERS >= 1 + SANDBOX_MAX_FORWARDS + 2 + EGRESS_MAX_LISTENERS + 1,
               "every listener pid 1 makes fits the arrays it travels in");

size_t sandbox_listener_count(const struct cap_spec *spec)
{
  struct egress_plan plan;
  egress_plan_build(spec, &plan);
  size_t forwards = spec->network.localhost.len < SANDBOX_MAX_FORWARDS ? spec->network.localhost.len
                                                                       : SANDBOX_MAX_FORWARDS;
  size_t n = 1 + forwards + 2 + plan.n_listeners + (plan.capture ? 1 : 0);
  egress_plan_free(&plan);
  return n;
}

/* The listeners make_proxy_listeners sent: returns how many (<= max), or -1. */
int sandbox_receive_fds(int sock, int *fds, size_t max)
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

int sandbox_connect(int connector, uint16_t port, int timeout_ms, struct cap_error *err)
{
  if (send(connector, &port, sizeof port, MSG_NOSIGNAL) != (ssize_t)sizeof port)
    return cap_error_errno(err, errno ? errno : EPIPE,
                           "the sandbox is gone (its connector is closed)");
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

/* The command has ended with `code`: the rest of the sandbox goes with it
 * (as the kernel would take it at pid 1's exit), every process reaped, so
 * none is left in the sandbox's cgroups; then the code goes to the
 * supervisor, which need not wait for pid 1's own exit (the teardown of
 * its namespaces, an RCU grace period or two), and pid 1 leaves. */
static void __attribute__((noreturn)) finish(int code, int status_fd)
{
  /* every process of this namespace descends from pid 1 (orphans are
   * its children): with no child left there is nothing to kill, and the
   * kill, which walks every process of the host, is spared */
  if (!(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD)) {
    kill(-1, SIGKILL); /* every other process of this pid namespace */
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
      ;
  }
  unsigned char c = (unsigned char)code;
  if (status_fd >= 0) /* when it fails, the supervisor waits for the exit instead */
    (void)!write(status_fd, &c, 1);
  _exit(code);
}

/* Reaps what has exited; finishes with the command's status when it is
 * among them. */
static void reap_children(pid_t command, int status_fd)
{
  int status;
  pid_t w;
  while ((w = waitpid(-1, &status, WNOHANG)) > 0) {
    if (w != command)
      continue;
    if (WIFSIGNALED(status))
      finish(128 + WTERMSIG(status), status_fd);
    finish(WEXITSTATUS(status), status_fd);
  }
}

/* A test build's way to hold pid 1 between the fork and its first look at
 * its children, where a SIGCHLD used to be lost (tests/sandbox). */
static void test_delay_init(void)
{
#ifdef CAPSULE_TEST_HOOKS
  const char *ms = getenv("CAPSULE_TEST_DELAY_INIT_MS");
  if (ms && *ms) {
    struct timespec t = {.tv_sec = atoi(ms) / 1000, .tv_nsec = (atoi(ms) % 1000) * 1000000L};
    nanosleep(&t, NULL);
  }
#endif
}

/* pid 1: reap everything; leave with the command's status. With a
 * connector (fd >= 0), also make connections in this namespace on request;
 * the connector's end means stop: SIGTERM to the command, SIGKILL two
 * seconds later. Every signal is already blocked (since before the fork:
 * a SIGCHLD the command sends before the signalfd exists stays pending).
 * The supervisor's pipe is the backstop for PR_SET_PDEATHSIG: when it
 * hangs up capsule is gone, and so is everything here. */
void __attribute__((noreturn))
sandbox_run_init(pid_t command, int connector, int life_fd, int status_fd)
{
  /* this process is a copy of capsule, with the caller's environment and
   * arguments in its memory: not dumpable, so the tool cannot read
   * /proc/1/environ or /proc/1/mem */
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  test_delay_init();
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, NULL);
  int sfd = signalfd(-1, &all, SFD_CLOEXEC);
  /* a command that already ended has no SIGCHLD left to wake the poll */
  reap_children(command, status_fd);
  uint64_t kill_at = 0;
  for (;;) {
    struct pollfd p[3] = {{.fd = sfd, .events = POLLIN},
                          {.fd = life_fd, .events = POLLIN},
                          {.fd = connector, .events = POLLIN}};
    int timeout = -1;
    if (kill_at) {
      uint64_t t = cap_now_ms(CLOCK_MONOTONIC);
      if (t >= kill_at) {
        kill(command, SIGKILL);
        kill_at = 0;
      } else {
        timeout = (int)(kill_at - t);
      }
    }
    if (poll(p, connector >= 0 ? 3 : 2, timeout) < 0 && errno != EINTR)
      _exit(127);
    if (p[1].revents) {  /* only the supervisor writes it, and never does */
      kill(-1, SIGKILL); /* every other process of this pid namespace */
      _exit(128 + SIGKILL);
    }
    if (p[0].revents & POLLIN) {
      struct signalfd_siginfo si;
      if (read(sfd, &si, sizeof si) == sizeof si && si.ssi_signo != SIGCHLD)
        kill(command, (int)si.ssi_signo); /* forward what the supervisor sends */
      reap_children(command, status_fd);
    }
    if (connector >= 0 && (p[2].revents & (POLLIN | POLLHUP | POLLERR))) {
      uint16_t port;
      ssize_t got = recv(connector, &port, sizeof port, MSG_DONTWAIT);
      if (got == (ssize_t)sizeof port) {
        serve_connect(connector, port);
      } else if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
        close(connector);
        connector = -1;
        kill(command, SIGTERM);
        kill_at = cap_now_ms(CLOCK_MONOTONIC) + 2000;
      }
    }
  }
}
