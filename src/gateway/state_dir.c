/* The state directory on disk: where it is, who may use it, the state key
 * in it, and the audit high-water mark beside the key. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/fs.h"
#include "gateway/state.h"
#include "gateway/state_int.h"

char *gw_state_default_dir(void)
{
  const char *x = getenv("XDG_STATE_HOME");
  if (x && *x == '/')
    return cap_xasprintf("%s/capsule", x);
  const char *home = getenv("HOME");
  return cap_xasprintf("%s/.local/state/capsule", home && *home ? home : "/");
}

char *gw_config_dir(void)
{
  const char *x = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
  if (x && *x == '/')
    return cap_xasprintf("%s/capsule", x);
  return home && *home ? cap_xasprintf("%s/.config/capsule", home) : NULL;
}

static bool trusted_owner(uid_t owner) { return owner == geteuid() || owner == 0; }

/* Someone else's directory, or one others can write, may hold a key they
 * planted (and would then read every credential sealed under it). */
static int check_owner_and_mode(const char *what, const struct stat *sb, struct cap_error *err)
{
  if (!trusted_owner(sb->st_uid))
    return cap_error_set(err, EPERM,
                         "%s is owned by uid %u, not by you (uid %u) or root: refusing it (its "
                         "owner could have planted the state key); use a state directory of "
                         "your own (--state DIR)",
                         what, (unsigned)sb->st_uid, (unsigned)geteuid());
  if (sb->st_mode & 022)
    return cap_error_set(err, EPERM,
                         "%s is writable by group or others (mode %04o): refusing it (a key "
                         "could have been planted); check what it holds, then chmod go-w it",
                         what, (unsigned)(sb->st_mode & 07777));
  return 0;
}

/* The directory's own files: the caller's are made 0600, root's that
 * others can read are refused. Missing files are fine. */
static int repair_files(int dirfd, const char *dir, struct cap_error *err)
{
  static const char *const files[] = {"state.db", "state.db-wal", "state.db-shm", "audit-hwm",
                                      "audit-hwm.lock"};
  for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
    struct stat sb;
    if (fstatat(dirfd, files[i], &sb, AT_SYMLINK_NOFOLLOW) < 0)
      continue;
    _cleanup_free_ char *what = cap_xasprintf("%s/%s", dir, files[i]);
    if (!S_ISREG(sb.st_mode))
      return cap_error_set(err, EPERM, "%s is not a regular file: refusing the state directory",
                           what);
    if (sb.st_nlink != 1)
      return cap_error_set(err, EPERM,
                           "%s has %lu links: another name for it could be read from elsewhere "
                           "(a tool may have kept one); refusing the state directory",
                           what, (unsigned long)sb.st_nlink);
    int r = check_owner_and_mode(what, &sb, err);
    if (r < 0)
      return r;
    if (!(sb.st_mode & 077))
      continue;
    if (sb.st_uid != geteuid() || fchmodat(dirfd, files[i], 0600, 0) < 0)
      return cap_error_set(err, EPERM, "%s is readable by others (mode %04o); chmod 600 it", what,
                           (unsigned)(sb.st_mode & 07777));
  }
  return 0;
}

