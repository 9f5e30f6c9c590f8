/* Rollback snapshots: walking the writable grants (never following a
 * symlink), hashing files with SHA-256 (libsodium) through the hash cache,
 * storing contents as objects, Merkle hashes of directories, and the
 * records. Restoring, verifying and pruning are rollback_restore.c. */
#include "sandbox/rollback.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/io.h"
#include "core/json.h"
#include "core/sha256.h"
#include "core/text.h"
#include "sandbox/rollback_internal.h"

#define RB_READ_CHUNK (256u << 10)
#define RB_TRIES 3

char *rb_store_dir(const char *state_dir) { return cap_xasprintf("%s/rollback", state_dir); }

static void hex_of(const unsigned char d[32], char hex[65])
{
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < 32; i++) {
    hex[2 * i] = digits[d[i] >> 4];
    hex[2 * i + 1] = digits[d[i] & 15];
  }
  hex[64] = '\0';
}

char *rb_object_path(const char *store, const char *hex)
{
  return cap_xasprintf("%s/objects/%.2s/%s", store, hex, hex + 2);
}

int rb_mkdirs(const char *path, mode_t mode)
{
  _cleanup_free_ char *p = cap_xstrdup(path);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = '\0';
      if (mkdir(p, mode) < 0 && errno != EEXIST)
        return -errno;
      *s = '/';
    }
  return mkdir(p, mode) < 0 && errno != EEXIST ? -errno : 0;
}

/* ---- the hash cache -------------------------------------------------------- */

struct rb_cached {
  uint64_t dev, ino, size;
  int64_t mtime_ns, ctime_ns;
  char hex[65];
};

struct rb_cache {
  struct rb_cached *v;
  size_t len, cap;
  size_t loaded; /* v[0..loaded) sorted, from the file; then this run's */
};

