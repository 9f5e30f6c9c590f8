/* More of the hostile tool (hostile.c): kernel interfaces a uid-65534 tool
 * would try next. Each prints "BLOCKED: ..." (exit 0) when the attempt
 * fails as it must and "ESCAPED: ..." (exit 1) when it works. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernel_probes.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

static int blocked(const char *what)
{
  printf("BLOCKED: %s (%s)\n", what, strerror(errno));
  fflush(stdout);
  return 0;
}

static int escaped(const char *what)
{
  printf("ESCAPED: %s\n", what);
  fflush(stdout);
  return 1;
}

/* pid 1's memory, written through /proc: it holds the sandbox's
 * connector and outlives the tool */
static int init_mem(void)
{
  int fd = open("/proc/1/mem", O_RDWR | O_CLOEXEC);
  if (fd >= 0)
    return escaped("opened /proc/1/mem read-write");
  fd = open("/proc/1/mem", O_RDONLY | O_CLOEXEC);
  if (fd >= 0)
    return escaped("opened /proc/1/mem");
  return blocked("/proc/1/mem");
}

/* a read-only file mapped shared, written through /proc/self/mem (the
 * kernel's FOLL_FORCE): the file on the host must not change */
static int self_mem_shared(const char *path)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return blocked("open the read-only file");
  char before[64] = "", after[64] = "";
  ssize_t n = pread(fd, before, sizeof before - 1, 0);
  void *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
  int mem = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  if (p == MAP_FAILED || mem < 0 || n <= 0)
    return blocked("mapping or /proc/self/mem");
  ssize_t w = pwrite(mem, "PWNED", 5, (off_t)(uintptr_t)p);
  if (pread(fd, after, sizeof after - 1, 0) > 0 && strncmp(after, "PWNED", 5) == 0)
    return escaped("wrote a read-only file through /proc/self/mem");
  errno = w < 0 ? errno : EACCES;
  return blocked("a shared read-only mapping written through /proc/self/mem");
}

/* every process the tool can see: its root, cwd and descriptors (a
 * helper of capsule's in another mount namespace would show the host) */
static int proc_roots(const char *host_path)
{
  DIR *d = opendir("/proc");
  if (!d)
    return blocked("/proc");
  int bad = 0, seen = 0;
  pid_t self = getpid();
  for (struct dirent *e; (e = readdir(d));) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0 || pid == self)
      continue;
    seen++;
    char path[512];
    snprintf(path, sizeof path, "/proc/%ld/root%s", pid, host_path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      printf("ESCAPED: read %s\n", path);
      bad = 1;
      close(fd);
    }
    snprintf(path, sizeof path, "/proc/%ld/fd", pid);
    DIR *fds = opendir(path);
    if (fds) {
      for (struct dirent *f; (f = readdir(fds));) {
        if (f->d_name[0] == '.')
          continue;
        char link[1024], target[256] = "";
        snprintf(link, sizeof link, "%s/%s", path, f->d_name);
        ssize_t l = readlink(link, target, sizeof target - 1);
        int ffd = open(link, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (l > 0 || ffd >= 0) {
          printf("ESCAPED: pid %ld's descriptor %s (%s)\n", pid, f->d_name, target);
          bad = 1;
        }
        if (ffd >= 0)
          close(ffd);
      }
      closedir(fds);
    }
  }
  closedir(d);
  if (bad)
    return 1;
  printf("(%d other processes looked at)\n", seen);
  errno = EACCES;
  return blocked("other processes' roots and descriptors");
}

/* descriptors the tool was started with beyond 0-2 (serve's listeners,
 * the caller's): none */
static int open_fds(void)
{
  DIR *d = opendir("/proc/self/fd");
  if (!d)
    return blocked("/proc/self/fd");
  int bad = 0;
  for (struct dirent *e; (e = readdir(d));) {
    int fd = atoi(e->d_name);
    if (e->d_name[0] == '.' || fd <= 2 || fd == dirfd(d))
      continue;
    char link[64], target[256] = "";
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    if (readlink(link, target, sizeof target - 1) < 0)
      continue;
    printf("ESCAPED: inherited descriptor %d: %s\n", fd, target);
    bad = 1;
  }
  closedir(d);
  errno = EBADF;
  return bad ? 1 : blocked("no descriptor beyond 0-2");
}

/* signals to the sandbox's init (which kills the namespace when it goes)
 * by every route: kill, pidfd, SIGIO through F_SETOWN */
