/* Rollback: verifying a record's objects, restoring its before tree (files
 * written to a temporary name beside them and renamed over, so a file is
 * either the old or the restored one, never half), and pruning. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "sandbox/rollback.h"
#include "sandbox/rollback_internal.h"

#define RB_CHUNK (256u << 10)

/* SHA-256 of an object's bytes as hex; -errno when it cannot be read
 * (-EBADMSG: its pack ends before it does). */
static int hash_object(const char *store, const struct rb_packs *packs, const char *hexname,
                       unsigned char *buf, char hex[65])
{
  uint64_t left;
  _cleanup_close_ int fd = rb_object_open(store, packs, hexname, &left);
  if (fd < 0)
    return fd;
  crypto_hash_sha256_state h;
  crypto_hash_sha256_init(&h);
  ssize_t n;
  while ((n = rb_object_read(fd, buf, RB_CHUNK, &left)) > 0)
    crypto_hash_sha256_update(&h, buf, (unsigned long long)n);
  if (n < 0)
    return -errno;
  unsigned char d[32];
  crypto_hash_sha256_final(&h, d);
  for (size_t i = 0; i < 32; i++)
    snprintf(hex + 2 * i, 3, "%02x", d[i]);
  return 0;
}

int rb_verify(const char *store, const struct rb_record *rec, struct cap_strv *bad,
              struct cap_error *err)
{
  if (sodium_init() < 0)
    return cap_error_set(err, EIO, "rollback: libsodium cannot start");
  _cleanup_free_ unsigned char *buf = cap_xmalloc(RB_CHUNK);
  struct rb_packs packs;
  rb_packs_load(store, &packs);
  struct cap_strv seen = {0};
  for (size_t i = 0; i < rec->before.len; i++) {
    const struct rb_entry *e = &rec->before.v[i];
    if (e->type != RB_FILE || cap_strv_contains(&seen, e->hash))
      continue;
    cap_strv_push(&seen, e->hash);
    char got[65];
    int r = hash_object(store, &packs, e->hash, buf, got);
    if (r < 0) {
      _cleanup_free_ char *line =
          cap_xasprintf("object %s (%s): %s", e->hash, e->path, strerror(-r));
      cap_strv_push(bad, line);
    } else if (strcmp(got, e->hash) != 0) {
      _cleanup_free_ char *line = cap_xasprintf(
          "object %s (%s): corrupted, its content hashes to %s", e->hash, e->path, got);
      cap_strv_push(bad, line);
    }
  }
  cap_strv_free(&seen);
  rb_packs_free(&packs);
  return 0;
}

/* path's contents replaced by the object's: a temporary file beside it,
 * its mode set, synced, then renamed over path. */
static int put_file(const char *store, const struct rb_packs *packs, const struct rb_entry *e,
                    unsigned char *buf, struct cap_error *err)
{
  uint64_t left;
  _cleanup_close_ int in = rb_object_open(store, packs, e->hash, &left);
  if (in < 0)
    return cap_error_errno(err, -in, "rollback: object %s for %s", e->hash, e->path);
  const char *slash = strrchr(e->path, '/');
  _cleanup_free_ char *tmp =
      cap_xasprintf("%.*s/.capsule-restore.XXXXXX", (int)(slash - e->path), e->path);
  _cleanup_close_ int out = mkostemp(tmp, O_CLOEXEC);
  if (out < 0)
    return cap_error_errno(err, errno, "rollback: cannot write beside %s", e->path);
  ssize_t n;
  int r = 0;
  while (r == 0 && (n = rb_object_read(in, buf, RB_CHUNK, &left)) != 0) {
    if (n < 0 || write(out, buf, (size_t)n) != n)
      r = errno ? -errno : -EIO;
  }
  /* the owner as recorded: what root restores stays the user's (an
   * unprivileged caller cannot give files away, and needs not) */
  if (r == 0 && geteuid() == 0 && fchown(out, e->uid, e->gid) < 0)
    r = -errno;
  if (r == 0 && (fchmod(out, e->mode) < 0 || fsync(out) < 0 || rename(tmp, e->path) < 0))
    r = -errno;
  if (r < 0) {
    unlink(tmp);
    return cap_error_errno(err, -r, "rollback: cannot restore %s", e->path);
  }
  return 0;
}

static int put_link(const struct rb_entry *e, struct cap_error *err)
{
  _cleanup_free_ char *tmp = cap_xasprintf("%s.capsule-restore", e->path);
  unlink(tmp);
  if (symlink(e->target, tmp) < 0 || (geteuid() == 0 && lchown(tmp, e->uid, e->gid) < 0) ||
      rename(tmp, e->path) < 0) {
    int r = errno;
    unlink(tmp);
    return cap_error_errno(err, r, "rollback: cannot restore the link %s", e->path);
  }
  return 0;
}

/* What the run created, or turned into another type, removed (deepest
 * first); a directory still holding excluded files stays. */
static size_t remove_new(const struct rb_record *rec, const struct rb_tree *now)
{
  size_t removed = 0;
  for (size_t i = now->len; i-- > 0;) {
    const struct rb_entry *e = &now->v[i];
    const struct rb_entry *was = rb_tree_find(&rec->before, e->path);
    if (was && was->type == e->type)
      continue;
    if (e->type == RB_DIR ? rmdir(e->path) == 0 : unlink(e->path) == 0)
      removed++;
  }
  return removed;
}

