/* seccomp: a deny-list of the syscalls sandbox escapes and kernel attacks
 * are made of, answered with EPERM (ENOSYS for clone3, so libc falls back to
 * clone, whose namespace flags can be inspected). Foreign architectures
 * (x32, ia32 on x86_64) are killed by libseccomp's bad-arch default. */
#include <errno.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "sandbox/sandbox.h"

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

static const char *const denied_syscalls[] = {
    /* mount table and namespaces: the tree built for the tool is final */
    "mount", "umount", "umount2", "pivot_root", "chroot", "unshare", "setns", "open_tree",
    "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    /* other processes and the kernel */
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "bpf", "perf_event_open",
    "keyctl", "add_key", "request_key", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
    "syslog", "lookup_dcookie", "open_by_handle_at", "name_to_handle_at", "iopl", "ioperm",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname",
    "setdomainname", "vhangup", "nfsservctl", "uselib", "personality", "fanotify_init",
    NULL,
};

int seccomp_apply(const struct cap_spec *spec, struct cap_error *err)
{
  (void)spec;
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx)
    return cap_error_set(err, ENOMEM, "seccomp: cannot create a filter");
  int r = 0;
  for (size_t i = 0; denied_syscalls[i] && r == 0; i++) {
    int nr = seccomp_syscall_resolve_name(denied_syscalls[i]);
    if (nr == __NR_SCMP_ERROR)
      continue; /* not on this architecture */
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
  }
  /* clone with any namespace flag: one rule per flag, the rules OR together */
  static const uint64_t ns_flags[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,
                                      CLONE_NEWNET,  CLONE_NEWIPC, CLONE_NEWUTS,
                                      CLONE_NEWCGROUP, CLONE_NEWTIME};
  for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]) && r == 0; i++)
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                         SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
  /* clone3 passes its flags in memory seccomp cannot read: ENOSYS makes
   * libc fall back to clone */
  if (r == 0)
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  /* typing into the terminal of whoever started capsule */
  static const uint64_t ioctls[] = {TIOCSTI, TIOCLINUX};
  for (size_t i = 0; i < 2 && r == 0; i++)
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                         SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, ioctls[i]));
  /* kernel attack surface with no use to a tool: netlink, packet, raw */
  static const uint64_t families[] = {AF_NETLINK, AF_PACKET};
  for (size_t i = 0; i < 2 && r == 0; i++)
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
                         SCMP_A0(SCMP_CMP_EQ, families[i]));
  if (r == 0)
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
                         SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_RAW));
  if (r == 0)
    r = seccomp_load(ctx);
  seccomp_release(ctx);
  if (r < 0)
    return cap_error_errno(err, -r, "seccomp: cannot load the filter");
  return 0;
}
