#include "core/procstat.h"

#include <fcntl.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "core/cleanup.h"

const char *cap_proc_stat(int at_fd, const char *path, char *buf, size_t size)
{
  _cleanup_close_ int fd = openat(at_fd, path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, size - 1) : -1;
  if (n <= 0)
    return NULL;
  buf[n] = '\0';
  const char *after = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
  return after && after[1] == ' ' ? after + 2 : NULL;
}
