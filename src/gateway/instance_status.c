/* The run directory and who may reach a keeper there; what `capsule ps`
 * and `capsule stop` read and do: the keepers' status files beside their
 * sockets, and the stop request a keeper honours. */
#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/procstat.h"
#include "gateway/instance.h"
#include "gateway/instance_int.h"
#include "gateway/state.h"

#define GW_KEEPER_TERM_MS 2500 /* SIGTERM, then SIGKILL */
#define STATUS_SUFFIX ".status"

/* Connects to a keeper by deadline (a full backlog is waited out, not
 * blocked on), and only to one run by this user: a socket planted by
 * someone else is refused. */
int gw_instance_connect(const struct sockaddr_un *sa, uint64_t deadline)
{
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return -errno;
  while (connect(fd, (const struct sockaddr *)sa, sizeof *sa) < 0) {
    int e = errno;
    if (e != EAGAIN || cap_now_ms(CLOCK_MONOTONIC) >= deadline) {
      close(fd);
      return -e;
    }
    struct timespec ts = {.tv_nsec = 5 * 1000000};
    nanosleep(&ts, NULL);
  }
  struct ucred peer;
  socklen_t len = sizeof peer;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) < 0 || peer.uid != geteuid()) {
    close(fd);
    return -EPERM;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

int gw_instance_check_run_dir(const char *dir, struct cap_error *err)
{
  struct stat sb;
  int r = lstat(dir, &sb); /* made only when missing: a long-lived caller checks it every call */
  if (r < 0 && errno == ENOENT) {
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
      return cap_error_errno(err, errno, "cannot create %s", dir);
    r = lstat(dir, &sb);
  }
  if (r < 0)
    return cap_error_errno(err, errno, "cannot read %s", dir);
  if (!S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 077))
    return cap_error_set(err, EPERM,
                         "%s is not a private directory of this user's (mode 0700, owned by uid "
                         "%u): capsule keeps instances' sockets there; fix or remove it",
                         dir, (unsigned)geteuid());
  return 0;
}

static const char *const state_names[] = {
    [GW_INSTANCE_STARTING] = "starting",
    [GW_INSTANCE_SERVING] = "serving",
    [GW_INSTANCE_STOPPING] = "stopping",
};

const char *gw_instance_state_name(enum gw_instance_state s)
{
  return (unsigned)s < sizeof state_names / sizeof state_names[0] ? state_names[s] : "unknown";
}

/* pid's start time in clock ticks since boot (/proc/PID/stat field 22),
 * 0 when there is no such process. */
static unsigned long long proc_start(int pid)
{
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  unsigned long long start;
  const char *after = cap_proc_stat(AT_FDCWD, path, buf, sizeof buf);
  /* field 3 (%c), fields 4-21 skipped, then 22 */
  static const char fmt[] = "%*c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
                            "%*s %*s %llu";
  return after && sscanf(after, fmt, &start) == 1 ? start : 0;
}

/* The keeper a status file names is the process now at its pid: a keeper
 * killed outright leaves its file, and the pid may since be another's. */
static bool keeper_alive(const struct gw_instance_info *info)
{
  unsigned long long now = proc_start(info->pid);
  return now && now == info->pid_start;
}

/* A user as its status line holds it: a line of its own (no control byte
 * may start another: a forged pid= would choose whom `stop` signals) */
static void status_user(char out[128], const char *user)
{
  snprintf(out, 128, "%s", user ? user : "");
  for (char *p = out; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f)
      *p = '_';
}

void gw_instance_status_write(const char *path, struct gw_instance_info *info)
{
  if (!info->pid_start)
    info->pid_start = proc_start(info->pid);
  char tmp[4096]; /* the writer's own: two keepers of one name may write at once */
  if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)syscall(SYS_gettid)) >= (int)sizeof tmp)
    return;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return;
  char user[sizeof info->user];
  status_user(user, info->user);
  dprintf(fd,
          "capability=%s\npid=%d\nstate=%s\nprotocol=%s\nleases=%u\nmax_leases=%u\n"
          "started_ms=%llu\nidle_since_ms=%llu\npid_start=%llu\nuser=%s\n",
          info->capability, info->pid, gw_instance_state_name(info->state), info->protocol,
          info->leases, info->max_leases, (unsigned long long)info->started_ms,
          (unsigned long long)info->idle_since_ms, info->pid_start, user);
  close(fd);
  if (rename(tmp, path) < 0)
    unlink(tmp);
}

