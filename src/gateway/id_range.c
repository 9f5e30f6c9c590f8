/* Host id ranges (as root): every capability runs under 65,536 host uids
 * and gids of its own, like subordinate ids, allocated once and recorded
 * in the state database (table id_ranges, schema version 4), so the same
 * capability has the same ids on every run and two capabilities never
 * share one; nor does a capability share the host's uid 65534 (nobody)
 * with its daemons.
 * Ranges come from 0x70000000 up to 0x7ffe0000, in steps of 65,536 (4,094
 * ranges): above systemd's container range (0x00080000-0x6fffffff, where
 * systemd-nspawn and homed pick theirs) and its dynamic users (61184-65519),
 * below its foreign range (0x7ffe0000-0x7ffeffff) and the top half, which
 * tools reading uid_t as signed mishandle. A candidate overlapping an entry
 * of /etc/subuid or /etc/subgid, or holding a user's or group's id
 * (getpwent, getgrent: NSS users too), is skipped. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "gateway/state.h"
#include "gateway/id_taken.h"
#include "gateway/id_registry_line.h"
#include "gateway/state_int.h"

static bool base_valid(int64_t b)
{
  return b >= RANGE_FIRST && b + GW_ID_RANGE_SIZE <= RANGE_END && b % GW_ID_RANGE_SIZE == 0;
}

static int lookup_read(struct gw_state *st, const char *key, uint32_t *base, struct cap_error *err);

static int lookup(struct gw_state *st, const char *key, uint32_t *base, struct cap_error *err)
{
  /* a range once recorded, as last read while nothing changed since
   * (gateway/state_cache.c) */
  struct cap_buf ck = {0};
  gw_state_cache_key(&ck, "id_range", &key, 1);
  char *const *kept;
  size_t n;
  bool hit = gw_state_cache_get(st, ck.data, &kept, &n) && n == 1;
  if (hit)
    *base = (uint32_t)strtoul(kept[0], NULL, 10);
  if (hit) {
    cap_buf_free(&ck);
    return 0;
  }
  int r = lookup_read(st, key, base, err);
  if (r == 0 && *base) {
    char text[16];
    snprintf(text, sizeof text, "%u", *base);
    gw_state_cache_put(st, ck.data, (const char *[]){text}, 1);
  }
  cap_buf_free(&ck);
  return r;
}

static int lookup_read(struct gw_state *st, const char *key, uint32_t *base, struct cap_error *err)
{
  struct gw_stmt *s =
      gw_state_prep(st, "SELECT base FROM id_ranges WHERE capability = ?", key, NULL);
  if (!s)
    return gw_state_db_error(st, err, "cannot read id_ranges");
  int rc = gw_stmt_step(s);
  int64_t b = rc == GW_DB_ROW ? gw_stmt_int64(s, 0) : 0;
  gw_stmt_finalize(s);
  if (rc == GW_DB_ROW && !base_valid(b))
    return cap_error_set(err, EINVAL,
                         "the id range recorded for %s (base %lld) is not one capsule hands out; "
                         "the state's id_ranges table was edited: refusing",
                         key, (long long)b);
  *base = (uint32_t)b;
  return rc == GW_DB_ROW || rc == GW_DB_DONE ? 0
                                             : gw_state_db_error(st, err, "cannot read id_ranges");
}

/* The recorded ranges, as taken. */
static int recorded(struct gw_state *st, struct taken *t, struct cap_error *err)
{
  struct gw_stmt *s = gw_state_prep(st, "SELECT base FROM id_ranges", NULL);
  if (!s)
    return gw_state_db_error(st, err, "cannot read id_ranges");
  int rc;
  while ((rc = gw_stmt_step(s)) == GW_DB_ROW)
    taken_add(t, (uint64_t)gw_stmt_int64(s, 0), GW_ID_RANGE_SIZE);
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot read id_ranges");
}

