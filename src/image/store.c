/* The image store's files (image.h): references, lookups, listing,
 * removal with garbage collection, and the small file helpers import.c
 * shares. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/io.h"
#include "image/image_internal.h"

extern char **environ;

char *image_store_dir(const char *state_dir) { return cap_xasprintf("%s/images", state_dir); }

char *image_blob_path(const char *dir, const char *digest)
{
  return cap_xasprintf("%s/blobs/sha256/%s", dir, digest + 7);
}

char *image_read_file(int dirfd, const char *path, size_t max, size_t *len)
{
  _cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0)
    return NULL;
  if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
    errno = S_ISREG(st.st_mode) ? EFBIG : EINVAL;
    return NULL;
  }
  char *data = cap_xmalloc((size_t)st.st_size + 1);
  size_t done;
  cap_read_upto(fd, data, (size_t)st.st_size, &done); /* a failed read: what came before it */
  data[done] = '\0';
  *len = done;
  return data;
}

int image_write_atomic(const char *dir, const char *name, const char *data, size_t len,
                       struct cap_error *err)
{
  _cleanup_free_ char *path = cap_xasprintf("%s/%s", dir, name);
  _cleanup_free_ char *tmp = cap_xasprintf("%s/.%s.%d", dir, name, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    return cap_error_errno(err, errno, "cannot write %s", tmp);
  bool ok = write(fd, data, len) == (ssize_t)len && fsync(fd) == 0;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) < 0) {
    int e = errno;
    unlink(tmp);
    return cap_error_errno(err, e, "cannot write %s", path);
  }
  return 0;
}

static int rmtree_at(int parent, const char *name)
{
  int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return 0;
    if (errno != ENOTDIR && errno != ELOOP)
      return -errno;
    return unlinkat(parent, name, 0) < 0 && errno != ENOENT ? -errno : 0;
  }
  fchmod(fd, 0700); /* an unpacked directory may be read-only */
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return -errno;
  }
  int r = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    int k = rmtree_at(dirfd(d), e->d_name);
    if (k < 0 && r == 0)
      r = k;
  }
  closedir(d);
  if (unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
    r = -errno;
  return r;
}

int image_rmtree(const char *path) { return rmtree_at(AT_FDCWD, path); }

int image_rmtree_at(int parent, const char *name) { return rmtree_at(parent, name); }

