/* Rollback (nono's rollback, for a manifest with rollback.enabled): the
 * writable grants snapshotted before a run and after it, so the run can be
 * shown, diffed and undone. A store lives in STATE/rollback:
 *   objects/AB/CDEF...  file contents named by their SHA-256 (the "before"
 *                       trees'; written to a temporary name, then renamed);
 *   records/ID.json     one run: when, what ran, the paths, the excludes,
 *                       the before and after trees (every entry's path,
 *                       type, mode, size, hash or link target) and each
 *                       tree's Merkle root (a directory's hash covers its
 *                       sorted children, the root the grants' hashes);
 *   hashcache           SHA-256 by device, inode, size, mtime and ctime, so
 *                       an unchanged tree is snapshotted without reading.
 * The state directory is masked from every sandbox: a tool cannot reach the
 * store. Excludes: exclude_patterns (a path component, or a substring of
 * the path when the pattern holds a '/'), exclude_globs (fnmatch on the
 * name), and .gitignore files (nono honours them too; negations are not).
 * A file that changes while it is read is read again (up to 3 times), then
 * recorded as unstable with what was read. Not thread-safe; the caller
 * frees what it gets. */
#ifndef CAPSULE_SANDBOX_ROLLBACK_H
#define CAPSULE_SANDBOX_ROLLBACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "manifest/model.h"

enum rb_type { RB_FILE, RB_DIR, RB_LINK };

struct rb_entry {
  char *path; /* absolute */
  enum rb_type type;
  uint32_t mode; /* permission bits */
  uint32_t uid, gid;
  uint64_t size;
  char hash[65]; /* files: content; directories: Merkle hash of the children */
  char *target;  /* links */
};

struct rb_tree {
  struct rb_entry *v; /* sorted by path */
  size_t len;
  char root[65];
  struct cap_strv unstable; /* files that kept changing while read */
};

struct rb_record {
  char *id, *time;
  struct cap_strv command, paths, patterns, globs;
  struct rb_tree before, after;
  bool has_after;
};

/* STATE/rollback (allocated). */
char *rb_store_dir(const char *state_dir);

/* Snapshots paths (absolute, existing or not) into out; with keep_objects
 * the files' contents are stored as objects. */
int rb_snapshot(const char *store, const struct cap_strv *paths, const struct cap_strv *patterns,
                const struct cap_strv *globs, bool keep_objects, struct rb_tree *out,
                struct cap_error *err);

/* Writes rec as records/ID.json, giving it an id and a time first. */
int rb_record_save(const char *store, struct rb_record *rec, struct cap_error *err);
int rb_record_load(const char *store, const char *id, struct rb_record *rec, struct cap_error *err);
/* Record ids, oldest first. */
int rb_record_ids(const char *store, struct cap_strv *ids, struct cap_error *err);
void rb_record_free(struct rb_record *rec);
void rb_tree_free(struct rb_tree *t);
const struct rb_entry *rb_tree_find(const struct rb_tree *t, const char *path);

/* The objects rec's before tree needs that are missing or do not hash to
 * their name (each named in bad). 0 when every one is sound. */
int rb_verify(const char *store, const struct rb_record *rec, struct cap_strv *bad,
              struct cap_error *err);

struct rb_restore_stats {
  size_t written, removed, modes, dirs;
};
/* Puts the paths back as rec's before tree has them: files written to a
 * temporary name and renamed over, modes and symlinks restored, what the
 * run created removed. Refuses (-EIO, naming the object) when verify fails. */
int rb_restore(const char *store, const struct rb_record *rec, struct rb_restore_stats *stats,
               struct cap_error *err);

/* Keeps the newest `keep` records, removes the others and every object no
 * kept record names. */
int rb_prune(const char *store, size_t keep, size_t *records, size_t *objects,
             struct cap_error *err);

#endif
