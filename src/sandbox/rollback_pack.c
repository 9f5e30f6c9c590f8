/* Rollback packs: small objects appended to a pack file instead of one
 * file each. Creating 10,000 files is what a cold snapshot spends its time
 * on where inode allocation is slow (ext4 without a journal skips every
 * recently deleted inode of a block group, one by one); a pack is one
 * inode per snapshot and thread. STORE/objects/packs/NAME.pack holds the
 * contents back to back; NAME.idx, written and renamed after it, lists
 * "HEX OFFSET LENGTH" a line: a pack without its index holds nothing. An
 * object is looked up loose first (STORE/objects/AB/CDEF...), then in the
 * packs' indexes, loaded once per verb. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "sandbox/rollback_internal.h"

static int by_hex(const void *a, const void *b)
{
  return strcmp(((const struct rb_pack_ref *)a)->hex, ((const struct rb_pack_ref *)b)->hex);
}

void rb_pack_index_parse(struct rb_packs *p, uint32_t pack, const char *text, size_t len)
{
  struct rb_pack_ref ref = {.pack = pack};
  for (size_t at = 0; at < len;) {
    const char *nl = memchr(text + at, '\n', len - at);
    size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
    char line[160];
    /* "HEX OFFSET LENGTH": anything else (a torn write, a foreign line) is skipped */
    if (n < sizeof line) {
      memcpy(line, text + at, n);
      line[n] = '\0';
      int used = 0;
      if (sscanf(line, "%64[0-9a-f] %" SCNu64 " %" SCNu64 "%n", ref.hex, &ref.off, &ref.len,
                 &used) == 3 &&
          strlen(ref.hex) == 64 && (size_t)used == n && ref.off <= UINT64_MAX - ref.len) {
        if (p->len == p->cap) {
          p->cap = p->cap ? 2 * p->cap : 1024;
          p->v = cap_xrealloc(p->v, p->cap * sizeof *p->v);
        }
        p->v[p->len++] = ref;
      }
    }
    at += n + 1;
  }
}

static void load_index(struct rb_packs *p, int dirfd, const char *idx_name)
{
  _cleanup_close_ int fd = openat(dirfd, idx_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  struct cap_buf text = {0};
  char chunk[65536];
  ssize_t n;
  while (fd >= 0 && (n = read(fd, chunk, sizeof chunk)) > 0)
    cap_buf_append(&text, chunk, (size_t)n);
  if (fd >= 0) {
    p->names = cap_xrealloc(p->names, (p->n_names + 1) * sizeof *p->names);
    p->names[p->n_names] = cap_xstrndup(idx_name, strlen(idx_name) - 4); /* NAME.idx */
    rb_pack_index_parse(p, (uint32_t)p->n_names++, text.data ? text.data : "", text.len);
  }
  cap_buf_free(&text);
}

void rb_packs_load(const char *store, struct rb_packs *p)
{
  *p = (struct rb_packs){0};
  _cleanup_free_ char *dir = cap_xasprintf("%s/objects/packs", store);
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n > 4 && strcmp(e->d_name + n - 4, ".idx") == 0 && e->d_name[0] != '.')
      load_index(p, dirfd(d), e->d_name);
  }
  if (d)
    closedir(d);
  if (p->len)
    qsort(p->v, p->len, sizeof *p->v, by_hex);
}

void rb_packs_free(struct rb_packs *p)
{
  for (size_t i = 0; i < p->n_names; i++)
    free(p->names[i]);
  free(p->names);
  free(p->v);
  *p = (struct rb_packs){0};
}

const struct rb_pack_ref *rb_packs_find(const struct rb_packs *p, const char *hex)
{
  struct rb_pack_ref key = {0};
  snprintf(key.hex, sizeof key.hex, "%s", hex);
  return p->len ? bsearch(&key, p->v, p->len, sizeof *p->v, by_hex) : NULL;
}