static int signal_init(void)
{
  if (kill(1, SIGSTOP) == 0 || kill(1, SIGTERM) == 0)
    return escaped("signalled pid 1 with kill");
  int pidfd = (int)syscall(SYS_pidfd_open, 1, 0);
  if (pidfd >= 0 && syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, NULL, 0) == 0)
    return escaped("signalled pid 1 through a pidfd");
  int p[2];
  if (pipe2(p, O_CLOEXEC) == 0 && fcntl(p[0], F_SETOWN, 1) == 0 &&
      fcntl(p[0], F_SETSIG, SIGTERM) == 0 && fcntl(p[0], F_SETFL, O_ASYNC | O_NONBLOCK) == 0) {
    if (write(p[1], "x", 1) < 0) {
    }
    usleep(100000);
  }
  /* pid 1 alive and not stopped: its state in /proc/1/stat */
  char buf[512] = "";
  int fd = open("/proc/1/stat", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
  char *rp = n > 0 ? strrchr(buf, ')') : NULL;
  if (!rp || rp[2] == 'T' || rp[2] == 'Z' || rp[2] == 'X')
    return escaped("pid 1 was stopped or killed");
  errno = EPERM;
  return blocked("signals to pid 1 (kill, pidfd, SIGIO)");
}

/* TIOCLINUX on every terminal the tool might hold */
static int tioclinux(void)
{
  int fds[4] = {0, 1, 2, open("/dev/tty", O_RDWR | O_CLOEXEC)};
  for (int i = 0; i < 4; i++) {
    if (fds[i] < 0)
      continue;
    char sub[2] = {6 /* TIOCL_GETSHIFTSTATE */, 0};
    if (ioctl(fds[i], TIOCLINUX, sub) == 0)
      return escaped("TIOCLINUX on a terminal");
    if (errno != EPERM && errno != ENOTTY && errno != EINVAL) {
      printf("ESCAPED: TIOCLINUX failed with %s, not the filter's EPERM\n", strerror(errno));
      return 1;
    }
  }
  errno = EPERM;
  return blocked("TIOCLINUX");
}

/* open_by_handle_at with a handle made up for the root directory of the
 * file system a granted directory lives on (the "shocker" attack) */
