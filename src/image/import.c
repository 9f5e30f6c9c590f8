/* Importing an image into the store (image.h), in the order it happens:
 * a staging directory under STORE/tmp; the source as an OCI image layout
 * there (a layout directory's blobs copied, an OCI or `docker save`
 * archive converted by skopeo); the index, manifest and config verified
 * against their digests and sizes; each layer read once, copied, hashed
 * and applied rootless by capsule's own applier (layer_apply.c), its
 * digest and size checked when it is read; then, under the store's lock,
 * the blobs, the rootfs and the reference moved in by rename. Any failure
 * removes the staging directory and leaves the store as it was. */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/io.h"
#include "image/image_internal.h"

#define COPY_CHUNK (1u << 20)
#define STAGE_REF "capsule"

enum source_kind { SOURCE_LAYOUT, SOURCE_OCI_ARCHIVE, SOURCE_DOCKER_ARCHIVE, SOURCE_REGISTRY };

struct stage {
  const char *store;
  char *dir;    /* STORE/tmp/import.XXXXXX */
  char *layout; /* dir/oci: the staged layout the blobs are committed from */
  char *src;    /* the layout the blobs come from (the source, or layout) */
  bool copy;    /* blobs are copied from src into layout */
  char digest[IMAGE_DIGEST_LEN + 1];
  char *manifest_type;
  int64_t manifest_size;
  struct image_manifest manifest;
};

static void stage_free(struct stage *s)
{
  if (s->dir)
    image_rmtree(s->dir);
  free(s->dir);
  free(s->layout);
  free(s->src);
  free(s->manifest_type);
  image_manifest_free(&s->manifest);
}

static int make_dirs(const char *store, struct cap_error *err)
{
  static const char *const subs[] = {"", "/tmp", "/blobs", "/blobs/sha256", "/rootfs", "/refs"};
  for (size_t i = 0; i < ARRAY_SIZE(subs); i++) {
    _cleanup_free_ char *p = cap_xasprintf("%s%s", store, subs[i]);
    if (mkdir(p, 0700) < 0 && errno != EEXIST)
      return cap_error_errno(err, errno, "cannot create %s", p);
  }
  return 0;
}

/* Copies (when out >= 0) and hashes what fd holds; size is the byte count. */
static int hash_fd(int fd, int out, char digest[72], int64_t *size)
{
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  _cleanup_free_ unsigned char *buf = cap_xmalloc(COPY_CHUNK);
  *size = 0;
  ssize_t k;
  while ((k = cap_read_some(fd, buf, COPY_CHUNK)) > 0) {
    crypto_hash_sha256_update(&st, buf, (size_t)k);
    int w = out >= 0 ? cap_write_all(out, buf, (size_t)k, 0) : 0;
    if (w < 0)
      return w;
    *size += k;
  }
  if (k < 0)
    return (int)k;
  unsigned char h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&st, h);
  memcpy(digest, "sha256:", 7);
  sodium_bin2hex(digest + 7, 65, h, sizeof h);
  return 0;
}

/* One blob: hashed (and copied into the staged layout) and checked against
 * the descriptor that names it. */
static int verify_blob(struct stage *s, const char *what, const char *digest, int64_t want_size,
                       struct cap_error *err)
{
  _cleanup_free_ char *from = image_blob_path(s->src, digest);
  _cleanup_close_ int fd = open(from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return cap_error_errno(err, errno, "%s %s is missing from the image (%s)", what, digest, from);
  _cleanup_free_ char *to = s->copy ? image_blob_path(s->layout, digest) : NULL;
  /* a blob named twice (a layer repeated) is copied once */
  _cleanup_close_ int out =
      to ? open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444) : -1;
  if (to && out < 0 && errno != EEXIST)
    return cap_error_errno(err, errno, "cannot write %s", to);
  char got[IMAGE_DIGEST_LEN + 1];
  int64_t size;
  int r = hash_fd(fd, out, got, &size);
  if (r < 0)
    return cap_error_errno(err, -r, "cannot read %s %s", what, from);
  if (strcmp(got, digest) != 0)
    return cap_error_set(err, EBADMSG,
                         "%s %s does not match its digest: its content hashes to %s (a corrupt "
                         "or altered image; nothing was stored)",
                         what, digest, got);
  if (want_size >= 0 && size != want_size)
    return cap_error_set(err, EBADMSG, "%s %s is %lld bytes, its descriptor says %lld", what,
                         digest, (long long)size, (long long)want_size);
  return 0;
}