int gw_statedir_open(const char *dir, struct cap_error *err)
{
  int r = cap_mkdir_p(dir, 0700);
  if (r < 0)
    r = cap_error_errno(err, -r, "cannot create the state directory %s", dir);
  if (r < 0)
    return r;
  _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return cap_error_errno(err, errno, "cannot open the state directory %s", dir);
  struct stat sb;
  if (fstat(fd, &sb) < 0)
    return cap_error_errno(err, errno, "cannot stat the state directory %s", dir);
  _cleanup_free_ char *what = cap_xasprintf("the state directory %s", dir);
  if ((r = check_owner_and_mode(what, &sb, err)) < 0)
    return r;
  if (sb.st_mode & 077) { /* readable by others: the caller's own is repaired */
    if (sb.st_uid != geteuid() || fchmod(fd, 0700) < 0)
      return cap_error_set(err, EPERM, "%s is readable by others (mode %04o); chmod 700 it", what,
                           (unsigned)(sb.st_mode & 07777));
  }
  if ((r = repair_files(fd, dir, err)) < 0)
    return r;
  /* made here 0600: SQLite gives its -wal and -shm files the database's mode */
  int db = openat(fd, "state.db", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (db >= 0)
    close(db);
  else if (errno != EEXIST)
    return cap_error_errno(err, errno, "cannot create %s/state.db", dir);
  int ret = fd;
  fd = -1;
  return ret;
}

static int key_from_env(const char *env, unsigned char key[GW_KEY_BYTES], struct cap_error *err)
{
  size_t n = 0;
  if (sodium_hex2bin(key, GW_KEY_BYTES, env, strlen(env), NULL, &n, NULL) != 0 || n != GW_KEY_BYTES)
    return cap_error_set(err, EINVAL, "CAPSULE_STATE_KEY must be 64 hex digits (32 bytes)");
  return 0;
}

static int read_key(int fd, const char *path, unsigned char key[GW_KEY_BYTES],
                    struct cap_error *err)
{
  struct stat sb;
  if (fstat(fd, &sb) < 0)
    return cap_error_errno(err, errno, "cannot stat %s", path);
  if (!trusted_owner(sb.st_uid))
    return cap_error_set(err, EPERM,
                         "%s is owned by uid %u, not by you (uid %u) or root: refusing a key "
                         "someone else could know",
                         path, (unsigned)sb.st_uid, (unsigned)geteuid());
  if (!S_ISREG(sb.st_mode) || (sb.st_mode & 077))
    return cap_error_set(err, EPERM, "%s is readable by others (mode %o); chmod 600 it", path,
                         (unsigned)(sb.st_mode & 0777));
  if (sb.st_nlink != 1)
    return cap_error_set(err, EPERM,
                         "%s has %lu links: another name for the key could be read from "
                         "elsewhere; refusing it",
                         path, (unsigned long)sb.st_nlink);
  if (read(fd, key, GW_KEY_BYTES) != GW_KEY_BYTES)
    return cap_error_set(err, EINVAL, "%s does not hold a 32-byte key", path);
  return 0;
}

int gw_statedir_load_key(int dirfd, const char *dir, unsigned char key[GW_KEY_BYTES],
                         struct cap_error *err)
{
  const char *env = getenv("CAPSULE_STATE_KEY");
  if (env && *env)
    return key_from_env(env, key, err);
  /* a key file of the operator's choosing (several gateways sharing one
   * database share its key): the same checks as STATE/key */
  const char *file = getenv("CAPSULE_STATE_KEY_FILE");
  if (file && *file) {
    _cleanup_close_ int kfd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (kfd < 0)
      return cap_error_errno(err, errno, "cannot read the state key CAPSULE_STATE_KEY_FILE=%s",
                             file);
    return read_key(kfd, file, key, err);
  }
  _cleanup_free_ char *path = cap_xasprintf("%s/key", dir);
  for (int attempt = 0; attempt < 2; attempt++) {
    _cleanup_close_ int fd = openat(dirfd, "key", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0)
      return read_key(fd, path, key, err);
    if (errno != ENOENT)
      return cap_error_errno(err, errno, "cannot read %s", path);
    randombytes_buf(key, GW_KEY_BYTES);
    char tmp[32];
    snprintf(tmp, sizeof tmp, "key.%d", (int)getpid());
    _cleanup_close_ int out = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0)
      return cap_error_errno(err, errno, "cannot create %s", path);
    bool ok = write(out, key, GW_KEY_BYTES) == GW_KEY_BYTES && fsync(out) == 0;
    /* link, not rename: when two processes race, the first key wins */
    if (!ok || (linkat(dirfd, tmp, dirfd, "key", 0) < 0 && errno != EEXIST)) {
      int e = errno;
      unlinkat(dirfd, tmp, 0);
      return cap_error_errno(err, e ? e : EIO, "cannot write %s", path);
    }
    unlinkat(dirfd, tmp, 0);
  }
  return cap_error_set(err, EIO, "cannot read %s", path);
}

/* ---- the audit high-water mark ---- */

static void hwm_mac(const struct gw_state *st, const struct gw_hwm *m, char out[65])
{
  char body[160];
  int len = snprintf(body, sizeof body, "capsule-audit-hwm-v1 %lld %s", (long long)m->seq, m->hash);
  gw_audit_mac_bytes(st, body, (size_t)len, out); /* libsodium's HMAC, from the kept key blocks */
}