int image_run_tool(char *const *argv, char *why, size_t why_size)
{
  why[0] = '\0';
  int errp[2];
  if (pipe2(errp, O_CLOEXEC) < 0)
    return -errno;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
  pid_t pid;
  int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(errp[1]);
  if (r != 0) {
    close(errp[0]);
    return -r;
  }
  struct cap_buf out = {0};
  char buf[4096];
  ssize_t k;
  while ((k = read(errp[0], buf, sizeof buf)) > 0 || (k < 0 && errno == EINTR))
    if (k > 0 && out.len < (1u << 20))
      cap_buf_append(&out, buf, (size_t)k);
  close(errp[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  /* the last non-empty line says why */
  size_t end = out.len;
  while (end && (out.data[end - 1] == '\n' || out.data[end - 1] == '\r'))
    end--;
  size_t start = end;
  while (start && out.data[start - 1] != '\n')
    start--;
  snprintf(why, why_size, "%.*s", (int)(end - start), out.data ? out.data + start : "");
  cap_buf_free(&out);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

int image_store_lock(const char *store, struct cap_error *err)
{
  _cleanup_free_ char *path = cap_xasprintf("%s/lock", store);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return cap_error_errno(err, errno, "cannot open %s", path);
  while (flock(fd, LOCK_EX) < 0)
    if (errno != EINTR) {
      int e = errno;
      close(fd);
      return cap_error_errno(err, e, "cannot lock %s", path);
    }
  return fd;
}

/* ---- references ---- */

static bool tag_char(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

static bool path_char(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-' ||
         c == '/';
}

static bool domain_like(const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (s[i] == '.' || s[i] == ':')
      return true;
  return n == 9 && strncmp(s, "localhost", 9) == 0;
}

char *image_ref_normalize(const char *ref, struct cap_error *err)
{
  size_t len = strlen(ref);
  const char *at = strchr(ref, '@');
  size_t name_end = at ? (size_t)(at - ref) : len;
  const char *slash = memrchr(ref, '/', name_end);
  const char *colon = memrchr(ref, ':', name_end);
  const char *tag = colon && (!slash || colon > slash) ? colon + 1 : NULL;
  size_t path_end = tag ? (size_t)(tag - 1 - ref) : name_end;
  const char *first = memchr(ref, '/', path_end);
  bool has_domain = first && domain_like(ref, (size_t)(first - ref));
  const char *path = has_domain ? first + 1 : ref;
  bool bad = len == 0 || len > 512 || path_end == 0 || path >= ref + path_end;
  for (const char *p = path; !bad && p < ref + path_end; p++)
    bad = !path_char(*p) || (*p == '/' && (p == path || p[1] == '/' || p + 1 == ref + path_end));
  for (const char *p = ref; has_domain && !bad && p < first; p++)
    bad = !(tag_char(*p) || *p == ':');
  if (tag && !bad)
    bad = tag == ref + name_end || name_end - (size_t)(tag - ref) > 128;
  for (const char *p = tag; tag && !bad && p < ref + name_end; p++)
    bad = !tag_char(*p);
  if (at && !bad)
    bad = !image_digest_valid(at + 1);
  if (!bad && strstr(ref, ".."))
    bad = true;
  if (bad) {
    cap_error_set(err, EINVAL,
                  "\"%s\" is not an image reference (such as ghcr.io/owner/name:tag, "
                  "name:tag, or name@sha256:<64 hex>)",
                  ref);
    return NULL;
  }
  struct cap_buf b = {0};
  if (!has_domain)
    cap_buf_puts(&b, memchr(ref, '/', path_end) ? "docker.io/" : "docker.io/library/");
  cap_buf_append(&b, ref, name_end);
  if (!tag && !at)
    cap_buf_puts(&b, ":latest");
  if (at)
    cap_buf_puts(&b, at);
  return cap_buf_steal(&b);
}

char *image_ref_encode(const char *ref)
{
  struct cap_buf b = {0};
  for (const unsigned char *p = (const unsigned char *)ref; *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '-' || *p == '_')
      cap_buf_putc(&b, (char)*p);
    else
      cap_buf_printf(&b, "%%%02X", *p);
  }
  cap_buf_putc(&b, '\0');
  return cap_buf_steal(&b);
}

char *image_ref_decode(const char *name)
{
  struct cap_buf b = {0};
  for (const char *p = name; *p; p++) {
    unsigned v;
    if (*p == '%' && sscanf(p + 1, "%2X", &v) == 1 && v) {
      cap_buf_putc(&b, (char)v);
      p += 2;
    } else {
      cap_buf_putc(&b, *p);
    }
  }
  cap_buf_putc(&b, '\0');
  return cap_buf_steal(&b);
}

/* ---- lookups ---- */

void image_info_free(struct image_info *info)
{
  free(info->ref);
  free(info->rootfs);
  image_config_free(&info->config);
  *info = (struct image_info){0};
}

void image_infos_free(struct image_info *list, size_t n)
{
  for (size_t i = 0; i < n; i++)
    image_info_free(&list[i]);
  free(list);
}

static int load_manifest(const char *store, const char *digest, struct image_manifest *m,
                         struct cap_error *err)
{
  _cleanup_free_ char *path = image_blob_path(store, digest);
  size_t len;
  _cleanup_free_ char *text = image_read_file(AT_FDCWD, path, IMAGE_JSON_MAX, &len);
  if (!text)
    return cap_error_errno(err, errno, "the store lacks the manifest %s (%s)", digest, path);
  return image_manifest_parse(text, len, m, err);
}

int image_store_load(const char *store, const char *digest, struct image_info *out,
                     struct cap_error *err)
{
  struct image_manifest m;
  int r = load_manifest(store, digest, &m, err);
  if (r < 0)
    return r;
  snprintf(out->digest, sizeof out->digest, "%s", digest);
  snprintf(out->config_digest, sizeof out->config_digest, "%s", m.config_digest);
  out->size = 0;
  for (size_t i = 0; i < m.n_layers; i++)
    out->size += m.layers[i].size;
  _cleanup_free_ char *cpath = image_blob_path(store, m.config_digest);
  image_manifest_free(&m);
  size_t len;
  _cleanup_free_ char *text = image_read_file(AT_FDCWD, cpath, IMAGE_JSON_MAX, &len);
  if (!text)
    return cap_error_errno(err, errno, "the store lacks the config %s", out->config_digest);
  r = image_config_parse(text, len, &out->config, err);
  if (r < 0)
    return r;
  char *rootfs = cap_xasprintf("%s/rootfs/%s", store, digest + 7);
  struct stat st;
  if (stat(rootfs, &st) == 0 && S_ISDIR(st.st_mode))
    out->rootfs = rootfs;
  else
    free(rootfs);
  return 0;
}

/* The manifest digest a ref file names. */
static int read_ref(const char *store, const char *encoded, char digest[72])
{
  _cleanup_free_ char *path = cap_xasprintf("%s/refs/%s", store, encoded);
  size_t len;
  _cleanup_free_ char *text = image_read_file(AT_FDCWD, path, 256, &len);
  if (!text)
    return -errno;
  text[strcspn(text, "\n")] = '\0';
  if (!image_digest_valid(text))
    return -EINVAL;
  memcpy(digest, text, IMAGE_DIGEST_LEN + 1);
  return 0;
}

int image_store_resolve(const char *store, const char *ref, struct image_info *out,
                        struct cap_error *err)
{
  *out = (struct image_info){0};
  _cleanup_free_ char *norm = image_ref_normalize(ref, err);
  if (!norm)
    return -EINVAL;
  char digest[IMAGE_DIGEST_LEN + 1];
  const char *at = strchr(norm, '@');
  _cleanup_free_ char *enc = image_ref_encode(norm);
  int r = at ? 0 : read_ref(store, enc, digest);
  if (at)
    snprintf(digest, sizeof digest, "%s", at + 1);
  _cleanup_free_ char *blob = at ? image_blob_path(store, digest) : NULL;
  if (r == 0 && blob && access(blob, F_OK) < 0)
    r = -ENOENT;
  if (r < 0)
    return cap_error_set(err, ENOENT,
                         "the image %s is not in capsule's image store (%s); run `capsule image "
                         "pull %s`, or `capsule image import PATH --tag %s` for an OCI layout, "
                         "OCI archive or `docker save` archive",
                         norm, store, ref, ref);
  r = image_store_load(store, digest, out, err);
  if (r < 0)
    return r;
  out->ref = steal_pointer(&norm);
  if (!out->rootfs)
    return cap_error_set(err, ENOENT,
                         "the image %s (%s) has no unpacked root in %s/rootfs; import it again "
                         "with `capsule image import`",
                         out->ref, digest, store);
  return 0;
}

int image_store_list(const char *store, struct image_info **ret, size_t *n, struct cap_error *err)
{
  *ret = NULL;
  *n = 0;
  _cleanup_free_ char *refs = cap_xasprintf("%s/refs", store);
  DIR *d = opendir(refs);
  if (!d)
    return errno == ENOENT ? 0 : cap_error_errno(err, errno, "cannot read %s", refs);
  struct dirent *e;
  size_t cap = 0;
  int r = 0;
  while ((e = readdir(d)) && r == 0) {
    char digest[IMAGE_DIGEST_LEN + 1];
    if (e->d_name[0] == '.' || read_ref(store, e->d_name, digest) < 0)
      continue;
    if (*n == cap)
      *ret = cap_xrealloc(*ret, (cap = cap ? 2 * cap : 8) * sizeof **ret);
    struct image_info *info = &(*ret)[*n];
    *info = (struct image_info){0};
    struct cap_error ignored = {0};
    if (image_store_load(store, digest, info, &ignored) < 0)
      snprintf(info->digest, sizeof info->digest, "%s", digest); /* shown, damaged */
    cap_error_clear(&ignored);
    info->ref = image_ref_decode(e->d_name);
    (*n)++;
  }
  closedir(d);
  for (size_t i = 1; i < *n; i++) /* sorted by reference */
    for (size_t j = i; j > 0 && strcmp((*ret)[j - 1].ref, (*ret)[j].ref) > 0; j--) {
      struct image_info t = (*ret)[j];
      (*ret)[j] = (*ret)[j - 1];
      (*ret)[j - 1] = t;
    }
  return r;
}

/* ---- removal ---- */

struct keep {
  char **digests; /* "sha256:HEX" of every blob a ref needs */
  size_t n, cap;
};

static void keep_add(struct keep *k, const char *digest)
{
  if (k->n == k->cap)
    k->digests = cap_xrealloc(k->digests, (k->cap = k->cap ? 2 * k->cap : 16) * sizeof(char *));
  k->digests[k->n++] = cap_xstrdup(digest);
}

static bool kept(const struct keep *k, const char *hex)
{
  for (size_t i = 0; i < k->n; i++)
    if (strcmp(k->digests[i] + 7, hex) == 0)
      return true;
  return false;
}

/* Every blob and rootfs no ref needs goes; a damaged ref keeps its
 * manifest's blobs it can still name. */
static void collect_garbage(const char *store)
{
  struct keep k = {0};
  _cleanup_free_ char *refs = cap_xasprintf("%s/refs", store);
  DIR *d = opendir(refs);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    char digest[IMAGE_DIGEST_LEN + 1];
    if (e->d_name[0] == '.' || read_ref(store, e->d_name, digest) < 0)
      continue;
    keep_add(&k, digest);
    struct image_manifest m;
    struct cap_error ignored = {0};
    if (load_manifest(store, digest, &m, &ignored) == 0) {
      keep_add(&k, m.config_digest);
      for (size_t i = 0; i < m.n_layers; i++)
        keep_add(&k, m.layers[i].digest);
      image_manifest_free(&m);
    }
    cap_error_clear(&ignored);
  }
  if (d)
    closedir(d);
  static const char *const dirs[] = {"rootfs", "blobs/sha256"};
  for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
    _cleanup_free_ char *dir = cap_xasprintf("%s/%s", store, dirs[i]);
    DIR *dd = opendir(dir);
    while (dd && (e = readdir(dd))) {
      if (e->d_name[0] == '.' || kept(&k, e->d_name))
        continue;
      _cleanup_free_ char *path = cap_xasprintf("%s/%s", dir, e->d_name);
      image_rmtree(path);
    }
    if (dd)
      closedir(dd);
  }
  for (size_t i = 0; i < k.n; i++)
    free(k.digests[i]);
  free(k.digests);
}

int image_store_remove(const char *store, const char *ref, struct cap_error *err)
{
  _cleanup_free_ char *norm = image_ref_normalize(ref, err);
  if (!norm)
    return -EINVAL;
  _cleanup_free_ char *enc = image_ref_encode(norm);
  _cleanup_free_ char *path = cap_xasprintf("%s/refs/%s", store, enc);
  _cleanup_close_ int lock = image_store_lock(store, err);
  if (lock < 0)
    return lock;
  if (unlink(path) < 0)
    return errno == ENOENT ? cap_error_set(err, ENOENT,
                                           "the image %s is not in the store; `capsule image ls` "
                                           "lists what is",
                                           norm)
                           : cap_error_errno(err, errno, "cannot remove %s", path);
  collect_garbage(store);
  return 0;
}

int image_rootfs_copy(const struct image_info *info, const char *dest, struct cap_error *err)
{
  if (!info->rootfs)
    return cap_error_set(err, ENOENT, "the image %s has no unpacked root", info->digest);
  /* hard links where the store and dest share a filesystem (the root is
   * read-only in the container), else a copy */
  char why[512];
  char *link[] = {"cp", "-a", "-l", "--", info->rootfs, (char *)dest, NULL};
  if (image_run_tool(link, why, sizeof why) == 0)
    return 0;
  image_rmtree(dest);
  char *copy[] = {"cp", "-a", "--reflink=auto", "--", info->rootfs, (char *)dest, NULL};
  int st = image_run_tool(copy, why, sizeof why);
  if (st != 0) {
    image_rmtree(dest);
    return cap_error_set(err, EIO, "cannot copy the image's root to %s: %s", dest,
                         *why ? why : "cp failed");
  }
  return 0;
}