/* The host's registry of ranges handed out by every state directory (as
 * root; each state's id_ranges knows only its own): "BASE KEY@M:D:I
 * STATE-DIR" lines, where M is the mount namespace the line was written in
 * (the inode of /proc/self/ns/mnt) and D:I the state directory's device
 * and inode; lines written before those were recorded lack the @ part. A
 * separate lock file is flock-held while the registry is read and changed;
 * a change is written to a temporary file and renamed over it, so a crash
 * leaves the old registry or the new one, never an empty one.
 * A line is dropped only when its state directory is missing in the mount
 * namespace it was written in (a capsule in another one, a service with
 * PrivateTmp= or ProtectHome=, a container, may not see the directory and
 * must not free its range). A state directory that was moved finds its
 * line gone at its next use and records it again under its new path,
 * unless its range went to another state in between (then it is refused:
 * gw_state_id_range); the same directory seen from another namespace, or
 * under another path, is known by its device and inode and gets a line
 * of its own for the same range. */
#define REGISTRY_DIR "/var/lib/capsule"

/* The registry's directory: /var/lib/capsule, or a test's own
 * (CAPSULE_TEST_ID_REGISTRY_DIR, so suites never touch the host's). */
static const char *registry_dir(void)
{
#ifdef CAPSULE_TEST_HOOKS
  const char *test = getenv("CAPSULE_TEST_ID_REGISTRY_DIR");
  if (test && *test == '/')
    return test;
#endif
  return REGISTRY_DIR;
}

/* DIR/id-ranges + suffix, in buf. */
static const char *registry_path(char *buf, size_t size, const char *suffix)
{
  snprintf(buf, size, "%s/id-ranges%s", registry_dir(), suffix);
  return buf;
}

struct reg_anchor {
  uint64_t base;
  unsigned long long dev, ino;
};

struct registry {
  int lock;                   /* flock-held */
  struct cap_buf kept;        /* the lines that stay */
  bool changed;               /* lines were dropped or added: write it back */
  bool added;                 /* a line was added: the write is needed */
  unsigned format;            /* its marker's format (0: none) */
  unsigned long long mnt;     /* this process's mount namespace */
  size_t foreign;             /* the first line it cannot read (1-based; 0: none) */
  struct reg_anchor *anchors; /* lines of live namespaces (dead_alias) */
  size_t n_anchors;
  unsigned long long *live; /* mount namespaces a process is in now (read once) */
  size_t n_live;
  bool live_read;
  struct stat read_sb; /* the file as read (st_ino 0: none) */
};

static void registry_release(struct registry *r)
{
  if (r->lock >= 0)
    close(r->lock);
  r->lock = -1;
  cap_buf_free(&r->kept);
  free(r->anchors);
  free(r->live);
  r->anchors = NULL;
  r->live = NULL;
}

static int registry_file_ok(int fd, const char *path, struct cap_error *err)
{
  struct stat sb;
  if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() &&
      !(sb.st_mode & 022))
    return 0;
  int e = fd < 0 ? errno : EPERM;
  return cap_error_set(err, e,
                       "cannot use the host's id-range registry %s (%s): it must be a regular "
                       "file of root's, mode 0600; fix or remove it",
                       path, fd < 0 ? strerror(e) : "refused");
}

static unsigned long long own_mount_ns(void)
{
  struct stat sb;
  return stat("/proc/self/ns/mnt", &sb) == 0 ? (unsigned long long)sb.st_ino : 0;
}

/* This process's view of the state directory at real. */
static struct reg_where where_of(const char *real)
{
  struct stat sb;
  struct reg_where w = {.mnt = own_mount_ns()};
  if (stat(real, &sb) == 0) {
    w.dev = (unsigned long long)sb.st_dev;
    w.ino = (unsigned long long)sb.st_ino;
  }
  return w;
}

/* What registered() looks for: a state directory's range. */
struct reg_self {
  const char *word; /* the key as the registry writes it */
  uint64_t base;
  const char *state; /* its real path */
  struct reg_where where;
  bool exact;    /* out: its own line is there (this path, this namespace) */
  bool alias;    /* out: a line of the same directory elsewhere (another path or namespace) */
  bool conflict; /* out: another state's line overlaps its range */
};

