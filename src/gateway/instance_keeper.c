/* A warm instance's keeper (instance.h): the process that starts the
 * Selu server in its sandbox, waits for it to become healthy, and hands
 * out leases on it to calls until it has been idle too long or is asked
 * to stop. instance.c forks it (gw_keeper_main) and leases from it. */
#include "gateway/instance.h"
#include "gateway/instance_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
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
#include "gateway/registry.h"
#include "gateway/selu.h"
#include "runtime/selu_rpc.h"
#include "sandbox/sandbox.h"

#ifndef __NR_close_range
#define __NR_close_range 436
#endif

#define KEEPER_STATUS_SETTLE_MS 100 /* a lease's end shown in the status file this much later */

/* ---- the keeper ---- */

struct keeper {
  const struct gw_instance_request *req;
  int listener, connector, status_fd;
  ino_t sock_ino;
  char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  uint16_t port;
  enum selu_protocol protocol; /* found at the first health check */
  uint32_t max_active;
  uint64_t idle_ms, startup_ms;
  pthread_mutex_t report_lock;
  bool reported;                   /* the starter has its verdict */
  pthread_mutex_t publish_lock;    /* the listener: closed once, from either thread */
  struct sandbox_running *running; /* for the sandbox's CPU count */
  uint64_t cpu_budget_ms;          /* per call (Selu max_cpu_seconds); 0: none */
  int sandbox_end;                 /* the connector's other end: closed once the sandbox has it */
  int spare;                    /* a connection to the server made ahead of the next lease, or -1 */
  struct gw_instance_info info; /* what RUN_DIR/KEY.status says (capsule ps) */
  char status_path[4096];
  pthread_mutex_t status_mu;   /* around its writes, from either thread */
  bool status_gone;            /* removed: written no more */
  uint64_t instance;           /* random, not 0: names this server to the calls keeping a channel */
  int ino;                     /* inotify on the package's tree (gw_package_watch), or -1 */
  struct gw_package_id pkg;    /* with it: the package dir's identity then */
  unsigned char digest[32];    /* without inotify: the package's at the start */
  struct keeper_egress egress; /* the proxy's decisions, by lease (instance_egress.c) */
};

/* The status file written (remove: removed): KEY.status while the socket
 * is this keeper's, then its own name (gw_instance_status_retire) */
static void keeper_status_put(struct keeper *k, bool remove)
{
  pthread_mutex_lock(&k->status_mu);
  if (!k->status_gone && remove)
    unlink(k->status_path);
  else if (!k->status_gone)
    gw_instance_status_write(k->status_path, &k->info);
  k->status_gone = k->status_gone || remove;
  pthread_mutex_unlock(&k->status_mu);
}

/* Keeps KEY.status current: the state, the leases held, since when idle. */
static void keeper_status(struct keeper *k, enum gw_instance_state state, unsigned leases)
{
  k->info.state = state;
  k->info.leases = leases;
  k->info.idle_since_ms = leases ? 0 : cap_now_ms(CLOCK_REALTIME);
  keeper_status_put(k, false);
}

