#include "gateway/instance.h"
#include "gateway/instance_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "core/proctitle.h"
#include "core/wait_hook.h"
#include "runtime/selu_rpc.h"
#include "sandbox/sandbox.h"

#define LEASE_ATTEMPTS 3 /* the first, and two retries (gw_instance_lease) */

#ifndef __NR_close_range
#define __NR_close_range 436
#endif

static int socket_path(const struct gw_instance_request *req, struct sockaddr_un *sa,
                       struct cap_error *err)
{
  *sa = (struct sockaddr_un){.sun_family = AF_UNIX};
  int n = snprintf(sa->sun_path, sizeof sa->sun_path, "%s/%s.sock", req->run_dir, req->key);
  if (n < 0 || (size_t)n >= sizeof sa->sun_path)
    return cap_error_set(err, ENAMETOOLONG,
                         "the state directory's path is too long for a unix socket (%s/%s.sock); "
                         "use a shorter --state",
                         req->run_dir, req->key);
  return 0;
}

/* Starts a keeper unless one is already there (under the lock). Returns a
 * connection to it, or -errno with err set. */
/* The keeper's verdict on fd by the deadline: KEEPER_READY, or why it
 * failed, into msg (its length), or -1 when none came in time */
static ssize_t keeper_verdict(int fd, uint64_t deadline, char *msg, size_t size)
{
  size_t got = 0;
  for (;;) {
    uint64_t t = cap_now_ms(CLOCK_MONOTONIC);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (t >= deadline || poll(&p, 1, ms_until(deadline)) <= 0)
      return -1;
    ssize_t n = read(fd, msg + got, size - 1 - got);
    if (n <= 0 || got + (size_t)n >= size - 1) {
      if (n > 0)
        got += (size_t)n;
      break;
    }
    got += (size_t)n;
    if (got >= strlen(KEEPER_READY) && memcmp(msg, KEEPER_READY, strlen(KEEPER_READY)) == 0)
      break;
  }
  msg[got] = '\0';
  return (ssize_t)got;
}

static int start_keeper(const struct gw_instance_request *req, const struct sockaddr_un *sa,
                        uint64_t deadline, struct cap_error *err)
{
  _cleanup_free_ char *lock_path = cap_xasprintf("%s/%s.lock", req->run_dir, req->key);
  _cleanup_close_ int lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0)
    return cap_error_errno(err, errno, "cannot open %s", lock_path);
  while (flock(lock, LOCK_EX | LOCK_NB) < 0) {
    if (errno != EWOULDBLOCK && errno != EINTR)
      return cap_error_errno(err, errno, "cannot lock %s", lock_path);
    if (cap_now_ms(CLOCK_MONOTONIC) >= deadline)
      return cap_error_set(err, ETIMEDOUT, "another call is still starting %s", req->spec->id);
    sleep_ms(10);
  }
  int fd = gw_instance_connect(sa, deadline);
  if (fd >= 0)
    return fd;                              /* started while this call waited for the lock */
  if (fd != -ENOENT && fd != -ECONNREFUSED) /* alive but busy, or not ours: never replaced */
    return cap_error_errno(err, -fd, "cannot reach %s's instance at %s", req->spec->id,
                           sa->sun_path);
  _cleanup_close_ int room_lock = -1; /* until the keeper's status is out */
  int room = gw_instance_room(req->run_dir, req->spec->id, gw_instance_owner(req), deadline,
                              &room_lock, err);
  if (room < 0)
    return room;
  const uint64_t *epoch = req->grants_epoch; /* gateway/instance.h, gw_grants_epoch */
  if (epoch && gw_grants_epoch_moved(req->run_dir, req->spec->id, *epoch))
    return cap_error_set(err, ESTALE, "%s's grants were revoked while this call began; call again",
                         req->spec->id);
  int status[2];
  if (pipe2(status, O_CLOEXEC) < 0)
    return cap_error_errno(err, errno, "cannot create a pipe");
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(status[0]);
    close(status[1]);
    return cap_error_errno(err, errno, "cannot fork the instance's keeper");
  }
  if (pid == 0) {
    close(status[0]);
    setsid();
    pid_t keeper = fork(); /* not this command's child: it outlives it */
    if (keeper != 0)
      _exit(keeper < 0);
    gw_keeper_main(req, sa, status[1], lock, epoch);
  }
  close(status[1]);
  waitpid(pid, NULL, 0);
  char msg[512];
  ssize_t got = keeper_verdict(status[0], deadline, msg, sizeof msg);
  close(status[0]);
  if (got < 0)
    return cap_error_set(err, ETIMEDOUT, "%s's server did not become ready in time", req->spec->id);
  size_t host = strlen(KEEPER_HOST);
  if (strncmp(msg, KEEPER_HOST, host) == 0) /* exit 3, as for any sandbox the host cannot make */
    return cap_error_set(err, ENOTSUP, "%s", msg + host);
  if (strncmp(msg, KEEPER_REVOKED, strlen(KEEPER_REVOKED)) == 0)
    return cap_error_set(err, ESTALE, "%s", msg + strlen(KEEPER_REVOKED));
  if (strcmp(msg, KEEPER_READY) != 0)
    return cap_error_set(err, ECONNREFUSED, "%s (its log: %s)",
                         got ? msg : "the instance's keeper exited before its server was ready",
                         req->log_path);
  fd = gw_instance_connect(sa, deadline);
  if (fd < 0)
    return cap_error_errno(err, -fd, "cannot reach the new instance of %s", req->spec->id);
  return fd;
}