/* A JSON blob of the source, verified, with its content. */
static char *read_blob(struct stage *s, const char *what, const char *digest, size_t *len,
                       struct cap_error *err)
{
  if (verify_blob(s, what, digest, -1, err) < 0)
    return NULL;
  _cleanup_free_ char *path = image_blob_path(s->src, digest);
  char *text = image_read_file(AT_FDCWD, path, IMAGE_JSON_MAX, len);
  if (!text)
    cap_error_errno(err, errno, "cannot read %s %s", what, path);
  return text;
}

/* index.json (and a nested index) to the image manifest, read and parsed. */
static int pick_manifest(struct stage *s, const char *want_ref, struct cap_error *err)
{
  _cleanup_free_ char *index_path = cap_xasprintf("%s/index.json", s->src);
  size_t len;
  _cleanup_free_ char *text = image_read_file(AT_FDCWD, index_path, IMAGE_JSON_MAX, &len);
  if (!text)
    return cap_error_errno(err, errno, "cannot read the image layout's index %s", index_path);
  bool nested = false;
  int r = image_index_pick(text, len, want_ref, s->digest, &nested, err);
  for (int depth = 0; r == 0 && nested; depth++) {
    if (depth == 2)
      return cap_error_set(err, EINVAL, "the image's indexes nest too deep");
    free(text);
    text = read_blob(s, "the image index", s->digest, &len, err);
    r = text ? image_index_pick(text, len, NULL, s->digest, &nested, err) : -EINVAL;
  }
  if (r < 0)
    return r;
  free(text);
  text = read_blob(s, "the image manifest", s->digest, &len, err);
  if (!text)
    return -EINVAL;
  s->manifest_size = (int64_t)len;
  r = image_manifest_parse(text, len, &s->manifest, err);
  if (r < 0)
    return r;
  s->manifest_type = cap_xstrdup(strstr(text, "application/vnd.docker.distribution.manifest.v2")
                                     ? "application/vnd.docker.distribution.manifest.v2+json"
                                     : "application/vnd.oci.image.manifest.v1+json");
  return 0;
}

/* Each layer verified (copied and hashed) without applying it: the
 * store already holds the image's root. */
static int verify_layers(struct stage *s, struct cap_error *err)
{
  int r = 0;
  for (size_t i = 0; r == 0 && i < s->manifest.n_layers; i++) {
    char what[32];
    snprintf(what, sizeof what, "layer %zu", i + 1);
    r = verify_blob(s, what, s->manifest.layers[i].digest, s->manifest.layers[i].size, err);
  }
  return r;
}

static int missing_tool(const char *tool, struct cap_error *err)
{
  cap_error_set(err, ENOTSUP,
                "capsule needs %s for image archives and registries and it is not installed; "
                "install the Debian package %s (scripts/deps.sh test does)",
                tool, tool);
  return cap_error_outcome(err, CAP_OUTCOME_HOST);
}

/* One layer applied: read from the source once, copied into the staged
 * layout (unless an earlier layer was the same blob) as it is read. */
static int apply_layer(struct stage *s, struct image_unpack *u, size_t i, struct cap_error *err)
{
  const struct image_layer *l = &s->manifest.layers[i];
  _cleanup_free_ char *from = image_blob_path(s->src, l->digest);
  _cleanup_close_ int fd = open(from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return cap_error_errno(err, errno, "layer %zu %s is missing from the image (%s)", i + 1,
                           l->digest, from);
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  _cleanup_free_ char *to = s->copy ? image_blob_path(s->layout, l->digest) : NULL;
  _cleanup_close_ int out =
      to ? open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444) : -1;
  if (to && out < 0 && errno != EEXIST)
    return cap_error_errno(err, errno, "cannot write %s", to);
  return image_unpack_layer(u, fd, out, l, i + 1, err);
}

