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
#include "core/fs.h"
#include "net/egress_plan.h"
#include "net/proxy.h"
#include "sandbox/mount_plan.h"
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
#define MOUNT_ATTR_NOEXEC_ 0x00000008
#define MOVE_MOUNT_T_EMPTY_PATH_ 0x00000040
#ifndef __NR_fsopen
#define __NR_fsopen 430
#define __NR_fsconfig 431
#define __NR_fsmount 432
#endif
#ifndef __NR_openat2
#define __NR_openat2 437
#endif
#define FSOPEN_CLOEXEC_ 0x00000001
#define FSMOUNT_CLOEXEC_ 0x00000001
#define FSCONFIG_SET_STRING_ 1
#define FSCONFIG_CMD_CREATE_ 6
#define RESOLVE_NO_MAGICLINKS_ 0x02
#define RESOLVE_IN_ROOT_ 0x10

struct open_how_ {
  uint64_t flags;
  uint64_t mode;
  uint64_t resolve;
};

struct mount_attr_ {
  uint64_t attr_set;
  uint64_t attr_clr;
  uint64_t propagation;
  uint64_t userns_fd;
};

#define DEFAULT_SHM_BYTES (16ull << 20)

static void touch(const char *path)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
  if (fd >= 0)
    close(fd);
}

/* Gives a detached tree its attributes (MOUNT_ATTR_*) on every submount
 * too (mount_setattr AT_RECURSIVE), so a read-only grant cannot be written
 * through a mount nested below it, and attaches it at dest. */
static int attach_tree(int tree, const char *dest, uint64_t attr_set)
{
  struct mount_attr_ attr = {.attr_set = attr_set, .propagation = MS_PRIVATE};
  if (syscall(__NR_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE_, &attr, sizeof attr) < 0)
    return -1;
  return (int)syscall(__NR_move_mount, tree, "", AT_FDCWD, dest, MOVE_MOUNT_F_EMPTY_PATH_);
}

static int open_tree_at(const char *src)
{
  /* AT_SYMLINK_NOFOLLOW: a grant checked as a directory cannot have been
   * swapped for a symlink to somewhere else since */
  return (int)syscall(__NR_open_tree, AT_FDCWD, src,
                      OPEN_TREE_CLONE_ | AT_RECURSIVE_ | O_CLOEXEC | AT_SYMLINK_NOFOLLOW);
}

/* Binds src (a host path) at dest (inside the new root). */
static int bind_tree(const char *src, const char *dest, uint64_t attr_set)
{
  _cleanup_close_ int fd = open_tree_at(src);
  if (fd < 0)
    return -1;
  return attach_tree(fd, dest, attr_set);
}

/* With a command list in force, nothing the tool can write may be
 * executed or mapped executable (noexec): the dynamic loader, which must
 * stay executable, maps its target with mmap, which Landlock does not
 * check, so only the mount flag keeps `ld.so /tmp/copy` from running. */
static bool command_list(const struct cap_spec *spec)
{
  return spec->process.allowed_commands.len || spec->process.blocked_commands.len;
}

/* Creates in root what the host path is (directory, file, or the same
 * symlink) and binds it: by the tree the parent opened (as root), else by
 * its path. */
