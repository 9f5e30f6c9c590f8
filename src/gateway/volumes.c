#include "gateway/volumes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"

static const char *const kind_dirs[] = {"workspaces", "caches"};

const char *gw_volume_kind_name(enum gw_volume_kind k)
{
  return k == GW_VOLUME_CACHE ? "cache" : "workspace";
}

static bool plain(unsigned char ch, size_t i)
{
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch == '-' || (ch == '.' && i > 0);
}

char *gw_volume_encode(const char *s)
{
  struct cap_buf b = {0};
  for (size_t i = 0; s[i]; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (plain(ch, i))
      cap_buf_append(&b, (const char *)&ch, 1);
    else
      cap_buf_printf(&b, "%%%02X", ch);
  }
  if (!b.len)
    cap_buf_append(&b, "%", 1);
  return cap_buf_steal(&b);
}

static int hexval(char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

char *gw_volume_decode(const char *name)
{
  if (strcmp(name, "%") == 0)
    return cap_xstrdup("");
  struct cap_buf b = {0};
  for (size_t i = 0; name[i]; i++) {
    unsigned char ch = (unsigned char)name[i];
    if (ch == '%') {
      int hi = hexval(name[i + 1]), lo = hi < 0 ? -1 : hexval(name[i + 2]);
      if (lo < 0 || (hi << 4 | lo) == 0) {
        cap_buf_free(&b);
        return NULL;
      }
      char v = (char)(hi << 4 | lo);
      cap_buf_append(&b, &v, 1);
      i += 2;
    } else if (plain(ch, i)) {
      cap_buf_append(&b, (const char *)&ch, 1);
    } else {
      cap_buf_free(&b);
      return NULL;
    }
  }
  return cap_buf_steal(&b);
}

/* Makes each missing directory of path 0700 (the caller's). */
static int make_dirs(const char *path, struct cap_error *err)
{
  _cleanup_free_ char *p = cap_xstrdup(path);
  for (char *s = p + 1;; s++) {
    if (*s != '/' && *s)
      continue;
    char saved = *s;
    *s = '\0';
    if (mkdir(p, 0700) < 0 && errno != EEXIST)
      return cap_error_errno(err, errno, "cannot create %s", p);
    *s = saved;
    if (!saved)
      break;
  }
  struct stat st;
  if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
    return cap_error_set(err, EPERM, "%s is not a directory of this user's: refusing it", path);
  return 0;
}

static char *volume_path(const char *volumes_dir, enum gw_volume_kind kind, const char *user,
                         const char *name)
{
  _cleanup_free_ char *u = gw_volume_encode(user);
  _cleanup_free_ char *n = gw_volume_encode(name);
  return cap_xasprintf("%s/%s/%s/%s", volumes_dir, kind_dirs[kind], u, n);
}

/* Its image (gw_volume_quota): in a tree of their own, so that no name
 * of a volume is taken for one. */
static char *image_path(const char *volumes_dir, enum gw_volume_kind kind, const char *user,
                        const char *name)
{
  _cleanup_free_ char *u = gw_volume_encode(user);
  _cleanup_free_ char *n = gw_volume_encode(name);
  return cap_xasprintf("%s/images/%s/%s/%s.img", volumes_dir, kind_dirs[kind], u, n);
}

int gw_volumes_bind(const struct cap_spec *spec, const char *volumes_dir, const char *user,
                    const char *session, struct cap_fs_grant **grants, size_t *n,
                    struct cap_strv *dirs, bool *unbounded, struct cap_error *err)
{
  if (unbounded)
    *unbounded = false;
  *grants = cap_xcalloc(spec->n_grants + 1, sizeof **grants);
  *n = 0;
  for (size_t i = 0; i < spec->n_grants; i++) {
    const struct cap_fs_grant *g = &spec->grants[i];
    bool ws = strcmp(g->path, CAP_SESSION_WORKSPACE) == 0;
    bool cache = strcmp(g->path, CAP_CAPABILITY_CACHE) == 0;
    struct cap_fs_grant out = *g;
    out.path = NULL;
    if ((ws || cache) && !volumes_dir)
      continue;
    if (ws && (!session || !*session)) {
      gw_volumes_free(*grants, *n);
      *grants = NULL;
      return cap_error_set(err, EINVAL,
                           "%s keeps a workspace per session (filesystem: workspace): give the "
                           "session with --session ID",
                           spec->id);
    }
    if (ws || cache) {
      enum gw_volume_kind kind = ws ? GW_VOLUME_WORKSPACE : GW_VOLUME_CACHE;
      out.path = volume_path(volumes_dir, kind, user ? user : "", ws ? session : spec->id);
      out.volume = true;
      int r = make_dirs(out.path, err);
      _cleanup_free_ char *image =
          image_path(volumes_dir, kind, user ? user : "", ws ? session : spec->id);
      bool quota;
      if (r == 0)
        r = gw_volume_quota(out.path, image, spec->limits.workspace_bytes, &quota, err);
      if (r < 0)
        cap_error_prefix(err, "%s's %s", spec->id, gw_volume_kind_name(kind));
      if (r < 0) {
        free(out.path);
        gw_volumes_free(*grants, *n);
        *grants = NULL;
        return r;
      }
      if (dirs)
        cap_strv_push(dirs, out.path);
      if (unbounded && spec->limits.workspace_bytes && !quota)
        *unbounded = true;
    } else {
      out.path = cap_xstrdup(g->path);
    }
    out.at = g->at ? cap_xstrdup(g->at) : NULL;
    (*grants)[(*n)++] = out;
  }
  return 0;
}

void gw_volumes_free(struct cap_fs_grant *grants, size_t n)
{
  for (size_t i = 0; grants && i < n; i++) {
    free(grants[i].path);
    free(grants[i].at);
  }
  free(grants);
}

static _Thread_local uint64_t usage_sum; /* nftw passes no context */
static _Thread_local int usage_err;

static int usage_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
  (void)path, (void)f;
  /* an entry that cannot be looked at or walked (a directory its owner,
   * the tool, made unreadable) could hold anything: not measured */
  if (type == FTW_NS || type == FTW_DNR) {
    usage_err = EACCES;
    return 1;
  }
  usage_sum += (uint64_t)st->st_blocks * 512;
  return 0;
}