/* The layers applied in order onto a new root at rootfs. */
static int unpack(struct stage *s, const char *rootfs, struct cap_error *err)
{
  struct image_unpack *u = NULL;
  int r = image_unpack_begin(rootfs, &u, err);
  for (size_t i = 0; r == 0 && i < s->manifest.n_layers; i++)
    r = apply_layer(s, u, i, err);
  if (r == 0)
    r = image_unpack_finish(u, err);
  image_unpack_free(u);
  return r;
}

/* Moves the staged blobs, the rootfs and the reference into the store. */
static int commit(struct stage *s, const char *ref, struct cap_error *err)
{
  _cleanup_close_ int lock = image_store_lock(s->store, err);
  if (lock < 0)
    return lock;
  const char *digests[3 + 1024];
  size_t n = 0;
  digests[n++] = s->digest;
  digests[n++] = s->manifest.config_digest;
  for (size_t i = 0; i < s->manifest.n_layers && n < ARRAY_SIZE(digests); i++)
    digests[n++] = s->manifest.layers[i].digest;
  for (size_t i = 0; i < n; i++) {
    _cleanup_free_ char *from = image_blob_path(s->layout, digests[i]);
    _cleanup_free_ char *to = image_blob_path(s->store, digests[i]);
    if (access(to, F_OK) == 0)
      continue; /* content-addressed: the same bytes */
    if (rename(from, to) < 0)
      return cap_error_errno(err, errno, "cannot move %s into the store", digests[i]);
  }
  _cleanup_free_ char *staged = cap_xasprintf("%s/rootfs", s->dir);
  _cleanup_free_ char *root = cap_xasprintf("%s/rootfs/%s", s->store, s->digest + 7);
  if (access(staged, F_OK) == 0 && rename(staged, root) < 0 && errno != EEXIST &&
      errno != ENOTEMPTY)
    return cap_error_errno(err, errno, "cannot move the unpacked root to %s", root);
  _cleanup_free_ char *enc = image_ref_encode(ref);
  _cleanup_free_ char *refs = cap_xasprintf("%s/refs", s->store);
  _cleanup_free_ char *line = cap_xasprintf("%s\n", s->digest);
  return image_write_atomic(refs, enc, line, strlen(line), err);
}

/* The source into an OCI layout: as it is (a directory), else skopeo's
 * conversion into the staged layout. */
static int stage_source(struct stage *s, enum source_kind kind, const char *path,
                        struct cap_error *err)
{
  if (kind == SOURCE_LAYOUT) {
    s->src = cap_xstrdup(path);
    s->copy = true;
    _cleanup_free_ char *blobs = cap_xasprintf("%s/blobs", s->layout);
    _cleanup_free_ char *sha = cap_xasprintf("%s/blobs/sha256", s->layout);
    if (mkdir(s->layout, 0700) < 0 || mkdir(blobs, 0700) < 0 || mkdir(sha, 0700) < 0)
      return cap_error_errno(err, errno, "cannot create %s", sha);
    return 0;
  }
  s->src = cap_xstrdup(s->layout);
  static const char *const transports[] = {[SOURCE_OCI_ARCHIVE] = "oci-archive",
                                           [SOURCE_DOCKER_ARCHIVE] = "docker-archive",
                                           [SOURCE_REGISTRY] = "docker"};
  _cleanup_free_ char *from =
      cap_xasprintf("%s:%s%s", transports[kind], kind == SOURCE_REGISTRY ? "//" : "", path);
  _cleanup_free_ char *to = cap_xasprintf("oci:%s:" STAGE_REF, s->layout);
  /* skopeo's own temporary copy of the image (an OCI archive is unpacked
   * whole into a directory of its own) goes into the staging directory,
   * not /var/tmp: removed with it, and a killed import's by the next one */
  _cleanup_free_ char *tmp = cap_xasprintf("%s/skopeo-tmp", s->dir);
  if (mkdir(tmp, 0700) < 0)
    return cap_error_errno(err, errno, "cannot create %s", tmp);
  /* a local archive has no signatures to check; from a registry the
   * host's signature policy applies */
  char *argv[] = {"skopeo", "--tmpdir", tmp, "copy", "--quiet", from, to, NULL, NULL};
  if (kind != SOURCE_REGISTRY) {
    argv[5] = "--insecure-policy";
    argv[6] = from;
    argv[7] = to;
  }
  char why[512];
  int st = image_run_tool(argv, why, sizeof why);
  if (st == -ENOENT)
    return missing_tool("skopeo", err);
  if (st != 0)
    return cap_error_set(err, EIO, "skopeo cannot read %s: %s", path, *why ? why : "failed");
  return 0;
}

