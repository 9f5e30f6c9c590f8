/* The host's side of the sandbox's mount tree, made in the parent with the
 * caller's rights before the clone (the child builds the tree from it in
 * mount.c, after it has taken the sandbox's ids):
 *   - each grant resolved once: what it is (directory, file, symlink), its
 *     real path, and, as root, the tree itself opened (open_tree), so the
 *     package is bound by that handle and the sandbox uid never has to
 *     traverse the grant's parents (a capability under /root or a 0700
 *     mktemp directory);
 *   - each mask (deny entries, capsule's state directories, blocked
 *     commands, /sys) resolved on the host (realpath, symlinks included)
 *     and mapped to every grant that contains it, at the path it has there
 *     inside the sandbox. A grant at or below a state directory is refused;
 *     a deny entry that cannot be resolved fails the run. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/fs.h"
#include "sandbox/mount_plan.h"
#include "sandbox/spawn_internal.h"

#ifndef __NR_open_tree
#define __NR_open_tree 428
#endif
#define OPEN_TREE_CLONE_ 1
#define AT_RECURSIVE_ 0x8000

char *sandbox_expand_path(const char *path)
{
  if (path[0] == '~' && (path[1] == '/' || path[1] == '\0')) {
    const char *home = getenv("HOME");
    return cap_xasprintf("%s%s", home ? home : "/", path + 1);
  }
  return cap_xstrdup(path);
}

/* Is `path` `dir` or below it (both real, absolute paths)? */
static bool path_within(const char *path, const char *dir)
{
  size_t n = strlen(dir);
  if (n == 1) /* "/" */
    return true;
  return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* what a mask hides: a deny entry (also held by Landlock: landlock.c),
 * capsule's state (a grant at or below it is refused), anything else */
enum mask_kind { MASK_OTHER, MASK_DENY, MASK_STATE };

static void plan_add_mask(struct sandbox_mount_plan *plan, char *at, const char *why,
                          const char *source, enum mask_kind kind)
{
  for (size_t i = 0; i < plan->n_masks; i++)
    if (strcmp(plan->masks[i].at, at) == 0) {
      free(at);
      return;
    }
  plan->masks = cap_xrealloc(plan->masks, (plan->n_masks + 1) * sizeof *plan->masks);
  plan->masks[plan->n_masks++] = (struct sandbox_mask){
      .at = at, .why = why, .source = cap_xstrdup(source), .deny = kind == MASK_DENY};
}

static int resolve_grant(struct plan_grant *g, const struct cap_fs_grant *spec_grant,
                         bool open_trees, struct cap_error *err)
{
  g->tree = -1;
  g->host = sandbox_expand_path(spec_grant->path);
  g->at = cap_xstrdup(spec_grant->at ? spec_grant->at : g->host);
  g->read_only = spec_grant->access == CAP_ACCESS_READ;
  g->volume = spec_grant->volume;
  if (g->host[0] != '/')
    return cap_error_set(err, EINVAL, "grant \"%s\" is not an absolute path", spec_grant->path);
  if (g->at[0] != '/')
    return cap_error_set(err, EINVAL, "grant \"%s\" is to appear at \"%s\", not an absolute path",
                         spec_grant->path, g->at);
  struct stat st;
  if (lstat(g->host, &st) < 0) {
    g->kind = PLAN_MISSING; /* a path the host lacks grants nothing */
    return 0;
  }
  if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX];
    ssize_t n = readlink(g->host, target, sizeof target - 1);
    if (n <= 0) {
      g->kind = PLAN_MISSING;
      return 0;
    }
    target[n] = '\0';
    g->kind = PLAN_LINK;
    g->link = cap_xstrdup(target);
    return 0;
  }
  g->kind = S_ISDIR(st.st_mode) ? PLAN_DIR : PLAN_FILE;
  int tree = sandbox_open_grant_tree(g->host, NULL, &g->real, open_trees);
  if (tree < 0 && tree != -ENOTSUP)
    return cap_error_errno(err, -tree, "cannot open the grant %s", g->host);
  g->tree = tree >= 0 ? tree : -1;
  return 0;
}

