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
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <sqlite3.h>
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
#include "gateway/state_int.h"

#define RANGE_FIRST 0x70000000u
#define RANGE_END 0x7ffe0000u /* exclusive */

struct taken {
  uint64_t (*v)[2]; /* [start, end) */
  size_t n;
};

static void taken_add(struct taken *t, uint64_t start, uint64_t count)
{
  if (start + count <= RANGE_FIRST || start >= RANGE_END || count == 0)
    return;
  t->v = cap_xrealloc(t->v, (t->n + 1) * sizeof *t->v);
  t->v[t->n][0] = start;
  t->v[t->n][1] = start + count;
  t->n++;
}

static bool taken_overlaps(const struct taken *t, uint64_t start, uint64_t end)
{
  for (size_t i = 0; i < t->n; i++)
    if (t->v[i][0] < end && start < t->v[i][1])
      return true;
  return false;
}

static const char *subid_file(const char *env, const char *dflt)
{
#ifdef CAPSULE_TEST_HOOKS /* tests/sandbox/ids.sh: a subordinate-id file of the test's */
  const char *test = getenv(env);
  if (test && *test)
    return test;
#else
  (void)env;
#endif
  return dflt;
}

/* "name:start:count" lines; anything else is skipped. */
static void read_subids(struct taken *t, const char *path)
{
  _cleanup_fclose_ FILE *f = fopen(path, "re");
  char line[512];
  while (f && fgets(line, sizeof line, f)) {
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2)
      continue;
    char *end1, *end2;
    unsigned long long start = strtoull(c1 + 1, &end1, 10);
    unsigned long long count = strtoull(c2 + 1, &end2, 10);
    if (end1 == c2 && end2 != c2 + 1)
      taken_add(t, start, count);
  }
}

/* Everything a range must not overlap: subordinate ids, users, groups. */
static void host_ids(struct taken *t)
{
  read_subids(t, subid_file("CAPSULE_TEST_SUBUID", "/etc/subuid"));
  read_subids(t, subid_file("CAPSULE_TEST_SUBGID", "/etc/subgid"));
  setpwent();
  for (struct passwd *pw; (pw = getpwent());)
    taken_add(t, pw->pw_uid, 1);
  endpwent();
  setgrent();
  for (struct group *gr; (gr = getgrent());)
    taken_add(t, gr->gr_gid, 1);
  endgrent();
}

/* Only a range capsule hands out: a row edited to name any other (one whose
 * ids end at the host's root, say) is not taken. */
static bool base_valid(int64_t b)
{
  return b >= RANGE_FIRST && b + GW_ID_RANGE_SIZE <= RANGE_END && b % GW_ID_RANGE_SIZE == 0;
}

static int lookup(struct gw_state *st, const char *key, uint32_t *base, struct cap_error *err)
{
  sqlite3_stmt *s = gw_state_prep(st, "SELECT base FROM id_ranges WHERE capability = ?", key, NULL);
  if (!s)
    return gw_state_db_error(st, err, "cannot read id_ranges");
  int rc = sqlite3_step(s);
  int64_t b = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
  sqlite3_finalize(s);
  if (rc == SQLITE_ROW && !base_valid(b))
    return cap_error_set(err, EINVAL,
                         "the id range recorded for %s (base %lld) is not one capsule hands out; "
                         "the state's id_ranges table was edited: refusing",
                         key, (long long)b);
  *base = (uint32_t)b;
  return rc == SQLITE_ROW || rc == SQLITE_DONE
             ? 0
             : gw_state_db_error(st, err, "cannot read id_ranges");
}

/* The recorded ranges, as taken. */
static int recorded(struct gw_state *st, struct taken *t, struct cap_error *err)
{
  sqlite3_stmt *s = gw_state_prep(st, "SELECT base FROM id_ranges", NULL);
  if (!s)
    return gw_state_db_error(st, err, "cannot read id_ranges");
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW)
    taken_add(t, (uint64_t)sqlite3_column_int64(s, 0), GW_ID_RANGE_SIZE);
  sqlite3_finalize(s);
  return rc == SQLITE_DONE ? 0 : gw_state_db_error(st, err, "cannot read id_ranges");
}

/* The host's registry of ranges handed out by every state directory (as
 * root; each state's id_ranges knows only its own): "BASE KEY STATE-DIR"
 * lines, flock-held while a range is chosen. Lines of state directories
 * that no longer exist are dropped. */
static const char *registry_path(void) { return "/var/lib/capsule/id-ranges"; }

/* Opens and locks the registry, its ranges added to t: the locked fd, or
 * -errno with err set. */
