#include "core/fs.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

static int try_mkdir(const char *path, mode_t mode)
{
  return mkdir(path, mode) == 0 || errno == EEXIST ? 0 : -errno;
}

int cap_mkdir_p(const char *path, mode_t mode)
{
  char buf[PATH_MAX];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf)
    return -ENAMETOOLONG;
  memcpy(buf, path, n + 1);
  int r = try_mkdir(buf, mode);
  if (r != -ENOENT)
    return r;
  /* back, cutting at each '/', to the first ancestor that exists or is made */
  char *end = buf + n;
  do {
    char *slash = memrchr(buf, '/', (size_t)(end - buf));
    if (!slash || slash == buf)
      return -ENOENT;
    *slash = '\0';
    end = slash;
    r = try_mkdir(buf, mode);
  } while (r == -ENOENT);
  /* forward: each cut mended in turn, its directory made */
  while (r == 0 && end < buf + n) {
    *end = '/';
    r = try_mkdir(buf, mode);
    end += 1 + strlen(end + 1);
  }
  return r;
}