void gw_instance_status_retire(const char *run_dir, const char *key, char *path, size_t size,
                               struct gw_instance_info *info)
{
  char moved[4096];
  if (snprintf(moved, sizeof moved, "%s/%s~%d%s", run_dir, key, (int)getpid(), STATUS_SUFFIX) >=
      (int)sizeof moved)
    return;
  if (rename(path, moved) < 0)
    unlink(moved); /* written anew below */
  snprintf(path, size, "%s", moved);
  info->state = GW_INSTANCE_STOPPING; /* no new call; not an idle one to stop for room */
  gw_instance_status_write(path, info);
}

/* One status file into *info: false when it is not one (or not whole). */
static bool status_read(int dir_fd, const char *name, struct gw_instance_info *info)
{
  _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  struct stat sb;
  /* only a keeper of this user's wrote it: a file another user put in a
   * state directory of theirs must not choose whom `stop` signals */
  if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
      (sb.st_mode & 022))
    return false;
  char buf[2048];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  if (n <= 0)
    return false;
  buf[n] = '\0';
  *info = (struct gw_instance_info){.pid = -1, .state = GW_INSTANCE_STARTING};
  unsigned seen = 0;
  for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    char *eq = strchr(line, '=');
    if (!eq)
      continue;
    *eq = '\0';
    const char *v = eq + 1;
    if (strcmp(line, "capability") == 0) {
      snprintf(info->capability, sizeof info->capability, "%s", v);
      seen |= 1;
    } else if (strcmp(line, "pid") == 0) {
      info->pid = atoi(v);
      seen |= 2;
    } else if (strcmp(line, "state") == 0) {
      for (size_t s = 0; s < sizeof state_names / sizeof state_names[0]; s++)
        if (strcmp(v, state_names[s]) == 0)
          info->state = (enum gw_instance_state)s;
    } else if (strcmp(line, "protocol") == 0) {
      snprintf(info->protocol, sizeof info->protocol, "%s", v);
    } else if (strcmp(line, "leases") == 0) {
      info->leases = (unsigned)strtoul(v, NULL, 10);
    } else if (strcmp(line, "max_leases") == 0) {
      info->max_leases = (unsigned)strtoul(v, NULL, 10);
    } else if (strcmp(line, "started_ms") == 0) {
      info->started_ms = strtoull(v, NULL, 10);
    } else if (strcmp(line, "idle_since_ms") == 0) {
      info->idle_since_ms = strtoull(v, NULL, 10);
    } else if (strcmp(line, "pid_start") == 0) {
      info->pid_start = strtoull(v, NULL, 10);
    } else if (strcmp(line, "user") == 0) {
      snprintf(info->user, sizeof info->user, "%s", v);
    }
  }
  size_t len = strlen(name) - strlen(STATUS_SUFFIX);
  if (len >= sizeof info->key)
    return false;
  memcpy(info->key, name, len);
  info->key[len] = '\0';
  return seen == 3 && info->pid > 0;
}

static int by_capability(const void *a, const void *b)
{
  const struct gw_instance_info *x = a, *y = b;
  int c = strcmp(x->capability, y->capability);
  return c ? c : x->pid - y->pid;
}

/* Whether name is KEY~PID.status for pid (a moved status file's) */
static bool own_name(const char *name, int pid)
{
  char tail[48];
  snprintf(tail, sizeof tail, "~%d%s", pid, STATUS_SUFFIX);
  size_t n = strlen(name), t = strlen(tail);
  return n > t && strcmp(name + n - t, tail) == 0;
}