static int registry_open(struct taken *t, struct cap_error *err)
{
  const char *path = registry_path();
  _cleanup_free_ char *dir = cap_xstrdup(path);
  char *slash = strrchr(dir, '/');
  if (slash && slash != dir) {
    *slash = '\0';
    mkdir(dir, 0700);
  }
  int fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
      (sb.st_mode & 022) || flock(fd, LOCK_EX) < 0) {
    int e = fd < 0 ? errno : EPERM;
    if (fd >= 0)
      close(fd);
    return cap_error_set(err, e,
                         "cannot use the host's id-range registry %s (%s): it must be a regular "
                         "file of root's, mode 0600; fix or remove it",
                         path, fd < 0 ? strerror(e) : "refused");
  }
  _cleanup_fclose_ FILE *f = fdopen(dup(fd), "re");
  struct cap_buf kept = {0};
  char line[PATH_MAX + 600];
  bool pruned = false;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long long b;
    int at = 0;
    struct stat st;
    if (sscanf(line, "%llu %*s %n", &b, &at) != 1 || !at)
      continue;
    line[strcspn(line, "\n")] = '\0';
    const char *state = line + at; /* the rest of the line: it may hold spaces */
    if (stat(state, &st) < 0 && errno == ENOENT) {
      pruned = true; /* its state is gone, and its ranges with it */
      continue;
    }
    taken_add(t, b, GW_ID_RANGE_SIZE);
    cap_buf_printf(&kept, "%s\n", line);
  }
  /* rewritten in place, under the lock (a renamed copy would leave the
   * lock of anyone waiting on this file behind) */
  bool lost = pruned && (ftruncate(fd, 0) < 0 ||
                         (kept.len && write(fd, kept.data, kept.len) != (ssize_t)kept.len));
  cap_buf_free(&kept);
  if (lost) {
    int e = errno ? errno : EIO;
    close(fd);
    return cap_error_errno(err, e, "cannot rewrite the host's id-range registry %s", path);
  }
  return fd;
}

static int allocate(struct gw_state *st, const char *key, uint32_t *base, struct cap_error *err)
{
  struct taken t = {0};
  int r = recorded(st, &t, err);
  _cleanup_close_ int registry = -1;
  if (r == 0 && (registry = registry_open(&t, err)) < 0)
    r = registry;
  if (r == 0)
    host_ids(&t);
  uint64_t b = RANGE_FIRST;
  while (r == 0 && b < RANGE_END && taken_overlaps(&t, b, b + GW_ID_RANGE_SIZE))
    b += GW_ID_RANGE_SIZE;
  free(t.v);
  if (r < 0)
    return r;
  if (b >= RANGE_END)
    return cap_error_set(err, ENOSPC,
                         "no free range of host ids left for capability %s (%u ranges from "
                         "0x%x are taken by other capabilities, /etc/subuid, /etc/subgid or "
                         "host users)",
                         key, (RANGE_END - RANGE_FIRST) / GW_ID_RANGE_SIZE, RANGE_FIRST);
  sqlite3_stmt *s =
      gw_state_prep(st, "INSERT INTO id_ranges (capability, base) VALUES (?, ?)", key, NULL);
  if (!s)
    return gw_state_db_error(st, err, "cannot record an id range");
  sqlite3_bind_int64(s, 2, (sqlite3_int64)b);
  int rc = sqlite3_step(s);
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE)
    return gw_state_db_error(st, err, "cannot record an id range");
  _cleanup_free_ char *real = realpath(st->dir, NULL);
  if (strchr(real ? real : st->dir, '\n'))
    return cap_error_set(err, EINVAL,
                         "the state directory's path holds a newline: rename it to record an id "
                         "range");
  if (dprintf(registry, "%llu %s %s\n", (unsigned long long)b, key, real ? real : st->dir) < 0)
    return cap_error_errno(err, errno, "cannot record an id range in %s", registry_path());
  *base = (uint32_t)b;
  return 0;
}

int gw_state_id_range(struct gw_state *st, const char *key, bool create, uint32_t *base,
                      struct cap_error *err)
{
  *base = 0;
  int r = lookup(st, key, base, err);
  if (r < 0 || *base || !create)
    return r;
  /* under the write lock: another capsule may be allocating too */
  struct sqlite3 *db = gw_state_db(st);
  if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
    return gw_state_db_error(st, err, "cannot allocate an id range");
  r = lookup(st, key, base, err);
  if (r == 0 && !*base)
    r = allocate(st, key, base, err);
  if (r == 0 && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
    r = gw_state_db_error(st, err, "cannot record an id range");
  if (r < 0) {
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    *base = 0;
  }
  return r;
}

int gw_state_id_range_peek(const char *dir, const char *key, uint32_t *base)
{
  *base = 0;
  struct cap_error err = {0};
  int dirfd = gw_statedir_open(dir, &err); /* the same ownership and mode checks */
  cap_error_clear(&err);
  if (dirfd < 0)
    return 0;
  /* a write-ahead log with frames in it: a read-only connection cannot
   * checkpoint it and would read every frame to rebuild its index, on
   * every run; the full path's connection checkpoints and removes it */
  struct stat wal;
  if (fstatat(dirfd, "state.db-wal", &wal, AT_SYMLINK_NOFOLLOW) == 0 && wal.st_size > 0) {
    close(dirfd);
    return 0;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d/state.db", dirfd);
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 2000);
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, "SELECT base FROM id_ranges WHERE capability = ?", -1, &s, NULL) ==
            SQLITE_OK &&
        sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW && base_valid(sqlite3_column_int64(s, 0)))
      *base = (uint32_t)sqlite3_column_int64(s, 0); /* an invalid one: the full path says why */
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  close(dirfd);
  return 0;
}
