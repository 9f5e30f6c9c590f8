/* The deny-list, probed from inside the sandbox under whichever of the
 * build-time seccomp programs the run loads (seccomp_variants.sh picks
 * them: root or not, supervised or not, ipc_mode full or not). Each probe
 * calls the kernel directly with arguments the kernel itself would accept
 * (or answer with another errno than the filter's), so success or that
 * other errno means the filter let the call through. Prints "ok NAME" or
 * "ESCAPED NAME (...)"; exits 1 when any probe escaped.
 * Usage: seccomp_probe WRITABLE-DIR */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static int escaped;

/* want: the errno the filter answers (0: any failure will do) */
static void expect(const char *name, long r, int want)
{
  int e = errno;
  if (r >= 0 || (want && e != want)) {
    escaped = 1;
    printf("ESCAPED %s (returned %ld, errno %d)\n", name, r, r < 0 ? e : 0);
  } else {
    printf("ok %s\n", name);
  }
}

/* A foreign-ABI unshare in a child: killed (SIGSYS) or ENOSYS is blocked. */
static void foreign(const char *name, int i386)
{
  pid_t pid = fork();
  if (pid == 0) {
    long r;
    if (i386)
      __asm__ volatile("int $0x80" : "=a"(r) : "a"(310), "b"(CLONE_NEWUSER) : "memory");
    else
      r = syscall(0x40000000 | 272, CLONE_NEWUSER);
    _exit(r == 0 ? 3 : 0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 3) {
    escaped = 1;
    printf("ESCAPED %s\n", name);
  } else {
    printf("ok %s\n", name);
  }
}

/* PTRACE_TRACEME in a child: a traced probe would stop at its next signal. */
static void traceme(void)
{
  pid_t pid = fork();
  if (pid == 0)
    _exit(syscall(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0) == 0 ? 3 : errno == EPERM ? 0 : 4);
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    printf("ok ptrace-traceme\n");
  } else {
    escaped = 1;
    printf("ESCAPED ptrace-traceme (status %d)\n", st);
  }
}

static void setid_probes(const char *dir)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/setid-probe-%d", dir, (int)getpid());
  int fd = open(path, O_CREAT | O_WRONLY, 0755);
  if (fd >= 0)
    close(fd);
  expect("chmod-setuid", syscall(SYS_chmod, path, 04755), EPERM);
  expect("fchmodat-setgid", syscall(SYS_fchmodat, AT_FDCWD, path, 02755, 0), EPERM);
  expect("fchmodat2-setuid", syscall(452, AT_FDCWD, path, 04755, 0), 0);
  unlink(path);
  expect("open-creat-setuid", syscall(SYS_openat, AT_FDCWD, path, O_CREAT | O_WRONLY, 04755),
         EPERM);
  unlink(path);
  struct {
    unsigned long long flags, mode, resolve;
  } how = {O_CREAT | O_WRONLY, 04755, 0};
  expect("openat2-setuid", syscall(437, AT_FDCWD, path, &how, sizeof how), ENOSYS);
  unlink(path);
  expect("mknod-setuid", syscall(SYS_mknodat, AT_FDCWD, path, S_IFREG | 04755, 0), EPERM);
  unlink(path);
}

int main(int argc, char **argv)
{
  const char *dir = argc > 1 ? argv[1] : "/tmp";
  char buf[8] = "abc", dst[8];
  struct iovec l = {dst, 3}, r = {buf, 3};
  struct {
    unsigned bytes;
    int type;
    unsigned char h[128];
  } fh = {.bytes = 128};
  int mnt;
  expect("io_uring_setup", syscall(SYS_io_uring_setup, 1, NULL), EPERM);
  expect("io_uring_register", syscall(SYS_io_uring_register, -1, 0, NULL, 0), EPERM);
  expect("userfaultfd", syscall(SYS_userfaultfd, -1), EPERM);
  expect("bpf", syscall(SYS_bpf, 1000, NULL, 0), EPERM);
  expect("keyctl", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0), EPERM);
  expect("add_key", syscall(SYS_add_key, "user", "x", "y", 1, KEY_SPEC_PROCESS_KEYRING), EPERM);
  expect("request_key", syscall(SYS_request_key, "user", "nope", NULL, 0), EPERM);
  expect("process_vm_readv", syscall(SYS_process_vm_readv, getpid(), &l, 1, &r, 1, 0), EPERM);
  expect("process_vm_writev", syscall(SYS_process_vm_writev, getpid(), &r, 1, &l, 1, 0), EPERM);
  expect("kcmp", syscall(SYS_kcmp, getpid(), getpid(), 0, 0, 0), EPERM);
  expect("pidfd_getfd", syscall(SYS_pidfd_getfd, -1, 0, 0), EPERM);
  expect("name_to_handle_at", syscall(SYS_name_to_handle_at, AT_FDCWD, "/", &fh, &mnt, 0), EPERM);
  expect("open_by_handle_at", syscall(SYS_open_by_handle_at, AT_FDCWD, NULL, 0), EPERM);
  expect("perf_event_open", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0), EPERM);
  expect("unshare", syscall(SYS_unshare, CLONE_NEWUSER), EPERM);
  long c = syscall(SYS_clone, CLONE_NEWNS | SIGCHLD, NULL, NULL, NULL, 0);
  if (c == 0)
    _exit(0);
  if (c > 0)
    waitpid((pid_t)c, NULL, 0);
  expect("clone-newns", c, EPERM);
  expect("clone3", syscall(SYS_clone3, NULL, 0), ENOSYS);
  expect("setns", syscall(SYS_setns, -1, 0), EPERM);
  expect("tiocsti-high-bits", syscall(SYS_ioctl, 0, (1UL << 32) | TIOCSTI, "x"), EPERM);
  expect("socket-vsock", syscall(SYS_socket, 40, SOCK_STREAM, 0), EAFNOSUPPORT);
  expect("socket-unix-high-bits", syscall(SYS_socket, (1UL << 32) | AF_UNIX, SOCK_STREAM, 0),
         EAFNOSUPPORT);
  expect("socket-packet", syscall(SYS_socket, AF_PACKET, SOCK_RAW, 0), EAFNOSUPPORT);
  expect("socket-netlink-audit", syscall(SYS_socket, AF_NETLINK, SOCK_RAW, 9), EAFNOSUPPORT);
  expect("socket-raw-ip", syscall(SYS_socket, AF_INET, SOCK_RAW, 1), EPERM);
  /* inet protocols the kernel would load a module for (SCTP 132, DCCP 33
   * with SOCK_DCCP 6), also behind the register's upper half */
  expect("socket-inet-sctp", syscall(SYS_socket, AF_INET, SOCK_STREAM, 132), EPERM);
  expect("socket-inet6-dccp", syscall(SYS_socket, AF_INET6, 6, 33), EPERM);
  expect("socket-inet-sctp-high-bits", syscall(SYS_socket, AF_INET, SOCK_STREAM, (1UL << 32) | 132),
         EPERM);
  traceme();
  expect("syscall-above-table", syscall(1000), ENOSYS);
  foreign("x32-unshare", 0);
  foreign("i386-unshare", 1);
  if (geteuid() != getuid() || getenv("SETID_PROBES"))
    setid_probes(dir);
  return escaped;
}
