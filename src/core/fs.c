#include "core/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cap_fd_nlink(int fd, nlink_t *out)
{
  struct statx sx;
  if (statx(fd, "", AT_EMPTY_PATH, STATX_NLINK, &sx) == 0 && (sx.stx_mask & STATX_NLINK)) {
    *out = sx.stx_nlink;
    return 0;
  }
  struct stat sb; /* no statx (ENOSYS, a filter's EPERM), or no count from it */
  if (fstat(fd, &sb) < 0)
    return -errno;
  *out = sb.st_nlink;
  return 0;
}

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

static bool cache_has(const struct cap_path_cache *c, const char *p, size_t len)
{
  for (size_t i = 0; i < c->n; i++)
    if (strlen(c->text + c->off[i]) == len && memcmp(c->text + c->off[i], p, len) == 0)
      return true;
  return false;
}

static void cache_add(struct cap_path_cache *c, const char *p, size_t len)
{
  if (c->n == sizeof c->off / sizeof c->off[0] || c->used + len + 1 > sizeof c->text)
    return;
  memcpy(c->text + c->used, p, len);
  c->text[c->used + len] = '\0';
  c->off[c->n++] = (unsigned short)c->used;
  c->used += len + 1;
}

/* An absolute path of plain components only (no ".", "..", empty ones or
 * a trailing slash): what the cached walk takes. */
static bool plain_path(const char *p, size_t len)
{
  if (p[0] != '/' || len < 2 || len >= PATH_MAX || p[len - 1] == '/')
    return false;
  for (size_t i = 0; i < len; i++)
    if (p[i] == '/' && (p[i + 1] == '/' ||
                        (p[i + 1] == '.' && (p[i + 2] == '/' || p[i + 2] == '\0' ||
                                             (p[i + 2] == '.' && (p[i + 3] == '/' || !p[i + 3]))))))
      return false;
  return true;
}

int cap_realpath_cached(struct cap_path_cache *cache, const char *path, char out[PATH_MAX])
{
  size_t len = strlen(path);
  if (!plain_path(path, len))
    return realpath(path, out) ? 0 : -errno;
  char prefix[PATH_MAX], one;
  for (size_t end = 1; end <= len; end++) {
    if (end < len && path[end] != '/')
      continue;
    if (cache_has(cache, path, end))
      continue;
    memcpy(prefix, path, end);
    prefix[end] = '\0';
    if (readlink(prefix, &one, 1) >= 0) /* a link: resolved the long way */
      return realpath(path, out) ? 0 : -errno;
    if (errno != EINVAL)
      return -errno;
    cache_add(cache, path, end);
  }
  memcpy(out, path, len + 1);
  return 0;
}
