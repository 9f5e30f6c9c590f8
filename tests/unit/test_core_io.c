/* Unit tests for src/core/io.c: the whole-buffer read and write loops
 * (short transfers continued, the end of file, a full nonblocking pipe
 * with and without waiting, a closed socket without SIGPIPE). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/io.h"
#include "unit.h"

#define BIG (1u << 20) /* more than a pipe holds: the writes are short */

static void test_write_all_short_writes(void)
{
  int p[2];
  CHECK(pipe2(p, O_CLOEXEC) == 0);
  pid_t pid = fork();
  if (pid == 0) { /* reads all of it, a little at a time, and says how much */
    close(p[1]);
    size_t total = 0;
    char buf[1000];
    ssize_t n;
    while ((n = read(p[0], buf, sizeof buf)) > 0)
      total += (size_t)n;
    _exit(total == BIG ? 0 : 1);
  }
  close(p[0]);
  char *buf = calloc(1, BIG);
  CHECK(cap_write_all(p[1], buf, BIG, 0) == 0);
  close(p[1]);
  int st = -1;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  free(buf);
}

static void test_write_full_nonblocking(void)
{
  int p[2];
  CHECK(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0);
  char *buf = calloc(1, BIG);
  CHECK(cap_write_all(p[1], buf, BIG, 0) == -EAGAIN);             /* nobody reads: no wait */
  CHECK(cap_write_all_wait(p[1], buf, BIG, 0, 10) == -ETIMEDOUT); /* still nobody */
  close(p[0]);
  signal(SIGPIPE, SIG_IGN); /* a pipe is written as is: its SIGPIPE is the caller's to block */
  CHECK(cap_write_all(p[1], "x", 1, CAP_IO_NOSIGPIPE) == -EPIPE);
  signal(SIGPIPE, SIG_DFL);
  close(p[1]);
  free(buf);
}

static void test_write_closed_socket_no_sigpipe(void)
{
  int s[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s) == 0);
  close(s[1]);
  CHECK(cap_write_all(s[0], "gone", 4, CAP_IO_NOSIGPIPE) == -EPIPE); /* and still running */
  close(s[0]);
}

static void test_read_all_and_upto(void)
{
  int p[2];
  CHECK(pipe2(p, O_CLOEXEC) == 0);
  CHECK(write(p[1], "abcdef", 6) == 6);
  char buf[16] = {0};
  CHECK(cap_read_all(p[0], buf, 4) == 0);
  CHECK(memcmp(buf, "abcd", 4) == 0);
  close(p[1]);
  CHECK(cap_read_all(p[0], buf, 4) == -EIO); /* two bytes, then the end */
  CHECK(pipe2(p, O_CLOEXEC) == 0);
  CHECK(write(p[1], "xyz", 3) == 3);
  close(p[1]);
  size_t got = 99;
  CHECK(cap_read_upto(p[0], buf, sizeof buf, &got) == 0);
  CHECK(got == 3 && memcmp(buf, "xyz", 3) == 0);
  close(p[0]);
  got = 99;
  CHECK(cap_read_upto(p[0], buf, sizeof buf, &got) == -EBADF);
  CHECK(got == 0);
}

static void setup(void)
{
  signal(SIGPIPE, SIG_DFL); /* a SIGPIPE would end the test: none may come */
}

UNIT_MAIN(setup, test_write_all_short_writes, test_write_full_nonblocking,
          test_write_closed_socket_no_sigpipe, test_read_all_and_upto)