static void mount_grant(const char *root, const struct plan_grant *g, bool noexec_writable)
{
  if (g->kind == PLAN_MISSING)
    return;
  _cleanup_free_ char *dest = cap_xasprintf("%s%s", root, g->at);
  _cleanup_free_ char *parent = cap_xstrdup(dest);
  char *slash = strrchr(parent, '/');
  if (slash && slash != parent) {
    *slash = '\0';
    cap_mkdir_p(parent, 0755);
  }
  if (g->kind == PLAN_LINK) {
    /* merged-/usr links such as /bin -> usr/bin: the same link inside,
     * resolved against the sandbox's own tree */
    if (symlink(g->link, dest) < 0 && errno != EEXIST)
      sandbox_child_fail("cannot create the link %s in the sandbox: %s", g->host, strerror(errno));
    return;
  }
  if (g->kind == PLAN_DIR)
    cap_mkdir_p(dest, 0755);
  else
    touch(dest);
  /* as root the parent opened the tree; otherwise it is opened here, by a
   * handle whose real path must still be the one the masks were mapped to */
  int opened = g->tree >= 0 ? dup(g->tree) : sandbox_open_grant_tree(g->host, g->real, NULL, true);
  if (opened < 0 && g->tree >= 0)
    opened = -errno;
  _cleanup_close_ int tree = opened;
  if (tree < 0)
    sandbox_child_fail("cannot open %s for the sandbox: %s", g->host,
                       tree == -ESTALE ? "it moved while the sandbox was being set up"
                                       : strerror(-tree));
  uint64_t attr = MOUNT_ATTR_NOSUID_ | MOUNT_ATTR_NODEV_;
  if (g->read_only)
    attr |= MOUNT_ATTR_RDONLY_;
  else if (noexec_writable)
    attr |= MOUNT_ATTR_NOEXEC_;
  CHILD_TRY(attach_tree(tree, dest, attr), "cannot bind %s into the sandbox: %s", g->host,
            strerror(errno));
}

/* An empty, read-only mount for a masked directory. */
static int empty_dir_mount(void)
{
  _cleanup_close_ int fs = (int)syscall(__NR_fsopen, "tmpfs", FSOPEN_CLOEXEC_);
  if (fs < 0 || syscall(__NR_fsconfig, fs, FSCONFIG_SET_STRING_, "mode", "0000", 0) < 0 ||
      syscall(__NR_fsconfig, fs, FSCONFIG_SET_STRING_, "size", "4k", 0) < 0 ||
      syscall(__NR_fsconfig, fs, FSCONFIG_CMD_CREATE_, NULL, NULL, 0) < 0)
    return -1;
  return (int)syscall(__NR_fsmount, fs, FSMOUNT_CLOEXEC_,
                      MOUNT_ATTR_RDONLY_ | MOUNT_ATTR_NOSUID_ | MOUNT_ATTR_NODEV_ |
                          MOUNT_ATTR_NOEXEC_);
}

/* An empty, read-only file for a masked file: /dev/null, which cannot be
 * executed (nodev, noexec). */
