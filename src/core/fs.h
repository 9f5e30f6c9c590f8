/* Small file-system helpers shared by the sandbox and the gateway, for the
 * parent's side. cap_mkdir_p allocates nothing: safe in the sandbox's
 * child between clone and exec too. */
#ifndef CAPSULE_CORE_FS_H
#define CAPSULE_CORE_FS_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

/* mkdir -p: path and its missing parents, each with mode. The path itself
 * is tried first (its parent usually exists: one system call), then the
 * walk goes back to the deepest existing ancestor and forward from there.
 * 0 when the path exists afterwards as anything (the caller checks what),
 * else -errno. */
int cap_mkdir_p(const char *path, mode_t mode);

/* Directories already found not to be symlinks, for a batch of
 * cap_realpath_cached calls made together (the state directories to mask:
 * dozens of paths under the same few parents). Zero-initialised; lives
 * as long as the batch, so a later batch looks again. */
struct cap_path_cache {
  size_t n, used;
  unsigned short off[128];
  char text[8192];
};

/* realpath(path, out), with the same answers and errors (readlink of
 * every component, as glibc's realpath does), but a component the cache
 * knows is not a link is not asked again. A path with a symlink, ".",
 * "..", "//" or a trailing slash is handed to realpath itself. 0 or
 * -errno. */
int cap_realpath_cached(struct cap_path_cache *cache, const char *path, char out[PATH_MAX]);

/* fd's link count (0: its file was removed), asked of statx for that
 * alone: an fstat also reads the file's change time, which on a kernel
 * with fine-grained timestamps (Linux 6.13+, ext4, xfs, tmpfs) makes the
 * next write to the file stamp a new one through the journal (1-3 µs a
 * write here; a file checked before each write pays it each time).
 * fstat where there is no statx. 0 or -errno. */
int cap_fd_nlink(int fd, nlink_t *out);

#endif