/* What path holds, and the name it carries (an archive's RepoTags or
 * index annotation) when it has one. */
static int detect(const char *path, enum source_kind *kind, char **name, struct cap_error *err)
{
  *name = NULL;
  struct stat st;
  if (stat(path, &st) < 0)
    return cap_error_errno(err, errno, "cannot read %s", path);
  if (S_ISDIR(st.st_mode)) {
    _cleanup_free_ char *marker = cap_xasprintf("%s/oci-layout", path);
    _cleanup_free_ char *index = cap_xasprintf("%s/index.json", path);
    if (access(marker, F_OK) < 0)
      return cap_error_set(err, EINVAL,
                           "%s is a directory but not an OCI image layout (it has no oci-layout "
                           "file); give an OCI layout, an OCI archive or a `docker save` archive",
                           path);
    size_t len;
    _cleanup_free_ char *text = image_read_file(AT_FDCWD, index, IMAGE_JSON_MAX, &len);
    *name = text ? image_index_ref_name(text, len) : NULL;
    *kind = SOURCE_LAYOUT;
    return 0;
  }
  if (strchr(path, ':'))
    return cap_error_set(err, EINVAL,
                         "%s: an archive's path may not hold ':' (skopeo reads it as a "
                         "reference); rename it",
                         path);
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return cap_error_errno(err, errno, "cannot read %s", path);
  size_t len;
  int r;
  _cleanup_free_ char *index = image_tar_fd_read_member(fd, "index.json", IMAGE_JSON_MAX, &len, &r);
  _cleanup_free_ char *layout =
      r == 1 ? image_tar_fd_read_member(fd, "oci-layout", 4096, &len, &r) : NULL;
  if (index && layout) {
    *kind = SOURCE_OCI_ARCHIVE;
    *name = image_index_ref_name(index, strlen(index));
    return 0;
  }
  _cleanup_free_ char *manifest =
      r >= 0 ? image_tar_fd_read_member(fd, "manifest.json", IMAGE_JSON_MAX, &len, &r) : NULL;
  if (manifest) {
    *kind = SOURCE_DOCKER_ARCHIVE;
    *name = image_docker_repo_tag(manifest, len);
    return 0;
  }
  return cap_error_set(err, EINVAL,
                       "%s is neither an OCI archive (a tar holding oci-layout and index.json) nor "
                       "a `docker save` archive (a tar holding manifest.json)%s",
                       path, r < 0 ? ": it is not a readable tar archive" : "");
}

/* The image's command exists in its root: else a warning. */
static char *entry_warning(const char *store, const char *ref)
{
  struct image_info info;
  struct cap_error err = {0};
  char *warning = NULL;
  if (image_store_resolve(store, ref, &info, &err) == 0) {
    char **argv = image_command(&info, &err);
    image_strv_free(argv);
  }
  if (err.message)
    warning = cap_xasprintf("%s: it cannot run as a Selu capability: %s", ref, err.message);
  cap_error_clear(&err);
  image_info_free(&info);
  return warning;
}

/* A staging directory of its own, held by a lock on STORE/tmp/NAME.lock
 * for as long as the import runs; another import's leftovers (a killed
 * one's: its lock is free) are removed first. Returns the lock's fd. */
