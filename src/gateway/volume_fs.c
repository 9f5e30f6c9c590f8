/* A Selu volume's size bound as a quota (as root): the volume directory
 * is the mount point of an ext4 file system of its own, made in a sparse
 * image file of exactly the bound's size, attached to a loop device and
 * mounted nosuid,nodev in capsule's mount namespace. A tool that fills
 * it gets ENOSPC; nothing it writes reaches the state's file system.
 *
 *   STATE/volumes/images/workspaces/USER/SESSION.img
 *   STATE/volumes/images/caches/USER/CAPABILITY.img
 *
 * The loop device is attached with LO_FLAGS_AUTOCLEAR, so it goes with
 * the last mount of it; the mount stays until `capsule workspace rm` or a
 * reboot, after which the next call mounts the image again. Setting one
 * up is serialised by an flock on the image. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/fs.h"
#include "gateway/volumes.h"

#define LOOP_MAJOR_ 7

/* Whether dir is the mount point of a loop device backed by image. */
static bool mounted_from(const char *dir, const char *image)
{
  struct stat st, parent;
  _cleanup_free_ char *up = cap_xasprintf("%s/..", dir);
  if (stat(dir, &st) < 0 || stat(up, &parent) < 0 || st.st_dev == parent.st_dev ||
      major(st.st_dev) != LOOP_MAJOR_)
    return false;
  _cleanup_free_ char *sys =
      cap_xasprintf("/sys/dev/block/%u:%u/loop/backing_file", major(st.st_dev), minor(st.st_dev));
  _cleanup_fclose_ FILE *f = fopen(sys, "re");
  char backing[PATH_MAX + 2] = "";
  if (!f || !fgets(backing, sizeof backing, f))
    return false;
  backing[strcspn(backing, "\n")] = '\0';
  _cleanup_free_ char *real = realpath(image, NULL);
  return real && strcmp(real, backing) == 0;
}

/* mkfs.ext4 over the image: no reserved blocks, root's root directory, the
 * inode tables and journal left to be zeroed lazily (so the image stays
 * sparse: about 660 KiB on disk for a 1 GiB bound, not the 33 MiB an
 * eagerly zeroed journal costs, which a client opening many sessions
 * would multiply). */
static int make_fs(const char *image, struct cap_error *err)
{
  static const char *const where[] = {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"};
  const char *mkfs = NULL;
  for (size_t i = 0; i < 2 && !mkfs; i++)
    if (access(where[i], X_OK) == 0)
      mkfs = where[i];
  if (!mkfs)
    return cap_error_set(err, ENOTSUP, "mkfs.ext4 is not installed (Debian: e2fsprogs)");
  pid_t pid = fork();
  if (pid < 0)
    return cap_error_errno(err, errno, "cannot start mkfs.ext4");
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
    }
    char *const env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
    execle(mkfs, mkfs, "-q", "-F", "-m", "0", "-E",
           "root_owner=0:0,lazy_itable_init=1,lazy_journal_init=1", image, (char *)NULL, env);
    _exit(127);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return cap_error_set(err, EIO, "mkfs.ext4 failed on %s (status %d)", image, status);
  return 0;
}

/* A free loop device attached to image (autoclear): its fd. The image
 * is opened anew: the loop device keeps the open file it is given, and
 * with it any flock on that file, which would block every later call. */
static int attach_loop(int locked_fd, struct cap_error *err)
{
  char self[64];
  snprintf(self, sizeof self, "/proc/self/fd/%d", locked_fd);
  _cleanup_close_ int image_fd = open(self, O_RDWR | O_CLOEXEC);
  if (image_fd < 0)
    return cap_error_errno(err, errno, "cannot open the volume image again");
  _cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (ctl < 0)
    return cap_error_errno(err, errno, "cannot open /dev/loop-control");
  for (int tries = 0; tries < 16; tries++) {
    int n = ioctl(ctl, LOOP_CTL_GET_FREE);
    if (n < 0)
      return cap_error_errno(err, errno, "no free loop device");
    char dev[32];
    snprintf(dev, sizeof dev, "/dev/loop%d", n);
    int fd = open(dev, O_RDWR | O_CLOEXEC);
    if (fd < 0)
      return cap_error_errno(err, errno, "cannot open %s", dev);
    struct loop_config cfg = {.fd = (unsigned)image_fd, .info = {.lo_flags = LO_FLAGS_AUTOCLEAR}};
    if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0)
      return fd;
    int e = errno;
    close(fd);
    if (e != EBUSY) /* taken by another process in between: the next */
      return cap_error_errno(err, e, "cannot attach %s", dev);
  }
  return cap_error_set(err, EBUSY, "every free loop device was taken meanwhile");
}

