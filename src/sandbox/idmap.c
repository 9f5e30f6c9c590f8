/* Idmapped read-write grants (as root). As root every capability runs
 * under host ids of its own (sandbox_options.id_base), not the caller's:
 * a root-owned directory granted read-write would not be writable by the
 * tool, and what it made there would belong to a stranger uid. So each
 * writable grant's tree, opened by the parent (mount_plan.c), is made an
 * idmapped mount (mount_setattr MOUNT_ATTR_IDMAP) before the sandbox
 * attaches it: through that mount alone, the caller's uid and gid on disk
 * read as the tool's host ids and the tool's host ids write as the
 * caller's. The mapping is a user namespace's: a helper process is cloned
 * into a new user namespace, given the maps "CALLER TOOL 1" (the mount's
 * inside ids are the ids on disk; the outside ids are the ones processes
 * see), its namespace opened, the helper killed.
 * A grant of `/` itself (Covenant's filesystem = "host") is never
 * idmapped: that would make the tool root on the whole host's files; there
 * the tool writes only what its own host ids may. Nor is a sticky
 * directory anyone may write (excluded, below).
 * Filesystems without idmapped mounts (tmpfs before 6.3, most FUSE, NFS)
 * keep the grant as it was: the caller's files are then not writable by
 * the tool, and the run says so. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/text.h"
#include "sandbox/mount_plan.h"
#include "sandbox/spawn_internal.h"

#ifndef __NR_mount_setattr
#define __NR_mount_setattr 442
#endif
#ifndef __NR_open_tree
#define __NR_open_tree 428
#endif
#define MOUNT_ATTR_IDMAP_ 0x00100000
#define OPEN_TREE_CLONE_ 1
#define AT_RECURSIVE_ 0x8000

struct idmap_attr_ { /* struct mount_attr, which Debian 12's headers lack */
  uint64_t attr_set;
  uint64_t attr_clr;
  uint64_t propagation;
  uint64_t userns_fd;
};

static int write_text(pid_t pid, const char *file, const char *text)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", pid, file);
  return cap_write_text(path, text);
}

int sandbox_idmap_userns(uid_t caller_uid, gid_t caller_gid, uid_t tool_uid, gid_t tool_gid)
{
  /* a raw clone: the helper only waits to be killed, so it is safe to
   * clone from a multi-threaded caller */
  pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, NULL);
  if (pid < 0)
    return -errno;
  if (pid == 0) {
    /* it dies with its creator, should capsule be killed before it is */
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    for (;;)
      pause();
  }
  char map[64];
  snprintf(map, sizeof map, "%u %u 1\n", caller_uid, tool_uid);
  int r = write_text(pid, "uid_map", map);
  snprintf(map, sizeof map, "%u %u 1\n", caller_gid, tool_gid);
  if (r == 0)
    r = write_text(pid, "gid_map", map);
  int fd = -1;
  if (r == 0) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/user", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      r = -errno;
  }
  kill(pid, SIGKILL);
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
    ;
  return r < 0 ? r : fd;
}

int sandbox_idmap_tree(int tree, int userns_fd)
{
  struct idmap_attr_ attr = {.attr_set = MOUNT_ATTR_IDMAP_, .userns_fd = (uint64_t)userns_fd};
  /* submounts too; one on a filesystem without idmapped mounts fails the
   * recursive call, and then the grant's own mount alone is mapped */
  if (syscall(__NR_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE_, &attr, sizeof attr) == 0)
    return 0;
  if (syscall(__NR_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) == 0)
    return 0;
  return -errno;
}

/* `/` itself; and a sticky directory anyone may write (/tmp, /var/tmp):
 * the tool writes there without an idmap, and links and files it made
 * there as root's would pass the kernel's protected_symlinks and
 * protected_regular checks meant to stop exactly them. */
static bool excluded(const char *real, const struct stat *st)
{
  if (real && strcmp(real, "/") == 0)
    return true;
  return S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX) && (st->st_mode & S_IWOTH);
}

static void note(char *buf, size_t size, const char *host, int e)
{
  size_t len = strlen(buf);
  snprintf(buf + len, size - len,
           "%sread-write grant %s is NOT WRITABLE by the tool where it is the caller's "
           "(no idmapped mount: %s)",
           len ? ", " : "", host, strerror(e));
}

int sandbox_idmap_plan(struct sandbox_mount_plan *plan, uid_t tool_uid, gid_t tool_gid,
                       char *unenforced, size_t size)
{
  _cleanup_close_ int userns = -1;
  int failed = 0;
  for (size_t i = 0; i < plan->n_grants; i++) {
    struct plan_grant *g = &plan->grants[i];
    struct stat st;
    if (g->read_only || g->tree < 0 || fstat(g->tree, &st) < 0 || excluded(g->real, &st))
      continue;
    if (userns < 0) {
      userns = sandbox_idmap_userns(getuid(), getgid(), tool_uid, tool_gid);
      if (userns < 0) {
        note(unenforced, size, g->host, -userns);
        return -1;
      }
    }
    int r = sandbox_idmap_tree(g->tree, userns);
    if (r < 0) {
      note(unenforced, size, g->host, -r);
      failed++;
    }
  }
  return failed ? -1 : 0;
}

bool sandbox_id_mapped(const char *map_file, uint32_t id)
{
  _cleanup_fclose_ FILE *f = fopen(map_file, "re");
  if (!f)
    return true; /* no user namespaces: every id is the host's */
  unsigned long long inside, outside, count;
  while (fscanf(f, "%llu %llu %llu", &inside, &outside, &count) == 3)
    if (id >= inside && id - inside < count)
      return true;
  return false;
}

bool sandbox_idmap_excluded(const char *real)
{
  struct stat st;
  return real && (strcmp(real, "/") == 0 || (stat(real, &st) == 0 && excluded(real, &st)));
}

int sandbox_idmap_probe(const char *path)
{
  if (sandbox_idmap_excluded(path))
    return -EPERM;
  _cleanup_close_ int tree =
      (int)syscall(__NR_open_tree, AT_FDCWD, path, OPEN_TREE_CLONE_ | AT_RECURSIVE_ | O_CLOEXEC);
  if (tree < 0)
    return -errno;
  /* any two ids will do: the mount is never attached */
  _cleanup_close_ int userns = sandbox_idmap_userns(getuid(), getgid(), 65534, 65534);
  if (userns < 0)
    return userns;
  return sandbox_idmap_tree(tree, userns);
}
