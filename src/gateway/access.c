/* Access tokens (gateway/access.h): the `access` table of the state
 * database (schema version 5, state.c).
 *
 * A SQLite state's handle keeps the tokens it found valid (their hash,
 * user and operator flag) until an access token is revoked: every revoke
 * appends a byte to STATE/access-changes after its commit, and a check
 * first looks at that file's inode, size and change time (one fstatat):
 * when they moved, or the file went away, the kept tokens are dropped
 * and the table read again, so a revoke stops its token on the next
 * request. A PostgreSQL state is shared by hosts whose files differ: its
 * checks always read the table. The kept tokens have a lock of their own,
 * so that gw_access_check_kept needs none of the handle's (serve checks
 * each request's token so, beside calls holding the state). */
#include "gateway/access.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "gateway/state_int.h"

static bool valid_name(const char *name)
{
  size_t n = strlen(name);
  if (n == 0 || n > 64)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-'))
      return false;
  }
  return true;
}

int gw_access_issue(struct gw_state *st, const char *name, const char *user, bool operator_,
                    char token[GW_ACCESS_TOKEN_LEN + 1], struct cap_error *err)
{
  if (!valid_name(name))
    return cap_error_set(
        err, EINVAL, "access name \"%s\" is not 1 to 64 of the characters A-Z a-z 0-9 _ . -", name);
  unsigned char raw[32];
  randombytes_buf(raw, sizeof raw);
  memcpy(token, GW_ACCESS_PREFIX, sizeof GW_ACCESS_PREFIX - 1);
  sodium_bin2hex(token + sizeof GW_ACCESS_PREFIX - 1, 65, raw, sizeof raw);
  sodium_memzero(raw, sizeof raw);
  char hash[65], now[32];
  gw_sha256_hex(token, strlen(token), hash);
  gw_state_now(now);
  struct gw_stmt *s = gw_state_prep(st, "INSERT INTO access VALUES (?, ?, ?, ?, ?)", name, hash,
                                    user, operator_ ? "1" : "0", now, NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  gw_stmt_finalize(s);
  if (rc == GW_DB_DONE)
    return 0;
  sodium_memzero(token, GW_ACCESS_TOKEN_LEN + 1);
  if (rc == GW_DB_CONSTRAINT)
    return cap_error_set(err, EEXIST,
                         "access \"%s\" exists; revoke it first (`capsule access revoke %s`)", name,
                         name);
  return gw_state_db_error(st, err, "cannot store the access token");
}

#define ACCESS_CHANGES "access-changes"

enum { KEPT = 16 };

struct gw_access_cache {
  bool have;      /* stamp read */
  struct stat at; /* access-changes as the kept tokens were read (st_ino 0: missing) */
  size_t n, next;
  struct kept {
    char hash[65];
    char *user;
    bool operator_;
  } v[KEPT];
};

static void cache_drop(struct gw_access_cache *c)
{
  for (size_t i = 0; i < c->n; i++) {
    free(c->v[i].user);
    c->v[i].user = NULL;
  }
  c->n = c->next = 0;
}

/* Every handle's kept tokens: checked without the handle's lock
 * (gw_access_check_kept) beside a check under it. */
static pthread_mutex_t kept_mu = PTHREAD_MUTEX_INITIALIZER;

void gw_access_cache_free(struct gw_state *st)
{
  pthread_mutex_lock(&kept_mu);
  if (st->access_cache)
    cache_drop(st->access_cache);
  free(st->access_cache);
  st->access_cache = NULL;
  pthread_mutex_unlock(&kept_mu);
}

/* access-changes now into *sb (zeroed when missing or unreadable: a stamp
 * of its own); false for a state that keeps no tokens. */
static bool stamp_now(const struct gw_state *st, struct stat *sb)
{
  if (st->url || st->dirfd < 0)
    return false;
  if (fstatat(st->dirfd, ACCESS_CHANGES, sb, AT_SYMLINK_NOFOLLOW) < 0)
    memset(sb, 0, sizeof *sb);
  return true;
}

static bool same_stamp(const struct stat *a, const struct stat *b)
{
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
         a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Under kept_mu: the handle's kept tokens, valid against the stamp sb
 * (emptied when it moved). */
static struct gw_access_cache *cache_now(struct gw_state *st, const struct stat *sb)
{
  if (!st->access_cache)
    st->access_cache = cap_xcalloc(1, sizeof *st->access_cache);
  struct gw_access_cache *c = st->access_cache;
  if (!c->have || !same_stamp(sb, &c->at)) {
    cache_drop(c);
    c->at = *sb;
    c->have = true;
  }
  return c;
}

static const struct kept *cache_find(const struct gw_access_cache *c, const char *hash)
{
  for (size_t i = 0; c && i < c->n; i++)
    if (sodium_memcmp(c->v[i].hash, hash, 64) == 0)
      return &c->v[i];
  return NULL;
}

static void cache_add(struct gw_access_cache *c, const char *hash, const char *user, bool op)
{
  if (!c)
    return;
  struct kept *k = c->n < KEPT ? &c->v[c->n++] : &c->v[c->next++ % KEPT];
  free(k->user); /* a replaced one's */
  memcpy(k->hash, hash, 65);
  k->user = cap_xstrdup(user);
  k->operator_ = op;
}

/* After a revoke's commit: the serves on this state drop the tokens they
 * kept. 0, or the error that leaves them keeping it. */
static int announce_revoke(struct gw_state *st, struct cap_error *err)
{
  if (st->url || st->dirfd < 0)
    return 0;
  int fd = openat(st->dirfd, ACCESS_CHANGES, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
                  0600);
  bool ok = fd >= 0 && write(fd, "\n", 1) == 1;
  int e = errno;
  if (fd >= 0)
    close(fd);
  /* another user's file (e.g. made by root in a state of its own user's):
   * gone is a change too, and takes only the directory's permission */
  if (!ok && fd < 0 && (e == EACCES || e == EPERM) && unlinkat(st->dirfd, ACCESS_CHANGES, 0) == 0)
    ok = true;
  if (!ok)
    return cap_error_errno(err, e ? e : EIO,
                           "the token is revoked, but a running `capsule serve` on this state "
                           "may accept it until restarted: cannot write %s/%s",
                           st->dir, ACCESS_CHANGES);
  return 0;
}

int gw_access_revoke(struct gw_state *st, const char *name, bool *found, struct cap_error *err)
{
  struct gw_stmt *s =
      gw_state_prep(st, "DELETE FROM access WHERE name = ? RETURNING 1", name, NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  *found = rc == GW_DB_ROW;
  if (rc == GW_DB_ROW)
    rc = gw_stmt_step(s);
  gw_stmt_finalize(s);
  if (rc != GW_DB_DONE)
    return gw_state_db_error(st, err, "cannot revoke the access token");
  if (*found) /* the dashboards signed in with it (ui_live.c) */
    gw_db_notify(st->db, GW_ACCESS_CHANNEL, name);
  return *found ? announce_revoke(st, err) : 0;
}

int gw_access_list(struct gw_state *st, gw_access_fn fn, void *arg, struct cap_error *err)
{
  struct gw_stmt *s =
      gw_state_prep(st, "SELECT name, user, operator, created FROM access ORDER BY name", NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  for (; rc == GW_DB_ROW; rc = gw_stmt_step(s)) {
    struct gw_access a = {.name = (const char *)gw_stmt_text(s, 0),
                          .user = (const char *)gw_stmt_text(s, 1),
                          .operator_ = gw_stmt_int(s, 2) != 0,
                          .created = (const char *)gw_stmt_text(s, 3)};
    fn(arg, &a);
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot read the access tokens");
}

/* Under kept_mu: token's kept user (hash: its hash) into *user, against
 * the stamp sb. */
static bool kept_user(struct gw_state *st, const struct stat *sb, const char *hash, char **user,
                      bool *operator_)
{
  const struct kept *k = cache_find(cache_now(st, sb), hash);
  if (k) {
    *user = cap_xstrdup(k->user);
    *operator_ = k->operator_;
  }
  return k != NULL;
}

int gw_access_check_kept(struct gw_state *st, const char *token, char **user, bool *operator_)
{
  char hash[65];
  struct stat sb;
  if (!stamp_now(st, &sb))
    return -ENOENT;
  gw_sha256_hex(token, strlen(token), hash);
  pthread_mutex_lock(&kept_mu);
  bool found = kept_user(st, &sb, hash, user, operator_);
  pthread_mutex_unlock(&kept_mu);
  return found ? 0 : -ENOENT;
}

/* A token just read from the table, kept unless the stamp moved since sb
 * was read before that read (a revoke meanwhile: the row may be gone). */
static void keep(struct gw_state *st, const struct stat *sb, const char *hash, const char *user,
                 bool op)
{
  pthread_mutex_lock(&kept_mu);
  struct gw_access_cache *c = st->access_cache;
  if (c && c->have && same_stamp(sb, &c->at) && !cache_find(c, hash))
    cache_add(c, hash, user, op);
  pthread_mutex_unlock(&kept_mu);
}

int gw_access_check(struct gw_state *st, const char *token, char **user, bool *operator_,
                    struct cap_error *err)
{
  char hash[65];
  gw_sha256_hex(token, strlen(token), hash);
  struct stat sb;
  bool keeps = stamp_now(st, &sb); /* before the table is read */
  pthread_mutex_lock(&kept_mu);
  bool found = keeps && kept_user(st, &sb, hash, user, operator_);
  pthread_mutex_unlock(&kept_mu);
  if (found)
    return 0;
  struct gw_stmt *s =
      gw_state_prep(st, "SELECT user, operator FROM access WHERE token_sha256 = ?", hash, NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  const char *u = rc == GW_DB_ROW ? (const char *)gw_stmt_text(s, 0) : NULL;
  if (u) {
    *user = cap_xstrdup(u);
    *operator_ = gw_stmt_int(s, 1) != 0;
    if (keeps)
      keep(st, &sb, hash, u, *operator_);
  }
  gw_stmt_finalize(s);
  if (rc == GW_DB_ROW && !u) /* NOT NULL in the schema; the database is not ours to trust */
    return cap_error_set(err, EIO,
                         "the state's access row of this token names no user: the "
                         "access table was edited (capsule access revoke it)");
  if (rc == GW_DB_ROW)
    return 0;
  if (rc == GW_DB_DONE)
    return cap_error_set(err, EACCES, "no such access token");
  return gw_state_db_error(st, err, "cannot read the access tokens");
}
