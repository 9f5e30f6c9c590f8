#include "core/io.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

static ssize_t write_once(int fd, const char *p, size_t len, unsigned flags)
{
  if (!(flags & CAP_IO_NOSIGPIPE))
    return write(fd, p, len);
  ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
  return n < 0 && errno == ENOTSOCK ? write(fd, p, len) : n;
}

/* wait_ms < 0: EAGAIN is an error like any other. */
static int write_all(int fd, const char *p, size_t len, unsigned flags, int wait_ms)
{
  while (len) {
    ssize_t n = write_once(fd, p, len, flags);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN && wait_ms >= 0) {
      struct pollfd pfd = {.fd = fd, .events = POLLOUT};
      int r = poll(&pfd, 1, wait_ms);
      if (r > 0)
        continue;
      return r == 0 ? -ETIMEDOUT : -errno;
    }
    if (n <= 0)
      return n < 0 ? -errno : -EIO;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int cap_write_all(int fd, const void *buf, size_t len, unsigned flags)
{
  return write_all(fd, buf, len, flags, -1);
}

int cap_write_all_wait(int fd, const void *buf, size_t len, unsigned flags, int wait_ms)
{
  return write_all(fd, buf, len, flags, wait_ms < 0 ? 0 : wait_ms);
}

ssize_t cap_read_some(int fd, void *buf, size_t len)
{
  ssize_t n;
  while ((n = read(fd, buf, len)) < 0 && errno == EINTR)
    ;
  return n < 0 ? -errno : n;
}

int cap_read_upto(int fd, void *buf, size_t len, size_t *got)
{
  char *p = buf;
  *got = 0;
  while (*got < len) {
    ssize_t n = cap_read_some(fd, p + *got, len - *got);
    if (n <= 0)
      return (int)n;
    *got += (size_t)n;
  }
  return 0;
}

int cap_read_all(int fd, void *buf, size_t len)
{
  size_t got;
  int r = cap_read_upto(fd, buf, len, &got);
  return r < 0 ? r : got < len ? -EIO : 0;
}