int gw_instance_list(const char *run_dir, struct gw_instance_info **out, size_t *n,
                     struct cap_error *err)
{
  *out = NULL;
  *n = 0;
  struct stat rd;
  if (lstat(run_dir, &rd) < 0)
    return errno == ENOENT ? 0 : cap_error_errno(err, errno, "cannot read %s", run_dir);
  if (gw_instance_check_run_dir(run_dir, err) < 0) /* another user's: not listed, never signalled */
    return -EPERM;
  DIR *d = opendir(run_dir);
  if (!d)
    return errno == ENOENT ? 0 : cap_error_errno(err, errno, "cannot read %s", run_dir);
  size_t cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name), sl = strlen(STATUS_SUFFIX);
    if (len <= sl || strcmp(e->d_name + len - sl, STATUS_SUFFIX) != 0)
      continue;
    struct gw_instance_info info;
    /* a keeper killed outright leaves its file: only the living are listed,
     * and a file of a keeper's own name (gw_instance_status_retire) goes */
    if (!status_read(dirfd(d), e->d_name, &info) || !keeper_alive(&info)) {
      if (strchr(e->d_name, '~') && info.pid && own_name(e->d_name, info.pid))
        unlinkat(dirfd(d), e->d_name, 0);
      continue;
    }
    if (*n == cap) {
      cap = cap ? 2 * cap : 8;
      *out = cap_xrealloc(*out, cap * sizeof **out);
    }
    (*out)[(*n)++] = info;
  }
  closedir(d);
  if (*n)
    qsort(*out, *n, sizeof **out, by_capability);
  return 0;
}

/* Sends the stop request ('S') on the keeper's socket: false when that
 * keeper did not answer there (another of the same name may: not asked) */
static bool ask_keeper_to_stop(const char *run_dir, const struct gw_instance_info *inst)
{
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s.sock", run_dir, inst->key) >=
      (int)sizeof sa.sun_path)
    return false;
  _cleanup_close_ int fd = gw_instance_connect(&sa, cap_now_ms(CLOCK_MONOTONIC) + 1000);
  struct ucred peer;
  socklen_t len = sizeof peer;
  return fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0 &&
         peer.pid == inst->pid && send(fd, "S", 1, MSG_NOSIGNAL) == 1;
}

/* SIGTERM to the keeper through a pidfd opened before its identity is
 * checked: never to a process that took a dead keeper's pid. */
static int signal_keeper(const struct gw_instance_info *inst, int sig)
{
  _cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, inst->pid, 0);
  if (pidfd < 0 || !keeper_alive(inst))
    return 0; /* gone */
  if (syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) < 0 && errno != ESRCH)
    return -errno;
  return 0;
}

