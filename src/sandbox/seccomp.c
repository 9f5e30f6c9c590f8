/* seccomp: a deny-list of the syscalls sandbox escapes and kernel attacks
 * are made of, answered with EPERM (ENOSYS for clone3, so libc falls back to
 * clone, whose namespace flags can be inspected); foreign architectures
 * (x32, ia32 on x86_64) are killed. The rules live in seccomp_gen.c, which
 * compiles them with libseccomp once, at build time, into one program per
 * combination of what may apply; here the finished BPF program is loaded
 * with one call.
 * Below Landlock ABI 9 that program also holds the supervisor's rules
 * (supervise.h): every connect() goes to capsule's supervisor as a user
 * notification, and unix datagram sockets are refused, since their
 * sendto/sendmsg name a destination path that no filter could see. With
 * exec_strategy "supervised" it holds the open family's rules too (open,
 * openat, openat2, creat: to the same supervisor, supervise_open.c). */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/buf.h"
#include "sandbox/spawn_internal.h"
#include "sandbox/supervise.h"
#include "seccomp_filter.h"

#define FILTER(f)                                                                                  \
  {                                                                                                \
    .len = (unsigned short)(sizeof f / sizeof f[0]), .filter = (struct sock_filter *)f             \
  }

/* The merged filter with the supervisor's rules, its listener sent to the
 * supervisor. */
static int load_with_listener(const struct sock_fprog *prog, struct cap_error *err)
{
  /* WAIT_KILLABLE_RECV (5.19): once the supervisor holds the request, a
   * signal cannot restart the connect or open it is performing */
  long listener =
      syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
              SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, prog);
  if (listener < 0 && errno == EINVAL)
    listener =
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, prog);
  if (listener < 0)
    return cap_error_errno(err, errno, "seccomp: cannot load the filter with its listener");
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
  /* one program for what applies (seccomp_gen.c): ipc_mode "full" (Python
   * multiprocessing and the like) keeps System V semaphores, the default,
   * "shared_memory_only", refuses them; as root the tool's files in a
   * writable grant are the caller's (idmap.c): no setuid or setgid mode
   * bits; below Landlock ABI 9 the unix-socket supervisor's rules; with
   * exec_strategy "supervised" the open family's (supervise_traps) */
  bool notify = supervise_pass_fd >= 0;
  unsigned v =
      (spec->process.ipc_full ? 0 : CAPSULE_SECCOMP_DENY_SEMAPHORES) |
      (refuse_setid ? CAPSULE_SECCOMP_NO_SETID : 0) |
      (notify && (supervise_traps & SUPERVISE_TRAP_CONNECT) ? CAPSULE_SECCOMP_NOTIFY : 0) |
      (notify && (supervise_traps & SUPERVISE_TRAP_OPEN) ? CAPSULE_SECCOMP_NOTIFY_OPEN : 0);
  struct sock_fprog prog = {.len = capsule_seccomp_mains[v].len,
                            .filter = (struct sock_filter *)capsule_seccomp_mains[v].filter};
  int r = notify ? load_with_listener(&prog, err) : 0;
  if (r < 0)
    return r;
  if (!notify && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
    return cap_error_errno(err, errno, "seccomp: cannot load the filter");
  /* a command list in force: no executable memfd, no execveat of an fd
   * (seccomp_gen.c); stacked as a second filter */
  if (spec->process.allowed_commands.len || spec->process.blocked_commands.len) {
    struct sock_fprog cmds = FILTER(capsule_seccomp_filter_command_list);
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &cmds, 0, 0) < 0)
      return cap_error_errno(err, errno, "seccomp: cannot load the command-list filter");
  }
  return 0;
}
