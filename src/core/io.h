/* The one set of whole-buffer read and write loops over a descriptor:
 * interrupted calls (EINTR) are retried, short transfers continued. They
 * allocate nothing and keep no state: safe in the sandbox's child and in
 * a forked call too. Each returns 0 or -errno; the caller's own message
 * names the descriptor. */
#ifndef CAPSULE_CORE_IO_H
#define CAPSULE_CORE_IO_H

#include <stddef.h>
#include <sys/types.h>

enum cap_io_flags {
  /* send(2) with MSG_NOSIGNAL, so a peer that closed a socket is EPIPE and
   * no SIGPIPE; a descriptor that is not a socket (ENOTSOCK: a pipe) is
   * written with write(2), its SIGPIPE the caller's to block */
  CAP_IO_NOSIGPIPE = 1u << 0,
};

/* Writes all len bytes of buf to fd. A nonblocking fd that is full
 * (EAGAIN) is an error, as is a write of nothing (-EIO). */
int cap_write_all(int fd, const void *buf, size_t len, unsigned flags);

/* cap_write_all, except that a nonblocking fd that is full (EAGAIN) is
 * waited for, up to wait_ms each time it fills; a reader that takes nothing
 * for that long is -ETIMEDOUT. */
int cap_write_all_wait(int fd, const void *buf, size_t len, unsigned flags, int wait_ms);

/* read(2), retried when interrupted: how many bytes came, 0 at the end of
 * file, or -errno. */
ssize_t cap_read_some(int fd, void *buf, size_t len);

/* Reads exactly len bytes into buf: an end of file before them is -EIO. */
int cap_read_all(int fd, void *buf, size_t len);

/* Reads into buf until len bytes or the end of file; *got is how many came,
 * also when a read fails (-errno) after some did. */
int cap_read_upto(int fd, void *buf, size_t len, size_t *got);

/* One sendmsg(2) of buf on the unix socket sock with the descriptor fd
 * (SCM_RIGHTS), MSG_NOSIGNAL, retried when interrupted: the bytes sent
 * (the rest is the caller's to write), or -1 with errno. */
ssize_t cap_send_fd(int sock, const void *buf, size_t len, int fd);

/* One recvmsg(2) into buf (MSG_CMSG_CLOEXEC), as read(2) returns: a
 * descriptor that came with the bytes goes to *fd when *fd is -1; any
 * other is closed, so a peer cannot fill the table. */
ssize_t cap_recv_fd(int sock, void *buf, size_t len, int *fd);

#endif
