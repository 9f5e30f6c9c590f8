/* The sandbox's mount tree, built in the child inside its new mount
 * namespace, in the order the kernel sees it: the host tree made private, a
 * tmpfs root, the grants bound as declared (parents before children;
 * read-only, nosuid, nodev, recursively), the private /tmp, the sandbox's own
 * /dev and /proc, deny entries and capsule's own state masked, the session
 * CA written, pivot_root, the root made read-only. A failure ends the child
 * through sandbox_child_fail. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "net/proxy.h"
#include "sandbox/spawn_internal.h"

#ifndef __NR_mount_setattr
#define __NR_mount_setattr 442
#endif
#ifndef __NR_open_tree
#define __NR_open_tree 428
#define __NR_move_mount 429
#endif
#define OPEN_TREE_CLONE_ 1
#define AT_RECURSIVE_ 0x8000
#define MOVE_MOUNT_F_EMPTY_PATH_ 0x00000004
#define MOUNT_ATTR_RDONLY_ 0x00000001
#define MOUNT_ATTR_NOSUID_ 0x00000002
#define MOUNT_ATTR_NODEV_ 0x00000004

struct mount_attr_ {
  uint64_t attr_set;
  uint64_t attr_clr;
  uint64_t propagation;
  uint64_t userns_fd;
};


#define DEFAULT_TMP_BYTES (64ull << 20)

/* "~/x" -> "$HOME/x"; other paths as they are. */
static char *expand_path(const char *path)
{
  if (path[0] == '~' && (path[1] == '/' || path[1] == '\0')) {
    const char *home = getenv("HOME");
    return cap_xasprintf("%s%s", home ? home : "/", path + 1);
  }
  return cap_xstrdup(path);
}

static void mkdir_p(const char *path, mode_t mode)
{
  char buf[PATH_MAX];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    mkdir(buf, mode);
    *p = '/';
  }
  mkdir(buf, mode);
}

static void touch(const char *path)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
  if (fd >= 0)
    close(fd);
}

/* Binds src (a host path) at dest (inside the new root) with the attributes
 * applied to every submount too (mount_setattr AT_RECURSIVE), so a read-only
 * grant cannot be written through a mount nested below it. */
static int bind_tree(const char *src, const char *dest, bool read_only, bool allow_dev)
{
  /* AT_SYMLINK_NOFOLLOW: a grant checked as a directory cannot have been
   * swapped for a symlink to somewhere else since */
  _cleanup_close_ int fd = (int)syscall(__NR_open_tree, AT_FDCWD, src,
                                        OPEN_TREE_CLONE_ | AT_RECURSIVE_ | O_CLOEXEC |
                                            AT_SYMLINK_NOFOLLOW);
  if (fd < 0)
    return -1;
  struct mount_attr_ attr = {.attr_set = MOUNT_ATTR_NOSUID_, .propagation = MS_PRIVATE};
  if (!allow_dev)
    attr.attr_set |= MOUNT_ATTR_NODEV_;
  if (read_only)
    attr.attr_set |= MOUNT_ATTR_RDONLY_;
  if (syscall(__NR_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE_, &attr, sizeof attr) <
      0)
    return -1;
  return (int)syscall(__NR_move_mount, fd, "", AT_FDCWD, dest, MOVE_MOUNT_F_EMPTY_PATH_);
}

/* Creates in root what the host path is (directory, file, or the same
 * symlink) and binds it. Paths the host lacks grant nothing: skipped. */
