/* capsule's own layer applier (image.h): the layers of an image applied
 * in order onto a new root, rootless, in one pass over each blob
 * (layer_read.c reads, hashes, copies and decompresses it).
 *
 * Each tar entry is checked first: a path, hard-link target or whiteout
 * target that climbs out of the root (`../x`, `a/../../x`) refuses the
 * image, as does an entry type capsule does not apply (GNU sparse files).
 * Then applied as the OCI image spec's changeset rules say:
 * - every parent is resolved inside the root (openat2 RESOLVE_IN_ROOT), so
 *   a symlink a layer made, absolute or climbing, resolves within the root
 *   and nothing is ever written outside it; the entry's own name is never
 *   followed (O_NOFOLLOW, unlinkat, mkdirat, symlinkat, linkat);
 * - `.wh.NAME` removes NAME from the layers below; `.wh..wh..opq` empties
 *   its directory of what the layers below put there (what this layer
 *   put there stays, whatever the order in the tar);
 * - an entry replaces what was at its path (a directory over a directory
 *   is kept and its mode updated); a file is always a new inode, so a hard
 *   link made earlier is never written through;
 * - regular files, directories, symlinks, hard links and FIFOs are made;
 *   device nodes are skipped (rootless: they could not be made, and the
 *   sandbox gives its own /dev); ownership is the importer's (the sandbox
 *   maps it), setuid and setgid bits are dropped (the sandbox runs with
 *   no-new-privs), extended attributes are not applied; modification
 *   times are kept;
 * - directories are made 0700 while the layers are applied, and get their
 *   own mode and time at the end (deepest first), so that a read-only
 *   directory in a layer does not stop the next one.
 * No fsync: the staged root is renamed into the store only when whole, and
 * a crash leaves a staging directory the next import removes.
 * With root -1 (image_layer_check_mem, the fuzz target) entries are only
 * checked. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/io.h"
#include "image/image_internal.h"
#include "image/layer_internal.h"

struct dir_mode {
  char *path;
  mode_t mode;
  struct timespec mtime;
  size_t seq;
};

struct image_unpack {
  int root; /* the new root, or -1: checking only */
  char *root_path;
  struct dir_mode *dirs; /* directories' modes and times, set at the end */
  size_t n_dirs, cap_dirs, seq;
  /* this layer's paths, for opaque directories */
  char **seen;
  size_t seen_cap, n_seen;
  /* the last parent directory resolved */
  char *parent_path;
  int parent_fd;
  mode_t root_mode; /* the root's own, from a layer's "./" entry */
  struct timespec root_mtime;
};

/* ---- paths ---- */

static uint64_t hash_str(const char *s)
{
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static bool seen_has(const struct image_unpack *u, const char *path)
{
  if (!u->seen_cap)
    return false;
  for (size_t i = hash_str(path) & (u->seen_cap - 1); u->seen[i]; i = (i + 1) & (u->seen_cap - 1))
    if (strcmp(u->seen[i], path) == 0)
      return true;
  return false;
}

static void seen_add(struct image_unpack *u, const char *path)
{
  if (seen_has(u, path))
    return;
  if (2 * (u->n_seen + 1) > u->seen_cap) {
    size_t cap = u->seen_cap ? 2 * u->seen_cap : 1024;
    char **old = u->seen, **fresh = cap_xcalloc(cap, sizeof *fresh);
    for (size_t i = 0; i < u->seen_cap; i++) {
      if (!old[i])
        continue;
      size_t j = hash_str(old[i]) & (cap - 1);
      while (fresh[j])
        j = (j + 1) & (cap - 1);
      fresh[j] = old[i];
    }
    free(old);
    u->seen = fresh;
    u->seen_cap = cap;
  }
  size_t j = hash_str(path) & (u->seen_cap - 1);
  while (u->seen[j])
    j = (j + 1) & (u->seen_cap - 1);
  u->seen[j] = cap_xstrdup(path);
  u->n_seen++;
}

static void seen_clear(struct image_unpack *u)
{
  for (size_t i = 0; i < u->seen_cap; i++)
    free(u->seen[i]);
  free(u->seen);
  u->seen = NULL;
  u->seen_cap = u->n_seen = 0;
}

static int open_in_root(int root, const char *path, int flags)
{
  struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
                         .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
  int fd = (int)syscall(SYS_openat2, root, *path ? path : ".", &how, sizeof how);
  return fd < 0 ? -errno : fd;
}

static void parent_forget(struct image_unpack *u)
{
  if (u->parent_fd >= 0)
    close(u->parent_fd);
  u->parent_fd = -1;
  free(u->parent_path);
  u->parent_path = NULL;
}

static void defer_dir(struct image_unpack *u, const char *path, mode_t mode, struct timespec mtime);

/* path made relative to the root with every ".." applied lexically and
 * clamped at the root, as RESOLVE_IN_ROOT resolves it. */
static char *clamp_path(const char *path)
{
  struct cap_buf b = {0};
  for (const char *p = path; *p;) {
    const char *end = strchr(p, '/');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == 2 && p[0] == '.' && p[1] == '.') {
      while (b.len && b.data[b.len - 1] != '/')
        b.len--;
      if (b.len)
        b.len--;
    } else if (len && !(len == 1 && p[0] == '.')) {
      if (b.len)
        cap_buf_append(&b, "/", 1);
      cap_buf_append(&b, p, len);
    }
    p += len + (end ? 1 : 0);
  }
  cap_buf_append(&b, "", 1);
  return cap_buf_steal(&b);
}