/* Is line (key, base, where, path) the state directory self looks for? */
static void registry_match(struct reg_self *self, const char *k, uint64_t b,
                           const struct reg_where *w, const char *dir, bool *keep)
{
  bool same_range = strcmp(k, self->word) == 0 && b == self->base;
  bool legacy = !w->mnt && !w->dev && !w->ino;
  bool here = strcmp(dir, self->state) == 0 && w->mnt == self->where.mnt;
  bool same_dir = !legacy && w->dev == self->where.dev && w->ino == self->where.ino;
  if (same_range && legacy && strcmp(dir, self->state) == 0)
    *keep = false; /* an older line of its own: written again in full */
  else if (same_range && here && same_dir)
    self->exact = true;
  else if (same_range && same_dir)
    self->alias = true;
  else if (b < self->base + GW_ID_RANGE_SIZE && self->base < b + GW_ID_RANGE_SIZE)
    self->conflict = true;
}

/* Whether a process lives in the mount namespace mnt now (this one
 * does): /proc/PID/ns/mnt of every process, read once. */
static bool ns_alive(struct registry *r, unsigned long long mnt)
{
  if (mnt == r->mnt)
    return true;
  if (!r->live_read) {
    r->live_read = true;
    DIR *d = opendir("/proc");
    for (struct dirent *e; d && (e = readdir(d));) {
      char p[300];
      struct stat st;
      snprintf(p, sizeof p, "/proc/%s/ns/mnt", e->d_name);
      if (e->d_name[0] < '1' || e->d_name[0] > '9' || stat(p, &st) < 0)
        continue;
      r->live = cap_xrealloc(r->live, (r->n_live + 1) * sizeof *r->live);
      r->live[r->n_live++] = (unsigned long long)st.st_ino;
    }
    if (d)
      closedir(d);
  }
  for (size_t i = 0; i < r->n_live; i++)
    if (r->live[i] == mnt)
      return true;
  return false;
}

/* Every capsule in a private mount namespace (a service's PrivateTmp=, a
 * test's unshare) adds a line for the directories it uses, which no
 * capsule could drop once that namespace is gone. Such a line is dropped
 * when a line of a live namespace names the same directory (device and
 * inode) with the same range: the range stays recorded. First pass: the
 * ranges those live lines hold. */
static void registry_anchor(struct registry *r, const char *text)
{
  _cleanup_free_ char *line = cap_xstrdup(text);
  uint64_t b;
  char *k, *dir;
  struct reg_where w;
  struct stat st;
  if (!registry_line(line, &b, &k, &w, &dir) || !w.mnt || !ns_alive(r, w.mnt) ||
      (w.mnt == r->mnt && stat(dir, &st) < 0)) /* one of this namespace's: still there */
    return;
  r->anchors = cap_xrealloc(r->anchors, (r->n_anchors + 1) * sizeof *r->anchors);
  r->anchors[r->n_anchors++] = (struct reg_anchor){.base = b, .dev = w.dev, .ino = w.ino};
}

/* A line of a namespace no process is in, whose directory and range a
 * live line records too (registry_anchor). */
static bool dead_alias(struct registry *r, uint64_t b, const struct reg_where *w)
{
  if (!w->mnt || ns_alive(r, w->mnt))
    return false;
  for (size_t i = 0; i < r->n_anchors; i++)
    if (r->anchors[i].base == b && r->anchors[i].dev == w->dev && r->anchors[i].ino == w->ino)
      return true;
  return false;
}

/* One line read: a marker, a line kept (or dropped), or one it cannot
 * read, which is kept as it was and makes the registry read-only. */
