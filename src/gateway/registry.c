#include "gateway/registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/filememo.h"
#include "core/sha256.h"
#include "core/text.h"
#include "manifest/load.h"

static int by_id(const void *a, const void *b)
{
  const struct cap_spec *x = *(const struct cap_spec *const *)a,
                        *y = *(const struct cap_spec *const *)b;
  return strcmp(x->id, y->id);
}

int gw_registry_load(const char *dir, struct gw_registry *reg, struct cap_diags *diags)
{
  *reg = (struct gw_registry){.dir = cap_xstrdup(dir)};
  struct cap_strv files = {0};
  int r = cap_caps_discover(dir, &files, diags);
  if (r < 0)
    return r;

  for (size_t i = 0; i < files.len; i++) {
    struct cap_spec *spec = NULL;
    if (cap_manifest_load(files.v[i], &spec, diags) < 0 || !spec)
      continue;
    reg->caps = cap_xrealloc(reg->caps, (reg->n + 1) * sizeof *reg->caps);
    reg->caps[reg->n++] = spec;
  }
  cap_strv_free(&files);
  if (reg->n) /* caps NULL for an empty directory: qsort's pointer must not be */
    qsort(reg->caps, reg->n, sizeof *reg->caps, by_id);
  /* an id twice: an error naming both places, and neither is used */
  size_t out = 0;
  for (size_t i = 0; i < reg->n;) {
    size_t j = i + 1;
    while (j < reg->n && strcmp(reg->caps[j]->id, reg->caps[i]->id) == 0)
      j++;
    if (j - i > 1) {
      for (size_t k = i + 1; k < j; k++)
        cap_diags_add(diags, CAP_SEV_ERROR, reg->caps[k]->source_path, 0, 0, "",
                      "capability id \"%s\" is also used by %s; ids must be unique (rename one)",
                      reg->caps[k]->id, reg->caps[i]->source_path);
      for (size_t k = i; k < j; k++)
        cap_spec_free(reg->caps[k]);
    } else {
      reg->caps[out++] = reg->caps[i];
    }
    i = j;
  }
  reg->n = out;
  return 0;
}

void gw_registry_free(struct gw_registry *reg)
{
  for (size_t i = 0; i < reg->n; i++)
    cap_spec_free(reg->caps[i]);
  free(reg->caps);
  free(reg->dir);
  *reg = (struct gw_registry){0};
}