int gw_instance_stop(const char *run_dir, const struct gw_instance_info *inst, uint64_t wait_ms,
                     struct cap_error *err)
{
  bool asked = ask_keeper_to_stop(run_dir, inst);
  int r = asked ? 0 : signal_keeper(inst, SIGTERM);
  if (r < 0)
    return cap_error_errno(err, -r, "cannot stop %s's keeper (pid %d)", inst->capability,
                           inst->pid);
  uint64_t now = cap_now_ms(CLOCK_MONOTONIC), deadline = now + wait_ms;
  /* SIGTERM goes on to the server, which may drain its calls or ignore
   * it: the keeper is killed then (its sandbox with it: pid 1's lifeline),
   * as the stop request's closed connector has pid 1 do */
  uint64_t kill_at = asked ? UINT64_MAX : now + GW_KEEPER_TERM_MS;
  while (keeper_alive(inst)) {
    if (cap_now_ms(CLOCK_MONOTONIC) >= kill_at) {
      kill_at = UINT64_MAX;
      signal_keeper(inst, SIGKILL);
    }
    if (cap_now_ms(CLOCK_MONOTONIC) >= deadline)
      return cap_error_set(err, ETIMEDOUT, "%s's keeper (pid %d) has not exited yet",
                           inst->capability, inst->pid);
    struct timespec ts = {.tv_nsec = 20 * 1000000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

long gw_instances_stop_run(const char *run, const char *cap, uint64_t wait_ms,
                           gw_instance_stopped_fn each, void *ctx, struct cap_error *err)
{
  struct gw_instance_info *list = NULL;
  size_t n = 0;
  if (gw_instance_list(run, &list, &n, err) < 0)
    return -(long)err->code;
  long found = 0;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(list[i].capability, cap) != 0)
      continue;
    struct cap_error failed = {0};
    bool stopped = gw_instance_stop(run, &list[i], wait_ms, &failed) == 0;
    if (each)
      each(ctx, &list[i], stopped ? NULL : &failed);
    cap_error_clear(&failed);
    found++;
  }
  free(list);
  return found;
}

long gw_instances_stop(const char *state_dir, const char *cap, uint64_t wait_ms,
                       gw_instance_stopped_fn each, void *ctx, struct cap_error *err)
{
  _cleanup_free_ char *run = cap_xasprintf("%s/run", state_dir);
  long found = gw_instances_stop_run(run, cap, wait_ms, each, ctx, err);
  if (found < 0)
    return found;
  struct gw_state *st = NULL;
  struct cap_error ignored = {0};
  if (found && gw_state_open(state_dir, &st, &ignored) == 0)
    gw_state_close(st);
  cap_error_clear(&ignored);
  return found;
}

static char *epoch_path(const char *run_dir, const char *cap)
{
  char hex[65];
  gw_sha256_hex(cap, strlen(cap), hex);
  return cap_xasprintf("%s/grants-%.32s.epoch", run_dir, hex);
}

static uint64_t epoch_parse(int fd)
{
  char buf[32];
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  buf[n > 0 ? n : 0] = '\0';
  return strtoull(buf, NULL, 10);
}

int gw_grants_epoch(const char *run_dir, const char *cap, uint64_t *epoch, struct cap_error *err)
{
  _cleanup_free_ char *path = epoch_path(run_dir, cap);
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  *epoch = 0;
  if (fd < 0 && errno != ENOENT)
    return cap_error_errno(err, errno, "cannot read %s", path);
  if (fd >= 0)
    *epoch = epoch_parse(fd);
  return 0;
}

bool gw_grants_epoch_moved(const char *run_dir, const char *cap, uint64_t epoch)
{
  uint64_t now;
  struct cap_error err = {0};
  bool moved = gw_grants_epoch(run_dir, cap, &now, &err) < 0 || now != epoch;
  cap_error_clear(&err);
  return moved;
}

/* Moves the count under its file's lock, the run directory made when
 * missing: a call that read the count before it was there (as 0) may make
 * it and start a keeper afterwards. */
static int epoch_bump(const char *run_dir, const char *cap, struct cap_error *err)
{
  int r = gw_instance_check_run_dir(run_dir, err); /* this user's, not a link, private */
  if (r < 0)
    return r;
  _cleanup_free_ char *path = epoch_path(run_dir, cap);
  _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 || flock(fd, LOCK_EX) < 0)
    return cap_error_errno(err, errno, "cannot record the revoke in %s", path);
  char buf[32];
  int n = snprintf(buf, sizeof buf, "%" PRIu64 "\n", epoch_parse(fd) + 1);
  if (pwrite(fd, buf, (size_t)n, 0) != n)
    return cap_error_errno(err, errno, "cannot record the revoke in %s", path);
  return 0;
}

long gw_instances_revoke(const char *state_dir, const char *cap, uint64_t wait_ms,
                         gw_instance_stopped_fn each, void *ctx, struct cap_error *err)
{
  _cleanup_free_ char *run = cap_xasprintf("%s/run", state_dir);
  struct cap_error bump = {0};
  int r = epoch_bump(run, cap, &bump);
  long found = gw_instances_stop(state_dir, cap, wait_ms, each, ctx, err); /* whatever the count */
  if (r < 0 && found >= 0) {
    found = r;
    cap_error_set(err, bump.code, "%s", bump.message);
  }
  cap_error_clear(&bump);
  return found;
}