static int by_handle(const char *granted)
{
  struct {
    unsigned int bytes;
    int type;
    unsigned char f[8];
  } h = {.bytes = 8, .type = 1 /* FILEID_INO32_GEN */, .f = {2, 0, 0, 0, 0, 0, 0, 0}};
  int mfd = open(granted, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (mfd < 0)
    return blocked("open the granted directory");
  int mount_id;
  struct {
    unsigned int bytes;
    int type;
    unsigned char f[128];
  } own = {.bytes = 128};
  long r = syscall(SYS_name_to_handle_at, AT_FDCWD, granted, &own, &mount_id, 0);
  if (r == 0)
    printf("(name_to_handle_at worked: handle type %d)\n", own.type);
  int fd = (int)syscall(SYS_open_by_handle_at, mfd, &h, O_RDONLY | O_DIRECTORY);
  if (fd >= 0)
    return escaped("open_by_handle_at opened the root of a granted file system");
  if (errno != EPERM) {
    printf("ESCAPED: open_by_handle_at failed with %s, not EPERM\n", strerror(errno));
    return 1;
  }
  return blocked("open_by_handle_at");
}

/* userfaultfd in user mode only (the kernel allows it to anyone) */
static int uffd(void)
{
  long r = syscall(SYS_userfaultfd, 1 /* UFFD_USER_MODE_ONLY */ | O_CLOEXEC);
  if (r >= 0)
    return escaped("userfaultfd");
  if (errno != EPERM) {
    printf("ESCAPED: userfaultfd failed with %s, not the filter's EPERM\n", strerror(errno));
    return 1;
  }
  return blocked("userfaultfd");
}

/* a program copied into a memfd, run by its /proc/self/fd path (execve,
 * not execveat): with a command list in force it must not run */
static int memfd_exec(const char *program)
{
  int src = open(program, O_RDONLY | O_CLOEXEC);
  unsigned flags[] = {MFD_EXEC, 0, 0x0008U /* MFD_NOEXEC_SEAL */};
  for (int i = 0; i < 3 && src >= 0; i++) {
    int m = (int)syscall(SYS_memfd_create, "x", flags[i]);
    if (m < 0)
      continue;
    char buf[65536];
    ssize_t n;
    lseek(src, 0, SEEK_SET);
    while ((n = read(src, buf, sizeof buf)) > 0)
      if (write(m, buf, (size_t)n) != n)
        break;
    fchmod(m, 0755); /* refused by the seal when MFD_NOEXEC_SEAL */
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", m);
    pid_t pid = fork();
    if (pid == 0) {
      int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      dup2(null, 2);
      execl(path, program, "--version", (char *)NULL);
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      printf("ESCAPED: %s ran from a memfd (flags %#x)\n", program, flags[i]);
      return 1;
    }
    close(m);
  }
  errno = EACCES;
  return blocked("a program in a memfd");
}

/* /proc/sys and /proc/sysrq-trigger */
static int proc_sys(void)
{
  static const char *const files[] = {"/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger",
                                      "/proc/sys/kernel/modprobe"};
  for (int i = 0; i < 3; i++) {
    int fd = open(files[i], O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      printf("ESCAPED: %s opened for writing\n", files[i]);
      return 1;
    }
  }
  return blocked("/proc/sys and /proc/sysrq-trigger");
}

/* a filtered call (unshare of a user namespace) through the other ABIs
 * an x86-64 process can reach: x32 (the syscall number's bit 30) and
 * i386 (int 0x80); the filter must answer for them as for the native
 * one, or kill the process */
static int foreign_abi(void)
{
#if defined(__x86_64__)
  for (int abi = 0; abi < 2; abi++) {
    pid_t pid = fork();
    if (pid == 0) {
      long r;
      if (abi == 0) {
        r = syscall(0x40000000L | 272 /* x32 unshare */, 0x10000000L /* CLONE_NEWUSER */);
      } else {
        __asm__ volatile("int $0x80"
                         : "=a"(r)
                         : "a"(310L /* i386 unshare */), "b"(0x10000000L)
                         : "memory");
        if (r < 0)
          errno = (int)-r, r = -1;
      }
      _exit(r == 0 ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 1) {
      printf("ESCAPED: unshare(CLONE_NEWUSER) through the %s ABI\n", abi ? "i386" : "x32");
      return 1;
    }
    printf("(%s ABI: %s)\n", abi ? "i386" : "x32", WIFSIGNALED(status) ? "killed" : "refused");
  }
  errno = EPERM;
  return blocked("filtered calls through the x32 and i386 ABIs");
#else
  errno = ENOSYS;
  return blocked("no foreign ABI on this architecture");
#endif
}

/* file capabilities (security.capability) and trusted.* attributes on a
 * file the tool makes in a writable grant: as root such a file is the
 * caller's on the host, and a capability there would run with it */
static int xattrs(const char *dir)
{
  char path[512];
  snprintf(path, sizeof path, "%s/fcaps-%d", dir, (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  if (fd < 0)
    return blocked("create a file in the writable grant");
  close(fd);
  /* VFS_CAP_REVISION_2: cap_setuid (bit 7) permitted and effective */
  uint32_t cap[5] = {0x02000001u, 1u << 7, 0, 0, 0};
  long r1 = syscall(SYS_setxattr, path, "security.capability", cap, sizeof cap, 0);
  int e1 = errno;
  long r2 = syscall(SYS_setxattr, path, "trusted.overlay.opaque", "y", 1, 0);
  unlink(path);
  if (r1 == 0)
    return escaped("set security.capability on a file in a writable grant");
  if (r2 == 0)
    return escaped("set a trusted.* attribute");
  errno = e1;
  return blocked("file capabilities and trusted.* attributes");
}

/* a Covenant agent (serve_fds.sh): one line in, its descriptors beyond
 * 0-2 and whether pid 1's can be listed, as one JSON line out */
static int agent_fds(void)
{
  char line[4096];
  if (!fgets(line, sizeof line, stdin))
    return 2;
  printf("{\"extra\": \"");
  DIR *d = opendir("/proc/self/fd");
  for (struct dirent *e; d && (e = readdir(d));) {
    int fd = atoi(e->d_name);
    char link[64], target[256] = "";
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    if (e->d_name[0] != '.' && fd > 2 && fd != dirfd(d) &&
        readlink(link, target, sizeof target - 1) >= 0)
      printf("%d=%s ", fd, strchr(target, '"') ? "?" : target);
  }
  if (d)
    closedir(d);
  DIR *init = opendir("/proc/1/fd");
  printf("\", \"init_fds_visible\": %s}\n", init ? "true" : "false");
  if (init)
    closedir(init);
  return 0;
}

int kernel_probe(int argc, char **argv)
{
  if (!strcmp(argv[1], "agent-fds"))
    return agent_fds();
  const char *cmd = argv[1], *arg = argc > 2 ? argv[2] : "";
  if (!strcmp(cmd, "init-mem"))
    return init_mem();
  if (!strcmp(cmd, "self-mem-shared"))
    return self_mem_shared(arg);
  if (!strcmp(cmd, "proc-roots"))
    return proc_roots(arg);
  if (!strcmp(cmd, "open-fds"))
    return open_fds();
  if (!strcmp(cmd, "signal-init"))
    return signal_init();
  if (!strcmp(cmd, "tioclinux"))
    return tioclinux();
  if (!strcmp(cmd, "by-handle"))
    return by_handle(arg);
  if (!strcmp(cmd, "userfaultfd"))
    return uffd();
  if (!strcmp(cmd, "memfd-exec"))
    return memfd_exec(arg);
  if (!strcmp(cmd, "proc-sys"))
    return proc_sys();
  if (!strcmp(cmd, "foreign-abi"))
    return foreign_abi();
  if (!strcmp(cmd, "xattrs"))
    return xattrs(arg);
  return -1;
}
