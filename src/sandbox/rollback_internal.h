/* What only the rollback files share (rollback.c, rollback_record.c,
 * rollback_restore.c). */
#ifndef CAPSULE_SANDBOX_ROLLBACK_INTERNAL_H
#define CAPSULE_SANDBOX_ROLLBACK_INTERNAL_H

#include <stdint.h>
#include <sys/types.h>

#include "manifest/model.h"

/* STORE/objects/AB/CDEF... for the hash hex (allocated). */
char *rb_object_path(const char *store, const char *hex);
/* mkdir -p; 0 or -errno. */
int rb_mkdirs(const char *path, mode_t mode);

/* rollback_pack.c: small objects in pack files (STORE/objects/packs). */
#define RB_PACK_MAX (1u << 20) /* files of this size and more stay loose */
struct rb_pack_ref {
  char hex[65];
  uint32_t pack; /* index into rb_packs.names */
  uint64_t off, len;
};
struct rb_packs {
  char **names; /* NAME of NAME.pack */
  size_t n_names;
  struct rb_pack_ref *v; /* sorted by hex */
  size_t len, cap;
};
void rb_packs_load(const char *store, struct rb_packs *p);
/* An index's text (NAME.idx of pack number `pack`) added to p, unsorted;
 * lines that are not "HEX OFFSET LENGTH" are skipped (fuzzed:
 * tests/fuzz/fuzz_rollback_idx.c). */
void rb_pack_index_parse(struct rb_packs *p, uint32_t pack, const char *text, size_t len);
void rb_packs_free(struct rb_packs *p);
const struct rb_pack_ref *rb_packs_find(const struct rb_packs *p, const char *hex);
/* An object's bytes: a descriptor at their start and *len of them
 * (UINT64_MAX: to its end, a loose object), or -errno (-ENOENT: none). */
int rb_object_open(const char *store, const struct rb_packs *p, const char *hex, uint64_t *len);
/* read() of at most *left bytes of an object (counted down); -1 with
 * errno EBADMSG when a pack ends before the object. */
ssize_t rb_object_read(int fd, void *buf, size_t size, uint64_t *left);
/* Removes the packs none of whose objects is in live (sorted, compared
 * with cmp), and unfinished ones of processes gone; returns the objects
 * removed. */
size_t rb_packs_prune(const char *store, const struct cap_strv *live,
                      int (*cmp)(const void *, const void *));

/* One snapshot thread's pack being written. */
struct rb_pack_writer {
  int fd, dirfd; /* -1 until begun */
  char name[64];
  uint64_t off; /* where the next object goes */
  struct rb_pack_ref *v;
  size_t len, cap;
};
int rb_pack_begin(struct rb_pack_writer *w, const char *store, int id);
void rb_pack_add(struct rb_pack_writer *w, const char *hex, uint64_t len);
/* The pack and then its index named (nothing when it holds nothing). */
int rb_pack_commit(struct rb_pack_writer *w);
void rb_pack_abandon(struct rb_pack_writer *w);

#endif