static void mount_grant(const char *root, const struct cap_fs_grant *g)
{
  _cleanup_free_ char *host = expand_path(g->path);
  if (host[0] != '/')
    sandbox_child_fail("grant \"%s\" is not an absolute path", g->path);
  struct stat st;
  if (lstat(host, &st) < 0)
    return;
  _cleanup_free_ char *dest = cap_xasprintf("%s%s", root, host);
  _cleanup_free_ char *parent = cap_xstrdup(dest);
  char *slash = strrchr(parent, '/');
  if (slash && slash != parent) {
    *slash = '\0';
    mkdir_p(parent, 0755);
  }
  if (S_ISLNK(st.st_mode)) {
    /* merged-/usr links such as /bin -> usr/bin: the same link inside,
     * resolved against the sandbox's own tree */
    char target[PATH_MAX];
    ssize_t n = readlink(host, target, sizeof target - 1);
    if (n > 0) {
      target[n] = '\0';
      if (symlink(target, dest) < 0 && errno != EEXIST)
        sandbox_child_fail("cannot create the link %s in the sandbox: %s", g->path, strerror(errno));
    }
    return;
  }
  if (S_ISDIR(st.st_mode))
    mkdir_p(dest, 0755);
  else
    touch(dest);
  CHILD_TRY(bind_tree(host, dest, g->access == CAP_ACCESS_READ, false),
            "cannot bind %s into the sandbox: %s", g->path, strerror(errno));
}

/* Deny wins: an empty read-only tmpfs over a denied directory, the empty
 * /dev/null over a denied file. */
static void mount_deny(const char *root, const char *path)
{
  _cleanup_free_ char *host = expand_path(path);
  _cleanup_free_ char *dest = cap_xasprintf("%s%s", root, host);
  struct stat st;
  if (lstat(dest, &st) < 0)
    return;
  if (S_ISDIR(st.st_mode))
    CHILD_TRY(mount("tmpfs", dest, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                    "mode=0000,size=4k"),
              "cannot mask the denied %s: %s", path, strerror(errno));
  else if (!S_ISLNK(st.st_mode))
    CHILD_TRY(bind_tree("/dev/null", dest, true, false), "cannot mask the denied %s: %s", path,
              strerror(errno));
}

/* A blocked command is masked where it is installed (/dev/null, which
 * cannot be executed); Landlock keeps the tool from running a copy. */
static void mask_blocked_commands(const struct cap_spec *spec, const char *root)
{
  char paths[8][4096];
  for (size_t i = 0; i < spec->process.blocked_commands.len; i++) {
    size_t n = sandbox_command_paths(spec->process.blocked_commands.v[i], paths, 8);
    for (size_t k = 0; k < n; k++)
      mount_deny(root, paths[k]);
  }
}

static void mount_dev(const char *root)
{
  _cleanup_free_ char *dev = cap_xasprintf("%s/dev", root);
  mkdir_p(dev, 0755);
  CHILD_TRY(mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k"),
            "cannot mount /dev: %s", strerror(errno));
  static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
  for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
    _cleanup_free_ char *src = cap_xasprintf("/dev/%s", nodes[i]);
    _cleanup_free_ char *dest = cap_xasprintf("%s/%s", dev, nodes[i]);
    if (access(src, F_OK) < 0)
      continue;
    touch(dest);
    CHILD_TRY(bind_tree(src, dest, false, true), "cannot bind %s: %s", src, strerror(errno));
  }
  static const char *const links[][2] = {{"/proc/self/fd", "fd"},   {"/proc/self/fd/0", "stdin"},
                                         {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}};
  for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
    _cleanup_free_ char *dest = cap_xasprintf("%s/%s", dev, links[i][1]);
    if (symlink(links[i][0], dest) < 0)
      sandbox_child_fail("cannot create /dev/%s: %s", links[i][1], strerror(errno));
  }
  _cleanup_free_ char *shm = cap_xasprintf("%s/shm", dev);
  mkdir_p(shm, 01777);
  CHILD_TRY(mount("tmpfs", shm, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777,size=16m"),
            "cannot mount /dev/shm: %s", strerror(errno));
}

static void mount_private_tmp(const struct cap_spec *spec, const char *root)
{
  _cleanup_free_ char *tmp = cap_xasprintf("%s/tmp", root);
  mkdir_p(tmp, 01777);
  char opts[64];
  uint64_t size = spec->limits.disk_bytes ? spec->limits.disk_bytes : DEFAULT_TMP_BYTES;
  snprintf(opts, sizeof opts, "mode=1777,size=%llu", (unsigned long long)size);
  CHILD_TRY(mount("tmpfs", tmp, "tmpfs", MS_NOSUID | MS_NODEV, opts),
            "cannot mount the private /tmp: %s", strerror(errno));
}

