#include "core/io.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
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

/* Room for one descriptor, aligned as a control message */
union one_fd {
  struct cmsghdr h;
  char space[CMSG_SPACE(sizeof(int))];
};

ssize_t cap_send_fd(int sock, const void *buf, size_t len, int fd)
{
  union one_fd u = {0};
  struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
  struct msghdr mh = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.space, .msg_controllen = sizeof u.space};
  struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof fd);
  ssize_t n;
  while ((n = sendmsg(sock, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
    ;
  return n;
}

ssize_t cap_recv_fd(int sock, void *buf, size_t len, int *fd)
{
  union one_fd u;
  struct iovec iov = {.iov_base = buf, .iov_len = len};
  struct msghdr mh = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.space, .msg_controllen = sizeof u.space};
  ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
  for (struct cmsghdr *c = n >= 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
      continue;
    size_t fds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < fds; i++) {
      int got;
      memcpy(&got, CMSG_DATA(c) + i * sizeof got, sizeof got);
      if (*fd < 0)
        *fd = got;
      else
        close(got);
    }
  }
  return n;
}