static int cached_cmp(const void *a, const void *b)
{
  const struct rb_cached *x = a, *y = b;
  if (x->dev != y->dev)
    return x->dev < y->dev ? -1 : 1;
  return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static void cache_push(struct rb_cache *c, const struct rb_cached *e)
{
  if (c->len == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 1024;
    c->v = cap_xrealloc(c->v, c->cap * sizeof *c->v);
  }
  c->v[c->len++] = *e;
}

static void cache_load(struct rb_cache *c, const char *store)
{
  _cleanup_free_ char *path = cap_xasprintf("%s/hashcache", store);
  FILE *f = fopen(path, "re");
  if (!f)
    return;
  struct rb_cached e;
  while (fscanf(f, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNd64 " %" SCNd64 " %64s\n", &e.dev,
                &e.ino, &e.size, &e.mtime_ns, &e.ctime_ns, e.hex) == 6)
    if (strlen(e.hex) == 64)
      cache_push(c, &e);
  fclose(f);
  if (c->len)
    qsort(c->v, c->len, sizeof *c->v, cached_cmp);
  c->loaded = c->len;
}

static int64_t ns_of(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }

static void cached_of(const struct stat *st, struct rb_cached *e)
{
  *e = (struct rb_cached){.dev = st->st_dev,
                          .ino = st->st_ino,
                          .size = (uint64_t)st->st_size,
                          .mtime_ns = ns_of(st->st_mtim),
                          .ctime_ns = ns_of(st->st_ctim)};
}

static const char *cache_find(const struct rb_cache *c, const struct stat *st)
{
  struct rb_cached key;
  cached_of(st, &key);
  const struct rb_cached *hit =
      c->loaded ? bsearch(&key, c->v, c->loaded, sizeof *c->v, cached_cmp) : NULL;
  if (hit && hit->size == key.size && hit->mtime_ns == key.mtime_ns &&
      hit->ctime_ns == key.ctime_ns)
    return hit->hex;
  return NULL;
}

/* This run's entries, then the file's others (by device and inode), written
 * to a temporary name and renamed over. */
static void cache_save(struct rb_cache *c, const char *store)
{
  _cleanup_free_ char *path = cap_xasprintf("%s/hashcache", store);
  _cleanup_free_ char *tmp = cap_xasprintf("%s/hashcache.tmp%d", store, (int)getpid());
  FILE *f = fopen(tmp, "we");
  if (!f)
    return;
  struct rb_cached *fresh = c->v + c->loaded;
  size_t n_fresh = c->len - c->loaded;
  if (n_fresh)
    qsort(fresh, n_fresh, sizeof *fresh, cached_cmp);
  for (size_t i = 0; i < c->len; i++) {
    const struct rb_cached *e = &c->v[i];
    if (i < c->loaded && n_fresh && bsearch(e, fresh, n_fresh, sizeof *e, cached_cmp))
      continue;
    fprintf(f, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRId64 " %" PRId64 " %s\n", e->dev, e->ino,
            e->size, e->mtime_ns, e->ctime_ns, e->hex);
  }
  if (fclose(f) == 0)
    rename(tmp, path);
  else
    unlink(tmp);
}

/* ---- hashing a file -------------------------------------------------------- */

struct rb_ctx {
  const char *store;
  const struct cap_strv *patterns, *globs;
  bool keep_objects;
  int objects_fd;          /* STORE/objects, with keep_objects */
  atomic_uint tmp_counter; /* temporary names made in it */
  int pid;                 /* in those names */
  atomic_bool made[256];   /* its two-digit directories known to exist */
  atomic_bool no_reflinks; /* the store's filesystem said so once */
  struct rb_cache cache;
  struct rb_tree *tree;
  unsigned char *buf, *helper_buf;  /* the walking thread's, the helper's */
  struct rb_packs packs;            /* the store's, when the snapshot began */
  struct rb_pack_writer writers[2]; /* the walking thread's, the helper's */
  struct cap_error *err;
};

static bool same_version(const struct stat *a, const struct stat *b)
{
  return a->st_size == b->st_size && ns_of(a->st_mtim) == ns_of(b->st_mtim) &&
         ns_of(a->st_ctim) == ns_of(b->st_ctim);
}

/* One pass over fd: the hash, and with out >= 0 the bytes copied there. */
static int hash_pass(unsigned char *buf, int fd, int out, char hex[65], uint64_t *bytes)
{
  struct cap_sha256 h;
  cap_sha256_init(&h);
  if (lseek(fd, 0, SEEK_CUR) != 0 && lseek(fd, 0, SEEK_SET) < 0)
    return -errno;
  ssize_t n;
  while ((n = cap_read_some(fd, buf, RB_READ_CHUNK)) > 0) {
    cap_sha256_update(&h, buf, (size_t)n);
    if (bytes)
      *bytes += (uint64_t)n;
    int w = out >= 0 ? cap_write_all(out, buf, (size_t)n, 0) : 0;
    if (w < 0)
      return w;
  }
  if (n < 0)
    return (int)n;
  unsigned char d[32];
  cap_sha256_final(&h, d);
  hex_of(d, hex);
  return 0;
}

/* A file for an object's contents not yet named: a temporary name in the
 * store's objects directory (renamed once complete; O_TMPFILE would spare
 * the name, but ext4 journals its orphan list for each one: 10,000 of
 * them cost seconds). *ret_tmp: the name, relative to x->objects_fd. */
static int object_open(struct rb_ctx *x, char **ret_tmp)
{
  for (int tries = 0; tries < 100; tries++) {
    char *tmp = cap_xasprintf("tmp.%d.%u", x->pid, x->tmp_counter++);
    int fd = openat(x->objects_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      *ret_tmp = tmp;
      return fd;
    }
    free(tmp);
    if (errno != EEXIST)
      return -1;
  }
  errno = EEXIST;
  return -1;
}

/* Names the temporary file tmp as the object hex, or drops it when the
 * store has that object already. */
static int store_object(struct rb_ctx *x, const char *tmp, const char *hex, struct cap_error *err)
{
  char name[68];
  snprintf(name, sizeof name, "%.2s/%s", hex, hex + 2);
  unsigned dir = (unsigned)strtoul((char[3]){hex[0], hex[1], 0}, NULL, 16);
  int r = 0;
  if (!x->made[dir] && mkdirat(x->objects_fd, (char[3]){hex[0], hex[1], 0}, 0700) < 0 &&
      errno != EEXIST)
    r = -errno;
  x->made[dir] = r == 0;
  if (r == 0 && renameat2(x->objects_fd, tmp, x->objects_fd, name, RENAME_NOREPLACE) < 0) {
    r = -errno;
    if (r == -EINVAL) /* a filesystem without RENAME_NOREPLACE */
      r = faccessat(x->objects_fd, name, F_OK, 0) == 0            ? -EEXIST
          : renameat(x->objects_fd, tmp, x->objects_fd, name) < 0 ? -errno
                                                                  : 0;
  }
  if (r < 0) /* EEXIST: the store has these bytes already */
    unlinkat(x->objects_fd, tmp, 0);
  if (r == -EEXIST)
    r = 0;
  return r < 0 ? cap_error_errno(err, -r, "rollback: cannot store object %s", hex) : 0;
}

/* Whether the cache knows this version of the file (and, when contents
 * are kept, the store still has its object); the entry is carried over. */
static bool cached_hit(struct rb_ctx *x, const struct stat *st)
{
  const char *cached = cache_find(&x->cache, st);
  bool packed = cached && x->keep_objects && rb_packs_find(&x->packs, cached);
  _cleanup_free_ char *obj =
      cached && x->keep_objects && !packed ? rb_object_path(x->store, cached) : NULL;
  if (!cached || (obj && access(obj, F_OK) < 0))
    return false;
  struct rb_cached e;
  cached_of(st, &e);
  memcpy(e.hex, cached, 65);
  cache_push(&x->cache, &e);
  return true;
}

/* tests/sandbox/rollback.sh (the test-hook build): a writer racing the
 * snapshot appends to the file named while it is read. */
static int test_race(const char *path, struct cap_error *err)
{
#ifdef CAPSULE_TEST_HOOKS
  const char *racing = getenv("CAPSULE_TEST_ROLLBACK_RACE");
  if (racing && strcmp(racing, path) == 0) {
    _cleanup_close_ int w = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (w < 0 || write(w, "+", 1) != 1)
      return cap_error_errno(err, errno, "rollback: test hook cannot append to %s", path);
  }
#else
  (void)path, (void)err;
#endif
  return 0;
}

/* A small file's content appended to the thread's pack (rollback_pack.c):
 * no inode of its own. */
static int pack_file(struct rb_ctx *x, struct rb_pack_writer *w, unsigned char *buf, int fd,
                     struct stat *st, const char *path, char hex[65], bool *stable,
                     struct cap_error *err)
{
  int r = w->fd < 0 ? rb_pack_begin(w, x->store, (int)(w - x->writers)) : 0;
  if (r < 0)
    return cap_error_errno(err, -r, "rollback: cannot write to the store %s", x->store);
  for (int attempt = 0;; attempt++) {
    uint64_t bytes = 0;
    r = lseek(w->fd, (off_t)w->off, SEEK_SET) < 0 ? -errno : hash_pass(buf, fd, w->fd, hex, &bytes);
    if (test_race(path, err) < 0)
      return -EIO;
    struct stat now;
    if (r == 0 && fstat(fd, &now) < 0)
      r = -errno;
    if (r < 0)
      return cap_error_errno(err, -r, "rollback: cannot read %s", path);
    *stable = same_version(st, &now);
    *st = now;
    if (!*stable && attempt + 1 < RB_TRIES)
      continue;                         /* it changed while read: again */
    if (!rb_packs_find(&x->packs, hex)) /* else the next object overwrites it */
      rb_pack_add(w, hex, bytes);
    return 0;
  }
}

/* One file hashed (and with keep_objects stored): from any thread, with
 * its own buf, pack and err; *stable false when it kept changing while
 * read. */
static int hash_file(struct rb_ctx *x, unsigned char *buf, struct rb_pack_writer *w, int fd,
                     struct stat *st, const char *path, char hex[65], bool *stable,
                     struct cap_error *err)
{
  if (x->keep_objects && (uint64_t)st->st_size < RB_PACK_MAX)
    return pack_file(x, w, buf, fd, st, path, hex, stable, err);
  for (int attempt = 0;; attempt++) {
    _cleanup_free_ char *tmp = NULL;
    _cleanup_close_ int out = x->keep_objects ? object_open(x, &tmp) : -1;
    if (x->keep_objects && out < 0)
      return cap_error_errno(err, errno, "rollback: cannot write to the store %s", x->store);
    /* a filesystem with reflinks (btrfs, XFS) shares the blocks instead of
     * copying them: the object is a copy-on-write clone of the file. Not on
     * the last try, whose object must be exactly the bytes read and hashed
     * even if the file is still changing */
    bool cloned = false;
    if (out >= 0 && attempt + 1 < RB_TRIES && !x->no_reflinks) {
      cloned = ioctl(out, FICLONE, fd) == 0;
      /* ext4 and tmpfs cannot: not asked again (EXDEV: another filesystem) */
      x->no_reflinks =
          !cloned && (errno == EOPNOTSUPP || errno == ENOTTY || errno == EINVAL || errno == EXDEV);
    }
    int r = hash_pass(buf, fd, cloned ? -1 : out, hex, NULL);
    if (test_race(path, err) < 0)
      return -EIO;
    struct stat now;
    if (r == 0 && fstat(fd, &now) < 0)
      r = -errno;
    if (r < 0) {
      if (tmp)
        unlinkat(x->objects_fd, tmp, 0);
      return cap_error_errno(err, -r, "rollback: cannot read %s", path);
    }
    *stable = same_version(st, &now);
    *st = now;
    if (!*stable && attempt + 1 < RB_TRIES) {
      if (tmp)
        unlinkat(x->objects_fd, tmp, 0);
      continue; /* it changed while read: again */
    }
    return x->keep_objects ? store_object(x, tmp, hex, err) : 0;
  }
}

/* ---- hashing files two at a time ------------------------------------------
 * A directory's files are hashed in batches by the walking thread and one
 * helper thread (the machines this runs on have two cores or more); what
 * needs one owner (the tree, the cache, the error) is done by the walking
 * thread once a batch is through. A batch bounds the descriptors held. */

#define RB_BATCH 64

struct rb_job {
  int fd;
  size_t index; /* its entry in x->tree */
  struct stat st;
  char hex[65];
  bool stable;
  int r;
  struct cap_error err;
};

struct rb_batch {
  struct rb_ctx *x;
  struct rb_job v[RB_BATCH];
  size_t len;
  atomic_size_t next;
};

static void batch_run(struct rb_batch *b, unsigned char *buf, struct rb_pack_writer *w)
{
  for (size_t i; (i = atomic_fetch_add(&b->next, 1)) < b->len;) {
    struct rb_job *j = &b->v[i];
    j->r = hash_file(b->x, buf, w, j->fd, &j->st, b->x->tree->v[j->index].path, j->hex, &j->stable,
                     &j->err);
  }
}

static void *batch_helper(void *p)
{
  struct rb_batch *b = p;
  batch_run(b, b->x->helper_buf, &b->x->writers[1]);
  return NULL;
}

/* Hashes the batch's files, then records them in order. */
static int batch_flush(struct rb_batch *b)
{
  struct rb_ctx *x = b->x;
  pthread_t t;
  atomic_store(&b->next, 0);
  bool helper = b->len > 1 && pthread_create(&t, NULL, batch_helper, b) == 0;
  batch_run(b, x->buf, &x->writers[0]);
  if (helper)
    pthread_join(t, NULL);
  int r = 0;
  for (size_t i = 0; i < b->len; i++) {
    struct rb_job *j = &b->v[i];
    close(j->fd);
    struct rb_entry *e = &x->tree->v[j->index];
    if (j->r < 0 && r == 0) {
      r = j->r;
      cap_error_set(x->err, j->err.code, "%s", j->err.message);
    }
    cap_error_clear(&j->err);
    if (j->r < 0)
      continue;
    memcpy(e->hash, j->hex, 65);
    e->size = (uint64_t)j->st.st_size;
    if (!j->stable) {
      cap_strv_push(&x->tree->unstable, e->path);
      continue;
    }
    struct rb_cached c;
    cached_of(&j->st, &c);
    memcpy(c.hex, j->hex, 65);
    cache_push(&x->cache, &c);
  }
  b->len = 0;
  return r;
}

/* ---- excludes and .gitignore ---------------------------------------------- */

struct rb_ignore {
  char *pattern;
  char *base; /* the directory of the .gitignore that holds it */
  bool dir_only, anchored;
};

struct rb_ignores {
  struct rb_ignore *v;
  size_t len;
};

static void read_gitignore(int dirfd, const char *dir, struct rb_ignores *ig)
{
  int fd = openat(dirfd, ".gitignore", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
  if (!f) {
    if (fd >= 0)
      close(fd);
    return;
  }
  char line[4096];
  while (fgets(line, sizeof line, f)) {
    size_t n = strcspn(line, "\r\n");
    line[n] = '\0';
    while (n && (line[n - 1] == ' ' || line[n - 1] == '\t'))
      line[--n] = '\0';
    if (!n || line[0] == '#' || line[0] == '!') /* negations are not honoured */
      continue;
    struct rb_ignore e = {0};
    if (line[n - 1] == '/') {
      e.dir_only = true;
      line[--n] = '\0';
    }
    char *p = line;
    if (*p == '/')
      p++;
    e.anchored = p != line || strchr(p, '/') != NULL;
    if (!*p)
      continue;
    e.pattern = cap_xstrdup(p);
    e.base = cap_xstrdup(dir);
    ig->v = cap_xrealloc(ig->v, (ig->len + 1) * sizeof *ig->v);
    ig->v[ig->len++] = e;
  }
  fclose(f);
}

static bool ignored(const struct rb_ignores *ig, const char *path, const char *name, bool is_dir)
{
  for (size_t i = 0; i < ig->len; i++) {
    const struct rb_ignore *e = &ig->v[i];
    if (e->dir_only && !is_dir)
      continue;
    if (!e->anchored && fnmatch(e->pattern, name, 0) == 0)
      return true;
    size_t b = strlen(e->base);
    if (e->anchored && strncmp(path, e->base, b) == 0 && path[b] == '/' &&
        fnmatch(e->pattern, path + b + 1, FNM_PATHNAME) == 0)
      return true;
  }
  return false;
}

static bool excluded(const struct rb_ctx *x, const char *path, const char *name)
{
  for (size_t i = 0; x->patterns && i < x->patterns->len; i++) {
    const char *p = x->patterns->v[i];
    if (strchr(p, '/') ? strstr(path, p) != NULL : strcmp(name, p) == 0)
      return true;
  }
  for (size_t i = 0; x->globs && i < x->globs->len; i++)
    if (fnmatch(x->globs->v[i], name, 0) == 0)
      return true;
  return false;
}

/* ---- the walk -------------------------------------------------------------- */

static struct rb_entry *tree_push(struct rb_tree *t, const char *path, enum rb_type type,
                                  const struct stat *st)
{
  t->v = cap_xrealloc(t->v, (t->len + 1) * sizeof *t->v);
  struct rb_entry *e = &t->v[t->len++];
  *e = (struct rb_entry){.path = cap_xstrdup(path),
                         .type = type,
                         .mode = st->st_mode & 07777,
                         .uid = st->st_uid,
                         .gid = st->st_gid,
                         .size = (uint64_t)st->st_size};
  return e;
}

static int by_name(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void merkle_line(crypto_hash_sha256_state *h, char type, uint32_t mode, const char *name,
                        const char *hash)
{
  char head[32];
  int n = snprintf(head, sizeof head, "%c %o ", type, mode);
  crypto_hash_sha256_update(h, (const unsigned char *)head, (unsigned long long)n);
  crypto_hash_sha256_update(h, (const unsigned char *)name, strlen(name) + 1);
  crypto_hash_sha256_update(h, (const unsigned char *)hash, 64);
}

static void hash_text(const char *s, char hex[65])
{
  unsigned char d[32];
  crypto_hash_sha256(d, (const unsigned char *)s, strlen(s));
  hex_of(d, hex);
}

/* One entry's line in its directory's Merkle hash: written once the
 * batch holding its file is through (index: its tree entry). */
struct rb_line {
  char type; /* 0: nothing (excluded, gone, not rolled back) */
  uint32_t mode;
  size_t index;
};

static int walk_entry(struct rb_ctx *x, int dirfd, const char *path, const char *name,
                      struct rb_ignores *ig, struct rb_batch *batch, struct rb_line *line);

static int walk_names(int fd, struct cap_strv *names)
{
  int dup_fd = dup(fd);
  DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
  if (!d) {
    if (dup_fd >= 0)
      close(dup_fd);
    return -errno;
  }
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
      cap_strv_push(names, e->d_name);
  closedir(d);
  if (names->len)
    qsort(names->v, names->len, sizeof *names->v, by_name);
  return 0;
}

/* A directory's entries (sorted), its hash the Merkle hash of them. */
static int walk_dir(struct rb_ctx *x, int fd, const char *path, struct rb_ignores *ig, char hex[65])
{
  struct cap_strv names = {0};
  if (walk_names(fd, &names) < 0)
    return cap_error_errno(x->err, errno, "rollback: cannot read %s", path);
  size_t ig_mark = ig->len;
  read_gitignore(fd, path, ig);
  struct rb_batch *batch = cap_xcalloc(1, sizeof *batch);
  batch->x = x;
  struct rb_line *lines = cap_xcalloc(names.len ? names.len : 1, sizeof *lines);
  int r = 0;
  for (size_t i = 0; i < names.len && r == 0; i++) {
    _cleanup_free_ char *child = cap_xasprintf("%s/%s", strcmp(path, "/") ? path : "", names.v[i]);
    r = walk_entry(x, fd, child, names.v[i], ig, batch, &lines[i]);
  }
  int fr = batch_flush(batch);
  r = r < 0 ? r : fr;
  crypto_hash_sha256_state h;
  crypto_hash_sha256_init(&h);
  for (size_t i = 0; i < names.len && r == 0; i++)
    if (lines[i].type)
      merkle_line(&h, lines[i].type, lines[i].mode, names.v[i], x->tree->v[lines[i].index].hash);
  free(lines);
  free(batch);
  cap_strv_free(&names);
  for (size_t i = ig_mark; i < ig->len; i++) {
    free(ig->v[i].pattern);
    free(ig->v[i].base);
  }
  ig->len = ig_mark;
  unsigned char digest[32];
  crypto_hash_sha256_final(&h, digest);
  hex_of(digest, hex);
  return r;
}

static int walk_entry(struct rb_ctx *x, int dirfd, const char *path, const char *name,
                      struct rb_ignores *ig, struct rb_batch *batch, struct rb_line *line)
{
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : cap_error_errno(x->err, errno, "rollback: cannot stat %s", path);
  bool is_dir = S_ISDIR(st.st_mode);
  if (excluded(x, path, name) || ignored(ig, path, name, is_dir))
    return 0;
  if (S_ISLNK(st.st_mode)) {
    char target[4096];
    ssize_t n = readlinkat(dirfd, name, target, sizeof target - 1);
    if (n < 0)
      return cap_error_errno(x->err, errno, "rollback: cannot read the link %s", path);
    target[n] = '\0';
    *line = (struct rb_line){'l', st.st_mode & 07777, x->tree->len};
    struct rb_entry *e = tree_push(x->tree, path, RB_LINK, &st);
    e->target = cap_xstrdup(target);
    hash_text(target, e->hash);
    return 0;
  }
  if (!is_dir && !S_ISREG(st.st_mode))
    return 0; /* devices, fifos, sockets: not rolled back */
  *line = (struct rb_line){is_dir ? 'd' : 'f', st.st_mode & 07777, x->tree->len};
  if (!is_dir && cached_hit(x, &st)) { /* unchanged since a snapshot: not even opened */
    struct rb_entry *e = tree_push(x->tree, path, RB_FILE, &st);
    memcpy(e->hash, cache_find(&x->cache, &st), 65);
    return 0;
  }
  int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (is_dir ? O_DIRECTORY : 0);
  int fd = openat(dirfd, name, flags);
  if (fd < 0) {
    line->type = 0;
    return errno == ENOENT ? 0 : cap_error_errno(x->err, errno, "rollback: cannot open %s", path);
  }
  size_t index = x->tree->len;
  tree_push(x->tree, path, is_dir ? RB_DIR : RB_FILE, &st);
  if (!is_dir) { /* hashed with the batch (batch_flush fills the entry) */
    batch->v[batch->len++] = (struct rb_job){.fd = fd, .index = index, .st = st};
    return batch->len == RB_BATCH ? batch_flush(batch) : 0;
  }
  char hex[65];
  int r = walk_dir(x, fd, path, ig, hex);
  close(fd);
  if (r < 0)
    return r;
  memcpy(x->tree->v[index].hash, hex, 65);
  return 0;
}

static int by_path(const void *a, const void *b)
{
  return strcmp(((const struct rb_entry *)a)->path, ((const struct rb_entry *)b)->path);
}

int rb_snapshot(const char *store, const struct cap_strv *paths, const struct cap_strv *patterns,
                const struct cap_strv *globs, bool keep_objects, struct rb_tree *out,
                struct cap_error *err)
{
  if (sodium_init() < 0)
    return cap_error_set(err, EIO, "rollback: libsodium cannot start");
  *out = (struct rb_tree){0};
  int r = rb_mkdirs(store, 0700);
  _cleanup_close_ int objects_fd = -1;
  if (r == 0 && keep_objects) {
    _cleanup_free_ char *objects = cap_xasprintf("%s/objects", store);
    r = rb_mkdirs(objects, 0700);
    objects_fd = r == 0 ? open(objects, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (r == 0 && objects_fd < 0)
      r = -errno;
  }
  if (r < 0)
    return cap_error_errno(err, -r, "rollback: cannot create the store %s", store);
  struct rb_ctx x = {.store = store,
                     .objects_fd = objects_fd,
                     .pid = (int)getpid(),
                     .patterns = patterns,
                     .globs = globs,
                     .keep_objects = keep_objects,
                     .tree = out,
                     .buf = cap_xmalloc(RB_READ_CHUNK),
                     .helper_buf = cap_xmalloc(RB_READ_CHUNK),
                     .writers = {{.fd = -1, .dirfd = -1}, {.fd = -1, .dirfd = -1}},
                     .err = err};
  if (keep_objects)
    rb_packs_load(store, &x.packs);
  cache_load(&x.cache, store);
  crypto_hash_sha256_state root;
  crypto_hash_sha256_init(&root);
  struct rb_ignores ig = {0};
  for (size_t i = 0; i < paths->len && r == 0; i++) {
    const char *p = paths->v[i];
    const char *slash = strrchr(p, '/');
    _cleanup_free_ char *parent =
        slash && slash != p ? cap_xstrndup(p, (size_t)(slash - p)) : cap_xstrdup("/");
    _cleanup_close_ int pfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0)
      continue; /* a grant this host lacks holds nothing */
    struct rb_batch *batch = cap_xcalloc(1, sizeof *batch);
    batch->x = &x;
    struct rb_line line = {0};
    r = walk_entry(&x, pfd, p, slash ? slash + 1 : p, &ig, batch, &line);
    int fr = batch_flush(batch);
    free(batch);
    r = r < 0 ? r : fr;
    crypto_hash_sha256_state one;
    crypto_hash_sha256_init(&one);
    if (r == 0 && line.type)
      merkle_line(&one, line.type, line.mode, slash ? slash + 1 : p, x.tree->v[line.index].hash);
    unsigned char d[32];
    char hex[65];
    crypto_hash_sha256_final(&one, d);
    hex_of(d, hex);
    merkle_line(&root, 'g', 0, p, hex);
  }
  free(ig.v);
  unsigned char d[32];
  crypto_hash_sha256_final(&root, d);
  hex_of(d, out->root);
  for (size_t i = 0; i < 2 && r == 0; i++)
    if ((r = rb_pack_commit(&x.writers[i])) < 0)
      cap_error_errno(err, -r, "rollback: cannot write a pack to the store %s", store);
  if (r == 0)
    cache_save(&x.cache, store);
  for (size_t i = 0; i < 2; i++)
    rb_pack_abandon(&x.writers[i]);
  rb_packs_free(&x.packs);
  free(x.cache.v);
  free(x.buf);
  free(x.helper_buf);
  if (out->len)
    qsort(out->v, out->len, sizeof *out->v, by_path);
  if (r < 0)
    rb_tree_free(out);
  return r;
}

const struct rb_entry *rb_tree_find(const struct rb_tree *t, const char *path)
{
  struct rb_entry key = {.path = (char *)path};
  return t->len ? bsearch(&key, t->v, t->len, sizeof *t->v, by_path) : NULL;
}

void rb_tree_free(struct rb_tree *t)
{
  for (size_t i = 0; i < t->len; i++) {
    free(t->v[i].path);
    free(t->v[i].target);
  }
  free(t->v);
  cap_strv_free(&t->unstable);
  *t = (struct rb_tree){0};
}