/* The keeper's reply to a lease asked on fd: its size (-1: none came, the
 * keeper gone), its passed descriptor in *got_fd; -ETIMEDOUT when no
 * reply came by the deadline. */
static ssize_t await_lease(int fd, uint64_t deadline, struct cap_wait_hook *wait,
                           struct lease_reply *rep, int *got_fd)
{
  uint64_t t = cap_now_ms(CLOCK_MONOTONIC);
  struct pollfd p = {.fd = fd, .events = POLLIN};
  int ready = 0;
  if (cap_wait_hook_armed(wait) && t < deadline &&
      (ready = ppoll(&p, 1, &(struct timespec){.tv_nsec = CAP_WAIT_SOON_US * 1000L}, NULL)) == 0)
    cap_wait_hook_run(wait); /* no reply at once: it may take the call's time */
  if (ready <= 0 && (t >= deadline || poll(&p, 1, ms_until(deadline)) <= 0))
    return -ETIMEDOUT;
  struct iovec iov = {.iov_base = rep, .iov_len = sizeof *rep};
  char control[CMSG_SPACE(sizeof(int))];
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
  ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
  if (cm && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof(int)))
    memcpy(got_fd, CMSG_DATA(cm), sizeof(int));
  return n < 0 ? -1 : n;
}

/* Asks the keeper on fd for a lease, and awaits its reply (as await_lease:
 * the descriptor passed is a connection to the server). */
static ssize_t ask_lease(int fd, uint64_t have_instance, uint64_t deadline,
                         struct cap_wait_hook *wait, struct lease_reply *rep, int *got_fd)
{
  char ask[1 + sizeof have_instance] = {'L'};
  memcpy(ask + 1, &have_instance, sizeof have_instance);
  size_t ask_len = have_instance ? sizeof ask : 1;
  if (send(fd, ask, ask_len, MSG_NOSIGNAL) != (ssize_t)ask_len)
    return -1;
  return await_lease(fd, deadline, wait, rep, got_fd);
}