static long max_warm(void)
{
  const char *v = getenv("CAPSULE_SELU_MAX_WARM"); /* the operator's bound, else ours */
  long max = v && *v ? strtol(v, NULL, 10) : GW_SELU_MAX_WARM;
  return max >= 1 && max <= 4096 ? max : GW_SELU_MAX_WARM;
}

/* who's live exclusive instances of cap in list: how many, and in *idle
 * the least recently idle one (NULL: all busy) */
static size_t owned(struct gw_instance_info *list, size_t n, const char *cap, const char *who,
                    struct gw_instance_info **idle)
{
  size_t mine = 0;
  *idle = NULL;
  for (size_t i = 0; i < n; i++) {
    struct gw_instance_info *x = &list[i];
    if (strcmp(x->user, who) != 0 || strcmp(x->capability, cap) != 0 ||
        strcmp(x->protocol, "mcp") == 0 || x->state == GW_INSTANCE_STOPPING)
      continue;
    mine++;
    if (x->state == GW_INSTANCE_SERVING && !x->leases && x->idle_since_ms &&
        (!*idle || x->idle_since_ms < (*idle)->idle_since_ms))
      *idle = x;
  }
  return mine;
}

/* The lock that makes one start at a time of user's instances of cap:
 * RUN/room-HASH.lock, taken by the deadline (its descriptor), else -1 */
static int room_lock(const char *run_dir, const char *cap, const char *who, uint64_t deadline)
{
  _cleanup_free_ char *both = cap_xasprintf("%s%c%s", cap, 0, who);
  char hex[65];
  gw_sha256_hex(both, strlen(cap) + 1 + strlen(who), hex);
  _cleanup_free_ char *path = cap_xasprintf("%s/room-%.32s.lock", run_dir, hex);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  while (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
    if ((errno != EWOULDBLOCK && errno != EINTR) || cap_now_ms(CLOCK_MONOTONIC) >= deadline) {
      close(fd);
      return -1;
    }
    struct timespec ts = {.tv_nsec = 10 * 1000000};
    nanosleep(&ts, NULL);
  }
  return fd;
}

int gw_instance_room(const char *run_dir, const char *cap, const char *user, uint64_t deadline,
                     int *lock, struct cap_error *err)
{
  *lock = -1;
  if (!user || !*user)
    return 0; /* a shared instance: one a capability */
  char who[128];
  status_user(who, user);
  if ((*lock = room_lock(run_dir, cap, who, deadline)) < 0)
    return cap_error_set(err, ETIMEDOUT, "another call is still starting an instance of %s for %s",
                         cap, user);
  long max = max_warm();
  struct gw_instance_info *list = NULL, *idle = NULL;
  size_t mine = 0;
  /* a lease's end shows in its status file up to KEEPER_STATUS_SETTLE_MS
   * later: at the bound with none idle, listed again for half a second */
  for (int tries = 0; tries < 10; tries++) {
    size_t n = 0;
    struct cap_error ignored = {0};
    free(list);
    list = NULL;
    if (gw_instance_list(run_dir, &list, &n, &ignored) < 0) {
      cap_error_clear(&ignored);
      return 0; /* nothing listed: nothing to count */
    }
    mine = owned(list, n, cap, who, &idle);
    if (mine < (size_t)max || idle)
      break;
    struct timespec ts = {.tv_nsec = 50 * 1000000};
    nanosleep(&ts, NULL);
  }
  int r = 0;
  if (mine >= (size_t)max) { /* the least recently used idle one gives way */
    struct cap_error ignored = {0};
    r = idle && gw_instance_stop(run_dir, idle, 5000, &ignored) == 0 ? 0 : -EBUSY;
    cap_error_clear(&ignored);
  }
  if (r < 0)
    cap_error_set(err, EBUSY,
                  "%zu warm instances of %s run for user %s (a session each) and none is idle "
                  "(at most %ld a user and capability: CAPSULE_SELU_MAX_WARM); try again when a "
                  "call ends, or stop some (capsule ps, capsule stop)",
                  mine, cap, user, max);
  free(list);
  return r;
}