static void registry_read_line(struct registry *r, char *line, size_t lineno, struct taken *t,
                               struct reg_self *self)
{
  uint64_t b;
  char *k, *dir;
  struct reg_where w;
  struct stat st;
  size_t len = strlen(line);
  _cleanup_free_ char *raw = cap_xstrdup(line);
  if (!registry_line(line, &b, &k, &w, &dir)) {
    if (!r->foreign)
      r->foreign = lineno;
    cap_buf_append(&r->kept, raw, len);
    if (!len || raw[len - 1] != '\n')
      cap_buf_putc(&r->kept, '\n');
    return;
  }
  unsigned format = registry_marker(b, k);
  if (format) {
    r->format = format > r->format ? format : r->format;
    return; /* written again first, as this capsule's */
  }
  bool keep = true;
  /* its state is gone, and its ranges with it: only when it was written
   * in this mount namespace (or before namespaces were recorded) */
  if ((!w.mnt || w.mnt == r->mnt) && stat(dir, &st) < 0 && errno == ENOENT)
    keep = false;
  if (keep && dead_alias(r, b, &w))
    keep = false;
  if (keep && self)
    registry_match(self, k, b, &w, dir, &keep);
  if (!keep) {
    r->changed = true;
    return;
  }
  if (t)
    taken_add(t, b, GW_ID_RANGE_SIZE);
  registry_put(&r->kept, b, k, &w, dir);
}

/* Locks and reads the registry, its ranges added to t (when t is not
 * NULL); self (or NULL) is looked for (struct reg_self). 0, or -errno
 * with err set. */
static int registry_open(struct registry *r, struct taken *t, struct reg_self *self,
                         struct cap_error *err)
{
  *r = (struct registry){.lock = -1, .mnt = own_mount_ns()};
  char path[PATH_MAX], lock[PATH_MAX];
  registry_path(path, sizeof path, "");
  registry_path(lock, sizeof lock, ".lock");
  mkdir(registry_dir(), 0700);
  r->lock = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  int rc = registry_file_ok(r->lock, lock, err);
  if (rc == 0 && flock(r->lock, LOCK_EX) < 0)
    rc = cap_error_errno(err, errno, "cannot lock %s", lock);
  int fd = rc < 0 ? -1 : open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (rc == 0 && fd < 0 && errno == ENOENT) {
    r->changed = true; /* written with its marker at the first store */
    return 0;
  }
  if (rc == 0)
    rc = registry_file_ok(fd, path, err);
  if (rc == 0 && fstat(fd, &r->read_sb) < 0)
    r->read_sb.st_ino = 0;
  if (rc < 0) {
    if (fd >= 0)
      close(fd);
    registry_release(r);
    return rc;
  }
  _cleanup_fclose_ FILE *f = fdopen(fd, "re");
  _cleanup_free_ char *line = NULL;
  size_t size = 0;
  struct cap_strv lines = {0};
  while (f && getline(&line, &size, f) >= 0) /* a line of any length is one line */
    cap_strv_push(&lines, line);
  for (size_t i = 0; i < lines.len; i++)
    registry_anchor(r, lines.v[i]);
  for (size_t i = 0; i < lines.len; i++)
    registry_read_line(r, lines.v[i], i + 1, t, self);
  cap_strv_free(&lines);
  if (r->format < REGISTRY_FORMAT)
    r->changed = true; /* marked (or marked again) at the next store */
  return 0;
}

/* Writes the kept lines back when they changed: a temporary file, synced,
 * renamed over the registry. A registry this capsule cannot read in full
 * (a later format, a line it does not know) is never rewritten: a line
 * to add is refused, lines to drop stay. 0, or -errno with err set. */
