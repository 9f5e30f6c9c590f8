/* seccomp: a deny-list of the syscalls sandbox escapes and kernel attacks
 * are made of, answered with EPERM (ENOSYS for clone3, so libc falls back to
 * clone, whose namespace flags can be inspected); foreign architectures
 * (x32, ia32 on x86_64) are killed. The rules live in seccomp_gen.c, which
 * compiles them with libseccomp once, at build time; here the finished BPF
 * program is loaded with one call. */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include "sandbox/spawn_internal.h"
#include "seccomp_filter.h"

#define FILTER(f) {.len = (unsigned short)(sizeof f / sizeof f[0]), .filter = (struct sock_filter *)f}

int seccomp_apply(const struct cap_spec *spec, struct cap_error *err)
{
  /* ipc_mode "full" (Python multiprocessing and the like) keeps System V
   * semaphores; the default, "shared_memory_only", refuses them */
  struct sock_fprog prog = spec->process.ipc_full ? (struct sock_fprog)FILTER(capsule_seccomp_filter)
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
  return 0;
}