int rb_restore(const char *store, const struct rb_record *rec, struct rb_restore_stats *stats,
               struct cap_error *err)
{
  *stats = (struct rb_restore_stats){0};
  struct cap_strv bad = {0};
  int r = rb_verify(store, rec, &bad, err);
  if (r == 0 && bad.len)
    r = cap_error_set(err, EIO,
                      "rollback %s cannot be restored: %s%s (`capsule rollback verify %s` lists "
                      "every damaged object); nothing was changed",
                      rec->id, bad.v[0], bad.len > 1 ? ", and more" : "", rec->id);
  cap_strv_free(&bad);
  if (r < 0)
    return r;
  struct rb_tree now;
  r = rb_snapshot(store, &rec->paths, &rec->patterns, &rec->globs, false, &now, err);
  if (r < 0)
    return r;
  stats->removed = remove_new(rec, &now);
  _cleanup_free_ unsigned char *buf = cap_xmalloc(RB_CHUNK);
  struct rb_packs packs;
  rb_packs_load(store, &packs);
  for (size_t i = 0; i < rec->before.len && r == 0; i++) {
    const struct rb_entry *e = &rec->before.v[i];
    const struct rb_entry *cur = rb_tree_find(&now, e->path);
    bool same_type = cur && cur->type == e->type && access(e->path, F_OK) == 0;
    if (e->type == RB_DIR) {
      if (!same_type && mkdir(e->path, e->mode) < 0 && errno != EEXIST)
        r = cap_error_errno(err, errno, "rollback: cannot create %s", e->path);
      else if (!same_type) {
        stats->dirs++;
        if (geteuid() == 0 && lchown(e->path, e->uid, e->gid) < 0)
          r = cap_error_errno(err, errno, "rollback: cannot restore the owner of %s", e->path);
      }
    } else if (e->type == RB_FILE && !(same_type && strcmp(cur->hash, e->hash) == 0)) {
      r = put_file(store, &packs, e, buf, err);
      stats->written += r == 0;
      continue;
    } else if (e->type == RB_LINK &&
               !(same_type && cur->target && strcmp(cur->target, e->target) == 0)) {
      r = put_link(e, err);
      stats->written += r == 0;
      continue;
    }
    struct stat st;
    if (r == 0 && e->type != RB_LINK && lstat(e->path, &st) == 0 &&
        (st.st_mode & 07777) != e->mode) {
      if (chmod(e->path, e->mode) < 0)
        r = cap_error_errno(err, errno, "rollback: cannot restore the mode of %s", e->path);
      else
        stats->modes++;
    }
  }
  rb_tree_free(&now);
  rb_packs_free(&packs);
  return r;
}

static int by_string(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int rb_prune(const char *store, size_t keep, size_t *records, size_t *objects,
             struct cap_error *err)
{
  *records = *objects = 0;
  struct cap_strv ids = {0}, live = {0};
  int r = rb_record_ids(store, &ids, err);
  for (size_t i = 0; r == 0 && i < ids.len; i++) {
    if (i + keep < ids.len) {
      _cleanup_free_ char *path = cap_xasprintf("%s/records/%s.json", store, ids.v[i]);
      if (unlink(path) == 0)
        (*records)++;
      continue;
    }
    struct rb_record rec;
    if (rb_record_load(store, ids.v[i], &rec, err) < 0) {
      r = -EINVAL; /* a damaged kept record: keep every object */
      break;
    }
    for (size_t k = 0; k < rec.before.len; k++)
      if (rec.before.v[k].type == RB_FILE)
        cap_strv_push(&live, rec.before.v[k].hash);
    rb_record_free(&rec);
  }
  if (live.len)
    qsort(live.v, live.len, sizeof *live.v, by_string);
  _cleanup_free_ char *objdir = cap_xasprintf("%s/objects", store);
  DIR *d = r == 0 ? opendir(objdir) : NULL;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    int pid = 0;
    /* a snapshot's unfinished object (tmp.PID.N), once that process is gone */
    if (sscanf(e->d_name, "tmp.%d.", &pid) == 1 && pid > 0 && kill(pid, 0) < 0 && errno == ESRCH)
      unlinkat(dirfd(d), e->d_name, 0);
    /* AB, two hex digits: not "..", whose entries are the store's own */
    if (strlen(e->d_name) != 2 || !isxdigit((unsigned char)e->d_name[0]) ||
        !isxdigit((unsigned char)e->d_name[1]))
      continue;
    _cleanup_free_ char *sub = cap_xasprintf("%s/%s", objdir, e->d_name);
    DIR *s = opendir(sub);
    struct dirent *o;
    while (s && (o = readdir(s))) {
      if (o->d_name[0] == '.')
        continue;
      _cleanup_free_ char *hex = cap_xasprintf("%s%s", e->d_name, o->d_name);
      const char *key = hex;
      if (live.len && bsearch(&key, live.v, live.len, sizeof *live.v, by_string))
        continue;
      if (unlinkat(dirfd(s), o->d_name, 0) == 0)
        (*objects)++;
    }
    if (s)
      closedir(s);
  }
  if (d)
    closedir(d);
  if (r == 0)
    *objects += rb_packs_prune(store, &live, by_string);
  cap_strv_free(&ids);
  cap_strv_free(&live);
  return r;
}