static int registry_store(struct registry *r, struct cap_error *err)
{
  char path[PATH_MAX], tmp[PATH_MAX];
  registry_path(path, sizeof path, "");
  registry_path(tmp, sizeof tmp, ".new");
  bool unreadable = r->format > REGISTRY_FORMAT || r->foreign;
  if (unreadable && r->added) {
    if (r->format > REGISTRY_FORMAT)
      return cap_error_set(err, EPROTO,
                           "the host's id-range registry %s is in format %u, written by a newer "
                           "capsule; this one knows format %u and will not rewrite it (it would "
                           "drop ranges it cannot read): use the newer capsule",
                           path, r->format, REGISTRY_FORMAT);
    return cap_error_set(err, EPROTO,
                         "line %zu of the host's id-range registry %s is not one this capsule "
                         "reads (format %u; a newer capsule's, or damaged); it will not rewrite "
                         "the registry and drop it: use the newer capsule, or fix the line",
                         r->foreign, path, REGISTRY_FORMAT);
  }
  if (!r->changed && !r->added)
    return 0;
  if (unreadable)
    return 0; /* only drops: they wait for a capsule that reads every line */
  unlink(tmp);
  struct cap_buf out = {0};
  cap_buf_printf(&out, "0 " REGISTRY_MARK "%u /\n", REGISTRY_FORMAT);
  cap_buf_append(&out, r->kept.data ? r->kept.data : "", r->kept.len);
  _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && write(fd, out.data, out.len) == (ssize_t)out.len && fsync(fd) == 0 &&
            rename(tmp, path) == 0;
  cap_buf_free(&out);
  if (!ok) {
    int e = errno ? errno : EIO;
    unlink(tmp);
    return cap_error_errno(err, e, "cannot rewrite the host's id-range registry %s", path);
  }
  _cleanup_close_ int dir = open(registry_dir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0)
    fsync(dir);
  r->changed = r->added = false;
  return 0;
}

/* The state directory's path as the registry records it. */
/* realpath of a directory, kept between calls (a call resolves its
 * package's and its state's directory, each several system calls): a kept
 * answer stands while the path and the answer still name the same
 * directory (device and inode: a directory has one place, so the answer
 * is still its path), checked with two stats (one when they are alike). */
enum { REAL_KEPT = 16 };
static pthread_mutex_t real_mu = PTHREAD_MUTEX_INITIALIZER;
static struct real_kept {
  char *path, *real;
  dev_t dev;
  ino_t ino;
} real_kept[REAL_KEPT];
static unsigned real_next;

static bool same_dir(const struct stat *a, const struct real_kept *k)
{
  return S_ISDIR(a->st_mode) && a->st_dev == k->dev && a->st_ino == k->ino;
}

static char *real_dir(const char *path)
{
  struct stat sb, rb;
  if (stat(path, &sb) < 0 || !S_ISDIR(sb.st_mode))
    return realpath(path, NULL);
  char *out = NULL;
  pthread_mutex_lock(&real_mu);
  for (size_t i = 0; i < REAL_KEPT && !out; i++) {
    struct real_kept *k = &real_kept[i];
    /* a path that is its own answer (the usual: capsule's paths are
     * resolved) was checked by the stat above */
    if (k->path && strcmp(k->path, path) == 0 && same_dir(&sb, k) &&
        (strcmp(k->real, path) == 0 || (stat(k->real, &rb) == 0 && same_dir(&rb, k))))
      out = cap_xstrdup(k->real);
  }
  pthread_mutex_unlock(&real_mu);
  if (out)
    return out;
  out = realpath(path, NULL);
  if (!out || stat(out, &rb) < 0 || rb.st_dev != sb.st_dev || rb.st_ino != sb.st_ino)
    return out; /* moved meanwhile: not kept */
  pthread_mutex_lock(&real_mu);
  struct real_kept *k = NULL;
  for (size_t i = 0; i < REAL_KEPT && !k; i++)
    if (!real_kept[i].path || strcmp(real_kept[i].path, path) == 0)
      k = &real_kept[i];
  if (!k)
    k = &real_kept[real_next++ % REAL_KEPT];
  free(k->path);
  free(k->real);
  *k = (struct real_kept){
      .path = cap_xstrdup(path), .real = cap_xstrdup(out), .dev = sb.st_dev, .ino = sb.st_ino};
  pthread_mutex_unlock(&real_mu);
  return out;
}

static int registry_state_path(struct gw_state *st, char **out, struct cap_error *err)
{
  /* never the path as given: a relative one would name nothing to the
   * next capsule, which would drop the line and hand the range out */
  char *real = real_dir(st->dir);
  if (!real)
    return cap_error_errno(err, errno,
                           "cannot resolve the state directory %s to record its id range", st->dir);
  if (strchr(real, '\n')) {
    free(real);
    return cap_error_set(err, EINVAL,
                         "the state directory's path holds a newline: rename it to record an id "
                         "range");
  }
  *out = real;
  return 0;
}