const struct cap_spec *gw_registry_find(const struct gw_registry *reg, const char *id)
{
  size_t lo = 0, hi = reg->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = strcmp(reg->caps[mid]->id, id);
    if (c == 0)
      return reg->caps[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

const struct cap_tool *gw_spec_tool(const struct cap_spec *spec, const char *name)
{
  for (size_t i = 0; i < spec->n_tools; i++)
    if (strcmp(spec->tools[i].name, name) == 0)
      return &spec->tools[i];
  return NULL;
}

/* ---- the digest of what a capability runs ---- */

struct digest_walk {
  struct cap_sha256 h; /* the CPU's SHA extensions where it has them: every warm call digests */
  size_t entries;
  bool incomplete; /* deeper than 64 levels or past the entry cap */
};

static void digest_field(struct digest_walk *d, const void *data, size_t len)
{
  uint64_t n = len; /* length-prefixed: no two field lists hash alike */
  cap_sha256_update(&d->h, &n, sizeof n);
  cap_sha256_update(&d->h, data, len);
}

static void digest_str(struct digest_walk *d, const char *s)
{
  digest_field(d, s ? s : "", s ? strlen(s) : 0);
}

static void digest_stat(struct digest_walk *d, const struct stat *sb)
{
  int64_t v[9] = {
      (int64_t)sb->st_mode,         (int64_t)sb->st_uid,         (int64_t)sb->st_gid,
      (int64_t)sb->st_size,         (int64_t)sb->st_ino,         (int64_t)sb->st_mtim.tv_sec,
      (int64_t)sb->st_mtim.tv_nsec, (int64_t)sb->st_ctim.tv_sec, (int64_t)sb->st_ctim.tv_nsec};
  digest_field(d, v, sizeof v);
}

static int by_entry_name(const struct dirent **a, const struct dirent **b)
{
  return strcmp((*a)->d_name, (*b)->d_name);
}

static int not_dots(const struct dirent *e)
{
  return strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
}

/* Walks dirfd's entries in name order, depth first; never follows a
 * symlink (its target is hashed as text). */
static int digest_dir(struct digest_walk *d, int dirfd, const char *rel, int depth,
                      struct cap_error *err)
{
  struct dirent **names = NULL;
  int n = scandirat(dirfd, ".", &names, not_dots, by_entry_name);
  if (n < 0)
    return cap_error_errno(err, errno, "cannot read the package directory %s", *rel ? rel : ".");
  int r = 0;
  for (int i = 0; i < n; i++) {
    const char *name = names[i]->d_name;
    struct stat sb;
    if (r == 0 && d->entries >= GW_DIGEST_MAX_ENTRIES)
      d->incomplete = true;
    if (r == 0 && d->entries < GW_DIGEST_MAX_ENTRIES &&
        fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
      d->entries++;
      _cleanup_free_ char *path = *rel ? cap_xasprintf("%s/%s", rel, name) : cap_xstrdup(name);
      digest_str(d, path);
      digest_stat(d, &sb);
      if (S_ISLNK(sb.st_mode)) {
        char target[4096];
        ssize_t len = readlinkat(dirfd, name, target, sizeof target);
        digest_field(d, target, len > 0 ? (size_t)len : 0);
      } else if (S_ISDIR(sb.st_mode) && depth >= 64) {
        d->incomplete = true;
      } else if (S_ISDIR(sb.st_mode)) {
        int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0) {
          r = digest_dir(d, sub, path, depth + 1, err);
          close(sub);
        }
      }
    }
    free(names[i]);
  }
  free(names);
  return r;
}

int gw_spec_digest(const struct cap_spec *spec, unsigned char out[32], struct cap_error *err)
{
  return gw_spec_digest_opts(spec, true, out, err);
}

static void digest_ports(struct digest_walk *d, const struct cap_ports *p)
{
  digest_field(d, p->len ? (const void *)p->v : "", p->len * sizeof *p->v); /* v NULL when empty */
}

void gw_spec_rights_digest(const struct cap_spec *spec, unsigned char out[32])
{
  struct digest_walk d = {0};
  cap_sha256_init(&d.h);
  digest_str(&d, "capsule-spec-rights-v1");
  for (size_t i = 0; i < spec->n_grants; i++) {
    const struct cap_fs_grant *g = &spec->grants[i];
    int v[3] = {(int)g->access, (int)g->type, (int)g->origin};
    digest_str(&d, g->path);
    digest_field(&d, v, sizeof v);
  }
  digest_field(&d, &spec->deny.len, sizeof spec->deny.len);
  for (size_t i = 0; i < spec->deny.len; i++)
    digest_str(&d, spec->deny.v[i]);
  const struct cap_network *n = &spec->network;
  int v[2] = {(int)n->mode, (int)n->dns};
  digest_field(&d, v, sizeof v);
  digest_field(&d, &n->allow_domains.len, sizeof n->allow_domains.len);
  for (size_t i = 0; i < n->allow_domains.len; i++)
    digest_str(&d, n->allow_domains.v[i]);
  digest_field(&d, &n->n_endpoints, sizeof n->n_endpoints);
  for (size_t i = 0; i < n->n_endpoints; i++) { /* a rule's text is the manifest's */
    digest_str(&d, n->endpoints[i].host);
    digest_field(&d, &n->endpoints[i].n_rules, sizeof n->endpoints[i].n_rules);
  }
  digest_ports(&d, &n->connect);
  digest_ports(&d, &n->bind);
  digest_ports(&d, &n->localhost);
  cap_sha256_final(&d.h, out);
}

int gw_spec_digest_opts(const struct cap_spec *spec, bool tree, unsigned char out[32],
                        struct cap_error *err)
{
  struct digest_walk d = {0};
  cap_sha256_init(&d.h);
  digest_str(&d, tree ? "capsule-spec-digest-v1" : "capsule-spec-digest-manifest-v1");
  digest_str(&d, spec->id);
  char *manifest = NULL;
  size_t len = 0; /* kept while unchanged: a long-lived caller digests it every call */
  int r = cap_filememo_read(spec->source_path, false, 16u << 20, &manifest, &len);
  if (r < 0)
    r = cap_read_file(spec->source_path, 16u << 20, &manifest, &len, err); /* its message */
  if (r < 0)
    return r;
  digest_field(&d, manifest, len);
  free(manifest);
  for (size_t i = 0; i < spec->n_grants; i++) {
    const struct cap_fs_grant *g = &spec->grants[i];
    int v[3] = {(int)g->access, (int)g->type, (int)g->origin};
    digest_str(&d, g->path);
    digest_field(&d, v, sizeof v);
  }
  for (size_t i = 0; i < spec->deny.len; i++)
    digest_str(&d, spec->deny.v[i]);
  if (!tree) { /* the manifest and the grants alone (a warm MCP server watches its tree) */
    digest_str(&d, spec->package_dir);
    cap_sha256_final(&d.h, out);
    return 0;
  }
  _cleanup_close_ int dirfd = open(spec->package_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0)
    return cap_error_errno(err, errno, "cannot open the package directory %s", spec->package_dir);
  r = digest_dir(&d, dirfd, "", 0, err);
  if (r < 0)
    return r;
  uint64_t entries = d.entries;
  digest_field(&d, &entries, sizeof entries);
  if (d.incomplete) { /* what was not walked could change unseen: bind nothing to it */
    unsigned char nonce[32];
    randombytes_buf(nonce, sizeof nonce);
    digest_field(&d, nonce, sizeof nonce);
  }
  cap_sha256_final(&d.h, out);
  return 0;
}

/* Watches a regular file's own inode: a hard link made to it later (from
 * outside the tree) raises IN_ATTRIB (its link count) and a write through
 * any name IN_MODIFY, neither of which reaches its directory's watch; its
 * link count checked after the watch is set (one made before it: -1). */
static int watch_file(int ino, int dirfd, const char *path, const char *name, size_t *files)
{
  struct stat sb;
  if (*files >= GW_WATCH_MAX_FILES ||
      inotify_add_watch(ino, path, IN_MODIFY | IN_ATTRIB | IN_DONT_FOLLOW) < 0 ||
      fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
    return -1;
  (*files)++;
  return S_ISREG(sb.st_mode) && sb.st_nlink == 1 ? 0 : -1; /* else written through another name */
}

/* Watches path's directories and regular files; -1 (give up: the digest
 * sees what a watch cannot) past the bounds or at a file with more than
 * one link */
static int watch_dir(int ino, const char *path, int depth, size_t *n, size_t *files)
{
  if (depth > 64 || *n >= GW_WATCH_MAX_DIRS ||
      inotify_add_watch(ino, path,
                        IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE | IN_DELETE_SELF |
                            IN_MOVED_FROM | IN_MOVED_TO | IN_MOVE_SELF | IN_ONLYDIR |
                            IN_DONT_FOLLOW) < 0)
    return -1;
  (*n)++;
  DIR *d = opendir(path);
  if (!d)
    return -1;
  int r = 0;
  struct dirent *e;
  while (r == 0 && (e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    struct stat sb;
    if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
      continue; /* gone meanwhile: the parent's watch has the event */
    if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode)) {
      if (sb.st_nlink > 1) /* written through another name, outside the watched tree */
        r = -1;
      continue;
    }
    _cleanup_free_ char *sub = cap_xasprintf("%s/%s", path, e->d_name);
    r = S_ISREG(sb.st_mode) ? watch_file(ino, dirfd(d), sub, e->d_name, files)
                            : watch_dir(ino, sub, depth + 1, n, files);
  }
  closedir(d);
  return r;
}

static bool package_id(const char *dir, struct gw_package_id *id)
{
  struct stat sb;
  if (stat(dir, &sb) < 0)
    return false;
  *id = (struct gw_package_id){.dev = sb.st_dev, .ino = sb.st_ino};
  return true;
}

int gw_package_watch(const char *dir, struct gw_package_id *at)
{
  if (!package_id(dir, at))
    return -1;
  int ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  size_t n = 0, files = 0;
  /* the identity taken again after the walk: a swap during it is a change */
  if (ino >= 0 && (watch_dir(ino, dir, 0, &n, &files) < 0 || gw_package_moved(dir, at))) {
    close(ino);
    ino = -1;
  }
  return ino;
}

bool gw_package_moved(const char *dir, const struct gw_package_id *at)
{
  struct gw_package_id now;
  return !package_id(dir, &now) || now.dev != at->dev || now.ino != at->ino;
}
