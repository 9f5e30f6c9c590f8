/* Ways around a command list (process.allowed_commands/blocked_commands)
 * that the sandbox must refuse: a program run through the dynamic loader
 * from a writable place, a copy run directly, and a program in a memfd
 * run with execveat(AT_EMPTY_PATH) or through /proc/self/fd. Prints ESCAPED (the program ran) or
 * BLOCKED and exits 0 for BLOCKED, 1 for ESCAPED. Usage: cmdlist WAY PROGRAM [DIR] */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOADER "/lib64/ld-linux-x86-64.so.2"

extern char **environ;

static int verdict(const char *way, int ran)
{
  printf("%s %s\n", ran ? "ESCAPED" : "BLOCKED", way);
  return ran ? 1 : 0;
}

/* Runs argv in a child, its output discarded; did it run and exit 0? */
static int runs(char *const argv[], int fd_exec)
{
  pid_t p = fork();
  if (p == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    if (fd_exec >= 0)
      syscall(SYS_execveat, fd_exec, "", argv, environ, AT_EMPTY_PATH);
    else
      execve(argv[0], argv, environ);
    _exit(127);
  }
  int status = 0;
  waitpid(p, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static int copy_into(int out, const char *src)
{
  int in = open(src, O_RDONLY | O_CLOEXEC);
  if (in < 0)
    return -1;
  char buf[65536];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, (size_t)n) != n)
      return -1;
  close(in);
  return n < 0 ? -1 : 0;
}

static int copy_to_dir(const char *src, const char *dir, char *path, size_t len)
{
  snprintf(path, len, "%s/cmdlist-copy-%d", dir, getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  if (fd < 0 || copy_into(fd, src) < 0)
    return -1;
  return close(fd);
}

static int memfd_with(const char *src, unsigned flags)
{
  int fd = (int)syscall(SYS_memfd_create, "cmdlist", flags);
  if (fd < 0 || copy_into(fd, src) < 0)
    return -1;
  return fd;
}

int main(int argc, char **argv)
{
  if (argc < 3)
    return 2;
  const char *way = argv[1], *prog = argv[2], *dir = argc > 3 ? argv[3] : "/tmp";
  char path[4096];
  if (!strcmp(way, "loader-copy") || !strcmp(way, "copy")) {
    if (copy_to_dir(prog, dir, path, sizeof path) < 0)
      return verdict(way, 0);
    char *through_loader[] = {LOADER, path, "--version", NULL};
    char *direct[] = {path, "--version", NULL};
    int ran = runs(!strcmp(way, "copy") ? direct : through_loader, -1);
    unlink(path);
    return verdict(way, ran);
  }
  if (!strcmp(way, "memfd-execveat") || !strcmp(way, "memfd-proc")) {
    int fd = memfd_with(prog, MFD_CLOEXEC);
    if (fd < 0)
      return verdict(way, 0);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    char *args[] = {!strcmp(way, "memfd-proc") ? path : (char *)prog, "--version", NULL};
    if (!strcmp(way, "memfd-proc"))
      fcntl(fd, F_SETFD, 0); /* the path must outlive the exec's own open */
    return verdict(way, runs(args, !strcmp(way, "memfd-execveat") ? fd : -1));
  }
  return 2;
}
