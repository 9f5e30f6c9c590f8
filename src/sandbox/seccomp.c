/* seccomp: a deny-list of the syscalls sandbox escapes and kernel attacks
 * are made of, answered with EPERM (ENOSYS for clone3, so libc falls back to
 * clone, whose namespace flags can be inspected); foreign architectures
 * (x32, ia32 on x86_64) are killed. The rules live in seccomp_gen.c, which
 * compiles them with libseccomp once, at build time; here the finished BPF
 * program is loaded with one call.
 * Below Landlock ABI 9 a second, small filter follows (supervise.h): every
 * connect() goes to capsule's supervisor as a user notification, and unix
 * datagram sockets are refused, since their sendto/sendmsg name a
 * destination path that no filter could see. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "sandbox/spawn_internal.h"
#include "sandbox/supervise.h"
#include "seccomp_filter.h"

#define FILTER(f)                                                                                  \
  {                                                                                                \
    .len = (unsigned short)(sizeof f / sizeof f[0]), .filter = (struct sock_filter *)f             \
  }

#if defined(__x86_64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "capsule's notification filter knows x86_64 and aarch64 only"
#endif

/* the low 32 bits of argument i: what the kernel reads as an int */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define ARG_LOW(i) (offsetof(struct seccomp_data, args) + 8 * (i))
#else
#define ARG_LOW(i) (offsetof(struct seccomp_data, args) + 8 * (i) + 4)
#endif

/* What supervise_traps asks for, after the architecture check: connect ->
 * the supervisor, socket/socketpair(AF_UNIX, anything but SOCK_STREAM or
 * SOCK_SEQPACKET) -> ESOCKTNOSUPPORT (the kernel turns an AF_UNIX SOCK_RAW
 * into a datagram socket); the open family -> the supervisor; everything
 * else as the deny-list decided. Another architecture falls through to
 * ALLOW here: the deny-list kills it. */
static const struct sock_filter head[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_AUDIT_ARCH, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
};
static const struct sock_filter unix_sockets[] = {
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 1, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socketpair, 0, 6),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LOW(0)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 0, 4),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LOW(1)),
    BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xf),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_STREAM, 1, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_SEQPACKET, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ESOCKTNOSUPPORT),
};
static const int open_family[] = {
#ifdef __NR_open
    __NR_open, __NR_creat,
#endif
    __NR_openat, __NR_openat2};

#define MAX_NOTIFY_FILTER 32

static size_t append(struct sock_filter *out, size_t n, const struct sock_filter *part, size_t len)
{
  memcpy(out + n, part, len * sizeof *part);
  return n + len;
}

/* nr -> the supervisor: two instructions */
static size_t notify_on(struct sock_filter *out, size_t n, int nr)
{
  out[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1);
  out[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
  return n;
}

static size_t build_notify_filter(struct sock_filter *out, unsigned traps)
{
  size_t n = append(out, 0, head, ARRAY_SIZE(head));
  if (traps & SUPERVISE_TRAP_OPEN)
    for (size_t i = 0; i < ARRAY_SIZE(open_family); i++)
      n = notify_on(out, n, open_family[i]);
  if (!(traps & SUPERVISE_TRAP_CONNECT)) {
    out[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    return n;
  }
  n = notify_on(out, n, __NR_connect);
  return append(out, n, unix_sockets, ARRAY_SIZE(unix_sockets));
}

int supervise_load_filter(struct cap_error *err)
{
  struct sock_filter filter[MAX_NOTIFY_FILTER];
  struct sock_fprog prog = {.len = (unsigned short)build_notify_filter(filter, supervise_traps),
                            .filter = filter};
  /* WAIT_KILLABLE_RECV (5.19): once the supervisor holds the request, a
   * signal cannot restart the connect or open it is performing */
  long listener =
      syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
              SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &prog);
  if (listener < 0 && errno == EINVAL)
    listener =
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
  if (listener < 0)
    return cap_error_errno(err, errno, "seccomp: cannot load the supervisor's notification filter");
  int r = supervise_send_listener((int)listener, err);
  close((int)listener);
  return r;
}

char *sandbox_seccomp_oci_rules(bool semaphores)
{
  return semaphores ? cap_xasprintf("[%s,%s]", capsule_seccomp_oci_syscalls,
                                    capsule_seccomp_oci_semaphores)
                    : cap_xasprintf("[%s]", capsule_seccomp_oci_syscalls);
}

int seccomp_apply(const struct cap_spec *spec, bool refuse_setid, struct cap_error *err)
{
  /* ipc_mode "full" (Python multiprocessing and the like) keeps System V
   * semaphores; the default, "shared_memory_only", refuses them */
  struct sock_fprog prog = spec->process.ipc_full
                               ? (struct sock_fprog)FILTER(capsule_seccomp_filter)
                               : (struct sock_fprog)FILTER(capsule_seccomp_filter_no_semaphores);
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
    return cap_error_errno(err, errno, "seccomp: cannot load the filter");
  /* a command list in force: no executable memfd, no execveat of an fd
   * (seccomp_gen.c); stacked as a second filter */
  if (spec->process.allowed_commands.len || spec->process.blocked_commands.len) {
    struct sock_fprog cmds = FILTER(capsule_seccomp_filter_command_list);
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &cmds, 0, 0) < 0)
      return cap_error_errno(err, errno, "seccomp: cannot load the command-list filter");
  }
  /* as root, the tool's files in a writable grant are the caller's
   * (idmap.c): no setuid or setgid mode bits (seccomp_gen.c) */
  if (refuse_setid) {
    struct sock_fprog setid = FILTER(capsule_seccomp_filter_no_setid);
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &setid, 0, 0) < 0)
      return cap_error_errno(err, errno, "seccomp: cannot load the setuid-mode filter");
  }
  return supervise_pass_fd >= 0 ? supervise_load_filter(err) : 0;
}