/* Makes each missing directory of want (0755 at the end, as a runtime
 * makes a missing parent). A symlink on the way whose target is missing
 * (say "/tmp/x", from a layer) is followed inside the root and its target
 * made there, as umoci's secure join does: *want becomes the resolved
 * path. 1: followed a link (start again), 0: made, or a negative errno. */
static int make_missing(struct image_unpack *u, char **want)
{
  for (size_t at = 0;;) {
    const char *end = strchr(*want + at, '/');
    size_t upto = end ? (size_t)(end - *want) : strlen(*want);
    _cleanup_free_ char *above = cap_xstrndup(*want, at ? at - 1 : 0);
    _cleanup_free_ char *name = cap_xstrndup(*want + at, upto - at);
    _cleanup_close_ int pfd = open_in_root(u->root, above, O_PATH | O_DIRECTORY);
    if (pfd < 0)
      return pfd;
    if (mkdirat(pfd, name, 0700) == 0) {
      _cleanup_free_ char *made = cap_xstrndup(*want, upto);
      defer_dir(u, made, 0755, (struct timespec){.tv_nsec = UTIME_OMIT});
    } else if (errno != EEXIST) {
      return -errno;
    } else {
      char target[4096];
      ssize_t n = readlinkat(pfd, name, target, sizeof target - 1);
      if (n > 0) {
        target[n] = '\0';
        _cleanup_free_ char *joined = cap_xasprintf("%s/%s%s%s", target[0] == '/' ? "" : above,
                                                    target, end ? "/" : "", end ? end + 1 : "");
        free(*want);
        *want = clamp_path(joined);
        return 1;
      }
    }
    if (!end)
      return 0;
    at = upto + 1;
  }
}

/* The directory dir (a cleaned path) inside the root, made where it is
 * missing. Borrowed: valid until the next call. */
static int parent_dir(struct image_unpack *u, const char *dir)
{
  if (u->parent_path && strcmp(u->parent_path, dir) == 0)
    return u->parent_fd;
  parent_forget(u);
  int fd = open_in_root(u->root, dir, O_PATH | O_DIRECTORY);
  _cleanup_free_ char *want = cap_xstrdup(dir);
  for (int hops = 0; fd == -ENOENT; hops++) {
    if (hops == 40)
      return -ELOOP;
    int k = make_missing(u, &want);
    if (k < 0)
      return k;
    fd = open_in_root(u->root, want, O_PATH | O_DIRECTORY);
  }
  if (fd < 0)
    return fd;
  u->parent_fd = fd;
  u->parent_path = cap_xstrdup(dir);
  return fd;
}

/* Splits a cleaned path into its directory (allocated) and its name. */
static char *split(const char *path, const char **base)
{
  const char *slash = strrchr(path, '/');
  *base = slash ? slash + 1 : path;
  return slash ? cap_xstrndup(path, (size_t)(slash - path)) : cap_xstrdup("");
}

