/* What an image runs (image.h): Entrypoint followed by Cmd, as a container
 * runtime starts it, its program looked up in the image's own root (never
 * the host's): a path with '/' as it is, else on the image's PATH. Every
 * lookup resolves inside the rootfs (openat2 RESOLVE_IN_ROOT), so an
 * absolute symlink in the image points into the image. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "image/image.h"

#ifndef __NR_openat2
#define __NR_openat2 437
#endif
#define RESOLVE_NO_MAGICLINKS_ 0x02
#define RESOLVE_IN_ROOT_ 0x10

struct open_how_ {
  uint64_t flags;
  uint64_t mode;
  uint64_t resolve;
};

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static bool executable_in(int root, const char *path)
{
  struct open_how_ how = {.flags = O_PATH | O_CLOEXEC,
                          .resolve = RESOLVE_IN_ROOT_ | RESOLVE_NO_MAGICLINKS_};
  _cleanup_close_ int fd = (int)syscall(__NR_openat2, root, path, &how, sizeof how);
  struct stat st;
  return fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
         (st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH));
}

static const char *image_path(const struct image_config *c)
{
  for (size_t i = 0; c->env && c->env[i]; i++)
    if (strncmp(c->env[i], "PATH=", 5) == 0)
      return c->env[i] + 5;
  return DEFAULT_PATH;
}

static bool found(int root, const struct image_config *c, const char *prog)
{
  if (strchr(prog, '/'))
    return prog[0] == '/' && executable_in(root, prog);
  _cleanup_free_ char *path = cap_xstrdup(image_path(c));
  for (char *save = NULL, *dir = strtok_r(path, ":", &save); dir;
       dir = strtok_r(NULL, ":", &save)) {
    _cleanup_free_ char *full = cap_xasprintf("%s/%s", dir, prog);
    if (dir[0] == '/' && executable_in(root, full))
      return true;
  }
  return false;
}

char **image_command(const struct image_info *info, struct cap_error *err)
{
  const struct image_config *c = &info->config;
  size_t n = 0;
  for (size_t i = 0; c->entrypoint && c->entrypoint[i]; i++)
    n++;
  for (size_t i = 0; c->cmd && c->cmd[i]; i++)
    n++;
  if (n == 0 || !(c->entrypoint && c->entrypoint[0] ? c->entrypoint[0] : c->cmd[0])[0]) {
    cap_error_set(err, EINVAL,
                  "the image %s names no command (its config has no Entrypoint or Cmd); give "
                  "one with x-capsule.command",
                  info->ref ? info->ref : info->digest);
    return NULL;
  }
  char **argv = cap_xcalloc(n + 1, sizeof *argv);
  size_t k = 0;
  for (size_t i = 0; c->entrypoint && c->entrypoint[i]; i++)
    argv[k++] = cap_xstrdup(c->entrypoint[i]);
  for (size_t i = 0; c->cmd && c->cmd[i]; i++)
    argv[k++] = cap_xstrdup(c->cmd[i]);
  _cleanup_close_ int root =
      info->rootfs ? open(info->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
  if (root < 0 || !found(root, c, argv[0])) {
    cap_error_set(err, ENOENT,
                  "the image %s's entrypoint %s is not an executable file in the image (%s "
                  "on its PATH %s); fix the image's Entrypoint/Cmd",
                  info->ref ? info->ref : info->digest, argv[0],
                  strchr(argv[0], '/') ? "looked up as an absolute path, not" : "nor",
                  image_path(c));
    image_strv_free(argv);
    return NULL;
  }
  return argv;
}