static int allocate(struct gw_state *st, const char *key, const char *dbkey, uint32_t *base,
                    struct cap_error *err)
{
  struct taken t = {0};
  _cleanup_free_ char *real = NULL;
  int r = recorded(st, &t, err);
  struct registry reg = {.lock = -1};
  if (r == 0)
    r = registry_state_path(st, &real, err);
  if (r == 0)
    r = registry_open(&reg, &t, NULL, err);
  if (r == 0)
    host_ids(&t);
  uint64_t b = RANGE_FIRST;
  while (r == 0 && b < RANGE_END && taken_overlaps(&t, b, b + GW_ID_RANGE_SIZE))
    b += GW_ID_RANGE_SIZE;
  free(t.v);
  if (r == 0 && b >= RANGE_END)
    r = cap_error_set(err, ENOSPC,
                      "no free range of host ids left for capability %s (%u ranges from "
                      "0x%x are taken by other capabilities, /etc/subuid, /etc/subgid or "
                      "host users)",
                      key, (RANGE_END - RANGE_FIRST) / GW_ID_RANGE_SIZE, RANGE_FIRST);
  struct gw_stmt *s = NULL;
  if (r == 0 && !(s = gw_state_prep(st, "INSERT INTO id_ranges (capability, base) VALUES (?, ?)",
                                    dbkey, NULL)))
    r = gw_state_db_error(st, err, "cannot record an id range");
  if (s) {
    gw_stmt_bind_int64(s, 2, (int64_t)b);
    int rc = gw_stmt_step(s);
    gw_stmt_finalize(s);
    if (rc != GW_DB_DONE)
      r = gw_state_db_error(st, err, "cannot record an id range");
  }
  if (r == 0) {
    _cleanup_free_ char *word = registry_key(key);
    struct reg_where w = where_of(real);
    registry_put(&reg.kept, b, word, &w, real);
    reg.added = true;
    r = registry_store(&reg, err);
  }
  registry_release(&reg);
  if (r == 0)
    *base = (uint32_t)b;
  return r;
}

/* Text that may go into a command the operator is told to paste: no
 * quote, no '$', '`', ';' or space (a nono or Talos key is a folder name,
 * the package's choice). */
