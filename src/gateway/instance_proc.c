/* The keeper process's own set-up (instance_keeper.c): the descriptors
 * it keeps, its stdio, the server's argv; what it peeks at on a
 * connection. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "gateway/instance_int.h"

#ifndef __NR_close_range
#define __NR_close_range 436
#endif

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

void gw_keeper_close_all_but(int *keep, size_t n)
{
  qsort(keep, n, sizeof keep[0], cmp_int);
  unsigned from = 3;
  for (size_t i = 0; i < n; i++) {
    if ((unsigned)keep[i] > from)
      syscall(__NR_close_range, from, (unsigned)keep[i] - 1, 0);
    if ((unsigned)keep[i] + 1 > from)
      from = (unsigned)keep[i] + 1;
  }
  syscall(__NR_close_range, from, ~0U, 0);
}

/* The server's argv: a "./" command is the package's own program. */
char **gw_keeper_server_argv(const struct cap_spec *spec)
{
  struct cap_strv argv = {0};
  for (size_t i = 0; i < spec->runtime.command.len; i++) {
    const char *a = spec->runtime.command.v[i];
    if (i == 0 && strncmp(a, "./", 2) == 0) {
      _cleanup_free_ char *abs = cap_xasprintf("%s/%s", spec->package_dir, a + 2);
      cap_strv_push(&argv, abs);
    } else {
      cap_strv_push(&argv, a);
    }
  }
  char **cmd = cap_xcalloc(argv.len + 1, sizeof *cmd);
  memcpy(cmd, argv.v, argv.len * sizeof *cmd);
  return cmd;
}

/* stdin and stdout /dev/null (returned), stderr the log (*log; /dev/null
 * when it cannot be opened). */
int gw_keeper_stdio(const char *log_path, int *log)
{
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  *log = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (devnull < 0)
    _exit(1);
  if (*log < 0)
    *log = devnull;
  dup2(devnull, 0);
  dup2(devnull, 1);
  dup2(*log, 2);
  return devnull;
}

/* Whether what the server sent on a connection so far (HTTP/2 frames,
 * peeked: they stay for the caller) holds a GOAWAY: a server shutting
 * down says so, and a call on that connection would be cancelled. */
bool gw_keeper_says_goaway(int fd)
{
  unsigned char b[4096];
  ssize_t n = recv(fd, b, sizeof b, MSG_PEEK | MSG_DONTWAIT);
  for (ssize_t off = 0; n > 0 && off + 9 <= n;) {
    if (b[off + 3] == 0x7) /* the frame's type: GOAWAY */
      return true;
    off += 9 + ((ssize_t)b[off] << 16 | (ssize_t)b[off + 1] << 8 | b[off + 2]);
  }
  return false;
}

/* A line of the keeper's own in its log (its stderr) */
void gw_keeper_note(const char *fmt, ...)
{
  char msg[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  dprintf(STDERR_FILENO, "capsule keeper[%d]: %s\n", (int)getpid(), msg);
}

#ifdef CAPSULE_TEST_HOOKS
/* While CAPSULE_TEST_KEEPER_PAUSE names a file, waits before the status
 * is out, the keeper's pid in that name with ".pid" added */
void gw_keeper_test_pause(void)
{
  const char *pause = getenv("CAPSULE_TEST_KEEPER_PAUSE");
  if (!pause || !*pause)
    return;
  _cleanup_free_ char *pid = cap_xasprintf("%s.pid", pause);
  FILE *f = fopen(pid, "w");
  if (f) {
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
  }
  while (access(pause, F_OK) == 0) {
    struct timespec ts = {.tv_nsec = 20 * 1000000};
    nanosleep(&ts, NULL);
  }
}
#endif