static const char *grant_path(const struct cap_spec *spec, size_t i)
{
  return i < spec->n_grants ? spec->grants[i].path : "/tmp";
}

static size_t path_depth(const char *p)
{
  size_t d = 0;
  for (; *p; p++)
    d += *p == '/';
  return d;
}

/* The grants and the private /tmp, parents before children, so a narrower
 * grant is never hidden by a wider one mounted after it (a read-only
 * /home/x stays read-only under a writable /home). */
static void mount_tree(const struct cap_spec *spec, const char *root)
{
  size_t n = spec->n_grants + (spec->sandbox.private_tmp ? 1 : 0);
  size_t *order = cap_xcalloc(n + 1, sizeof(size_t));
  for (size_t i = 0; i < n; i++)
    order[i] = i; /* index n_grants stands for the private /tmp */
  for (size_t i = 1; i < n; i++) { /* stable insertion sort by depth */
    size_t cur = order[i], j = i;
    while (j > 0 && path_depth(grant_path(spec, order[j - 1])) >
                        path_depth(grant_path(spec, cur))) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = cur;
  }
  for (size_t k = 0; k < n; k++) {
    if (order[k] == spec->n_grants)
      mount_private_tmp(spec, root);
    else
      mount_grant(root, &spec->grants[order[k]]);
  }
  free(order);
}

/* The trust bundle for intercepted TLS, on the sandbox's own root (made
 * read-only with it): the tool can read it, not change it. */
static void write_ca_bundle(const struct proxy *px, const char *root)
{
  size_t len;
  const char *pem = proxy_ca_bundle(px, &len);
  if (!pem)
    return;
  _cleanup_free_ char *dir = cap_xasprintf("%s%s", root, PROXY_CA_DIR);
  _cleanup_free_ char *file = cap_xasprintf("%s%s", root, PROXY_CA_FILE);
  CHILD_TRY(mkdir(dir, 0755), "cannot create %s for the session CA: %s", PROXY_CA_DIR, strerror(errno));
  _cleanup_close_ int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
  CHILD_TRY(fd, "cannot write %s: %s", PROXY_CA_FILE, strerror(errno));
  while (len) {
    ssize_t w = write(fd, pem, len);
    CHILD_TRY(w <= 0 ? -1 : 0, "cannot write %s: %s", PROXY_CA_FILE, strerror(errno));
    pem += w;
    len -= (size_t)w;
  }
}

/* Builds the new root at `root` (a tmpfs) and moves into it. */
void sandbox_build_root(const struct cap_spec *spec, const struct sandbox_options *opt,
                        const char *root, const struct proxy *px)
{
  CHILD_TRY(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL),
            "cannot make the mount tree private: %s", strerror(errno));
  CHILD_TRY(mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m"),
            "cannot mount the sandbox root: %s", strerror(errno));
  mount_tree(spec, root);
  /* the sandbox's own /dev and /proc go on top of everything */
  mount_dev(root);
  _cleanup_free_ char *proc = cap_xasprintf("%s/proc", root);
  mkdir_p(proc, 0555);
  CHILD_TRY(mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
            "cannot mount /proc: %s", strerror(errno));
  for (size_t i = 0; i < spec->deny.len; i++)
    mount_deny(root, spec->deny.v[i]);
  for (size_t i = 0; i < opt->n_hidden; i++) /* capsule's own state, whatever was granted */
    mount_deny(root, opt->hidden[i]);
  mask_blocked_commands(spec, root);
  if (px)
    write_ca_bundle(px, root);

  CHILD_TRY(chdir(root), "cannot enter the sandbox root: %s", strerror(errno));
  CHILD_TRY(syscall(SYS_pivot_root, ".", "."), "pivot_root failed: %s", strerror(errno));
  CHILD_TRY(umount2(".", MNT_DETACH), "cannot detach the host's root: %s", strerror(errno));
  CHILD_TRY(chdir("/"), "chdir / failed: %s", strerror(errno));
  CHILD_TRY(mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL),
            "cannot make the sandbox root read-only: %s", strerror(errno));
  sethostname("capsule", 7);
}