/* The mark's text (buf, NUL-terminated) read into out and checked. */
static void hwm_parse(const struct gw_state *st, const char *buf, struct gw_hwm *out,
                      enum gw_hwm_status *status)
{
  long long seq = -1;
  char hash[65] = "", mac[65] = "", want[65];
  if (st->hwm_text[0] && strcmp(buf, st->hwm_text) == 0) {
    out->seq = st->hwm_text_seq; /* as this handle wrote it, MAC and all: not parsed again */
    memcpy(out->hash, st->hwm_text_hash, sizeof out->hash);
    *status = GW_HWM_OK;
    return;
  }
  *status = GW_HWM_FORGED;
  if (sscanf(buf, "capsule-audit-hwm-v1 %lld %64[0-9a-f] %64[0-9a-f]", &seq, hash, mac) != 3 ||
      seq < 0)
    return;
  out->seq = seq;
  memcpy(out->hash, hash, sizeof hash);
  hwm_mac(st, out, want);
  if (sodium_memcmp(want, mac, 64) == 0)
    *status = GW_HWM_OK;
}

int gw_hwm_read(const struct gw_state *st, struct gw_hwm *out, enum gw_hwm_status *status,
                struct cap_error *err)
{
  memset(out, 0, sizeof *out);
  _cleanup_close_ int fd = openat(st->dirfd, st->hwm_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ENOENT) {
    *status = GW_HWM_MISSING;
    return 0;
  }
  if (fd < 0)
    return cap_error_errno(err, errno, "cannot read %s/%s", st->dir, st->hwm_name);
  char buf[256];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  buf[n > 0 ? n : 0] = '\0';
  hwm_parse(st, buf, out, status);
  return 0;
}

int gw_hwm_hold(struct gw_state *st, struct cap_error *err)
{
  if (strcmp(st->hwm_held_name, st->hwm_name) != 0) { /* renamed since: the new name's */
    gw_hwm_forget(st);
    st->hwm_text[0] = '\0';
    snprintf(st->hwm_held_name, sizeof st->hwm_held_name, "%s", st->hwm_name);
  }
  if (!st->hwm_lock1) {
    int fd = gw_hwm_lock(st, err);
    if (fd < 0)
      return fd;
    st->hwm_lock1 = fd + 1;
    return 0;
  }
  if (flock(st->hwm_lock1 - 1, LOCK_EX) < 0)
    return cap_error_errno(err, errno, "cannot lock %s/%s.lock", st->dir, st->hwm_name);
  return 0;
}

void gw_hwm_release(struct gw_state *st)
{
  if (st->hwm_lock1)
    flock(st->hwm_lock1 - 1, LOCK_UN);
}

void gw_hwm_forget(struct gw_state *st)
{
  if (st->hwm_lock1)
    close(st->hwm_lock1 - 1);
  if (st->hwm_fd1)
    close(st->hwm_fd1 - 1);
  st->hwm_lock1 = st->hwm_fd1 = 0;
}

int gw_hwm_read_held(struct gw_state *st, struct gw_hwm *out, enum gw_hwm_status *status,
                     struct cap_error *err)
{
  memset(out, 0, sizeof *out);
  nlink_t links = 0; /* its link count alone: an fstat would make the next write costlier */
  if (st->hwm_fd1 && (cap_fd_nlink(st->hwm_fd1 - 1, &links) < 0 || links == 0)) {
    close(st->hwm_fd1 - 1); /* replaced or removed since: the name again */
    st->hwm_fd1 = 0;
  }
  if (!st->hwm_fd1) {
    /* no O_CREAT: a mark deleted since it was read stays missing */
    int fd = openat(st->dirfd, st->hwm_name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) {
      *status = GW_HWM_MISSING;
      return 0;
    }
    if (fd < 0)
      return cap_error_errno(err, errno, "cannot read %s/%s", st->dir, st->hwm_name);
    st->hwm_fd1 = fd + 1;
  }
  char buf[256];
  ssize_t n = pread(st->hwm_fd1 - 1, buf, sizeof buf - 1, 0);
  buf[n > 0 ? n : 0] = '\0';
  /* under the mark's lock, so what gw_hwm_advance writes over: a full
   * buffer may be the start of a longer file */
  st->hwm_held_len = n < 0 ? -1 : n == (ssize_t)sizeof buf - 1 ? SSIZE_MAX : n;
  hwm_parse(st, buf, out, status);
  return 0;
}