int rb_object_open(const char *store, const struct rb_packs *p, const char *hex, uint64_t *len)
{
  _cleanup_free_ char *loose = rb_object_path(store, hex);
  int fd = open(loose, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0 || errno != ENOENT) {
    *len = UINT64_MAX;
    return fd >= 0 ? fd : -errno;
  }
  const struct rb_pack_ref *ref = rb_packs_find(p, hex);
  if (!ref)
    return -ENOENT;
  _cleanup_free_ char *pack = cap_xasprintf("%s/objects/packs/%s.pack", store, p->names[ref->pack]);
  fd = open(pack, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  if (lseek(fd, (off_t)ref->off, SEEK_SET) < 0) {
    int r = -errno;
    close(fd);
    return r;
  }
  *len = ref->len;
  return fd;
}

ssize_t rb_object_read(int fd, void *buf, size_t size, uint64_t *left)
{
  size_t want = *left < size ? (size_t)*left : size;
  ssize_t n = want ? read(fd, buf, want) : 0;
  if (n > 0 && *left != UINT64_MAX)
    *left -= (uint64_t)n;
  if (n == 0 && want && *left != UINT64_MAX) {
    errno = EBADMSG; /* the pack ends before the object: damaged */
    return -1;
  }
  return n;
}

/* ---- writing ---- */

int rb_pack_begin(struct rb_pack_writer *w, const char *store, int id)
{
  _cleanup_free_ char *dir = cap_xasprintf("%s/objects/packs", store);
  int r = rb_mkdirs(dir, 0700);
  if (r < 0)
    return r;
  w->dirfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (w->dirfd < 0)
    return -errno;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(w->name, sizeof w->name, "%lld%09ld-%d-%d", (long long)ts.tv_sec, ts.tv_nsec,
           (int)getpid(), id);
  char tmp[128];
  snprintf(tmp, sizeof tmp, "tmp.%d.%s.pack", (int)getpid(), w->name);
  w->fd = openat(w->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  return w->fd < 0 ? -errno : 0;
}

void rb_pack_add(struct rb_pack_writer *w, const char *hex, uint64_t len)
{
  if (w->len == w->cap) {
    w->cap = w->cap ? 2 * w->cap : 256;
    w->v = cap_xrealloc(w->v, w->cap * sizeof *w->v);
  }
  struct rb_pack_ref *ref = &w->v[w->len++];
  snprintf(ref->hex, sizeof ref->hex, "%s", hex);
  ref->off = w->off;
  ref->len = len;
  w->off += len;
}

int rb_pack_commit(struct rb_pack_writer *w)
{
  if (w->fd < 0)
    return 0;
  char tmp[128], idx_tmp[128], final[96];
  snprintf(tmp, sizeof tmp, "tmp.%d.%s.pack", (int)getpid(), w->name);
  snprintf(idx_tmp, sizeof idx_tmp, "tmp.%d.%s.idx", (int)getpid(), w->name);
  int r = ftruncate(w->fd, (off_t)w->off) < 0 ? -errno : 0;
  if (r == 0 && w->len) {
    struct cap_buf b = {0};
    for (size_t i = 0; i < w->len; i++)
      cap_buf_printf(&b, "%s %" PRIu64 " %" PRIu64 "\n", w->v[i].hex, w->v[i].off, w->v[i].len);
    int fd = openat(w->dirfd, idx_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, b.data, b.len) != (ssize_t)b.len)
      r = -(errno ? errno : EIO);
    if (fd >= 0)
      close(fd);
    cap_buf_free(&b);
    snprintf(final, sizeof final, "%s.pack", w->name);
    if (r == 0 && renameat(w->dirfd, tmp, w->dirfd, final) < 0)
      r = -errno;
    snprintf(final, sizeof final, "%s.idx", w->name);
    if (r == 0 && renameat(w->dirfd, idx_tmp, w->dirfd, final) < 0)
      r = -errno;
  }
  if (r < 0 || !w->len) { /* nothing in it, or it failed: no pack */
    unlinkat(w->dirfd, tmp, 0);
    unlinkat(w->dirfd, idx_tmp, 0);
  }
  return r;
}

void rb_pack_abandon(struct rb_pack_writer *w)
{
  if (w->fd >= 0) {
    char tmp[128];
    snprintf(tmp, sizeof tmp, "tmp.%d.%s.pack", (int)getpid(), w->name);
    unlinkat(w->dirfd, tmp, 0);
    close(w->fd);
  }
  if (w->dirfd >= 0)
    close(w->dirfd);
  free(w->v);
  *w = (struct rb_pack_writer){.fd = -1, .dirfd = -1};
}

/* ---- pruning ---- */

static bool any_live(const char *idx_path, const struct cap_strv *live,
                     int (*cmp)(const void *, const void *), size_t *n)
{
  FILE *f = fopen(idx_path, "re");
  char line[160], hex[65];
  bool found = false;
  *n = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "%64[0-9a-f]", hex) == 1) {
      (*n)++;
      const char *key = hex;
      found |= live->len && bsearch(&key, live->v, live->len, sizeof *live->v, cmp) != NULL;
    }
  if (f)
    fclose(f);
  return found || !f;
}

size_t rb_packs_prune(const char *store, const struct cap_strv *live,
                      int (*cmp)(const void *, const void *))
{
  _cleanup_free_ char *dir = cap_xasprintf("%s/objects/packs", store);
  DIR *d = opendir(dir);
  struct dirent *e;
  size_t objects = 0;
  while (d && (e = readdir(d))) {
    size_t n = strlen(e->d_name), count;
    int pid = 0;
    /* a snapshot's unfinished pack, once its process is gone */
    if (sscanf(e->d_name, "tmp.%d.", &pid) == 1 && pid > 0 && kill(pid, 0) < 0 && errno == ESRCH) {
      unlinkat(dirfd(d), e->d_name, 0);
      continue;
    }
    if (n <= 4 || strcmp(e->d_name + n - 4, ".idx") != 0 || e->d_name[0] == 't')
      continue;
    _cleanup_free_ char *idx = cap_xasprintf("%s/%s", dir, e->d_name);
    if (any_live(idx, live, cmp, &count))
      continue;
    _cleanup_free_ char *pack = cap_xasprintf("%s/%.*s.pack", dir, (int)(n - 4), e->d_name);
    unlink(idx); /* the index first: a pack without one holds nothing */
    unlink(pack);
    objects += count;
  }
  if (d)
    closedir(d);
  return objects;
}