/* Removes name in dir, whatever it is (a directory with all it holds).
 * The cached parent is dir itself, never inside name: it stays valid. */
static int remove_at(int dir, const char *name)
{
  if (unlinkat(dir, name, 0) == 0 || errno == ENOENT)
    return 0;
  if (errno != EISDIR && errno != EPERM)
    return -errno;
  return image_rmtree_at(dir, name);
}

/* ---- applying ---- */

static void defer_dir(struct image_unpack *u, const char *path, mode_t mode, struct timespec mtime)
{
  if (u->n_dirs == u->cap_dirs) {
    u->cap_dirs = u->cap_dirs ? 2 * u->cap_dirs : 256;
    u->dirs = cap_xrealloc(u->dirs, u->cap_dirs * sizeof *u->dirs);
  }
  u->dirs[u->n_dirs++] =
      (struct dir_mode){.path = cap_xstrdup(path), .mode = mode, .mtime = mtime, .seq = u->seq++};
}

static int write_data(int fd, struct layer_reader *r, uint64_t size)
{
  while (size) {
    const unsigned char *p;
    ssize_t k = layer_get(r, size < (1u << 20) ? (size_t)size : (1u << 20), &p);
    if (k <= 0)
      return k < 0 ? (int)k : -EPIPE;
    size -= (uint64_t)k;
    int w = cap_write_all(fd, p, (size_t)k, 0);
    if (w < 0)
      return w;
  }
  return 0;
}

static int make_file(int dir, const char *name, const struct layer_entry *e, struct layer_reader *r)
{
  int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) {
    int k = remove_at(dir, name);
    if (k < 0)
      return k;
    fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  }
  if (fd < 0)
    return -errno;
  int k = write_data(fd, r, e->size);
  struct timespec t[2] = {e->mtime, e->mtime};
  if (k == 0 && (fchmod(fd, e->mode) < 0 || futimens(fd, t) < 0))
    k = -errno;
  close(fd);
  return k;
}

static int make_dir(struct image_unpack *u, int dir, const char *name, const struct layer_entry *e)
{
  struct stat st;
  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode)) {
    int k = remove_at(dir, name);
    if (k < 0)
      return k;
  }
  if (mkdirat(dir, name, 0700) < 0 && errno != EEXIST)
    return -errno;
  defer_dir(u, e->path, e->mode, e->mtime);
  return 0;
}

/* A node that is not a file nor a directory: a symlink, a FIFO. */
static int make_node(int dir, const char *name, const struct layer_entry *e)
{
  for (int attempt = 0; attempt < 2; attempt++) {
    int k = e->type == '2' ? symlinkat(e->link, dir, name) : mknodat(dir, name, S_IFIFO | 0600, 0);
    if (k == 0)
      break;
    if (errno != EEXIST || attempt)
      return -errno;
    if ((k = remove_at(dir, name)) < 0)
      return k;
  }
  struct timespec t[2] = {e->mtime, e->mtime};
  if (e->type == '6' && fchmodat(dir, name, e->mode, AT_SYMLINK_NOFOLLOW) < 0 && errno != ENOTSUP)
    return -errno;
  return utimensat(dir, name, t, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static int make_link(struct image_unpack *u, int dir, const char *name, const struct layer_entry *e)
{
  const char *tbase;
  _cleanup_free_ char *tdir = split(e->link, &tbase);
  _cleanup_close_ int tfd = open_in_root(u->root, tdir, O_PATH | O_DIRECTORY);
  if (tfd < 0)
    return tfd;
  struct stat a, b;
  if (fstatat(tfd, tbase, &a, AT_SYMLINK_NOFOLLOW) < 0)
    return -errno;
  if (fstatat(dir, name, &b, AT_SYMLINK_NOFOLLOW) == 0) {
    if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
      return 0;
    int k = remove_at(dir, name);
    if (k < 0)
      return k;
  }
  return linkat(tfd, tbase, dir, name, 0) < 0 ? -errno : 0;
}

/* Empties dir of what the layers below put there. */
static int opaque(struct image_unpack *u, const char *dir)
{
  parent_forget(u); /* it may be inside */
  int fd = open_in_root(u->root, dir, O_RDONLY | O_DIRECTORY);
  if (fd == -ENOENT || fd == -ENOTDIR)
    return 0;
  if (fd < 0)
    return fd;
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return -errno;
  }
  int r = 0;
  struct dirent *de;
  while (r == 0 && (de = readdir(d))) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    _cleanup_free_ char *path =
        *dir ? cap_xasprintf("%s/%s", dir, de->d_name) : cap_xstrdup(de->d_name);
    if (!seen_has(u, path))
      r = remove_at(dirfd(d), de->d_name);
  }
  closedir(d);
  return r;
}