/* Whether dir holds nothing (a volume made before quotas holds files). */
static bool empty(const char *dir)
{
  DIR *d = opendir(dir);
  if (!d)
    return false;
  bool none = true;
  for (struct dirent *e; none && (e = readdir(d));)
    none = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
  closedir(d);
  return none;
}

/* The image made (sparse, bytes long, formatted) when new; mounted on dir
 * when not already. Called under the image's flock. */
static int mount_image(int fd, bool fresh, const char *image, const char *dir, uint64_t bytes,
                       struct cap_error *err)
{
  if (fresh && (ftruncate(fd, (off_t)bytes) < 0))
    return cap_error_errno(err, errno, "cannot size %s", image);
  int r = fresh ? make_fs(image, err) : 0;
  if (r < 0)
    return r;
  _cleanup_close_ int loop = attach_loop(fd, err);
  if (loop < 0)
    return loop;
  char dev[64];
  snprintf(dev, sizeof dev, "/proc/self/fd/%d", loop);
  _cleanup_free_ char *real = realpath(dev, NULL);
  if (!real || mount(real, dir, "ext4", MS_NOSUID | MS_NODEV, NULL) < 0)
    return cap_error_errno(err, errno, "cannot mount %s on %s", image, dir);
  if (fresh) {
    _cleanup_free_ char *lf = cap_xasprintf("%s/lost+found", dir);
    rmdir(lf); /* mkfs's, of no use to a tool */
  }
  return 0;
}

int gw_volume_quota(const char *dir, const char *image, uint64_t bytes, bool *enforced,
                    struct cap_error *err)
{
  *enforced = false;
  if (geteuid() != 0 || !bytes)
    return 0;
  _cleanup_free_ char *image_dir = cap_xstrdup(image);
  *strrchr(image_dir, '/') = '\0';
  int r = cap_mkdir_p(image_dir, 0700);
  if (r < 0)
    return cap_error_errno(err, -r, "cannot create %s", image_dir);
  bool fresh = false;
  _cleanup_close_ int fd = open(image, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    if (!empty(dir)) /* made before quotas: left to the check */
      return 0;
    fd = open(image, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    fresh = fd >= 0;
    if (fd < 0 && errno == EEXIST) /* another call made it meanwhile */
      fd = open(image, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  }
  if (fd < 0)
    return cap_error_errno(err, errno, "cannot open the volume image %s", image);
  if (flock(fd, LOCK_EX) < 0)
    return cap_error_errno(err, errno, "cannot lock %s", image);
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 077))
    return cap_error_set(err, EPERM, "%s is not a volume image of capsule's (root's, 0600)", image);
  fresh = fresh || st.st_size == 0; /* a call that died before formatting it */
  if (!mounted_from(dir, image)) {
    r = mount_image(fd, fresh, image, dir, bytes, err);
    if (r < 0) {
      if (fresh)
        unlink(image);
      return r;
    }
  }
  *enforced = true;
  return 0;
}

int gw_volume_quota_release(const char *dir, const char *image, struct cap_error *err)
{
  if (mounted_from(dir, image) && umount2(dir, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
    return cap_error_errno(err, errno, "cannot unmount %s", dir);
  if (unlink(image) < 0 && errno != ENOENT)
    return cap_error_errno(err, errno, "cannot remove %s", image);
  return 0;
}
