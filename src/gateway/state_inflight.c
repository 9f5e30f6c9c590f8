/* Calls in flight (gateway/state.h, gw_inflight_*): a marker file per
 * call while it runs, and the recovery that turns an abandoned one into
 * its audit record. Split from state_audit.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/fork_mutex.h"
#include "core/fs.h"
#include "gateway/state.h"
#include "gateway/state_int.h"

/* ---- calls in flight ----
 * A call is recorded as in flight before it runs: a marker file
 * STATE/run/calls/<random>, holding the audit record's fields (NUL
 * separated), the start time and the pid, write-locked for the call's
 * life. The lock goes with the process: a capsule killed mid-call leaves
 * a marker whose lock is free, and the next process that opens the state
 * turns it into one audit record with outcome "interrupted". A POSIX
 * record lock (fcntl F_SETLK), not flock: it belongs to the process, so
 * the sandbox's pid 1 or a warm instance's keeper forked during the call
 * does not hold it on after capsule is gone. Within one process such a
 * lock never conflicts, so a process skips the markers with its own pid. */

#define INFLIGHT_DIR "run/calls"

/* The markers this process holds (begun, not yet finished or ended). Its
 * own recovery never opens them: closing any descriptor of a file drops
 * every POSIX lock the process holds on it, and the marker would then look
 * abandoned to every other capsule while its call or run goes on (a run
 * opens its state mid-run to read a credential). */
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static char **own_names;
static size_t n_own;
static char **volatile forked_names; /* a forked child's: its parent's, kept reachable, unread */
static pthread_once_t own_once = PTHREAD_ONCE_INIT;

/* A forked child (serve's call children open the state: recovery, their
 * own markers) finds own_lock unlocked, whichever thread held it at the
 * fork, and holds none of its parent's markers' locks: it forgets their
 * names (the array may have been mid-change: not freed) and any parked
 * ones (spares_pid says so too) */
static void own_child(void)
{
  pthread_mutex_init(&own_lock, NULL);
  if (own_names)
    forked_names = own_names;
  own_names = NULL;
  n_own = 0;
}
static void own_at_fork(void) { pthread_atfork(NULL, NULL, own_child); }

static void own_lock_take(void)
{
  pthread_once(&own_once, own_at_fork); /* before the first lock: a fork may find it held */
  pthread_mutex_lock(&own_lock);
}

static void own_marker(const char *name, bool held)
{
  own_lock_take();
  if (held) {
    own_names = cap_xrealloc(own_names, (n_own + 1) * sizeof *own_names);
    own_names[n_own++] = cap_xstrdup(name);
  }
  for (size_t i = 0; !held && i < n_own; i++)
    if (strcmp(own_names[i], name) == 0) {
      free(own_names[i]);
      own_names[i] = own_names[--n_own];
      break;
    }
  pthread_mutex_unlock(&own_lock);
}

static bool own_marker_has(const char *name)
{
  bool found = false;
  own_lock_take();
  for (size_t i = 0; i < n_own && !found; i++)
    found = strcmp(own_names[i], name) == 0;
  pthread_mutex_unlock(&own_lock);
  return found;
}

/* The whole file write-locked by this process; wait or not. */
static int lock_marker(int fd, bool wait)
{
  struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  return fcntl(fd, wait ? F_SETLKW : F_SETLK, &l) < 0 ? -errno : 0;
}

/* Spare marker files: a recorded marker is emptied and kept in
 * STATE/run/spares (recover_one) for the next marker to take, since
 * creating a file (a new inode) costs far more on ext4 than renaming one,
 * on the way of every `capsule run`. At most SPARE_SLOTS of them, named by
 * slot; a directory of their own, which no capsule counts or records
 * markers from. */
#define SPARE_DIR "run/spares"
#define SPARE_SLOTS 64
#define SPARE_TRIES 3

/* Takes happen one at a time in a process: POSIX locks never conflict
 * within one, and a second descriptor of a marker another thread has just
 * taken, once closed, would drop that marker's lock. */
static struct cap_fork_mutex take_lock = CAP_FORK_MUTEX_INIT;

/* A spare renamed to name in dir (the markers' directory), locked first
 * (a taker in another process has to get the lock too) and checked to be
 * the file under the spare's name still, and empty. It goes to the
 * marker's own name at once: locked before it has it, so a marker under
 * its name is still either locked by its call or abandoned, and one
 * abandoned before it was written records nothing. -1 when there is
 * none. */