static bool paste_safe(const char *s)
{
  return s[strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./+,:@-")] ==
         '\0';
}

/* Ranges this process found registered, and the registry file as it
 * read it then: while the file is that one still (every write is a
 * rename, a chmod or chown moves its ctime), its line is there and the
 * check's answer stands, so a long-lived process (serve) skips reading
 * the registry and /proc on each call. */
#define SEEN_MAX 32
static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;
static struct seen {
  char *word, *state;
  uint64_t base;
  struct stat sb;
} seen[SEEN_MAX];
static size_t seen_next;

static bool same_file(const struct stat *a, const struct stat *b)
{
  return a->st_ino && a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
         a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
         a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
         a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Whether (word, base, state) was seen in the registry as it is now
 * (sb NULL), or remember that it was in the file sb describes. */
static bool seen_registered(const char *word, uint64_t base, const char *state,
                            const struct stat *sb)
{
  struct stat now;
  char path[PATH_MAX];
  if (!sb && stat(registry_path(path, sizeof path, ""), &now) < 0)
    return false;
  bool found = false;
  pthread_mutex_lock(&seen_mu);
  for (size_t i = 0; i < SEEN_MAX && !found && !sb; i++)
    found = seen[i].word && seen[i].base == base && strcmp(seen[i].word, word) == 0 &&
            strcmp(seen[i].state, state) == 0 && same_file(&seen[i].sb, &now);
  if (sb) {
    struct seen *e = &seen[seen_next++ % SEEN_MAX];
    free(e->word);
    free(e->state);
    *e = (struct seen){
        .word = cap_xstrdup(word), .state = cap_xstrdup(state), .base = base, .sb = *sb};
  }
  pthread_mutex_unlock(&seen_mu);
  return found;
}

/* A range the state recorded, checked against the registry: recorded
 * again when its line is missing (a moved state directory, or a range
 * older than the registry), refused when another state holds it now. */
static int registered(struct gw_state *st, const char *key, uint32_t base, struct cap_error *err)
{
  _cleanup_free_ char *real = NULL;
  int r = registry_state_path(st, &real, err);
  if (r < 0)
    return r;
  _cleanup_free_ char *word = registry_key(key);
  if (seen_registered(word, base, real, NULL))
    return 0;
  struct registry reg;
  struct reg_self self = {.word = word, .base = base, .state = real, .where = where_of(real)};
  r = registry_open(&reg, NULL, &self, err);
  if (r < 0)
    return r;
  /* the same directory under another path or seen from another namespace
   * holds the range: a line of its own here too */
  bool found = self.exact, conflict = self.conflict && !self.alias;
  if (!found && conflict) {
    /* the command to paste only when nothing in it is the package's to shape */
    _cleanup_free_ char *paste =
        paste_safe(real) && paste_safe(key)
            ? cap_xasprintf(" (`sqlite3 %s/state.db \"DELETE FROM id_ranges WHERE capability = "
                            "'%s'\"`)",
                            real, key)
            : cap_xstrdup("");
    char path[PATH_MAX];
    r = cap_error_set(err, EEXIST,
                      "capability %s's host id range 0x%x of state %s now belongs to another "
                      "state directory in %s"
                      " (this state was moved or copied after the range was allocated); files "
                      "its tools wrote carry ids another state's tools now hold: check them, "
                      "then allocate a new range by deleting the capability's row of the "
                      "table id_ranges in %s/state.db%s",
                      key, base, real, registry_path(path, sizeof path, ""), real, paste);
  }
  if (r == 0 && !found) {
    registry_put(&reg.kept, base, word, &self.where, real);
    reg.added = true;
  }
  if (r == 0 && found && !reg.changed) /* the file read is the file there */
    seen_registered(word, base, real, &reg.read_sb);
  if (r == 0)
    r = registry_store(&reg, err);
  registry_release(&reg);
  return r;
}

/* The peek: the range the registry records for KEY of the state directory
 * DIR, read without the lock (its writes are renames): 0 when it records
 * none, or more than one (the full path, with the database, decides). */
static uint32_t registry_find(const char *key, const char *dir)
{
  _cleanup_free_ char *real = realpath(dir, NULL);
  char path[PATH_MAX];
  _cleanup_fclose_ FILE *f = real ? fopen(registry_path(path, sizeof path, ""), "re") : NULL;
  struct stat sb;
  if (!f || fstat(fileno(f), &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
      (sb.st_mode & 022))
    return 0;
  _cleanup_free_ char *line = NULL, *word = registry_key(key);
  size_t size = 0;
  uint32_t found = 0;
  unsigned long long mnt = own_mount_ns();
  size_t real_len = strlen(real), word_len = strlen(word);
  ssize_t n;
  while ((n = getline(&line, &size, f)) >= 0) {
    uint64_t b;
    char *k, *d;
    struct reg_where w;
    /* a line of another state directory, known by its end, is not parsed
     * (a host's registry holds every state directory's lines) */
    n -= n > 0 && line[n - 1] == '\n';
    if ((size_t)n <= real_len || !isspace((unsigned char)line[(size_t)n - real_len - 1]) ||
        memcmp(line + (size_t)n - real_len, real, real_len) != 0)
      continue;
    /* nor one of another key (a state directory's lines hold every
     * capability's range: hundreds in a test host's default state) */
    if (registry_other_key(line, (size_t)n, word, word_len))
      continue;
    /* only a line written in this mount namespace: a path names another
     * directory in another one (an older line goes the full path, which
     * writes it again) */
    if (!registry_line(line, &b, &k, &w, &d) || registry_marker(b, k) > REGISTRY_FORMAT)
      return 0; /* a line it cannot read: the full path decides */
    if (strcmp(k, word) != 0 || strcmp(d, real) != 0 || !w.mnt || w.mnt != mnt)
      continue;
    if (found || !base_valid((int64_t)b))
      return 0;
    found = (uint32_t)b;
  }
  return found;
}

/* The row's key: the capability's id, and on a PostgreSQL state (shared
 * by gateways on several hosts, each with its own host ids and registry)
 * the host and this gateway's own directory beside it. */
static char *range_key(const struct gw_state *st, const char *key)
{
  if (!st->url)
    return cap_xstrdup(key);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  return cap_xasprintf("%s@%s:%s", key, host, st->dir);
}

char *gw_id_range_key(const char *id, const char *package_dir)
{
  _cleanup_free_ char *real = package_dir ? real_dir(package_dir) : NULL;
  const char *where = real ? real : package_dir ? package_dir : "";
  char hex[65];
  gw_sha256_hex(where, strlen(where), hex);
  return cap_xasprintf("%s/%.32s", id ? id : "", hex);
}

int gw_state_id_range(struct gw_state *st, const char *key, bool create, uint32_t *base,
                      struct cap_error *err)
{
  *base = 0;
  _cleanup_free_ char *dbkey = range_key(st, key);
  int r = lookup(st, dbkey, base, err);
  if (r < 0 || !create)
    return r;
  if (*base) {
    r = registered(st, key, *base, err);
    if (r < 0)
      *base = 0;
    return r;
  }
  /* under the write lock: another capsule may be allocating too */
  struct gw_db *db = gw_state_db(st);
  if (gw_db_exec(db, "BEGIN IMMEDIATE") != GW_DB_OK)
    return gw_state_db_error(st, err, "cannot allocate an id range");
  r = lookup_read(st, dbkey, base, err);
  if (r == 0 && !*base)
    r = allocate(st, key, dbkey, base, err);
  if (r == 0 && gw_db_exec(db, "COMMIT") != GW_DB_OK)
    r = gw_state_db_error(st, err, "cannot record an id range");
  if (r < 0) {
    gw_db_exec(db, "ROLLBACK");
    *base = 0;
  }
  return r;
}

int gw_state_id_range_known(struct gw_state *st, const char *key, uint32_t base,
                            struct cap_error *err)
{
  return registered(st, key, base, err);
}

int gw_id_registry_scan(const char *text, size_t len, size_t *lines, unsigned *format,
                        size_t *foreign)
{
  *lines = *foreign = 0;
  *format = 0;
  int r = 0;
  for (size_t at = 0; at < len && r == 0;) {
    const char *nl = memchr(text + at, '\n', len - at);
    size_t n = nl ? (size_t)(nl - (text + at)) + 1 : len - at;
    _cleanup_free_ char *line = cap_xstrndup(text + at, n); /* to a NUL, as getline's reader */
    at += n;
    ++*lines;
    uint64_t b, b2;
    char *k, *dir, *k2, *dir2;
    struct reg_where w, w2;
    if (!registry_line(line, &b, &k, &w, &dir)) {
      *foreign = *foreign ? *foreign : *lines;
      continue;
    }
    unsigned f = registry_marker(b, k);
    if (f) {
      *format = f > *format ? f : *format;
      continue;
    }
    /* written back as registry_put writes it, it reads the same */
    struct cap_buf out = {0};
    registry_put(&out, b, k, &w, dir);
    if (!registry_line(out.data, &b2, &k2, &w2, &dir2) || b2 != b || strcmp(k2, k) != 0 ||
        memcmp(&w2, &w, sizeof w) != 0 || strcmp(dir2, dir) != 0)
      r = -EPROTO;
    cap_buf_free(&out);
  }
  return r;
}

int gw_state_id_range_peek(int statefd, const char *dir, const char *key, uint32_t *base)
{
  /* the host's registry, root's and written only by renames, records
   * every range with its state directory: no database to open on a root
   * run's way to the tool. A range the registry does not record under
   * this path (a moved state) goes the full path, which records it again
   * or refuses it. */
  *base = statefd >= 0 ? registry_find(key, dir) : 0;
  return 0;
}
