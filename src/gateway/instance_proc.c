/* The keeper process's own set-up (instance_keeper.c): the descriptors
 * it keeps, its stdio, the server's argv. */
#include <fcntl.h>
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