/* Whether a lease reply's message (space-separated words) holds word. */
static bool offers(const char *message, const char *word)
{
  size_t n = strlen(word);
  for (const char *p = message; (p = strstr(p, word)); p += n)
    if ((p == message || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
      return true;
  return false;
}

/* Whether a lease asked ahead (its reply in rep, n bytes, with watch: the
 * keeper's inotify descriptor, closed here) may go to the call now: granted
 * on the instance the caller keeps, no event queued on the package's tree,
 * nothing said by the keeper since, the package's path naming the
 * directory the keeper watches (instance_int.h, KEEPER_AHEAD). */
static bool ahead_fresh(const struct gw_instance_request *req, int fd, ssize_t n,
                        struct lease_reply *rep, int watch)
{
  unsigned long long dev = 0, ino = 0;
  rep->message[sizeof rep->message - 1] = '\0';
  const char *at = strstr(rep->message, " " KEEPER_AHEAD " ");
  bool fresh = n == (ssize_t)sizeof *rep && rep->code == 0 && req->have_instance &&
               rep->instance == req->have_instance && at &&
               sscanf(at + strlen(" " KEEPER_AHEAD), "%llu %llu", &dev, &ino) == 2;
  struct pollfd p[2] = {{.fd = watch, .events = POLLIN}, {.fd = fd, .events = POLLIN}};
  if (fresh && !req->rootfs) /* an event queued, or read by the keeper after it said so */
    fresh = watch >= 0 && poll(p, 2, 0) == 0;
  else if (fresh)
    fresh = poll(p + 1, 1, 0) == 0;
  struct stat sb;
  if (fresh && !req->rootfs)
    fresh = stat(req->spec->package_dir, &sb) == 0 && (unsigned long long)sb.st_dev == dev &&
            (unsigned long long)sb.st_ino == ino;
  if (watch >= 0)
    close(watch);
  return fresh;
}

/* A connection to the instance's keeper: kept (when >= 0), or made,
 * starting the keeper when none listens (not for a warm-only call) */
static int keeper_reached(const struct gw_instance_request *req, const struct sockaddr_un *sa,
                          int kept, uint64_t deadline, struct cap_error *err)
{
  int fd = kept >= 0 ? kept : gw_instance_connect(sa, deadline);
  if (fd == -EPERM)
    return cap_error_set(err, EPERM, "%s is not a socket of this user's: refusing it",
                         sa->sun_path);
  if ((fd == -ENOENT || fd == -ECONNREFUSED) && req->warm_only)
    return cap_error_set(err, EWOULDBLOCK, "%s has no instance running", req->spec->id);
  if (fd == -ENOENT || fd == -ECONNREFUSED)
    return start_keeper(req, sa, deadline, err);
  if (fd < 0)
    return cap_error_errno(err, -fd, "cannot reach %s's instance at %s", req->spec->id,
                           sa->sun_path);
  return fd;
}

int gw_instance_lease(const struct gw_instance_request *req, struct gw_lease *lease,
                      struct cap_error *err)
{
  bool ahead = req->control_ahead && req->control >= 0;
  *lease = (struct gw_lease){.control = -1, .fd = -1};
  int kept = req->control; /* a connection kept from the last lease: asked first */
  struct sockaddr_un sa;
  int r = socket_path(req, &sa, err);
  if (r == 0 && kept < 0)
    r = gw_instance_check_run_dir(req->run_dir, err);
  if (r < 0) {
    if (kept >= 0)
      close(kept);
    return r;
  }
  uint64_t deadline = cap_now_ms(CLOCK_MONOTONIC) + (req->wait_ms ? req->wait_ms : 30000);
  /* an instance that went away between connect and lease is started anew:
   * nothing was sent to it yet, so retrying is safe. Twice: a keeper
   * stopping (SIGTERM, its server gone) stays reachable until a lease
   * finds its server gone and it unpublishes, so the first retry may
   * reach it again. */
  for (int attempt = 0; attempt < LEASE_ATTEMPTS; attempt++) {
    /* a kept connection that fails is not an attempt: nothing reached the server */
    if (kept >= 0)
      attempt--;
    int fd = keeper_reached(req, &sa, kept, deadline, err);
    kept = -1;
    if (fd < 0)
      return fd;
    struct lease_reply rep = {0};
    int got_fd = -1;
    ssize_t n = ahead ? await_lease(fd, deadline, req->wait, &rep, &got_fd)
                      : ask_lease(fd, req->have_instance, deadline, req->wait, &rep, &got_fd);
    if (ahead && n != -ETIMEDOUT) {
      ahead = false;
      if (ahead_fresh(req, fd, n, &rep, got_fd)) {
        *lease = (struct gw_lease){.control = fd,
                                   .fd = -1,
                                   .protocol = rep.protocol,
                                   .instance = rep.instance,
                                   .keep = true,
                                   .ahead = offers(rep.message, KEEPER_AHEAD_OFFER)};
        return 0;
      }
      close(fd); /* and the lease with it: asked anew, on a new connection */
      if ((r = gw_instance_check_run_dir(req->run_dir, err)) < 0)
        return r;
      continue;
    }
    if (n == -ETIMEDOUT) {
      close(fd);
      return cap_error_set(err, ETIMEDOUT,
                           "no free slot on %s's server in time (at most %u calls at once)",
                           req->spec->id, req->spec->runtime.max_concurrency);
    }
    bool same = req->have_instance && rep.instance == req->have_instance;
    if (n == (ssize_t)sizeof rep && rep.code == 0 && (got_fd >= 0 || same)) {
      rep.message[sizeof rep.message - 1] = '\0';
      *lease = (struct gw_lease){.control = fd,
                                 .fd = got_fd,
                                 .protocol = rep.protocol,
                                 .instance = rep.instance,
                                 .egress = offers(rep.message, KEEPER_EGRESS_OFFER),
                                 .keep = offers(rep.message, KEEPER_KEEP),
                                 .ahead = offers(rep.message, KEEPER_AHEAD_OFFER)};
      return 0;
    }
    if (got_fd >= 0)
      close(got_fd);
    close(fd);
    bool gone = n <= 0 || rep.code == ECONNREFUSED;
    if (!gone || attempt == LEASE_ATTEMPTS - 1) {
      rep.message[sizeof rep.message - 1] = '\0';
      return cap_error_set(err, rep.code ? rep.code : ECONNRESET, "%s (its log: %s)",
                           n > 0 ? rep.message : "the capability's instance went away",
                           req->log_path);
    }
  }
  return cap_error_set(err, ECONNRESET, "unreachable");
}

bool gw_lease_reason(struct gw_lease *lease, char *buf, size_t size)
{
  struct lease_reply rep = {0};
  struct pollfd p = {.fd = lease->control, .events = POLLIN};
  /* the keeper sends its reason before it stops the server: a moment's wait */
  if (lease->control < 0 || poll(&p, 1, 200) <= 0 ||
      recv(lease->control, &rep, sizeof rep, MSG_DONTWAIT) != (ssize_t)sizeof rep || !rep.code)
    return false;
  rep.message[sizeof rep.message - 1] = '\0';
  snprintf(buf, size, "%s", rep.message);
  return true;
}

bool gw_lease_egress(struct gw_lease *lease, struct gw_egress_batch *b, uint64_t wait_ms)
{
  if (!lease->egress || lease->control < 0 || !b || send(lease->control, "E", 1, MSG_NOSIGNAL) != 1)
    return false;
  uint64_t deadline = cap_now_ms(CLOCK_MONOTONIC) + wait_ms;
  _cleanup_free_ char *msg = cap_xmalloc(KEEPER_EGRESS_CHUNK + 5);
  struct cap_buf got = {0};
  bool last = false;
  while (!last) {
    struct pollfd p = {.fd = lease->control, .events = POLLIN};
    if (poll(&p, 1, ms_until(deadline)) <= 0)
      break;
    ssize_t n = recv(lease->control, msg, KEEPER_EGRESS_CHUNK + 5, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
      break;
    if (n < 5 || memcmp(msg, KEEPER_EGRESS_MAGIC, 4) != 0)
      continue; /* a lease reply (why the server stopped): not the decisions */
    cap_buf_append(&got, msg + 5, (size_t)n - 5);
    last = msg[4] == 1;
  }
  const char *p = got.data ? got.data : "";
  bool ok = last && gw_egress_batch_decode(b, &p, p + got.len);
  cap_buf_free(&got);
  return ok;
}

int gw_lease_release_keep(struct gw_lease *lease)
{
  int fd = -1;
  if (lease->keep && lease->control >= 0 && send(lease->control, "R", 1, MSG_NOSIGNAL) == 1) {
    fd = lease->control;
    lease->control = -1;
  }
  gw_lease_release(lease);
  return fd;
}

int gw_lease_detach_ahead(struct gw_lease *lease, uint64_t *instance)
{
  if (!lease->ahead || !lease->keep || !lease->instance || lease->control < 0)
    return -1;
  int fd = lease->control;
  *instance = lease->instance;
  lease->control = -1;
  gw_lease_release(lease);
  return fd;
}

int gw_lease_ask_ahead(int control, uint64_t instance)
{
  char m[2 + sizeof instance] = {'R', 'A'};
  memcpy(m + 2, &instance, sizeof instance);
  return send(control, m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof m ? 0 : -EPIPE;
}

int gw_lease_release_ahead(struct gw_lease *lease, bool *ahead)
{
  *ahead = false;
  uint64_t instance = 0;
  int fd = gw_lease_detach_ahead(lease, &instance);
  if (fd < 0)
    return gw_lease_release_keep(lease);
  if (gw_lease_ask_ahead(fd, instance) < 0) {
    close(fd);
    return -1;
  }
  *ahead = true;
  return fd;
}

void gw_lease_release(struct gw_lease *lease)
{
  if (lease->control >= 0)
    close(lease->control);
  if (lease->fd >= 0)
    close(lease->fd);
  *lease = (struct gw_lease){.control = -1, .fd = -1};
}