static int stage_begin(const char *store, struct stage *s, struct cap_error *err)
{
  _cleanup_free_ char *tmp = cap_xasprintf("%s/tmp", store);
  DIR *d = opendir(tmp);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (strncmp(e->d_name, "import.", 7) != 0 || n < 5 || strcmp(e->d_name + n - 5, ".lock") != 0)
      continue;
    _cleanup_free_ char *lock = cap_xasprintf("%s/%s", tmp, e->d_name);
    _cleanup_close_ int fd = open(lock, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
      continue; /* an import in progress */
    _cleanup_free_ char *dir = cap_xasprintf("%s/%.*s", tmp, (int)(n - 5), e->d_name);
    image_rmtree(dir);
    unlink(lock);
  }
  if (d)
    closedir(d);
  s->dir = cap_xasprintf("%s/import.XXXXXX", tmp);
  if (!mkdtemp(s->dir)) {
    int r = cap_error_errno(err, errno, "cannot create a staging directory in %s", tmp);
    free(s->dir);
    s->dir = NULL;
    return r;
  }
  _cleanup_free_ char *lock = cap_xasprintf("%s.lock", s->dir);
  int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 || flock(fd, LOCK_EX) < 0) {
    int r = cap_error_errno(err, errno, "cannot lock %s", lock);
    if (fd >= 0)
      close(fd);
    return r;
  }
  return fd;
}

static void stage_end(struct stage *s, int lock)
{
  _cleanup_free_ char *path = s->dir ? cap_xasprintf("%s.lock", s->dir) : NULL;
  stage_free(s); /* removes the directory */
  if (path)
    unlink(path);
  if (lock >= 0)
    close(lock);
}

/* pick: the name the image has in a layout's index (STAGE_REF where
 * skopeo made the layout); ref: the normalised reference it is stored as. */
static int import_from(const char *store, enum source_kind kind, const char *path, const char *pick,
                       const char *ref, struct image_info *ret_info, char **ret_warning,
                       struct cap_error *err)
{
  *ret_info = (struct image_info){0};
  if (ret_warning)
    *ret_warning = NULL;
  int r = make_dirs(store, err);
  if (r < 0)
    return r;
  struct stage s = {.store = store};
  int lock = stage_begin(store, &s, err);
  if (lock < 0) {
    stage_free(&s);
    return lock;
  }
  s.layout = cap_xasprintf("%s/oci", s.dir);
  r = stage_source(&s, kind, path, err);
  if (r == 0)
    r = pick_manifest(&s, kind == SOURCE_LAYOUT ? pick : STAGE_REF, err);
  if (r == 0)
    r = verify_blob(&s, "the image config", s.manifest.config_digest, s.manifest.config_size, err);
  _cleanup_free_ char *root = cap_xasprintf("%s/rootfs/%s", store, s.digest + 7);
  _cleanup_free_ char *staged = cap_xasprintf("%s/rootfs", s.dir);
  if (r == 0)
    r = access(root, F_OK) < 0 ? unpack(&s, staged, err) : verify_layers(&s, err);
  if (r == 0)
    r = commit(&s, ref, err);
  stage_end(&s, lock);
  if (r < 0)
    return cap_error_prefix(err, "importing %s", path), r;
  if (ret_warning)
    *ret_warning = entry_warning(store, ref);
  return image_store_resolve(store, ref, ret_info, err);
}

int image_import(const char *store, const char *path, const char *tag, struct image_info *ret_info,
                 char **ret_warning, struct cap_error *err)
{
  enum source_kind kind = SOURCE_LAYOUT;
  _cleanup_free_ char *own = NULL;
  int r = detect(path, &kind, &own, err);
  if (r < 0)
    return r;
  if (!tag && !own)
    return cap_error_set(err, EINVAL,
                         "%s carries no full image reference; name it with --tag REF (the "
                         "`image:` of the Selu manifests that use it)",
                         path);
  _cleanup_free_ char *ref = image_ref_normalize(tag ? tag : own, err);
  if (!ref)
    return -EINVAL;
  return import_from(store, kind, path, tag ? tag : own, ref, ret_info, ret_warning, err);
}

int image_pull(const char *store, const char *ref, struct image_info *ret_info, char **ret_warning,
               struct cap_error *err)
{
  _cleanup_free_ char *norm = image_ref_normalize(ref, err);
  if (!norm)
    return -EINVAL;
  return import_from(store, SOURCE_REGISTRY, norm, STAGE_REF, norm, ret_info, ret_warning, err);
}