/* The real path of what fd refers to, from /proc (the object itself, not
 * a path looked up again). */
static char *fd_real_path(int fd)
{
  char link[64], target[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0 || target[0] != '/')
    return NULL;
  target[n] = '\0';
  return cap_xstrdup(target);
}

int sandbox_open_grant_tree(const char *host, const char *expect_real, char **ret_real,
                            bool want_tree)
{
  /* O_NOFOLLOW: a grant checked as a directory or file cannot
   * have been swapped for a symlink to somewhere else since */
  _cleanup_close_ int fd = open(host, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  _cleanup_free_ char *real = fd_real_path(fd);
  if (!real)
    return -ENOENT;
  if (expect_real && strcmp(real, expect_real) != 0)
    return -ESTALE; /* moved since the masks were mapped to it */
  int tree = -ENOTSUP;
  if (want_tree) {
    tree = (int)syscall(__NR_open_tree, fd, "",
                        AT_EMPTY_PATH | OPEN_TREE_CLONE_ | AT_RECURSIVE_ | O_CLOEXEC);
    if (tree < 0)
      return -errno;
  }
  if (ret_real)
    *ret_real = steal_pointer(&real);
  return tree;
}

/* Maps one host path to be hidden (already real) to every grant that shows
 * it. A state directory at or above a grant refuses the grant; a deny
 * entry there masks the whole grant. */
static int plan_mask_real(struct sandbox_mount_plan *plan, const char *real, const char *why,
                          const char *source, enum mask_kind kind, struct cap_error *err)
{
  for (size_t i = 0; i < plan->n_grants; i++) {
    const struct plan_grant *g = &plan->grants[i];
    if (!g->real)
      continue;
    if (path_within(g->real, real)) {
      /* a session's workspace or a cache the gateway made for this call,
       * strictly below its state directory: granted as itself alone */
      if (kind == MASK_STATE && g->volume && strcmp(g->real, real) != 0)
        continue;
      if (kind == MASK_STATE)
        return cap_error_set(err, EPERM,
                             "the grant %s is at or below capsule's state directory %s, which no "
                             "sandbox may see; grant a directory beside it",
                             g->host, real);
      plan_add_mask(plan, cap_xstrdup(g->at), why, source, kind);
    } else if (path_within(real, g->real)) {
      const char *rel = real + (strcmp(g->real, "/") == 0 ? 0 : strlen(g->real));
      plan_add_mask(plan, cap_xasprintf("%s%s", strcmp(g->at, "/") == 0 ? "" : g->at, rel), why,
                    source, kind);
    }
  }
  return 0;
}

/* A host path to hide: resolved first (a symlink, or a symlinked parent,
 * hides what it points to). A path that does not exist hides nothing;
 * one that cannot be resolved otherwise (a symlink loop, an I/O error)
 * fails closed. */
/* Whether what keeps `path` from resolving is a directory of another
 * user's (which the tool, with the caller's uid or fewer rights, cannot
 * make searchable), not one of the caller's own (which a tool with a
 * writable grant could have made unsearchable, and could undo). */
static bool blocked_by_others(const char *path)
{
  _cleanup_free_ char *p = cap_xstrdup(path);
  for (char *s = p + 1;; s++) {
    bool end = *s == '\0';
    if (!end && *s != '/')
      continue;
    char saved = *s;
    *s = '\0';
    struct stat st;
    bool found = stat(p, &st) == 0;
    bool stuck = found && S_ISDIR(st.st_mode) && access(p, X_OK) < 0;
    *s = saved;
    if (stuck)
      return st.st_uid != geteuid();
    if (!found || end)
      return false;
  }
}

/* A deny entry that does not exist (yet): what it will be, its nearest
 * existing ancestor resolved and the missing rest appended. It has no
 * mask (apply_mask finds nothing there), but Landlock gives the grant
 * holding it as rules around it (landlock.c add_around_denies): the
 * directories on its way keep only READ_DIR, so the tool cannot create
 * it (a ~/.ssh/authorized_keys, a ~/.aws/config of its own; review6,
 * deny_absent_created.sh). */
static int plan_absent_deny(struct sandbox_mount_plan *plan, const char *host, const char *why,
                            const char *source, int depth, struct cap_error *err);

/* A dangling symlink at prefix (the rest of host after it): the deny is
 * what it points to, which the tool could create. */
static int plan_absent_link(struct sandbox_mount_plan *plan, const char *host, const char *prefix,
                            const char *why, const char *source, int depth, struct cap_error *err)
{
  char target[PATH_MAX];
  ssize_t n = readlink(prefix, target, sizeof target - 1);
  if (n <= 0)
    return cap_error_errno(err, n < 0 ? errno : EINVAL, "cannot read the link %s (%s)", prefix,
                           why);
  target[n] = '\0';
  _cleanup_free_ char *dir = cap_xstrdup(prefix);
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = '\0';
  else /* a relative entry: its link is relative to the current directory */
    strcpy(dir, ".");
  _cleanup_free_ char *next =
      cap_xasprintf("%s%s%s%s", target[0] == '/' ? "" : dir, target[0] == '/' ? "" : "/", target,
                    host + strlen(prefix));
  return plan_absent_deny(plan, next, why, source, depth + 1, err);
}

static int plan_absent_deny(struct sandbox_mount_plan *plan, const char *host, const char *why,
                            const char *source, int depth, struct cap_error *err)
{
  if (depth > 40)
    return cap_error_set(err, ELOOP, "cannot resolve the deny entry %s: too many links", source);
  _cleanup_free_ char *prefix = cap_xstrdup(host);
  for (;;) {
    struct stat st;
    if (lstat(prefix, &st) == 0 && S_ISLNK(st.st_mode)) /* dangling (it did not resolve) */
      return plan_absent_link(plan, host, prefix, why, source, depth, err);
    char *slash = strrchr(prefix, '/');
    if (!slash || slash == prefix)
      return 0;
    *slash = '\0';
    _cleanup_free_ char *real = realpath(prefix, NULL);
    if (!real && errno != ENOENT && errno != ENOTDIR)
      return 0; /* as before: behind something capsule cannot resolve either */
    if (!real)
      continue;
    const char *rest = host + strlen(prefix);
    for (const char *c = rest; *c; c++)
      if (c[0] == '/' && c[1] == '.' &&
          (c[2] == '/' || !c[2] || (c[2] == '.' && (c[3] == '/' || !c[3]))))
        return cap_error_set(err, EINVAL,
                             "the deny entry %s does not exist and has a . or .. after its "
                             "missing directory; write it without them",
                             source);
    _cleanup_free_ char *full = cap_xasprintf("%s%s", strcmp(real, "/") == 0 ? "" : real, rest);
    return plan_mask_real(plan, full, why, source, MASK_DENY, err);
  }
}

/* cache: directories found not to be links in this batch of masks (the
 * state directories), or NULL. */
static int plan_mask_in(struct sandbox_mount_plan *plan, struct cap_path_cache *cache,
                        const char *path, const char *why, enum mask_kind kind,
                        struct cap_error *err)
{
  _cleanup_free_ char *host = sandbox_expand_path(path);
  char real[PATH_MAX];
  int rr = cache ? cap_realpath_cached(cache, host, real) : realpath(host, real) ? 0 : -errno;
  if (rr < 0) {
    errno = -rr;
    /* nothing there to show: absent (its ancestors are pinned, so a tool
     * cannot have moved it away). A directory on the way that the caller
     * cannot search is no reason to skip the mask: the tool may be the one
     * that made it so (it has the caller's uid, or as root writes the
     * caller's files through an idmapped grant) and can make it searchable
     * again once the mask is not there: fail closed */
    if ((errno == ENOENT || errno == ENOTDIR) && kind == MASK_DENY)
      return plan_absent_deny(plan, host, why, path, 0, err);
    if (errno == ENOENT || errno == ENOTDIR)
      return 0;
    if (errno == EACCES && !blocked_by_others(host))
      return cap_error_set(err, EACCES,
                           "cannot resolve %s (%s) to mask it: a directory of yours on its way "
                           "is not searchable; make it searchable again (chmod u+x), or drop "
                           "the entry; refusing to run with it maybe visible",
                           host, why);
    if (errno == EACCES)
      return 0; /* behind another user's directory: the tool cannot open it either */
    return cap_error_errno(err, errno,
                           "cannot resolve %s (%s) to mask it; refusing to run with "
                           "it visible",
                           host, why);
  }
  return plan_mask_real(plan, real, why, path, kind, err);
}

static int plan_mask(struct sandbox_mount_plan *plan, const char *path, const char *why,
                     enum mask_kind kind, struct cap_error *err)
{
  return plan_mask_in(plan, NULL, path, why, kind, err);
}

/* /sys shows the host (cgroup trees, host pids, devices) to a tool granted
 * `/`: masked unless /sys or a path below it is granted explicitly. */
static bool sys_granted(const struct sandbox_mount_plan *plan)
{
  for (size_t i = 0; i < plan->n_grants; i++)
    if (plan->grants[i].real && path_within(plan->grants[i].real, "/sys"))
      return true;
  return false;
}

/* A directory holding a state key and database is capsule state, whoever
 * made it (a copy, another tool's --state): looked for in the first levels
 * below each directory grant but the system ones, on the grant's own
 * filesystem, within a budget of entries per run. */
#define MARKER_SCAN_DEPTH 2
#define MARKER_SCAN_BUDGET 4096

static bool holds_state(int dirfd)
{
  struct stat key, db;
  return fstatat(dirfd, "key", &key, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(key.st_mode) &&
         fstatat(dirfd, "state.db", &db, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(db.st_mode);
}

static int scan_for_state(struct sandbox_mount_plan *plan, int dirfd, const char *real, dev_t dev,
                          int depth, size_t *budget, struct cap_error *err)
{
  if (holds_state(dirfd))
    return plan_mask_real(plan, real, "a capsule state directory", real, MASK_STATE, err);
  int copy = depth > 0 ? dup(dirfd) : -1;
  DIR *d = copy >= 0 ? fdopendir(copy) : NULL;
  if (!d) {
    if (copy >= 0)
      close(copy);
    return 0;
  }
  int r = 0;
  struct dirent *e;
  while (r == 0 && *budget > 0 && (e = readdir(d))) {
    (*budget)--;
    if (e->d_type != DT_DIR || strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    _cleanup_close_ int sub =
        openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (sub < 0 || fstat(sub, &st) < 0 || st.st_dev != dev)
      continue; /* unreadable, or another filesystem (/proc, /sys under `/`) */
    _cleanup_free_ char *path =
        cap_xasprintf("%s/%s", strcmp(real, "/") == 0 ? "" : real, e->d_name);
    r = scan_for_state(plan, sub, path, dev, depth - 1, budget, err);
  }
  closedir(d);
  return r;
}

static int plan_scan_for_state(struct sandbox_mount_plan *plan, const struct cap_spec *spec,
                               struct cap_error *err)
{
  size_t budget = MARKER_SCAN_BUDGET;
  int r = 0;
  for (size_t i = 0; i < plan->n_grants && r == 0; i++) {
    const struct plan_grant *g = &plan->grants[i];
    if (g->kind != PLAN_DIR || spec->grants[i].origin == CAP_ORIGIN_SYSTEM)
      continue;
    _cleanup_close_ int fd = open(g->real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0)
      r = scan_for_state(plan, fd, g->real, st.st_dev, MARKER_SCAN_DEPTH, &budget, err);
  }
  return r;
}

/* A blocked command is masked where it is installed on the sandbox's PATH
 * and under every other name the same file has in those directories (a
 * hard link such as perl5.36.0 for perl is the same program). */
static int plan_mask_command(struct sandbox_mount_plan *plan, const char *name,
                             struct cap_error *err)
{
  static const char *const dirs[] = {"/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"};
  char paths[8][4096];
  size_t n = sandbox_command_paths(name, paths, 8);
  int r = 0;
  for (size_t k = 0; k < n && r == 0; k++) {
    r = plan_mask(plan, paths[k], "blocked command", MASK_OTHER, err);
    struct stat target;
    if (r < 0 || stat(paths[k], &target) < 0 || target.st_nlink < 2)
      continue;
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0] && r == 0; d++) {
      DIR *dir = opendir(dirs[d]);
      struct dirent *e;
      while (dir && r == 0 && (e = readdir(dir))) {
        struct stat st;
        if (e->d_name[0] == '.' || fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            st.st_dev != target.st_dev || st.st_ino != target.st_ino)
          continue;
        _cleanup_free_ char *alias = cap_xasprintf("%s/%s", dirs[d], e->d_name);
        char real[4096];
        if (realpath(alias, real) && strcmp(real, paths[k]) != 0)
          r = plan_mask(plan, real, "blocked command", MASK_OTHER, err);
      }
      if (dir)
        closedir(dir);
    }
  }
  return r;
}

/* A write-only grant inside the private /tmp would be readable: Landlock's
 * rights on /tmp are inherited by everything below it, and Landlock can
 * only grant. Refused rather than left readable. */
static int check_write_only_in_tmp(const struct cap_spec *spec, struct cap_error *err)
{
  if (!spec->sandbox.private_tmp)
    return 0;
  for (size_t i = 0; i < spec->n_grants; i++) {
    const struct cap_fs_grant *g = &spec->grants[i];
    _cleanup_free_ char *host = sandbox_expand_path(g->path);
    if (g->access == CAP_ACCESS_WRITE &&
        (strcmp(host, "/tmp") == 0 || strncmp(host, "/tmp/", 5) == 0))
      return cap_error_set(err, ENOTSUP,
                           "the write-only grant %s lies in the sandbox's private /tmp, whose "
                           "read rights it would inherit: grant it read-write, or move it "
                           "outside /tmp",
                           g->path);
  }
  return 0;
}

static int plan_masks(struct sandbox_mount_plan *plan, const struct cap_spec *spec,
                      const struct sandbox_options *opt, struct cap_error *err)
{
  int r = 0;
  for (size_t i = 0; i < spec->deny.len && r == 0; i++)
    r = plan_mask(plan, spec->deny.v[i], "deny entry", MASK_DENY, err);
  struct cap_path_cache *own =
      opt->n_hidden && !opt->hidden_cache ? cap_xcalloc(1, sizeof *own) : NULL;
  for (size_t i = 0; i < opt->n_hidden && r == 0; i++)
    r = plan_mask_in(plan, opt->hidden_cache ? opt->hidden_cache : own, opt->hidden[i],
                     "capsule's state", MASK_STATE, err);
  free(own);
  for (size_t i = 0; i < spec->process.blocked_commands.len && r == 0; i++)
    r = plan_mask_command(plan, spec->process.blocked_commands.v[i], err);
  if (r == 0)
    r = plan_scan_for_state(plan, spec, err);
  if (r == 0 && !sys_granted(plan))
    r = plan_mask(plan, "/sys", "the host's /sys", MASK_OTHER, err); /* absent: nothing to hide */
  return r;
}

/* An image's root: each top-level entry but those the sandbox provides
 * itself (/dev, /proc, /tmp), opened here as the grants are. */
static int plan_image(struct sandbox_mount_plan *plan, const char *rootfs, bool open_trees,
                      struct cap_error *err)
{
  static const char *const own[] = {".", "..", "dev", "proc", "tmp"};
  plan->image_root = true;
  DIR *d = opendir(rootfs);
  if (!d)
    return cap_error_errno(err, errno, "cannot read the image's root %s", rootfs);
  int r = 0;
  struct dirent *e;
  while (r == 0 && (e = readdir(d))) {
    bool skip = false;
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
      skip |= strcmp(e->d_name, own[i]) == 0;
    if (skip)
      continue;
    plan->image = cap_xrealloc(plan->image, (plan->n_image + 1) * sizeof *plan->image);
    struct plan_grant *g = &plan->image[plan->n_image++];
    *g =
        (struct plan_grant){.host = cap_xasprintf("/%s", e->d_name), .tree = -1, .read_only = true};
    _cleanup_free_ char *path = cap_xasprintf("%s/%s", rootfs, e->d_name);
    struct stat st;
    if (lstat(path, &st) < 0) {
      r = cap_error_errno(err, errno, "cannot read %s", path);
      break;
    }
    if (S_ISLNK(st.st_mode)) { /* /bin -> usr/bin: the same link, resolved inside */
      char target[PATH_MAX];
      ssize_t n = readlink(path, target, sizeof target - 1);
      if (n < 0) {
        r = cap_error_errno(err, errno, "cannot read the link %s", path);
        break;
      }
      target[n] = '\0';
      g->kind = PLAN_LINK;
      g->link = cap_xstrdup(target);
      continue;
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
      continue; /* a device node, socket or fifo at the top: not bound */
    g->kind = S_ISDIR(st.st_mode) ? PLAN_DIR : PLAN_FILE;
    int tree = sandbox_open_grant_tree(path, NULL, &g->real, open_trees);
    if (tree < 0 && tree != -ENOTSUP)
      r = cap_error_errno(err, -tree, "cannot open the image's %s", path);
    g->tree = tree >= 0 ? tree : -1;
  }
  closedir(d);
  return r;
}

int sandbox_mount_plan_new(const struct cap_spec *spec, const struct sandbox_options *opt,
                           struct sandbox_mount_plan **ret, struct cap_error *err)
{
  struct sandbox_mount_plan *plan = cap_xcalloc(1, sizeof *plan);
  plan->grants = cap_xcalloc(spec->n_grants + 1, sizeof *plan->grants);
  /* as root the sandbox's uid is not the caller's: the trees are opened
   * here, with the caller's rights; an unprivileged caller cannot open
   * them outside its own namespace, and the sandbox keeps its uid anyway */
  bool open_trees = geteuid() == 0;
  int r = check_write_only_in_tmp(spec, err);
  for (size_t i = 0; i < spec->n_grants && r == 0; i++) {
    r = resolve_grant(&plan->grants[i], &spec->grants[i], open_trees, err);
    plan->n_grants = i + 1;
  }
  if (r == 0)
    r = plan_masks(plan, spec, opt, err);
  if (r == 0 && opt->rootfs)
    r = plan_image(plan, opt->rootfs, open_trees, err);
  if (r < 0) {
    sandbox_mount_plan_free(plan);
    return r;
  }
  *ret = plan;
  return 0;
}

void sandbox_mount_plan_close_trees(struct sandbox_mount_plan *plan)
{
  for (size_t i = 0; plan && i < plan->n_grants; i++)
    if (plan->grants[i].tree >= 0) {
      close(plan->grants[i].tree);
      plan->grants[i].tree = -1;
    }
  for (size_t i = 0; plan && i < plan->n_image; i++)
    if (plan->image[i].tree >= 0) {
      close(plan->image[i].tree);
      plan->image[i].tree = -1;
    }
}

void sandbox_mount_plan_free(struct sandbox_mount_plan *plan)
{
  if (!plan)
    return;
  sandbox_mount_plan_close_trees(plan);
  for (size_t i = 0; i < plan->n_grants; i++) {
    free(plan->grants[i].host);
    free(plan->grants[i].at);
    free(plan->grants[i].real);
    free(plan->grants[i].link);
  }
  for (size_t i = 0; i < plan->n_masks; i++) {
    free(plan->masks[i].at);
    free(plan->masks[i].source);
  }
  for (size_t i = 0; i < plan->n_image; i++) {
    free(plan->image[i].host);
    free(plan->image[i].real);
    free(plan->image[i].link);
  }
  free(plan->image);
  free(plan->grants);
  free(plan->masks);
  free(plan);
}

void sandbox_mount_note_unenforced(const struct cap_spec *spec,
                                   const struct sandbox_mount_plan *plan, char *buf, size_t size)
{
  if (!spec->limits.disk_bytes)
    return;
  for (size_t i = 0; i < plan->n_grants; i++) {
    const struct plan_grant *g = &plan->grants[i];
    if (g->read_only || (g->kind != PLAN_DIR && g->kind != PLAN_FILE))
      continue;
    size_t len = strlen(buf);
    snprintf(buf + len, size - len,
             "%sdisk limit on writable grants and workspaces (each file "
             "bounded by RLIMIT_FSIZE, not their total; /tmp and /dev/shm are sized)",
             len ? ", " : "");
    return;
  }
}