static int empty_file_mount(void)
{
  int fd = open_tree_at("/dev/null");
  struct mount_attr_ attr = {.attr_set =
                                 MOUNT_ATTR_RDONLY_ | MOUNT_ATTR_NOSUID_ | MOUNT_ATTR_NOEXEC_};
  if (fd >= 0 && syscall(__NR_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Makes every directory above a masked path (inside the sandbox's root) a
 * mount point of its own: a bind of itself, with its mount's attributes
 * and everything mounted below it. A mount point cannot be renamed
 * (EBUSY), so a tool with a writable grant above a mask cannot move the
 * masked directory's parent away between runs and leave the real one
 * unmasked under a name the next run does not know. */
static void pin_ancestors(int root_fd, const char *at)
{
  _cleanup_free_ char *path = cap_xstrdup(at);
  for (char *s = path + 1; *s; s++) {
    if (*s != '/')
      continue;
    *s = '\0';
    struct open_how_ how = {.flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                            .resolve = RESOLVE_IN_ROOT_ | RESOLVE_NO_MAGICLINKS_};
    _cleanup_close_ int dir = (int)syscall(__NR_openat2, root_fd, path, &how, sizeof how);
    *s = '/';
    if (dir < 0)
      return; /* nothing below it resolves either: the mask has nothing to hide */
    _cleanup_close_ int tree = (int)syscall(
        __NR_open_tree, dir, "", OPEN_TREE_CLONE_ | AT_RECURSIVE_ | AT_EMPTY_PATH | O_CLOEXEC);
    CHILD_TRY(tree, "cannot pin %s above a masked path: %s", path, strerror(errno));
    CHILD_TRY(syscall(__NR_move_mount, tree, "", dir, "",
                      MOVE_MOUNT_F_EMPTY_PATH_ | MOVE_MOUNT_T_EMPTY_PATH_),
              "cannot pin %s above a masked path: %s", path, strerror(errno));
  }
}

/* Deny wins: an empty mount over the path, found inside the sandbox's own
 * root (symlinks resolved there, as the tool will resolve them). A path
 * that does not resolve there shows nothing to hide (covered by the
 * private /tmp, /dev or /proc, say), and one the sandbox's uid cannot
 * reach needs no mask (the tool has that uid and fewer rights); any other
 * failure stops the run: a mask that cannot be applied is never reported
 * as applied. */
static void apply_mask(int root_fd, const struct sandbox_mask *m)
{
  struct open_how_ how = {.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                          .resolve = RESOLVE_IN_ROOT_ | RESOLVE_NO_MAGICLINKS_};
  /* a deny entry that does not exist has no mask (Landlock keeps the tool
   * from creating it, mount_plan.c plan_absent_deny): nothing to pin */
  int probe = (int)syscall(__NR_openat2, root_fd, m->at, &how, sizeof how);
  if (probe < 0 && errno == ENOENT && m->deny)
    return;
  if (probe >= 0)
    close(probe);
  pin_ancestors(root_fd, m->at);
  _cleanup_close_ int at = (int)syscall(__NR_openat2, root_fd, m->at, &how, sizeof how);
  if (at < 0 && (errno == EACCES || errno == ENOENT || errno == ENOTDIR))
    return;
  CHILD_TRY(at, "cannot mask %s (%s) at %s: %s", m->source, m->why, m->at, strerror(errno));
  struct stat st;
  CHILD_TRY(fstat(at, &st), "cannot mask %s: %s", m->source, strerror(errno));
  if (S_ISLNK(st.st_mode))
    sandbox_child_fail("cannot mask %s (%s): %s is a symlink inside the sandbox", m->source, m->why,
                       m->at);
  _cleanup_close_ int mnt = S_ISDIR(st.st_mode) ? empty_dir_mount() : empty_file_mount();
  CHILD_TRY(mnt, "cannot mask %s (%s): %s", m->source, m->why, strerror(errno));
  CHILD_TRY(syscall(__NR_move_mount, mnt, "", at, "",
                    MOVE_MOUNT_F_EMPTY_PATH_ | MOVE_MOUNT_T_EMPTY_PATH_),
            "cannot mask %s (%s): %s", m->source, m->why, strerror(errno));
}

static void apply_masks(const struct sandbox_mount_plan *plan, const char *root)
{
  _cleanup_close_ int root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  CHILD_TRY(root_fd, "cannot open the sandbox root: %s", strerror(errno));
  bool deny_masks = true;
#ifdef CAPSULE_TEST_HOOKS /* tests/sandbox/deny.sh: Landlock alone holds deny entries */
  deny_masks = !getenv("CAPSULE_TEST_NO_DENY_MASKS");
#endif
  for (size_t i = 0; i < plan->n_masks; i++)
    if (deny_masks || !plan->masks[i].deny)
      apply_mask(root_fd, &plan->masks[i]);
}

static void mount_dev(const char *root, uint64_t shm_bytes)
{
  _cleanup_free_ char *dev = cap_xasprintf("%s/dev", root);
  cap_mkdir_p(dev, 0755);
  CHILD_TRY(mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k"),
            "cannot mount /dev: %s", strerror(errno));
  static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
  for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
    _cleanup_free_ char *src = cap_xasprintf("/dev/%s", nodes[i]);
    _cleanup_free_ char *dest = cap_xasprintf("%s/%s", dev, nodes[i]);
    if (access(src, F_OK) < 0)
      continue;
    touch(dest);
    CHILD_TRY(bind_tree(src, dest, MOUNT_ATTR_NOSUID_), "cannot bind %s: %s", src, strerror(errno));
  }
  static const char *const links[][2] = {{"/proc/self/fd", "fd"},
                                         {"/proc/self/fd/0", "stdin"},
                                         {"/proc/self/fd/1", "stdout"},
                                         {"/proc/self/fd/2", "stderr"}};
  for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
    _cleanup_free_ char *dest = cap_xasprintf("%s/%s", dev, links[i][1]);
    if (symlink(links[i][0], dest) < 0)
      sandbox_child_fail("cannot create /dev/%s: %s", links[i][1], strerror(errno));
  }
  _cleanup_free_ char *shm = cap_xasprintf("%s/shm", dev);
  cap_mkdir_p(shm, 01777);
  char opts[64];
  snprintf(opts, sizeof opts, "mode=1777,size=%llu", (unsigned long long)shm_bytes);
  CHILD_TRY(mount("tmpfs", shm, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts),
            "cannot mount /dev/shm: %s", strerror(errno));
}

/* The sandbox's temporary space is tmpfs, which lives in memory: /tmp
 * sized by the disk limit (64 MiB by default), /dev/shm by the same limit
 * (16 MiB at most), and with a memory limit both together within it
 * (/dev/shm a quarter at most), since without a memory cgroup nothing
 * else would count a tmpfs page against the tool. */
static void temp_space(const struct cap_spec *spec, uint64_t *tmp, uint64_t *shm)
{
  uint64_t disk = spec->limits.disk_bytes, mem = spec->limits.memory_bytes;
  *tmp = disk ? disk : SANDBOX_TMP_DEFAULT_BYTES;
  *shm = disk && disk < DEFAULT_SHM_BYTES ? disk : DEFAULT_SHM_BYTES;
  if (mem) {
    if (*shm > mem / 4)
      *shm = mem / 4;
    if (*tmp > mem - *shm)
      *tmp = mem - *shm;
  }
  /* tmpfs rounds up to pages; a size of 0 would mean "unlimited" */
  if (*tmp < 4096)
    *tmp = 4096;
  if (*shm < 4096)
    *shm = 4096;
}

static void mount_private_tmp(const struct cap_spec *spec, const char *root, bool noexec)
{
  _cleanup_free_ char *tmp = cap_xasprintf("%s/tmp", root);
  cap_mkdir_p(tmp, 01777);
  char opts[64];
  uint64_t size, shm_size;
  temp_space(spec, &size, &shm_size);
  snprintf(opts, sizeof opts, "mode=1777,size=%llu", (unsigned long long)size);
  unsigned long flags = MS_NOSUID | MS_NODEV | (noexec || command_list(spec) ? MS_NOEXEC : 0);
  CHILD_TRY(mount("tmpfs", tmp, "tmpfs", flags, opts), "cannot mount the private /tmp: %s",
            strerror(errno));
}

static const char *grant_path(const struct cap_spec *spec, size_t i)
{
  if (i >= spec->n_grants)
    return "/tmp";
  return spec->grants[i].at ? spec->grants[i].at : spec->grants[i].path; /* where it appears */
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
static void mount_tree(const struct cap_spec *spec, const struct sandbox_mount_plan *plan,
                       const char *root)
{
  size_t n = spec->n_grants + (spec->sandbox.private_tmp ? 1 : 0);
  size_t *order = cap_xcalloc(n + 1, sizeof(size_t));
  for (size_t i = 0; i < n; i++)
    order[i] = i;                  /* index n_grants stands for the private /tmp */
  for (size_t i = 1; i < n; i++) { /* stable insertion sort by depth */
    size_t cur = order[i], j = i;
    while (j > 0 &&
           path_depth(grant_path(spec, order[j - 1])) > path_depth(grant_path(spec, cur))) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = cur;
  }
  for (size_t k = 0; k < n; k++) {
    if (order[k] == spec->n_grants)
      mount_private_tmp(spec, root, plan->image_root); /* Selu's image /tmp is noexec */
    else
      mount_grant(root, &plan->grants[order[k]], command_list(spec));
  }
  free(order);
}

/* file (a path under root) created with len bytes of data, read-only. */
static void write_small_file(const char *root, const char *path, const char *data, size_t len)
{
  _cleanup_free_ char *file = cap_xasprintf("%s%s", root, path);
  _cleanup_close_ int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
  CHILD_TRY(fd, "cannot write %s: %s", path, strerror(errno));
  while (len) {
    ssize_t w = write(fd, data, len);
    CHILD_TRY(w <= 0 ? -1 : 0, "cannot write %s: %s", path, strerror(errno));
    data += w;
    len -= (size_t)w;
  }
}

/* /etc/NAME of the sandbox replaced by capsule's file of that name in
 * PROXY_CA_DIR, when the sandbox's /etc has a regular file there or can
 * take a new one (its /etc is capsule's own directory); a symbolic link,
 * or an /etc that cannot take one, is left alone: the namespace has no
 * other resolver to reach either way. */
static void cover_etc_file(const char *root, const char *name)
{
  _cleanup_free_ char *target = cap_xasprintf("%s/etc/%s", root, name);
  _cleanup_free_ char *source = cap_xasprintf("%s%s/%s", root, PROXY_CA_DIR, name);
  _cleanup_free_ char *etc = cap_xasprintf("%s/etc", root);
  struct stat st, root_st, etc_st;
  if (lstat(target, &st) < 0 && errno == ENOENT) {
    /* only in capsule's own /etc on the sandbox's root tmpfs: never a
     * file added to a granted host directory */
    if (stat(root, &root_st) < 0 || lstat(etc, &etc_st) < 0 || !S_ISDIR(etc_st.st_mode) ||
        etc_st.st_dev != root_st.st_dev)
      return;
    int fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (fd < 0)
      return;
    close(fd);
  } else if (lstat(target, &st) < 0 || !S_ISREG(st.st_mode)) {
    return;
  }
  CHILD_TRY(mount(source, target, NULL, MS_BIND, NULL), "cannot mount over /etc/%s: %s", name,
            strerror(errno));
  CHILD_TRY(mount(NULL, target, NULL,
                  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
            "cannot make /etc/%s read-only: %s", name, strerror(errno));
}

/* Proxy mode's files on the sandbox's own root (made read-only with it):
 * the trust bundle for intercepted TLS, and the resolver's resolv.conf and
 * a hosts file holding only localhost, which cover the sandbox's /etc
 * ones (net/egress_plan.h). The tool can read them, not change them. */
static void write_proxy_files(const struct proxy *px, const char *root)
{
  static const char resolv[] = SANDBOX_RESOLV_CONF;
  static const char hosts[] = SANDBOX_HOSTS;
  size_t len;
  const char *pem = proxy_ca_bundle(px, &len);
  _cleanup_free_ char *dir = cap_xasprintf("%s%s", root, PROXY_CA_DIR);
  CHILD_TRY(mkdir(dir, 0755), "cannot create %s for the session CA: %s", PROXY_CA_DIR,
            strerror(errno));
  char opts[64];
  snprintf(opts, sizeof opts, "mode=0755,size=%zu", len + 16384);
  CHILD_TRY(mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts),
            "cannot mount %s for the session CA: %s", PROXY_CA_DIR, strerror(errno));
  if (pem)
    write_small_file(root, PROXY_CA_FILE, pem, len);
  write_small_file(root, PROXY_CA_DIR "/resolv.conf", resolv, sizeof resolv - 1);
  write_small_file(root, PROXY_CA_DIR "/hosts", hosts, sizeof hosts - 1);
  /* the tool reads its trust, it does not change it */
  CHILD_TRY(mount(NULL, dir, NULL,
                  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
            "cannot make %s read-only: %s", PROXY_CA_DIR, strerror(errno));
  cover_etc_file(root, "resolv.conf");
  cover_etc_file(root, "hosts");
}

static bool grants_root(const struct sandbox_mount_plan *plan)
{
  for (size_t i = 0; i < plan->n_grants; i++)
    if (plan->grants[i].kind == PLAN_DIR && strcmp(plan->grants[i].host, "/") == 0)
      return true;
  return false;
}

/* An image's root: its top-level entries bound read-only (their whole
 * trees), its top-level links recreated; by the trees the parent opened
 * as root, else by their real paths. */
static void mount_image(const struct sandbox_mount_plan *plan, const char *root)
{
  for (size_t i = 0; i < plan->n_image; i++) {
    const struct plan_grant *g = &plan->image[i];
    _cleanup_free_ char *dest = cap_xasprintf("%s%s", root, g->host);
    if (g->kind == PLAN_LINK) {
      if (symlink(g->link, dest) < 0 && errno != EEXIST)
        sandbox_child_fail("cannot create the image's link %s: %s", g->host, strerror(errno));
      continue;
    }
    if (g->kind == PLAN_DIR)
      cap_mkdir_p(dest, 0755);
    else
      touch(dest);
    int opened =
        g->tree >= 0 ? dup(g->tree) : sandbox_open_grant_tree(g->real, g->real, NULL, true);
    if (opened < 0 && g->tree >= 0)
      opened = -errno;
    _cleanup_close_ int tree = opened;
    if (tree < 0)
      sandbox_child_fail("cannot open the image's %s for the sandbox: %s", g->host,
                         strerror(-tree));
    CHILD_TRY(attach_tree(tree, dest, MOUNT_ATTR_RDONLY_ | MOUNT_ATTR_NOSUID_ | MOUNT_ATTR_NODEV_),
              "cannot bind the image's %s: %s", g->host, strerror(errno));
  }
}

/* Builds the new root at `root` (a tmpfs) and moves into it. */
void sandbox_build_root(const struct cap_spec *spec, struct sandbox_mount_plan *plan,
                        const char *root, const struct proxy *px)
{
  CHILD_TRY(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL),
            "cannot make the mount tree private: %s", strerror(errno));
  CHILD_TRY(mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m"),
            "cannot mount the sandbox root: %s", strerror(errno));
  mount_image(plan, root);
  mount_tree(spec, plan, root);
  sandbox_mount_plan_close_trees(plan); /* attached now; the command inherits none */
  /* the sandbox's own /dev and /proc go on top of everything */
  uint64_t tmp_bytes, shm_bytes;
  temp_space(spec, &tmp_bytes, &shm_bytes);
  mount_dev(root, shm_bytes);
  _cleanup_free_ char *proc = cap_xasprintf("%s/proc", root);
  cap_mkdir_p(proc, 0555);
  CHILD_TRY(mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
            "cannot mount /proc: %s", strerror(errno));
  /* deny entries, capsule's own state (whatever was granted), blocked
   * commands, /sys: mapped into the grants by the parent (mount_plan.c) */
  apply_masks(plan, root);
  if (px)
    write_proxy_files(px, root);

  CHILD_TRY(chdir(root), "cannot enter the sandbox root: %s", strerror(errno));
  CHILD_TRY(syscall(SYS_pivot_root, ".", "."), "pivot_root failed: %s", strerror(errno));
  CHILD_TRY(umount2(".", MNT_DETACH), "cannot detach the host's root: %s", strerror(errno));
  CHILD_TRY(chdir("/"), "chdir / failed: %s", strerror(errno));
  /* a grant of `/` itself lies on top of the tmpfs root and is the root
   * now, with the grant's own attributes (Covenant's filesystem = "host"
   * is `/` read-write); otherwise the tmpfs root is made read-only */
  if (!grants_root(plan))
    CHILD_TRY(mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL),
              "cannot make the sandbox root read-only: %s", strerror(errno));
  sethostname("capsule", 7);
}