/* The starter's verdict, once: KEEPER_READY or why not. */
static void keeper_report(struct keeper *k, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void keeper_report(struct keeper *k, const char *fmt, ...)
{
  pthread_mutex_lock(&k->report_lock);
  if (!k->reported) {
    char msg[480];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (write(k->status_fd, msg, strlen(msg)) < 0) {
      /* the starter gave up waiting */
    }
    close(k->status_fd);
    k->reported = true;
  }
  pthread_mutex_unlock(&k->report_lock);
}

/* The status file's fixed part, and its first version (starting); then,
 * with the count of revokes its call read (epoch), the keeper ends when a
 * revoke came since (gateway/instance.h, gw_grants_epoch). */
static void keeper_status_begin(struct keeper *k, const uint64_t *epoch)
{
#ifdef CAPSULE_TEST_HOOKS /* tests/review17/revoke_keeper_paused.sh: a revoke before the status */
  gw_keeper_test_pause();
#endif
  snprintf(k->status_path, sizeof k->status_path, "%s/%s.status", k->req->run_dir, k->req->key);
  k->info = (struct gw_instance_info){
      .pid = getpid(), .max_leases = k->max_active, .started_ms = cap_now_ms(CLOCK_REALTIME)};
  while (!k->instance) /* what names this server to the calls keeping a channel to it */
    randombytes_buf(&k->instance, sizeof k->instance);
  snprintf(k->info.capability, sizeof k->info.capability, "%s", k->req->spec->id);
  snprintf(k->info.user, sizeof k->info.user, "%s", gw_instance_owner(k->req));
  keeper_status(k, GW_INSTANCE_STARTING, 0);
  const char *id = k->req->spec->id;
  if (epoch && gw_grants_epoch_moved(k->req->run_dir, id, *epoch)) {
    gw_keeper_note("a revoke of %s's grants came while it started: not started", id);
    keeper_report(k, KEEPER_REVOKED "%s's grants were revoked while its server started; call again",
                  id);
    keeper_status_put(k, true);
    _exit(0);
  }
}

/* Waits until the server's health check says ready, up to startup_ms, and
 * learns there which of Selu's two contracts it speaks (selu_health). On
 * failure, why says what was seen. */
static bool keeper_wait_healthy(struct keeper *k, char *why, size_t why_len)
{
  uint64_t deadline = cap_now_ms(CLOCK_MONOTONIC) + k->startup_ms;
  snprintf(why, why_len, "nothing listened on port %u", k->port);
  bool answered = false; /* the server answered a check (not ready, or not a health answer) */
  while (cap_now_ms(CLOCK_MONOTONIC) < deadline) {
    struct cap_error err = {0};
    int fd = sandbox_connect(k->connector, k->port, 1000, &err);
    if (fd == -EPIPE || fd == -ETIMEDOUT) {
      snprintf(why, why_len, "the server exited before it became healthy");
      cap_error_clear(&err);
      return false;
    }
    cap_error_clear(&err);
    if (fd >= 0) {
      struct selu_channel *ch = NULL;
      bool healthy = false;
      enum selu_protocol proto = SELU_PROTOCOL_UNKNOWN;
      uint64_t left =
          deadline > cap_now_ms(CLOCK_MONOTONIC) ? deadline - cap_now_ms(CLOCK_MONOTONIC) : 1;
      int r = selu_channel_open(fd, 1 << 20, &ch, &err);
      if (r == 0)
        r = selu_health(ch, (int)(left < 1000 ? left : 1000), &proto, &healthy, &err);
      selu_channel_close(ch);
      if (r == 0 && healthy) {
        cap_error_clear(&err);
        k->protocol = proto;
        return true;
      }
      if (r == 0)
        snprintf(why, why_len, "its health check (selu.capability.v1.%s) answered not ready",
                 selu_protocol_name(proto));
      else if (!answered || r != -ETIMEDOUT ||
               left >= 1000) /* one the deadline cut short keeps it */
        snprintf(why, why_len, "its health check failed: %s", err.message ? err.message : "?");
      answered |= r != -ETIMEDOUT;
      cap_error_clear(&err);
    }
    sleep_ms(50);
  }
  return false;
}

struct client {
  int fd;
  bool waiting, leased;
  bool ahead;                     /* its lease asked ahead ('A'); granted so when vouched for */
  uint64_t since;                 /* accepted at */
  uint64_t have;                  /* the instance it keeps a connection to, or 0 */
  uint64_t asked;                 /* with waiting: its ask's number (lease_loop.asks) */
  struct gw_egress_batch *egress; /* with a lease: its egress decisions */
};

static void reply(int fd, int code, const char *message, int pass_fd, enum selu_protocol protocol,
                  uint64_t instance)
{
  struct lease_reply rep = {.code = code, .protocol = (int32_t)protocol, .instance = instance};
  snprintf(rep.message, sizeof rep.message, "%s", message ? message : "");
  struct iovec iov = {.iov_base = &rep, .iov_len = sizeof rep};
  char control[CMSG_SPACE(sizeof(int))];
  memset(control, 0, sizeof control);
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (pass_fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
  }
  if (sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
    /* the client is gone: its slot is freed when its hang-up is seen */
  }
}

/* A reply without a lease: code says why. */
static void refuse(int fd, int code, const char *message)
{
  reply(fd, code, message, -1, SELU_PROTOCOL_UNKNOWN, 0);
}

/* No new client can reach this keeper once its socket is gone. */
static void keeper_unpublish(struct keeper *k)
{
  struct stat sb;
  pthread_mutex_lock(&k->publish_lock);
  if (k->listener >= 0) {
    pthread_mutex_lock(&k->status_mu); /* a new keeper may take the name: the status moves */
    if (!k->status_gone)
      gw_instance_status_retire(k->req->run_dir, k->req->key, k->status_path, sizeof k->status_path,
                                &k->info);
    pthread_mutex_unlock(&k->status_mu);
    if (stat(k->sock_path, &sb) == 0 && sb.st_ino == k->sock_ino)
      unlink(k->sock_path);
    close(k->listener);
    k->listener = -1;
  }
  pthread_mutex_unlock(&k->publish_lock);
}

/* Stops the server: pid 1 sees the connector close and ends the command. */
static void keeper_stop(struct keeper *k)
{
  keeper_status(k, GW_INSTANCE_STOPPING, 0);
  keeper_unpublish(k);
  if (k->spare >= 0) {
    close(k->spare);
    k->spare = -1;
  }
  if (k->connector >= 0) {
    close(k->connector);
    k->connector = -1;
  }
}

/* The lease loop's state: the callers connected, the leases held. */
struct lease_loop {
  struct client clients[KEEPER_MAX_CLIENTS];
  size_t n;
  uint32_t active; /* leases held */
  uint64_t asks;   /* asks numbered as they come: granted in that order */
  uint64_t last;   /* when the last lease ended (the idle clock) */
  bool dying;      /* the server is gone or going: refuse what is asked */
  bool stop_asked; /* `capsule stop` asked (an 'S' on the socket) */
  /* The per-call CPU budget, on a server shared by calls: over a busy
   * period (from the first lease to the moment none is held) the server
   * may use the budget times the most calls it held at once. Exact when
   * calls come one at a time; never less than each call's own share. */
  bool cpu_counted;
  int64_t busy_base;
  uint32_t busy_peak;
  uint32_t shown;      /* the leases the status file shows */
  uint64_t status_due; /* when it is rewritten to show active (0: not due) */
};

static bool package_changed(struct keeper *k, struct lease_loop *L);

/* How long poll may wait: the idle timeout, the CPU tick, the next silent
 * client to drop; < -1 when the keeper should stop now (idle; or its
 * package changed, which poll watches while no client is in: no call
 * would reach this server again, so it does not wait for its idle
 * timeout). */
static int lease_timeout(struct keeper *k, struct lease_loop *L)
{
  int timeout = -1;
  if (L->n == 0) {
    uint64_t t = cap_now_ms(CLOCK_MONOTONIC);
    if (!L->dying && k->ino >= 0 && package_changed(k, L)) {
      gw_keeper_note("the package changed with no call in: this instance stops");
      return -2;
    }
    if (L->dying || t >= L->last + k->idle_ms) {
      if (!L->dying)
        gw_keeper_note("idle for %llu ms: stopping the server", (unsigned long long)k->idle_ms);
      return -2;
    }
    timeout = ms_until(L->last + k->idle_ms);
  }
  if (L->active && L->cpu_counted && (timeout < 0 || timeout > 100))
    timeout = 100;     /* the CPU budget's tick */
  if (L->status_due) { /* the status file's next rewrite */
    int t = ms_until(L->status_due);
    if (timeout < 0 || t < timeout)
      timeout = t;
  }
  for (size_t i = 0; i < L->n; i++) /* the next silent client to drop */
    if (!L->clients[i].waiting && !L->clients[i].leased) {
      int t = ms_until(L->clients[i].since + KEEPER_ASK_MS);
      if (timeout < 0 || t < timeout)
        timeout = t;
    }
  return timeout;
}

/* The status file follows the leases: at once when a call comes to an
 * idle server, otherwise KEEPER_STATUS_SETTLE_MS later, with what is held
 * then (a burst of calls rewrites it twice, not twice per call: each
 * rewrite creates a file, 0.4-0.8 ms on a busy disk, on the CPUs and disk
 * the next call needs). */
static void lease_show(struct keeper *k, struct lease_loop *L)
{
  uint64_t t = cap_now_ms(CLOCK_MONOTONIC);
  if (L->active == L->shown) {
    L->status_due = 0;
  } else if (L->shown == 0 || (L->status_due && t >= L->status_due)) {
    keeper_status(k, GW_INSTANCE_SERVING, L->active);
    L->shown = L->active;
    L->status_due = 0;
  } else if (!L->status_due) {
    L->status_due = t + KEEPER_STATUS_SETTLE_MS;
  }
}

/* Reads what each polled client said (a lease request, or its end) and
 * drops the gone and the silent, keeping arrival order. */
static void lease_read_clients(struct keeper *k, struct lease_loop *L, const struct pollfd *p,
                               size_t polled)
{
  size_t kept = 0;
  for (size_t i = 0; i < L->n; i++) {
    struct client *cl = &L->clients[i];
    bool gone = false;
    short ev = i < polled ? p[i].revents : 0;
    if (ev & POLLIN) {
      char m[2 + sizeof(uint64_t)];
      ssize_t got = recv(cl->fd, m, sizeof m, MSG_DONTWAIT);
      char c = got > 0 ? m[0] : 0;
      bool then_ahead = got == (ssize_t)sizeof m && c == 'R' && m[1] == 'A';
      if (got > 0 && c == 'L' && !cl->leased) {
        cl->waiting = true;
        cl->asked = ++L->asks;
        cl->ahead = false;
        cl->have = 0;
        if (got == 1 + (ssize_t)sizeof(uint64_t))
          memcpy(&cl->have, m + 1, sizeof cl->have);
      } else if (got == 1 && c == 'E' && cl->leased && cl->egress) { /* the call is done */
        keeper_egress_end(&k->egress, cl->egress, cl->fd);
        cl->egress = NULL;
      } else if ((got == 1 || then_ahead) && c == 'R' && cl->leased) { /* done; connection kept */
        keeper_egress_end(&k->egress, cl->egress, -1);
        cl->egress = NULL;
        cl->leased = false;
        cl->since = L->last = cap_now_ms(CLOCK_MONOTONIC);
        if (--L->active == 0) { /* a busy period ended (lease_check_cpu) */
          L->busy_base = -1;
          L->busy_peak = 0;
        }
        if (then_ahead) { /* and the next lease asked at once */
          cl->waiting = cl->ahead = true;
          cl->asked = ++L->asks;
          memcpy(&cl->have, m + 2, sizeof cl->have);
        }
      } else if (got == 1 && c == 'S') /* only this user reaches the socket (0600, 0700 dir) */
        L->stop_asked = gone = true;
      else if (got == 0 || (got < 0 && errno != EAGAIN))
        gone = true;
    } else if (ev & (POLLHUP | POLLERR)) {
      gone = true;
    } else if (!cl->waiting && !cl->leased &&
               cap_now_ms(CLOCK_MONOTONIC) >= cl->since + KEEPER_ASK_MS) {
      gone = true; /* silent: its slot is for callers */
    }
    if (gone) {
      if (cl->leased)
        L->active--;
      /* a call gone without asking: its decisions the next lease's */
      keeper_egress_end(&k->egress, cl->egress, -1);
      close(cl->fd);
      L->last = cap_now_ms(CLOCK_MONOTONIC);
    } else {
      L->clients[kept++] = *cl; /* in arrival order (the grants go by asks' numbers) */
    }
  }
  L->n = kept;
}

/* The spare connection while the server neither closed it nor said it is
 * going away (what it sent first, e.g. HTTP/2's SETTINGS, stays for the
 * caller), or -1. */
static int take_spare(struct keeper *k)
{
  int fd = k->spare;
  k->spare = -1;
  struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
  if (fd >= 0 && poll(&p, 1, 0) >= 0 && !(p.revents & (POLLHUP | POLLERR | POLLRDHUP)) &&
      !((p.revents & POLLIN) && gw_keeper_says_goaway(fd)))
    return fd;
  if (fd >= 0)
    close(fd);
  return -1;
}

/* Makes the next lease's connection now, after the replies: the pid 1
 * round trip is then off the next call's path. A failure here is left to
 * that lease to find (and act on). */
static void refill_spare(struct keeper *k, const struct lease_loop *L)
{
  if (k->spare >= 0 || L->dying || k->connector < 0)
    return;
  struct cap_error err = {0};
  int fd = sandbox_connect(k->connector, k->port, 2000, &err);
  cap_error_clear(&err);
  k->spare = fd >= 0 ? fd : -1;
}

/* Events queued on the package's tree: the holders of leases asked ahead
 * learn it first (a word on their control socket), so that none of them
 * takes its lease for a call made after the edit once the events are
 * read. */
static void warn_ahead(struct keeper *k, struct lease_loop *L)
{
  struct pollfd p = {.fd = k->ino, .events = POLLIN};
  if (poll(&p, 1, 0) <= 0)
    return;
  for (size_t i = 0; i < L->n; i++)
    if (L->clients[i].leased && L->clients[i].ahead) {
      refuse(L->clients[i].fd, ECONNREFUSED, "the package changed");
      L->clients[i].ahead = false;
    }
}

/* Whether the package changed since the keeper started (an image's
 * server never reads it): its path naming another directory or an event
 * on its tree, or without inotify its digest recomputed. Asked before each lease, so a call made
 * after an edit never reaches the server that started before it: the instance's key leaves the tree
 * out (gw_instance_key), this keeper watches it. */
static bool package_changed(struct keeper *k, struct lease_loop *L)
{
  if (k->req->rootfs)
    return false;
  if (k->ino >= 0) {
    warn_ahead(k, L); /* before the events are read: none is missed */
    if (gw_package_moved(k->req->spec->package_dir, &k->pkg))
      return true; /* the path names another directory: no event on the watched one */
    char buf[4096];
    return read(k->ino, buf, sizeof buf) > 0 || errno != EAGAIN;
  }
  unsigned char now[32];
  struct cap_error err = {0};
  bool changed = gw_spec_digest(k->req->spec, now, &err) < 0 || memcmp(now, k->digest, 32) != 0;
  cap_error_clear(&err);
  return changed;
}

/* The waiting client to grant next: a call's ask before one asked ahead
 * of a call (a caller keeping its connection asks its next lease as it
 * ends one, and by the clients' order it would take the slot back before
 * a call on a newer connection, every time), each kind in the order
 * asked; NULL: none waits. */
static struct client *next_waiting(struct lease_loop *L)
{
  struct client *best = NULL;
  for (size_t i = 0; i < L->n; i++) {
    struct client *cl = &L->clients[i];
    if (cl->waiting && (!best || (cl->ahead != best->ahead ? !cl->ahead : cl->asked < best->asked)))
      best = cl;
  }
  return best;
}

/* Grants waiting clients a connection to the server, in next_waiting's order,
 * while there is room. */
static void lease_grant(struct keeper *k, struct lease_loop *L)
{
  struct client *cl;
  while ((L->active < k->max_active || L->dying) && (cl = next_waiting(L))) {
    if (!L->dying && package_changed(k, L)) { /* refused as gone: the call starts a new one */
      gw_keeper_note("the package changed: new calls start a new instance; this one stops");
      L->dying = true;
      keeper_unpublish(k);
    }
    cl->waiting = false;
    if (L->dying) {
      refuse(cl->fd, ECONNREFUSED, "the capability's server stopped listening");
      continue;
    }
    struct cap_error err = {0};
    bool kept = cl->have == k->instance; /* it keeps a connection to this server */
    int fd = kept ? -1 : take_spare(k);
    if (!kept && fd < 0)
      fd = sandbox_connect(k->connector, k->port, 2000, &err);
    if (!kept && fd < 0) {
      gw_keeper_note("cannot reach the server: %s; stopping this instance", err.message);
      refuse(cl->fd, ECONNREFUSED, "the capability's server stopped listening");
      cap_error_clear(&err);
      L->dying = true;
      keeper_unpublish(k); /* new calls start a new instance */
      continue;
    }
    bool proxied = k->req->spec->network.mode == CAP_NET_PROXY;
    cl->egress = proxied ? keeper_egress_grant(&k->egress) : NULL;
    /* a lease asked ahead is vouched for while the caller can see what
     * changes: a watched tree or none */
    bool offer = !proxied && (k->req->rootfs || k->ino >= 0);
    cl->ahead = cl->ahead && kept && offer;
    char message[96];
    snprintf(message, sizeof message, "%s%s", proxied ? KEEPER_EGRESS_OFFER " " : "",
             offer ? KEEPER_KEEP " " KEEPER_AHEAD_OFFER : KEEPER_KEEP);
    if (cl->ahead) {
      size_t len = strlen(message);
      snprintf(message + len, sizeof message - len, " " KEEPER_AHEAD " %llu %llu",
               k->req->rootfs ? 0ULL : (unsigned long long)k->pkg.dev,
               k->req->rootfs ? 0ULL : (unsigned long long)k->pkg.ino);
      fd = k->req->rootfs ? -1 : k->ino; /* kept: no connection travels */
    }
    reply(cl->fd, 0, message, fd, k->protocol, k->instance);
    if (cl->ahead)
      fd = -1; /* the keeper's own */
    if (fd >= 0)
      close(fd);
    cl->leased = true;
    if (L->active++ == 0 && L->cpu_counted)
      L->busy_base = sandbox_cpu_ms(k->running);
    if (L->active > L->busy_peak)
      L->busy_peak = L->active;
  }
}

/* The per-call CPU budget over the busy period: past it, the calls learn
 * why and the server stops. */
static void lease_check_cpu(struct keeper *k, struct lease_loop *L)
{
  if (L->active == 0) {
    L->busy_base = -1;
    L->busy_peak = 0;
    return;
  }
  if (!L->cpu_counted || L->busy_base < 0 || L->dying)
    return;
  int64_t used = sandbox_cpu_ms(k->running) - L->busy_base;
  if (used <= (int64_t)(k->cpu_budget_ms * L->busy_peak))
    return;
  gw_keeper_note("%u call(s) used %lld ms of CPU, over the budget of %llu ms per call: "
                 "stopping the server",
                 L->busy_peak, (long long)used, (unsigned long long)k->cpu_budget_ms);
  char reason[200];
  snprintf(reason, sizeof reason, "cpu budget exceeded: %lld ms used, %llu ms per call",
           (long long)used, (unsigned long long)k->cpu_budget_ms);
  for (size_t i = 0; i < L->n; i++) /* the calls learn why their server went away */
    if (L->clients[i].leased)
      refuse(L->clients[i].fd, ETIMEDOUT, reason);
  L->dying = true;
  keeper_stop(k);
}

/* `capsule stop`: the calls holding a lease learn why, the server stops. */
static void lease_stop_asked(struct keeper *k, struct lease_loop *L)
{
  gw_keeper_note("stop asked (capsule stop): stopping the server");
  for (size_t i = 0; i < L->n; i++) {
    if (L->clients[i].leased || L->clients[i].waiting)
      refuse(L->clients[i].fd, ECONNRESET, "the instance was stopped (capsule stop)");
    keeper_egress_end(&k->egress, L->clients[i].egress, -1);
    close(L->clients[i].fd);
  }
  L->n = 0;
  keeper_stop(k);
}

static void *keeper_serve(void *arg)
{
  struct keeper *k = arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  char why[400];
  if (!keeper_wait_healthy(k, why, sizeof why)) {
    gw_keeper_note("the server did not become healthy within %llu ms: %s",
                   (unsigned long long)k->startup_ms, why);
    keeper_report(k, "the capability's server did not become healthy within %llu ms (%s)",
                  (unsigned long long)k->startup_ms, why);
    keeper_stop(k);
    return NULL;
  }
  gw_keeper_note("server healthy, speaking selu.capability.v1.%s; serving leases (at most %u at "
                 "once, idle timeout %llu ms)",
                 selu_protocol_name(k->protocol), k->max_active, (unsigned long long)k->idle_ms);
  keeper_report(k, "%s", KEEPER_READY);
  snprintf(k->info.protocol, sizeof k->info.protocol, "%s", selu_protocol_name(k->protocol));
  keeper_status(k, GW_INSTANCE_SERVING, 0);

  struct lease_loop L = {.last = cap_now_ms(CLOCK_MONOTONIC), .busy_base = -1};
  L.cpu_counted = k->cpu_budget_ms && sandbox_cpu_ms(k->running) >= 0;
  if (k->cpu_budget_ms && !L.cpu_counted)
    gw_keeper_note("this host gives capsule no cgroup to count CPU in: the per-call CPU budget "
                   "(%llu ms) is not enforced; each call is bounded by its deadline",
                   (unsigned long long)k->cpu_budget_ms);
  for (;;) {
    struct pollfd p[2 + KEEPER_MAX_CLIENTS]; /* the listener, the clients, the package */
    size_t np = 0;
    if (k->listener >= 0)
      p[np++] = (struct pollfd){.fd = k->listener, .events = POLLIN};
    size_t first_client = np;
    for (size_t i = 0; i < L.n; i++)
      p[np++] = (struct pollfd){.fd = L.clients[i].fd, .events = POLLIN};
    if (L.n == 0 && k->ino >= 0) /* an edit then stops it (lease_timeout) */
      p[np++] = (struct pollfd){.fd = k->ino, .events = POLLIN};
    int timeout = lease_timeout(k, &L);
    if (timeout < -1) {
      keeper_stop(k);
      return NULL;
    }
    if (poll(p, np, timeout) < 0 && errno != EINTR)
      continue;
    size_t polled = L.n; /* clients accepted below have no poll entry yet */
    if (k->listener >= 0 && (p[0].revents & POLLIN)) {
      int c = accept4(k->listener, NULL, NULL, SOCK_CLOEXEC);
      if (c >= 0 && L.n < KEEPER_MAX_CLIENTS)
        L.clients[L.n++] = (struct client){.fd = c, .since = cap_now_ms(CLOCK_MONOTONIC)};
      else if (c >= 0)
        close(c);
    }
    lease_read_clients(k, &L, p + first_client, polled);
    if (L.stop_asked) {
      lease_stop_asked(k, &L);
      return NULL;
    }
    lease_grant(k, &L);
    refill_spare(k, &L);
    lease_check_cpu(k, &L);
    if (!L.dying)
      lease_show(k, &L);
  }
}

struct keeper_start {
  struct keeper *k;
  pthread_t thread;
  bool started;
};

static void keeper_started(void *ctx, struct sandbox_running *running)
{
  struct keeper_start *s = ctx;
  s->k->running = running;
  close(s->k->sandbox_end); /* pid 1 has its copy */
  s->k->sandbox_end = -1;
  /* it holds the credentials: not dumpable from now on (not before: an
   * unprivileged keeper writes the sandbox's id maps in /proc, which a
   * non-dumpable parent's child would not let it) */
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  s->started = pthread_create(&s->thread, NULL, keeper_serve, s->k) == 0;
  if (!s->started)
    keeper_stop(s->k);
}

/* The instance's listening socket at sa (0600, published once bound) and
 * the connector pair; any failure ends the keeper with a status line. */
static void keeper_listen(struct keeper *k, const struct sockaddr_un *sa, int pair[2])
{
  k->listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  mode_t old = umask(0077);
  unlink(sa->sun_path); /* a dead keeper's; the lock makes this keeper the only starter */
  int r = k->listener < 0 ? -1 : bind(k->listener, (const struct sockaddr *)sa, sizeof *sa);
  umask(old);
  struct stat sb;
  if (r < 0 || listen(k->listener, 128) < 0 || stat(sa->sun_path, &sb) < 0 ||
      socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0) {
    dprintf(k->status_fd, "cannot set up the instance's socket %s: %s", sa->sun_path,
            strerror(errno));
    _exit(1);
  }
  k->sock_ino = sb.st_ino;
}

/* The server ended (or never started): the log and the waiting caller
 * learn why. */
static void keeper_ended(struct keeper *k, int r, const struct sandbox_result *res,
                         const struct cap_error *err)
{
  if (r < 0) {
    gw_keeper_note("cannot start the server: %s", err->message);
    keeper_report(k, "%scannot start the capability's server: %s", r == -ENOTSUP ? KEEPER_HOST : "",
                  err->message);
  } else if (res->killed_by) {
    gw_keeper_note("the server was stopped: %s exceeded", res->killed_by);
    keeper_report(k, "the capability's server was stopped before it became healthy: %s exceeded",
                  res->killed_by);
  } else {
    gw_keeper_note("the server exited with status %d", res->exit_status);
    keeper_report(k, "the capability's server exited with status %d before it became healthy",
                  res->exit_status);
  }
}

/* The package's tree watched before the server reads any of it (an
 * image's server never reads it), or its digest kept to compare. */
static void keeper_watch(struct keeper *k)
{
  if (k->req->rootfs)
    return;
  k->ino = gw_package_watch(k->req->spec->package_dir, &k->pkg);
  struct cap_error err = {0};
  if (k->ino < 0 && gw_spec_digest(k->req->spec, k->digest, &err) < 0)
    cap_error_clear(&err); /* an unreadable package: the first lease retires the keeper */
}

void gw_keeper_main(const struct gw_instance_request *req, const struct sockaddr_un *sa,
                    int status_fd, int lock_fd, const uint64_t *epoch)
{
  /* `ps` shows this process for as long as the instance lives: never the
   * arguments of the call that started it (they may hold secrets) */
  cap_proctitle_set("capsule-keeper", "capsule keeper %s", req->spec->id);
  int keep[] = {status_fd, lock_fd};
  gw_keeper_close_all_but(keep, 2);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  int log, devnull = gw_keeper_stdio(req->log_path, &log);

  const struct cap_spec *spec = req->spec;
  struct keeper k = {.req = req,
                     .listener = -1,
                     .connector = -1,
                     .spare = -1,
                     .status_fd = status_fd,
                     .port = spec->runtime.port,
                     .max_active =
                         spec->runtime.max_concurrency ? spec->runtime.max_concurrency : 1,
                     .idle_ms = spec->runtime.idle_timeout_ms,
                     .startup_ms = spec->runtime.startup_timeout_ms,
                     .report_lock = PTHREAD_MUTEX_INITIALIZER,
                     .publish_lock = PTHREAD_MUTEX_INITIALIZER,
                     .status_mu = PTHREAD_MUTEX_INITIALIZER,
                     .sandbox_end = -1,
                     .cpu_budget_ms = spec->limits.cpu_ms_per_task,
                     .ino = -1};
  if (req->wait_ms && req->wait_ms < k.startup_ms)
    k.startup_ms = req->wait_ms; /* nobody waits longer for it */
  snprintf(k.sock_path, sizeof k.sock_path, "%s", sa->sun_path);
  keeper_status_begin(&k, epoch);
  keeper_egress_init(&k.egress, req->run_dir, spec->id, req->user);
  int pair[2] = {-1, -1};
  keeper_listen(&k, sa, pair);
  close(lock_fd); /* published: later calls find this keeper */
  keeper_watch(&k);
  k.connector = pair[0];
  k.sandbox_end = pair[1];

  /* the server: no wall clock and no CPU budget of its own (it lives across
   * calls; each call has its deadline) */
  struct cap_spec run_spec = *spec;
  run_spec.limits.wall_ms = 0;
  run_spec.limits.cpu_ms_per_task = 0;
  if (req->rootfs)
    gw_selu_image_spec(&run_spec);
  char **cmd = req->argv ? (char **)req->argv : gw_keeper_server_argv(spec);
  struct keeper_start start = {.k = &k};
  struct sandbox_options opt = {
      .argv = cmd,
      .workdir = req->rootfs ? req->workdir : spec->package_dir,
      .rootfs = req->rootfs,
      .inside_id = req->inside_id,
      .extra_env = req->env,
      .n_extra_env = req->n_env,
      .redirect_stdio = true,
      .stdio = {devnull, log, log},
      .has_connector = true,
      .connector_fd = pair[1],
      .hidden = req->hidden,
      .n_hidden = req->n_hidden,
      .on_started = keeper_started,
      .on_started_ctx = &start,
      .id_base = req->id_base,
      .proxy = {.sink = &k.egress.sink}, /* its decisions go to the calls' egress log */
  };
  gw_keeper_note("starting %s (%s)", spec->id, cmd[0]);
  struct sandbox_result res;
  struct cap_error err = {0};
  int r = sandbox_run(&run_spec, &opt, &res, &err);
  keeper_ended(&k, r, &res, &err);
  keeper_egress_close(&k.egress); /* the proxy has stopped: what it decided with no lease kept */
  keeper_unpublish(&k);
  keeper_status_put(&k, true);
  _exit(0);
}