int gw_volume_usage(const char *dir, uint64_t *bytes)
{
  usage_sum = 0;
  usage_err = 0;
  int r = nftw(dir, usage_one, 16, FTW_PHYS | FTW_MOUNT);
  *bytes = usage_sum;
  if (r < 0 && !usage_err)
    usage_err = errno ? errno : EIO;
  return usage_err ? -usage_err : 0;
}

/* Empties the directory dfd (which this owns and closes), never following
 * a link: each entry is opened relative to its parent with O_NOFOLLOW. */
static int empty_dir(int dfd, struct cap_error *err)
{
  DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return cap_error_errno(err, errno, "cannot read a directory to remove");
  }
  int r = 0;
  struct dirent *e;
  while (r == 0 && (e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    if (unlinkat(dirfd(d), e->d_name, 0) == 0 || (errno != EISDIR && errno != EPERM))
      continue;
    int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    /* a directory the tool made unreadable (it has the caller's uid) */
    if (sub < 0 && errno == EACCES && fchmodat(dirfd(d), e->d_name, 0700, 0) == 0)
      sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0)
      r = cap_error_errno(err, errno, "cannot open %s to remove it", e->d_name);
    else if ((r = empty_dir(sub, err)) == 0 && unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) < 0)
      r = cap_error_errno(err, errno, "cannot remove %s", e->d_name);
  }
  closedir(d);
  return r;
}

int gw_volume_remove(const char *volumes_dir, enum gw_volume_kind kind, const char *user,
                     const char *name, struct cap_error *err)
{
  _cleanup_free_ char *path = volume_path(volumes_dir, kind, user, name);
  _cleanup_free_ char *image = image_path(volumes_dir, kind, user, name);
  if (gw_volume_quota_release(path, image, err) < 0)
    return -EBUSY;
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? cap_error_set(err, ENOENT, "there is no %s %s of user %s",
                                           gw_volume_kind_name(kind), name, user)
                           : cap_error_errno(err, errno, "cannot open %s", path);
  int r = empty_dir(fd, err);
  if (r == 0 && rmdir(path) < 0)
    r = cap_error_errno(err, errno, "cannot remove %s", path);
  if (r < 0)
    cap_error_prefix(err, "removing %s", path);
  return r;
}

static int info_cmp(const void *a, const void *b)
{
  const struct gw_volume_info *x = a, *y = b;
  if (x->kind != y->kind)
    return (int)x->kind - (int)y->kind;
  int c = strcmp(x->user, y->user);
  return c ? c : strcmp(x->name, y->name);
}

/* The volumes of one user directory (users/NAME) of one kind. */
static void list_user(const char *base, const char *user_dir, enum gw_volume_kind kind,
                      struct gw_volume_info **out, size_t *n)
{
  _cleanup_free_ char *udir = cap_xasprintf("%s/%s", base, user_dir);
  _cleanup_free_ char *user = gw_volume_decode(user_dir);
  DIR *d = user ? opendir(udir) : NULL;
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d))) {
    _cleanup_free_ char *name = e->d_name[0] == '.' ? NULL : gw_volume_decode(e->d_name);
    struct stat st;
    _cleanup_free_ char *path = cap_xasprintf("%s/%s", udir, e->d_name);
    if (!name || lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
      continue;
    *out = cap_xrealloc(*out, (*n + 1) * sizeof **out);
    (*out)[(*n)++] = (struct gw_volume_info){
        .kind = kind,
        .user = cap_xstrdup(user),
        .name = steal_pointer(&name),
        .path = steal_pointer(&path),
        .bytes = 0,
        .modified_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000,
    };
    gw_volume_usage((*out)[*n - 1].path, &(*out)[*n - 1].bytes); /* what can be seen */
  }
  closedir(d);
}

int gw_volume_list(const char *volumes_dir, struct gw_volume_info **out, size_t *n,
                   struct cap_error *err)
{
  (void)err;
  *out = NULL;
  *n = 0;
  for (int k = GW_VOLUME_WORKSPACE; k <= GW_VOLUME_CACHE; k++) {
    _cleanup_free_ char *base = cap_xasprintf("%s/%s", volumes_dir, kind_dirs[k]);
    DIR *d = opendir(base);
    if (!d)
      continue;
    struct dirent *e;
    while ((e = readdir(d)))
      if (e->d_name[0] != '.')
        list_user(base, e->d_name, (enum gw_volume_kind)k, out, n);
    closedir(d);
  }
  if (*n)
    qsort(*out, *n, sizeof **out, info_cmp);
  return 0;
}

void gw_volume_list_free(struct gw_volume_info *v, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    free(v[i].user);
    free(v[i].name);
    free(v[i].path);
  }
  free(v);
}