/* One entry, checked (and applied when there is a root). */
static int apply_entry(void *arg, struct layer_entry *e, struct layer_reader *r, size_t index,
                       struct cap_error *err)
{
  struct image_unpack *u = arg;
  const char *base;
  _cleanup_free_ char *dir = split(e->path, &base);
  bool whiteout = strncmp(base, ".wh.", 4) == 0;
  bool opq = strcmp(base, ".wh..wh..opq") == 0;
  if (whiteout && !opq) {
    bool climbs;
    _cleanup_free_ char *target =
        *dir ? cap_xasprintf("%s/%s", dir, base + 4) : cap_xstrdup(base + 4);
    _cleanup_free_ char *clean = layer_clean_path(target, &climbs);
    if (climbs || !*clean || strcmp(base + 4, "..") == 0 || strcmp(base + 4, ".") == 0)
      return cap_error_set(err, EXDEV,
                           "layer %zu: the whiteout \"%s\" climbs out of the image's root (a "
                           "hostile or broken layer; nothing was stored)",
                           index, e->path);
  }
  if (u->root >= 0 && !*e->path && e->type == '5') { /* the root's own mode and time */
    u->root_mode = e->mode;
    u->root_mtime = e->mtime;
  }
  if (u->root < 0 || !*base || strcmp(base, "..") == 0)
    return 0; /* the root itself, or checking only */
  int pfd = parent_dir(u, dir);
  int k = pfd;
  if (pfd >= 0 && opq)
    k = opaque(u, dir);
  else if (pfd >= 0 && whiteout)
    k = remove_at(pfd, base + 4);
  else if (pfd >= 0) {
    seen_add(u, e->path);
    switch (e->type) {
    case '0':
    case '\0':
    case '7': k = make_file(pfd, base, e, r); break;
    case '5': k = make_dir(u, pfd, base, e); break;
    case '1': k = make_link(u, pfd, base, e); break;
    case '2':
    case '6': k = make_node(pfd, base, e); break;
    default: k = 0; /* '3', '4': device nodes are skipped */
    }
  }
  e->consumed = k == 0 && (e->type == '0' || e->type == '\0' || e->type == '7') && !whiteout;
  if (k < 0 && !r->fault) {
    _cleanup_free_ char *what =
        e->type == '1' ? cap_xasprintf(" (a hard link to \"%s\")", e->link) : cap_xstrdup("");
    return cap_error_errno(err, -k, "layer %zu: cannot apply \"%s\"%s", index, e->path, what);
  }
  return k;
}

/* A fault of the stream itself, as the operator reads it. */
static int stream_fault(struct layer_reader *r, int k, size_t index, struct cap_error *err)
{
  if (err->message)
    return k;
  if (r->copy_fault)
    return cap_error_errno(err, -k, "cannot copy layer %zu into the staging directory", index);
  if (k == -EBADMSG)
    return cap_error_set(err, EBADMSG, "layer %zu is corrupt: it is not a valid %s stream", index,
                         r->codec == LAYER_ZSTD ? "zstd" : "gzip");
  if (k == -EPIPE)
    return cap_error_set(err, EBADMSG, "layer %zu is cut short: its tar stream ends mid-entry",
                         index);
  return cap_error_errno(err, -k, "cannot read layer %zu", index);
}