int gw_hwm_write(const struct gw_state *st, const struct gw_hwm *mark, bool create_only,
                 struct cap_error *err)
{
  char mac[65], text[256], tmp[80];
  hwm_mac(st, mark, mac);
  int len = snprintf(text, sizeof text, "capsule-audit-hwm-v1 %lld %s %s\n", (long long)mark->seq,
                     mark->hash, mac);
  snprintf(tmp, sizeof tmp, "%s.%d", st->hwm_name, (int)getpid());
  _cleanup_close_ int fd =
      openat(st->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return cap_error_errno(err, errno, "cannot write %s/%s", st->dir, st->hwm_name);
  bool ok = write(fd, text, (size_t)len) == len && fsync(fd) == 0;
  int r = !ok           ? -1
          : create_only ? linkat(st->dirfd, tmp, st->dirfd, st->hwm_name, 0)
                        : renameat(st->dirfd, tmp, st->dirfd, st->hwm_name);
  int e = errno;
  unlinkat(st->dirfd, tmp, 0);
  if (r < 0 && !(create_only && e == EEXIST))
    return cap_error_errno(err, e ? e : EIO, "cannot write %s/%s", st->dir, st->hwm_name);
  if (create_only)
    fsync(st->dirfd); /* the first mark is made durable, its name too */
  return 0;
}

/* The mark alone: the log's own records reach the disk at SQLite's
 * checkpoints (synchronous=NORMAL), and syncing its write-ahead log here
 * stalled a call for 200 ms on a busy disk. A durable mark ahead of a log
 * that lost its last records to a power loss is what verify should say:
 * those calls happened, and their records are gone. */
static void sync_mark(struct gw_state *st, int fd)
{
  fdatasync(fd);
  st->hwm_dirty = false;
  st->hwm_synced_ms = cap_now_ms(CLOCK_MONOTONIC);
}

int gw_hwm_advance(struct gw_state *st, const struct gw_hwm *mark, struct cap_error *err)
{
  char mac[65], text[256];
  hwm_mac(st, mark, mac);
  int len = snprintf(text, sizeof text, "capsule-audit-hwm-v1 %lld %s %s\n", (long long)mark->seq,
                     mark->hash, mac);
  if (!st->hwm_fd1) /* read by gw_hwm_read_held first: missing */
    return 0;
  int fd = st->hwm_fd1 - 1;
  /* in place, one write of one line that only grows with seq (a shorter
   * one, from a mark written otherwise, is cut after: gw_hwm_read_held read
   * its length under the same lock): no name changes,
   * so an unsynced mark is the old line or the new one, never an empty file */
  if (pwrite(fd, text, (size_t)len, 0) != len ||
      ((st->hwm_held_len < 0 || st->hwm_held_len > len) && ftruncate(fd, len) < 0)) {
    st->hwm_text[0] = '\0';
    return cap_error_errno(err, errno ? errno : EIO, "cannot write %s/%s", st->dir, st->hwm_name);
  }
  memcpy(st->hwm_text, text, (size_t)len + 1);
  st->hwm_text_seq = mark->seq;
  memcpy(st->hwm_text_hash, mark->hash, sizeof st->hwm_text_hash);
  st->hwm_dirty = true;
  if (cap_now_ms(CLOCK_MONOTONIC) - st->hwm_synced_ms >= GW_HWM_SYNC_MS)
    sync_mark(st, fd);
  return 0;
}

void gw_hwm_sync(struct gw_state *st)
{
  if (!st->hwm_dirty)
    return;
  _cleanup_close_ int fd = openat(st->dirfd, st->hwm_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0)
    sync_mark(st, fd);
}

int gw_hwm_lock(const struct gw_state *st, struct cap_error *err)
{
  char lock[64];
  snprintf(lock, sizeof lock, "%s.lock", st->hwm_name);
  int fd = openat(st->dirfd, lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return cap_error_errno(err, errno, "cannot open %s/%s", st->dir, lock);
  if (flock(fd, LOCK_EX) < 0) {
    int e = errno;
    close(fd);
    return cap_error_errno(err, e, "cannot lock %s/%s", st->dir, lock);
  }
  return fd;
}