static int take_spare(int statefd, int dir, const char *name, unsigned start)
{
  int fd = -1;
  cap_fork_mutex_lock(&take_lock);
  for (unsigned i = 0; i < SPARE_TRIES && fd < 0; i++) {
    char spare[32];
    snprintf(spare, sizeof spare, SPARE_DIR "/%u", (start + i) % SPARE_SLOTS);
    fd = openat(statefd, spare, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat a, b;
    if (fd >= 0 &&
        (lock_marker(fd, false) < 0 || fstat(fd, &a) < 0 || !S_ISREG(a.st_mode) ||
         a.st_nlink != 1 || a.st_size != 0 ||
         fstatat(statefd, spare, &b, AT_SYMLINK_NOFOLLOW) < 0 || a.st_ino != b.st_ino ||
         a.st_dev != b.st_dev || renameat2(statefd, spare, dir, name, RENAME_NOREPLACE) < 0)) {
      close(fd);
      fd = -1;
    }
  }
  cap_fork_mutex_unlock(&take_lock);
  return fd;
}

/* A recorded marker (name in dir; fd: it, locked) emptied and kept as a
 * spare in the first free slot from *slot on (one pass over the slots per
 * recovery), or removed when there is none. */
static void recycle_marker(int statefd, int dir, const char *name, int fd, unsigned *slot)
{
  if (*slot == 0)
    mkdirat(statefd, SPARE_DIR, 0700);
  if (ftruncate(fd, 0) == 0)
    for (; *slot < SPARE_SLOTS; (*slot)++) {
      char spare[32];
      snprintf(spare, sizeof spare, SPARE_DIR "/%u", *slot);
      if (renameat2(dir, name, statefd, spare, RENAME_NOREPLACE) == 0) {
        (*slot)++;
        return;
      }
      if (errno != EEXIST)
        break;
    }
  unlinkat(dir, name, 0);
}

static int inflight_dir(int statefd)
{
  mkdirat(statefd, "run", 0700);
  mkdirat(statefd, INFLIGHT_DIR, 0700);
  return openat(statefd, INFLIGHT_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
}

/* V in decimal, '-' first when NEG, at the end of BUF (24 bytes): as
 * printf's %llu and %lld write it. */
static const char *dec(char buf[24], uint64_t v, bool neg)
{
  char *p = buf + 23;
  *p = '\0';
  do
    *--p = (char)('0' + v % 10);
  while (v /= 10);
  if (neg)
    *--p = '-';
  return p;
}

/* The marker's fields, NUL-separated: a tag, user, capability, tool,
 * arguments' hash, decision, start (ms), pid; a finished one
 * (gw_inflight_finish, gw_inflight_answered) adds outcome, duration (ms)
 * and the result's hash. The start is written with pad leading zeros
 * (read the same: strtoull). */
static void marker_text(struct cap_buf *b, const struct gw_inflight *m,
                        const struct gw_audit_record *rec, bool finished, size_t pad)
{
  const char *fields[] = {rec->user, rec->capability, rec->tool, rec->args_hash, rec->decision};
  cap_buf_puts(b, "capsule-inflight-v1");
  for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
    cap_buf_putc(b, '\0');
    cap_buf_puts(b, fields[i]);
  }
  /* the numbers as %llu and %d print them (no printf: twice a call) */
  char num[24];
  cap_buf_putc(b, '\0');
  for (size_t i = 0; i < pad; i++)
    cap_buf_putc(b, '0');
  cap_buf_puts(b, dec(num, m->start_ms, false));
  cap_buf_putc(b, '\0');
  pid_t pid = m->pid ? m->pid : getpid();
  cap_buf_puts(b, dec(num, (uint64_t)(pid < 0 ? -(int64_t)pid : pid), pid < 0));
  cap_buf_putc(b, '\0');
  if (finished)
    cap_buf_printf(b, "%s%c%lld%c%s%c", rec->outcome ? rec->outcome : "ok", '\0',
                   (long long)rec->duration_ms, '\0', rec->result_hash, '\0');
}

/* The marker's text written over the old in one write, never cut: a
 * shorter text is padded (its start's leading zeros) to the old text's
 * length (m->len), so no tail of the old text (a finished record's
 * outcome, duration and hash, say) can ever follow the new fields, not
 * even after a kill between a write and a truncate (there is none). Also
 * cheaper: a truncate on ext4 at each warm call's begin, once its spare
 * last held a finished record, cost more than the write. */
static int inflight_write(struct gw_inflight *m, const struct gw_audit_record *rec, bool finished)
{
  struct cap_buf b = {0};
  cap_buf_reserve(&b, 256);
  marker_text(&b, m, rec, finished, 0);
  if (m->len > b.len) {
    size_t pad = m->len - b.len;
    b.len = 0;
    marker_text(&b, m, rec, finished, pad);
  }
  ssize_t w = pwrite(m->fd, b.data, b.len, 0);
  int r = w == (ssize_t)b.len ? 0 : w < 0 ? -errno : -EIO;
  /* a short write may still have grown the file: the next pads past it */
  m->len = r == 0 || b.len > m->len ? b.len : m->len;
  cap_buf_free(&b);
  return r;
}

/* Markers of ended calls kept for the next calls of this process: parked
 * under their own names, still locked and still in own_names (so no
 * recovery here opens them, and another process's skips a locked one),
 * their tag's first byte overwritten so that a parked marker records
 * nothing once its lock is free (inflight_record reads no tag: the
 * process died between calls). A call's marker then costs a write at its
 * begin and one byte at its end instead of a file created and removed (a
 * create on a busy disk was 0.1-0.4 ms of a warm call), or renamed twice.
 * Of the process that made them: a forked child holds none of their
 * locks. Keyed by the state directory (its device and inode). */
#define SPARE_MARKERS 8
struct spare_marker {
  int fd, statefd; /* the marker, and its state directory (the call's dirfd) */
  dev_t dev;
  ino_t ino;  /* of the state directory */
  size_t len; /* what the marker's file holds */
  char name[32];
};
static struct spare_marker spares[SPARE_MARKERS];
static size_t n_spares;
static pid_t spares_pid;
static bool spares_on;

void gw_inflight_spares(bool on)
{
  own_lock_take();
  spares_on = on;
  size_t n = spares_pid == getpid() ? n_spares : 0;
  struct spare_marker drop[SPARE_MARKERS];
  memcpy(drop, spares, n * sizeof *drop);
  n_spares = 0;
  spares_pid = getpid();
  pthread_mutex_unlock(&own_lock);
  for (size_t i = 0; i < n; i++) { /* removed before their locks go */
    char path[48];
    snprintf(path, sizeof path, INFLIGHT_DIR "/%s", drop[i].name);
    unlinkat(drop[i].statefd, path, 0);
    close(drop[i].fd);
    close(drop[i].statefd);
    own_marker(drop[i].name, false);
  }
}

static bool spare_take(const struct stat *dir, pid_t pid, struct spare_marker *out)
{
  bool got = false;
  own_lock_take();
  if (spares_pid != pid)
    n_spares = 0; /* a fork's copy: not this process's locks, nor its spares */
  for (size_t i = n_spares; i-- > 0 && !got;)
    if (spares[i].dev == dir->st_dev && spares[i].ino == dir->st_ino) {
      *out = spares[i];
      spares[i] = spares[--n_spares];
      got = true;
    }
  pthread_mutex_unlock(&own_lock);
  return got;
}

static bool spare_give(const struct spare_marker *m)
{
  bool kept = false;
  pid_t pid = getpid(); /* a system call: not with the lock held (every call's end takes it) */
  own_lock_take();
  if (spares_on && spares_pid == pid && n_spares < SPARE_MARKERS) {
    spares[n_spares++] = *m;
    kept = true;
  }
  pthread_mutex_unlock(&own_lock);
  return kept;
}

/* A parked marker made the call's: written in place. Its file must still
 * be linked (a state directory removed under it would hide the call).
 * dir: statefd's fstat (the state's, taken once at its open), or NULL. */
static int inflight_reuse(int statefd, const struct stat *dir, const struct gw_audit_record *r,
                          struct gw_inflight *m)
{
  struct stat dsb;
  struct spare_marker sp;
  if (!dir && fstat(statefd, &dsb) < 0)
    return -ENOENT;
  if (!spare_take(dir ? dir : &dsb, m->pid, &sp))
    return -ENOENT;
  m->start_ms = cap_now_ms(CLOCK_REALTIME);
  m->len = sp.len;
  nlink_t links = 0; /* its link count alone: core/fs.h says why */
  int e = cap_fd_nlink(sp.fd, &links) < 0 || links == 0 ? -ENOENT : 0;
  if (e == 0) {
    m->fd = sp.fd;
    e = inflight_write(m, r, false);
  }
  if (e < 0) { /* dropped: a new one is made */
    char path[48];
    snprintf(path, sizeof path, INFLIGHT_DIR "/%s", sp.name);
    unlinkat(sp.statefd, path, 0);
    close(sp.fd);
    close(sp.statefd);
    own_marker(sp.name, false);
    *m = (struct gw_inflight){.fd = -1, .pid = m->pid};
    return e;
  }
  m->dirfd = sp.statefd; /* the spare's own descriptor of the directory it is keyed by */
  m->keyed = true;
  m->dev = sp.dev;
  m->ino = sp.ino;
  m->name = cap_xstrdup(sp.name);
  return 0;
}

static int inflight_begin(int statefd, const struct stat *dir_sb, const char *statedir,
                          const struct gw_audit_record *r, struct gw_inflight *m,
                          struct cap_error *err)
{
  /* the pid once a call: its marker's, its spare's (a call ends in the
   * process that began it; a fork's child checks its own at spare_give) */
  *m = (struct gw_inflight){.fd = -1, .pid = getpid()};
  if (inflight_reuse(statefd, dir_sb, r, m) == 0)
    return 0;
  _cleanup_close_ int dir = inflight_dir(statefd);
  if (dir < 0)
    return cap_error_errno(err, errno, "cannot create %s/" INFLIGHT_DIR, statedir);
  unsigned char rnd[12];
  randombytes_buf(rnd, sizeof rnd);
  char name[32], tmp[40];
  sodium_bin2hex(name, sizeof name, rnd, sizeof rnd);
  snprintf(tmp, sizeof tmp, ".%s", name);
  own_marker(name, true);
  /* locked before it has its name: a marker under its name is always
   * either locked by its call or abandoned (a spare is taken locked, under
   * its name at once) */
  int fd = take_spare(statefd, dir, name, rnd[0]);
  bool spare = fd >= 0;
  if (!spare)
    fd = openat(dir, tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    own_marker(name, false);
    return cap_error_errno(err, errno, "cannot record the call as in flight");
  }
  m->fd = fd;
  m->start_ms = cap_now_ms(CLOCK_REALTIME);
  int e = spare ? 0 : lock_marker(fd, true);
  if (e == 0)
    e = inflight_write(m, r, false);
  if (e == 0 && !spare && renameat(dir, tmp, dir, name) < 0)
    e = -errno;
  if (e < 0) {
    unlinkat(dir, spare ? name : tmp, 0);
    close(fd);
    own_marker(name, false);
    *m = (struct gw_inflight){.fd = -1};
    return cap_error_errno(err, -e, "cannot record the call as in flight");
  }
  m->name = cap_xstrdup(name);
  m->dirfd = fcntl(statefd, F_DUPFD_CLOEXEC, 0); /* dup() would drop O_CLOEXEC: the tool */
  return 0;
}

int gw_inflight_begin(struct gw_state *st, const struct gw_audit_record *r, struct gw_inflight *m,
                      struct cap_error *err)
{
  return inflight_begin(st->dirfd, st->dir_sb_ok ? &st->dir_sb : NULL, st->dir, r, m, err);
}

int gw_inflight_begin_at(int statefd, const char *dir, const struct gw_audit_record *r,
                         struct gw_inflight *m, struct cap_error *err)
{
  return inflight_begin(statefd, NULL, dir, r, m, err);
}

void gw_inflight_update(struct gw_inflight *m, const struct gw_audit_record *r)
{
  if (m->fd >= 0)
    inflight_write(m, r, false);
}

/* Finished markers wait for a state open; more than this many and the
 * run that finishes one opens the state itself (a host that only runs
 * `capsule run` would otherwise gather them without end). */
#define FINISHED_MARKERS_MAX 64

static void flush_when_many(int dirfd, const char *statedir)
{
  _cleanup_close_ int dfd = openat(dirfd, INFLIGHT_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
  if (!d)
    return;
  dfd = -1;
  size_t k = 0;
  while (readdir(d) && k <= FINISHED_MARKERS_MAX + 2)
    k++;
  closedir(d);
  struct gw_state *st = NULL;
  struct cap_error err = {0};
  if (k > FINISHED_MARKERS_MAX + 2 && gw_state_open(statedir, &st, &err) == 0)
    gw_state_close(st); /* its open recorded them */
  cap_error_clear(&err);
}

static void inflight_leave(struct gw_inflight *m, const struct gw_audit_record *r,
                           const char *statedir);

void gw_inflight_finish(struct gw_inflight *m, const struct gw_audit_record *r,
                        const char *statedir)
{
  if (m->fd < 0)
    return;
  struct gw_audit_record done = *r;
  uint64_t now = cap_now_ms(CLOCK_REALTIME);
  done.duration_ms = now > m->start_ms ? (int64_t)(now - m->start_ms) : 0;
  inflight_leave(m, &done, statedir);
}

static void inflight_leave(struct gw_inflight *m, const struct gw_audit_record *r,
                           const char *statedir)
{
  inflight_write(m, r, true);
  close(m->fd); /* the lock goes with it: the next gw_state_open records it */
  own_marker(m->name, false);
  if (statedir)
    flush_when_many(m->dirfd, statedir);
  close(m->dirfd);
  free(m->name);
  *m = (struct gw_inflight){.fd = -1};
}

int gw_inflight_answered(struct gw_inflight *m, const struct gw_audit_record *r)
{
  return m->fd < 0 ? -EBADF : inflight_write(m, r, true);
}

void gw_inflight_leave(struct gw_inflight *m, const struct gw_audit_record *r)
{
  if (m->fd >= 0)
    inflight_leave(m, r, NULL);
}

void gw_inflight_keep(struct gw_inflight *m, const struct gw_audit_record *r)
{
  gw_inflight_finish(m, r, NULL);
}

/* A marker longer than this (a call's long tool name or outcome) is not
 * kept as a spare: every later call on it would be padded to its length. */
#define SPARE_LEN_MAX 4096

/* The ended call's marker parked for the next call: its tag's first byte
 * overwritten (it records nothing now), its lock held. False when it is
 * not kept. */
static bool inflight_park(struct gw_inflight *m)
{
  struct stat dsb = {.st_dev = m->dev, .st_ino = m->ino}; /* keyed: dirfd's, from its spare */
  struct spare_marker sp = {.fd = m->fd, .statefd = m->dirfd, .len = m->len};
  if (m->dirfd < 0 || m->len > SPARE_LEN_MAX || strlen(m->name) >= sizeof sp.name ||
      (!m->keyed && fstat(m->dirfd, &dsb) < 0))
    return false;
  snprintf(sp.name, sizeof sp.name, "%s", m->name);
  sp.dev = dsb.st_dev;
  sp.ino = dsb.st_ino;
  return (m->recorded || pwrite(m->fd, "-", 1, 0) == 1) && spare_give(&sp);
}

void gw_inflight_recorded(struct gw_inflight *m)
{
  if (m->fd >= 0 && !m->recorded)
    m->recorded = pwrite(m->fd, "-", 1, 0) == 1; /* the tag, "capsule-inflight-v1", spoilt */
}

void gw_inflight_end(struct gw_inflight *m)
{
  if (m->fd < 0)
    return;
  if (inflight_park(m)) {
    free(m->name);
    *m = (struct gw_inflight){.fd = -1};
    return;
  }
  _cleanup_free_ char *path = cap_xasprintf(INFLIGHT_DIR "/%s", m->name);
  unlinkat(m->dirfd, path, 0); /* before the lock goes: no one takes it for abandoned */
  close(m->fd);
  own_marker(m->name, false);
  close(m->dirfd);
  free(m->name);
  *m = (struct gw_inflight){.fd = -1};
}

/* The marker's text, whole (a long user name or outcome included, up to
 * MARKER_MAX), NUL-terminated; its fields in f (at most 11), their count
 * in *k. NULL when it is empty or cannot be read. */
#define MARKER_MAX (16u << 20) /* past any request serve takes (4 MiB) */
static char *marker_fields(int fd, const char *f[11], size_t *k)
{
  struct stat sb;
  *k = 0;
  if (fstat(fd, &sb) < 0 || sb.st_size <= 0)
    return NULL;
  size_t size = (size_t)sb.st_size < MARKER_MAX ? (size_t)sb.st_size : MARKER_MAX;
  char *buf = cap_xmalloc(size + 1);
  ssize_t n = pread(fd, buf, size, 0);
  if (n <= 0) {
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  for (char *p = buf; p < buf + n && *k < 11; p += strlen(p) + 1)
    f[(*k)++] = p;
  return buf;
}

/* An abandoned marker's record: fields as the call last wrote them.
 * Returns 1 for a marker of this process's own (a call still running). */
static int inflight_record(struct gw_state *st, int fd, struct cap_error *err)
{
  const char *f[11] = {0};
  size_t k = 0;
  _cleanup_free_ char *buf = marker_fields(fd, f, &k);
  if (!buf) /* killed before it wrote: nothing to say about it */
    return 0;
  if (k < 8 || strcmp(f[0], "capsule-inflight-v1") != 0)
    return 0;
  bool finished = k == 11;
  if (!finished && strtol(f[7], NULL, 10) == (long)getpid())
    return 1;
  uint64_t start = strtoull(f[6], NULL, 10), now = cap_now_ms(CLOCK_REALTIME);
  struct gw_audit_record rec = {.user = f[1],
                                .capability = f[2],
                                .tool = f[3],
                                .decision = f[5],
                                .outcome = finished ? f[8] : "interrupted",
                                .duration_ms = finished      ? strtoll(f[9], NULL, 10)
                                               : now > start ? (int64_t)(now - start)
                                                             : 0};
  snprintf(rec.args_hash, sizeof rec.args_hash, "%s", f[4]);
  /* a run's user, "#UID" (a user name never starts with '#'): its name */
  char *end = NULL;
  unsigned long uid = f[1][0] == '#' ? strtoul(f[1] + 1, &end, 10) : 0;
  struct passwd *pw = end && end != f[1] + 1 && !*end ? getpwuid((uid_t)uid) : NULL;
  if (pw)
    rec.user = pw->pw_name;
  if (finished)
    snprintf(rec.result_hash, sizeof rec.result_hash, "%s", f[10]);
  return gw_audit_append(st, &rec, err);
}

/* Whether the marker fd (another process's, locked) holds a call's
 * finished record with its tag whole: an answered call whose append is
 * under way (gw_inflight_answered). */
static bool holds_answer(int fd)
{
  const char *f[11] = {0};
  size_t k = 0;
  _cleanup_free_ char *buf = marker_fields(fd, f, &k);
  return buf && k == 11 && strcmp(f[0], "capsule-inflight-v1") == 0;
}

/* One marker: when its lock is free and it is still the file under its
 * name (another process may have recorded and removed it), its record.
 * *answered: the marker is another process's answered call, its record
 * not yet appended, written at or before opened (the caller waits for
 * it; one answered after the open began is not this reader's to see). */
static int recover_one(struct gw_state *st, int dir, const char *name, size_t *n, unsigned *slot,
                       const struct timespec *opened, bool *answered, struct cap_error *err)
{
  /* opened, locked and checked under the take mutex, closed under it when
   * not kept: between the open and the lock another process may record
   * the file, recycle it into the spares, and a thread of this one take
   * it for its call; the lock here then succeeds (no conflict within a
   * process) and this descriptor's close would drop that call's lock.
   * Once locked here and still under its name, no other process can move
   * it, and only this thread would recycle it */
  cap_fork_mutex_lock(&take_lock);
  int fd = openat(dir, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  struct stat a, b;
  bool held = fd >= 0 && lock_marker(fd, false) < 0;
  bool mine = fd >= 0 && !held && fstat(fd, &a) == 0 &&
              fstatat(dir, name, &b, AT_SYMLINK_NOFOLLOW) == 0 && a.st_ino == b.st_ino &&
              a.st_dev == b.st_dev;
  struct stat hsb;
  *answered = held && fstat(fd, &hsb) == 0 &&
              (hsb.st_mtim.tv_sec < opened->tv_sec ||
               (hsb.st_mtim.tv_sec == opened->tv_sec && hsb.st_mtim.tv_nsec <= opened->tv_nsec)) &&
              holds_answer(fd);
  if (!mine && fd >= 0)
    close(fd); /* gone, its call still running, or not the file under its name */
  cap_fork_mutex_unlock(&take_lock);
  if (!mine)
    return 0;
  int r = inflight_record(st, fd, err);
  if (r == 0) {
    /* renamed into the spares and closed with no take in between: a
     * thread of this process taking it first would lock it (no conflict
     * within a process), and this close would then drop that call's lock */
    cap_fork_mutex_lock(&take_lock);
    recycle_marker(st->dirfd, dir, name, fd, slot);
    close(fd);
    cap_fork_mutex_unlock(&take_lock);
    (*n)++;
  } else {
    close(fd); /* still under its name, locked here: no take can have it */
  }
  return r < 0 ? r : 0;
}

/* A dot name is a marker still being made, or one whose capsule was
 * killed before its call began (nothing ran: no record). Removed once its
 * lock is free and it is older than any making takes. */
#define UNNAMED_MARKER_AGE_S 600
static void drop_unnamed(int dir, const char *name)
{
  /* under the take mutex, as recover_one says: the file may have become a
   * marker, been recorded and recycled, and be taken here meanwhile */
  cap_fork_mutex_lock(&take_lock);
  int fd = openat(dir, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  struct stat sb;
  if (fd >= 0 && lock_marker(fd, false) == 0 && fstat(fd, &sb) == 0 &&
      sb.st_mtime + UNNAMED_MARKER_AGE_S < time(NULL))
    unlinkat(dir, name, 0);
  if (fd >= 0)
    close(fd);
  cap_fork_mutex_unlock(&take_lock);
}

struct marker_name {
  struct timespec mtime;
  char *name;
};

static int marker_cmp(const void *a, const void *b)
{
  const struct timespec *x = &((const struct marker_name *)a)->mtime;
  const struct timespec *y = &((const struct marker_name *)b)->mtime;
  if (x->tv_sec != y->tv_sec)
    return x->tv_sec < y->tv_sec ? -1 : 1;
  return (x->tv_nsec > y->tv_nsec) - (x->tv_nsec < y->tv_nsec);
}

/* A process's threads call it in turn (gw_state_open's recovery mutex:
 * a marker's lock is the process's) */
int gw_audit_recover_interrupted(struct gw_state *st, size_t *n, struct cap_error *err)
{
  struct timespec opened; /* markers answered since are not waited for */
  clock_gettime(CLOCK_REALTIME, &opened);
  *n = 0;
  int dfd = openat(st->dirfd, INFLIGHT_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dfd < 0)
    return errno == ENOENT ? 0
                           : cap_error_errno(err, errno, "cannot read %s/" INFLIGHT_DIR, st->dir);
  DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return cap_error_errno(err, errno, "cannot read %s/" INFLIGHT_DIR, st->dir);
  }
  /* in the order they were last written (a finished run's marker: when it
   * ended), so the records follow one another as the calls did */
  struct marker_name *v = NULL;
  size_t k = 0, cap = 0;
  struct dirent *e;
  struct stat sb;
  while ((e = readdir(d))) {
    if (own_marker_has(e->d_name + (e->d_name[0] == '.')))
      continue; /* this process's: opening it would drop its lock */
    if (e->d_name[0] == '.') {
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
        drop_unnamed(dirfd(d), e->d_name);
      continue;
    }
    if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
      continue;
    if (k == cap)
      v = cap_xrealloc(v, (cap = cap ? 2 * cap : 16) * sizeof *v);
    v[k++] = (struct marker_name){.mtime = sb.st_mtim, .name = cap_xstrdup(e->d_name)};
  }
  if (k) /* qsort takes no NULL, even for none */
    qsort(v, k, sizeof *v, marker_cmp);
  int r = 0;
  unsigned slot = 0;
  uint64_t until = cap_now_ms(CLOCK_MONOTONIC) + GW_INFLIGHT_ANSWERED_WAIT_MS;
  for (size_t i = 0; i < k; i++) {
    bool answered = true;
    /* an answered call's record, being appended by its process: waited
     * for, so that whoever opens the state after an answer finds it */
    while (r == 0 && answered) {
      r = recover_one(st, dirfd(d), v[i].name, n, &slot, &opened, &answered, err);
      if (answered && cap_now_ms(CLOCK_MONOTONIC) < until)
        usleep(1000);
      else
        answered = false;
    }
    free(v[i].name);
  }
  free(v);
  closedir(d);
  return r;
}