static int layer_run(struct image_unpack *u, struct layer_reader *r, size_t index,
                     const char *digest, int64_t size, struct cap_error *err)
{
  int k = layer_walk(r, index, apply_entry, u, err);
  if (k < 0)
    stream_fault(r, k, index, err);
  char got[72];
  int d = layer_drain(r, got);
  seen_clear(u);
  if (!digest)
    return k;
  if (d == 0 && strcmp(got, digest) != 0) { /* says more than what it broke */
    cap_error_clear(err);
    return cap_error_set(err, EBADMSG,
                         "layer %zu %s does not match its digest: its content hashes to %s (a "
                         "corrupt or altered image; nothing was stored)",
                         index, digest, got);
  }
  if (k == 0 && d < 0)
    return stream_fault(r, d, index, err);
  if (k == 0 && size >= 0 && r->raw_bytes != size)
    return cap_error_set(err, EBADMSG, "layer %zu %s is %lld bytes, its descriptor says %lld",
                         index, digest, (long long)r->raw_bytes, (long long)size);
  return k;
}

/* ---- the public side ---- */

int image_unpack_begin(const char *root, struct image_unpack **ret, struct cap_error *err)
{
  if (mkdir(root, 0700) < 0)
    return cap_error_errno(err, errno, "cannot create %s", root);
  int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return cap_error_errno(err, errno, "cannot open %s", root);
  struct image_unpack *u = cap_xcalloc(1, sizeof *u);
  u->root = fd;
  u->root_path = cap_xstrdup(root);
  u->parent_fd = -1;
  u->root_mode = 0755;
  u->root_mtime = (struct timespec){.tv_nsec = UTIME_OMIT};
  *ret = u;
  return 0;
}

int image_unpack_layer(struct image_unpack *u, int blob, int copy, const struct image_layer *layer,
                       size_t index, struct cap_error *err)
{
  struct layer_reader r;
  int k = layer_reader_init(&r, blob, copy, NULL, 0, layer->media_type);
  if (k == 0)
    k = layer_run(u, &r, index, *layer->digest ? layer->digest : NULL, layer->size, err);
  else
    cap_error_set(err, ENOMEM, "cannot start the decompressor for layer %zu", index);
  layer_reader_free(&r);
  return k;
}

static int by_path_then_latest(const void *a, const void *b)
{
  const struct dir_mode *x = a, *y = b;
  int c = strcmp(y->path, x->path); /* deepest (longest prefix) first */
  return c ? c : (x->seq < y->seq) - (x->seq > y->seq);
}

int image_unpack_finish(struct image_unpack *u, struct cap_error *err)
{
  parent_forget(u);
  if (u->n_dirs)
    qsort(u->dirs, u->n_dirs, sizeof *u->dirs, by_path_then_latest);
  for (size_t i = 0; i < u->n_dirs; i++) {
    if (i && strcmp(u->dirs[i].path, u->dirs[i - 1].path) == 0)
      continue; /* an older layer's mode */
    const char *base;
    _cleanup_free_ char *dir = split(u->dirs[i].path, &base);
    _cleanup_close_ int pfd = open_in_root(u->root, dir, O_PATH | O_DIRECTORY);
    _cleanup_close_ int fd =
        pfd < 0 ? -1 : openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
      continue; /* replaced or removed by a later layer */
    struct timespec t[2] = {u->dirs[i].mtime, u->dirs[i].mtime};
    if (fchmod(fd, u->dirs[i].mode) < 0 || futimens(fd, t) < 0)
      return cap_error_errno(err, errno, "cannot set the mode of %s in the image's root",
                             u->dirs[i].path);
  }
  struct timespec t[2] = {u->root_mtime, u->root_mtime};
  if (fchmod(u->root, u->root_mode) < 0 || futimens(u->root, t) < 0)
    return cap_error_errno(err, errno, "cannot set the mode of %s", u->root_path);
  return 0;
}

void image_unpack_free(struct image_unpack *u)
{
  if (!u)
    return;
  parent_forget(u);
  seen_clear(u);
  for (size_t i = 0; i < u->n_dirs; i++)
    free(u->dirs[i].path);
  free(u->dirs);
  if (u->root >= 0)
    close(u->root);
  free(u->root_path);
  free(u);
}

int image_layer_check_mem(const unsigned char *data, size_t len, const char *media_type,
                          size_t index, struct cap_error *err)
{
  struct image_unpack u = {.root = -1, .parent_fd = -1};
  struct layer_reader r;
  int k = layer_reader_init(&r, -1, -1, data, len, media_type);
  if (k == 0)
    k = layer_run(&u, &r, index, NULL, -1, err);
  else
    cap_error_set(err, ENOMEM, "cannot start the decompressor");
  layer_reader_free(&r);
  return k;
}
