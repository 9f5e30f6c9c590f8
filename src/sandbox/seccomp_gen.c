/* Build-time generator of capsule's seccomp filter: builds the deny-list
 * with libseccomp for the build machine's architecture and writes it as a C
 * array (seccomp_filter.h), so the sandbox loads a finished BPF program with
 * one prctl instead of compiling the filter on every run.
 * Usage: seccomp_gen OUTPUT.h */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <linux/sched.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

static const char *const denied_syscalls[] = {
    /* mount table and namespaces: the tree built for the tool is final */
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    /* other processes and the kernel */
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "quotactl_fd",
    "syslog",
    "lookup_dcookie",
    "open_by_handle_at",
    "name_to_handle_at",
    "iopl",
    "ioperm",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "sethostname",
    "setdomainname",
    "vhangup",
    "nfsservctl",
    "uselib",
    "personality",
    "fanotify_init",
    NULL,
};

/* ipc_mode "shared_memory_only": System V semaphores refused too. */
static const char *const semaphore_syscalls[] = {"semget", "semop", "semtimedop", "semctl", NULL};

/* Address families: an allow-list. AF_UNIX; AF_INET/AF_INET6 in every
 * network mode (in `blocked` the namespace holds only loopback, which tools
 * use to talk to themselves; Landlock bounds its TCP ports); AF_NETLINK
 * with NETLINK_ROUTE alone (getifaddrs), read-only for a tool without
 * capabilities. Everything else (vsock, packet, bluetooth, alg, xdp, can,
 * tipc, the other netlink protocols, ...) answers EAFNOSUPPORT, as on a
 * kernel built without it. The kernel reads these arguments as 32-bit ints
 * while seccomp sees the whole register, so every comparison must hold
 * whatever the upper half holds: exact matches for the values below
 * FAMILY_LIMIT (the kernel's AF_MAX is 46 in 6.x; the slack covers families
 * added later), and anything at or above it, which includes every value
 * with a bit set in the upper half, refused. The protocol test is "not 0"
 * over 64 bits: a non-zero upper half is refused too. */
#define FAMILY_LIMIT 64

static bool family_allowed(unsigned family)
{
  return family == AF_UNIX || family == AF_INET || family == AF_INET6 || family == AF_NETLINK;
}

/* One refusal: a syscall by name, its errno, up to three argument
 * comparisons (ANDed). The same list makes the BPF programs (libseccomp)
 * and the OCI rules of `capsule export oci`. */
struct refusal {
  const char *call;
  int err;
  unsigned n;
  struct scmp_arg_cmp args[3];
};
typedef int (*refusal_sink)(void *ctx, const struct refusal *r);

/* AF_INET and AF_INET6: SOCK_STREAM with protocol 0 or TCP, SOCK_DGRAM
 * with 0, UDP or the family's ICMP (ping sockets), nothing else: any other
 * type (raw packets, SOCK_SEQPACKET, SOCK_DCCP, ...) or protocol (SCTP,
 * DCCP, UDP-Lite, L2TP, MPTCP, ...) would make the kernel load that
 * protocol's module for the tool, and with it code no tool needs. EPERM.
 * The type is compared under the mask SOCK_TYPE_MASK (0xf: SOCK_NONBLOCK
 * and SOCK_CLOEXEC are free; other bits the kernel refuses itself). A
 * protocol is refused by ranges: each gap between allowed values as
 * aligned blocks (a mask over all 64 bits), and everything above the
 * largest as one unsigned 64-bit comparison, which also takes every value
 * with a bit in the upper half the kernel would not read. socketpair()
 * of an inet family creates the socket (loading its module) before it
 * fails: refused outright. */
static int inet_protocol_gaps(void *ctx, refusal_sink sink, unsigned family, unsigned type,
                              const unsigned *allowed, size_t n)
{
  int r = 0;
  struct refusal ref = {.call = "socket", .err = EPERM, .n = 3};
  ref.args[0] = (struct scmp_arg_cmp)SCMP_A0(SCMP_CMP_EQ, family);
  ref.args[1] = (struct scmp_arg_cmp)SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, type);
  for (size_t i = 0; i + 1 < n && r == 0; i++) {
    uint64_t lo = allowed[i] + 1, hi = allowed[i + 1] - 1;
    while (lo <= hi && r == 0) {
      uint64_t size = 1;
      while ((lo & (size * 2 - 1)) == 0 && lo + size * 2 - 1 <= hi)
        size *= 2;
      ref.args[2] = (struct scmp_arg_cmp)SCMP_A2(SCMP_CMP_MASKED_EQ, ~(size - 1), lo);
      r = sink(ctx, &ref);
      lo += size;
    }
  }
  ref.args[2] = (struct scmp_arg_cmp)SCMP_A2(SCMP_CMP_GE, allowed[n - 1] + 1);
  return r ? r : sink(ctx, &ref);
}

static int inet_refusals(void *ctx, refusal_sink sink)
{
  static const unsigned stream[] = {0, IPPROTO_TCP};
  static const unsigned dgram4[] = {0, IPPROTO_ICMP, IPPROTO_UDP};
  static const unsigned dgram6[] = {0, IPPROTO_UDP, IPPROTO_ICMPV6};
  static const unsigned families[] = {AF_INET, AF_INET6};
  int r = 0;
  for (size_t i = 0; i < 2 && r == 0; i++) {
    unsigned f = families[i];
    for (unsigned type = 0; type < 16 && r == 0; type++) {
      if (type == SOCK_STREAM || type == SOCK_DGRAM)
        continue;
      struct refusal ref = {.call = "socket", .err = EPERM, .n = 2};
      ref.args[0] = (struct scmp_arg_cmp)SCMP_A0(SCMP_CMP_EQ, f);
      ref.args[1] = (struct scmp_arg_cmp)SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, type);
      r = sink(ctx, &ref);
    }
    if (r == 0)
      r = inet_protocol_gaps(ctx, sink, f, SOCK_STREAM, stream, 2);
    if (r == 0)
      r = f == AF_INET ? inet_protocol_gaps(ctx, sink, f, SOCK_DGRAM, dgram4, 3)
                       : inet_protocol_gaps(ctx, sink, f, SOCK_DGRAM, dgram6, 3);
    if (r == 0) {
      struct refusal pair = {.call = "socketpair", .err = EPERM, .n = 1};
      pair.args[0] = (struct scmp_arg_cmp)SCMP_A0(SCMP_CMP_EQ, f);
      r = sink(ctx, &pair);
    }
  }
  return r;
}

static int bpf_sink(void *ctx, const struct refusal *ref)
{
  return seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(ref->err),
                                seccomp_syscall_resolve_name(ref->call), ref->n, ref->args);
}

static int add_socket_rules(scmp_filter_ctx ctx)
{
  static const int calls[] = {SCMP_SYS(socket), SCMP_SYS(socketpair)};
  const uint32_t refuse = SCMP_ACT_ERRNO(EAFNOSUPPORT);
  int r = 0;
  for (size_t c = 0; c < 2 && r == 0; c++) {
    for (unsigned f = 0; f < FAMILY_LIMIT && r == 0; f++)
      if (!family_allowed(f))
        r = seccomp_rule_add(ctx, refuse, calls[c], 1, SCMP_A0(SCMP_CMP_EQ, f));
    if (r == 0)
      r = seccomp_rule_add(ctx, refuse, calls[c], 1, SCMP_A0(SCMP_CMP_GE, FAMILY_LIMIT));
    if (r == 0)
      r = seccomp_rule_add(ctx, refuse, calls[c], 2, SCMP_A0(SCMP_CMP_EQ, AF_NETLINK),
                           SCMP_A2(SCMP_CMP_NE, NETLINK_ROUTE));
  }
  return r ? r : inet_refusals(ctx, bpf_sink);
}

/* clone with any namespace flag; ioctls that type into the terminal of
 * whoever started capsule */
static const uint64_t ns_flags[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,    CLONE_NEWNET,
                                    CLONE_NEWIPC,  CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME};
static const uint64_t tty_ioctls[] = {TIOCSTI, TIOCLINUX};

static int build(scmp_filter_ctx ctx, bool deny_semaphores)
{
  int r = 0;
  for (size_t i = 0; denied_syscalls[i] && r == 0; i++) {
    int nr = seccomp_syscall_resolve_name(denied_syscalls[i]);
    if (nr == __NR_SCMP_ERROR)
      continue; /* not on this architecture */
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
  }
  /* clone with any namespace flag: one rule per flag, the rules OR together */
  for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]) && r == 0; i++)
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                         SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
  /* clone3 passes its flags in memory seccomp cannot read: ENOSYS makes
   * libc fall back to clone */
  if (r == 0)
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  /* typing into the terminal of whoever started capsule */
  for (size_t i = 0; i < 2 && r == 0; i++)
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                         SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, tty_ioctls[i]));
  if (r == 0)
    r = add_socket_rules(ctx);
  for (size_t i = 0; deny_semaphores && semaphore_syscalls[i] && r == 0; i++) {
    int nr = seccomp_syscall_resolve_name(semaphore_syscalls[i]);
    if (nr != __NR_SCMP_ERROR)
      r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
  }
  return r;
}

/* ---- a second filter, stacked only when a command list is in force ----
 * Programs written at run time must not run: a memfd is executable unless
 * made with MFD_NOEXEC_SEAL, and execveat(fd, "", AT_EMPTY_PATH) runs an
 * fd whatever path Landlock would have checked. */
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif
#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif

static int build_command_list(scmp_filter_ctx ctx)
{
  int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(memfd_create), 1,
                           SCMP_A1(SCMP_CMP_MASKED_EQ, MFD_NOEXEC_SEAL, 0));
  if (r == 0)
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(execveat), 1,
                         SCMP_A4(SCMP_CMP_MASKED_EQ, AT_EMPTY_PATH, AT_EMPTY_PATH));
  return r;
}

/* ---- a third filter, stacked when the tool's files are the caller's ----
 * As root, a read-write grant is an idmapped mount (idmap.c): what the
 * tool creates there belongs to the caller (root) on the host. A setuid or
 * setgid bit on such a file would hand the caller's identity to whoever
 * runs it outside the sandbox, so no file mode the tool sets may carry
 * one: chmod and its relatives, and the mode of a file being created
 * (open, openat, creat, mknod, mknodat; the mode is 0 when no file is
 * created, as libc passes it). openat2 keeps its mode in memory no filter
 * can read: ENOSYS, so callers fall back to openat. */
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif

static int refuse_setid_mode(scmp_filter_ctx ctx, int nr, unsigned arg)
{
  static const scmp_datum_t bits[] = {S_ISUID, S_ISGID};
  int r = 0;
  for (size_t i = 0; i < 2 && r == 0; i++) {
    struct scmp_arg_cmp cmp = {
        .arg = arg, .op = SCMP_CMP_MASKED_EQ, .datum_a = bits[i], .datum_b = bits[i]};
    r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1, &cmp);
  }
  return r;
}

static int build_no_setid(scmp_filter_ctx ctx)
{
  const struct {
    int nr;
    unsigned mode_arg;
  } calls[] = {{SCMP_SYS(chmod), 1}, {SCMP_SYS(fchmod), 1}, {SCMP_SYS(fchmodat), 2},
               {__NR_fchmodat2, 2},  {SCMP_SYS(open), 2},   {SCMP_SYS(openat), 3},
               {SCMP_SYS(creat), 1}, {SCMP_SYS(mknod), 1},  {SCMP_SYS(mknodat), 2}};
  int r = 0;
  for (size_t i = 0; i < sizeof calls / sizeof calls[0] && r == 0; i++)
    r = refuse_setid_mode(ctx, calls[i].nr, calls[i].mode_arg);
  if (r == 0)
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0);
  return r;
}

/* ---- the unix-socket supervisor's rules (supervise.h), below Landlock
 * ABI 9 ----
 * every connect() goes to capsule's supervisor as a user notification;
 * socket/socketpair(AF_UNIX, anything but SOCK_STREAM or SOCK_SEQPACKET)
 * is refused with ESOCKTNOSUPPORT, since a datagram's sendto/sendmsg names
 * a destination path no filter could see (the kernel turns an AF_UNIX
 * SOCK_RAW into a datagram socket). A family with bits past the int the
 * kernel reads is refused by the deny-list's socket rules already. */
static int build_notify(scmp_filter_ctx ctx)
{
  int r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(connect), 0);
  static const int calls[] = {SCMP_SYS(socket), SCMP_SYS(socketpair)};
  for (size_t c = 0; c < 2 && r == 0; c++)
    for (unsigned type = 0; type < 16 && r == 0; type++)
      if (type != SOCK_STREAM && type != SOCK_SEQPACKET)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ESOCKTNOSUPPORT), calls[c], 2,
                             SCMP_A0(SCMP_CMP_EQ, AF_UNIX), SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, type));
  return r;
}

/* ---- exec_strategy "supervised"'s rules (supervise.h, supervise_open.c)
 * ----
 * every open (open, openat, openat2, creat) goes to capsule's supervisor
 * as a user notification. With the setuid-mode rules (no_setid) those
 * keep their answers: a creating mode with a setuid or setgid bit is
 * refused (EPERM) and only an open without one is trapped, and openat2
 * stays ENOSYS (callers fall back to openat, which is trapped): the rules
 * must not overlap, each call has one answer. */
static int build_notify_open(scmp_filter_ctx ctx, bool no_setid)
{
  const struct {
    int nr;
    unsigned mode_arg;
  } calls[] = {{SCMP_SYS(open), 2}, {SCMP_SYS(openat), 3}, {SCMP_SYS(creat), 1}};
  int r = 0;
  for (size_t i = 0; i < sizeof calls / sizeof calls[0] && r == 0; i++) {
    struct scmp_arg_cmp clean = {.arg = calls[i].mode_arg,
                                 .op = SCMP_CMP_MASKED_EQ,
                                 .datum_a = S_ISUID | S_ISGID,
                                 .datum_b = 0};
    r = seccomp_rule_add_array(ctx, SCMP_ACT_NOTIFY, calls[i].nr, no_setid ? 1 : 0, &clean);
  }
  if (r == 0 && !no_setid)
    r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(openat2), 0);
  return r;
}

/* The main filter's variants, one program each, so that a spawn loads one
 * filter where it stacked up to three (each load costs ~50 us before its
 * first instruction: the JIT, the allow cache): the deny-list with or
 * without System V semaphores, with or without the setuid-mode rules, with
 * or without the unix-socket supervisor's rules, with or without the open
 * family's. The command-list rules stay a filter of their own, stacked
 * after. */
enum {
  MAIN_DENY_SEMAPHORES = 1, /* not ipc_mode "full" */
  MAIN_NO_SETID = 2,        /* as root: the tool's files are the caller's */
  MAIN_NOTIFY = 4,          /* below Landlock ABI 9: the unix-socket supervisor */
  MAIN_NOTIFY_OPEN = 8,     /* exec_strategy "supervised": the open family */
  MAIN_VARIANTS = 16,
  FILTER_COMMAND_LIST = 32,
};

static int build_kind(scmp_filter_ctx ctx, unsigned kind)
{
  if (kind == FILTER_COMMAND_LIST)
    return build_command_list(ctx);
  int r = build(ctx, kind & MAIN_DENY_SEMAPHORES);
  if (r == 0 && (kind & MAIN_NO_SETID))
    r = build_no_setid(ctx);
  if (r == 0 && (kind & MAIN_NOTIFY))
    r = build_notify(ctx);
  if (r == 0 && (kind & MAIN_NOTIFY_OPEN))
    r = build_notify_open(ctx, kind & MAIN_NO_SETID);
  return r;
}

/* Writes one filter as a C array named `name`. The syscall numbers are
 * dispatched through a binary tree: fewer instructions per syscall for the
 * tool, and for the kernel's allow cache built at load. */
static int emit(FILE *out, const char *name, unsigned kind)
{
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx || seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2) < 0)
    return -1;
  if (build_kind(ctx, kind) < 0)
    return -1;
  FILE *tmp = tmpfile();
  if (!tmp || seccomp_export_bpf(ctx, fileno(tmp)) < 0)
    return -1;
  static char bpf[1 << 16];
  rewind(tmp);
  size_t len = fread(bpf, 1, sizeof bpf, tmp);
  fclose(tmp);
  seccomp_release(ctx);
  fprintf(out, "static const struct sock_filter %s[] = {\n", name);
  const struct sock_filter *f = (const struct sock_filter *)bpf;
  for (size_t i = 0; i < len / sizeof *f; i++)
    fprintf(out, "    {0x%04x, %u, %u, 0x%08x},\n", f[i].code, f[i].jt, f[i].jf, f[i].k);
  fprintf(out, "};\n");
  return 0;
}

/* ---- the same main filter as OCI runtime-spec seccomp rules ----
 * (`capsule export oci`): a JSON array of linux.seccomp.syscalls entries,
 * written from the same tables, as a C string. MASKED_EQ is OCI's
 * {value: mask, valueTwo: datum}, as runc reads it. */
static void oci_names(FILE *out, const char *const *names, int errno_ret, const char **sep)
{
  fprintf(out, "%s{\"names\":[", *sep);
  for (size_t i = 0; names[i]; i++)
    fprintf(out, "%s\"%s\"", i ? "," : "", names[i]);
  fprintf(out, "],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":%d}", errno_ret);
  *sep = ",";
}

static void oci_rule(FILE *out, const char *name, int errno_ret, const char *args, const char **sep)
{
  fprintf(out,
          "%s{\"names\":[\"%s\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":%d,"
          "\"args\":[%s]}",
          *sep, name, errno_ret, args);
  *sep = ",";
}

static const char *const oci_ops[] = {[SCMP_CMP_NE] = "SCMP_CMP_NE",
                                      [SCMP_CMP_LT] = "SCMP_CMP_LT",
                                      [SCMP_CMP_LE] = "SCMP_CMP_LE",
                                      [SCMP_CMP_EQ] = "SCMP_CMP_EQ",
                                      [SCMP_CMP_GE] = "SCMP_CMP_GE",
                                      [SCMP_CMP_GT] = "SCMP_CMP_GT",
                                      [SCMP_CMP_MASKED_EQ] = "SCMP_CMP_MASKED_EQ"};

struct oci_out {
  FILE *out;
  const char **sep;
};

/* a refusal as an OCI rule: MASKED_EQ as {value: mask, valueTwo: datum} */
static int oci_sink(void *ctx, const struct refusal *ref)
{
  struct oci_out *o = ctx;
  char args[512];
  size_t len = 0;
  for (unsigned i = 0; i < ref->n; i++)
    len +=
        (size_t)snprintf(args + len, sizeof args - len,
                         "%s{\"index\":%u,\"value\":%llu,\"valueTwo\":%llu,\"op\":\"%s\"}",
                         i ? "," : "", ref->args[i].arg, (unsigned long long)ref->args[i].datum_a,
                         (unsigned long long)ref->args[i].datum_b, oci_ops[ref->args[i].op]);
  oci_rule(o->out, ref->call, ref->err, args, o->sep);
  return 0;
}

static void emit_oci_json(FILE *out)
{
  const char *sep = "";
  char args[256];
  oci_names(out, denied_syscalls, EPERM, &sep);
  for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++) {
    snprintf(args, sizeof args,
             "{\"index\":0,\"value\":%llu,\"valueTwo\":%llu,\"op\":\"SCMP_CMP_MASKED_EQ\"}",
             (unsigned long long)ns_flags[i], (unsigned long long)ns_flags[i]);
    oci_rule(out, "clone", EPERM, args, &sep);
  }
  static const char *const clone3[] = {"clone3", NULL};
  oci_names(out, clone3, ENOSYS, &sep);
  for (size_t i = 0; i < 2; i++) {
    snprintf(args, sizeof args,
             "{\"index\":1,\"value\":4294967295,\"valueTwo\":%llu,\"op\":\"SCMP_CMP_MASKED_EQ\"}",
             (unsigned long long)tty_ioctls[i]);
    oci_rule(out, "ioctl", EPERM, args, &sep);
  }
  static const char *const calls[] = {"socket", "socketpair"};
  for (size_t c = 0; c < 2; c++) {
    for (unsigned f = 0; f < FAMILY_LIMIT; f++) {
      if (family_allowed(f))
        continue;
      snprintf(args, sizeof args, "{\"index\":0,\"value\":%u,\"op\":\"SCMP_CMP_EQ\"}", f);
      oci_rule(out, calls[c], EAFNOSUPPORT, args, &sep);
    }
    snprintf(args, sizeof args, "{\"index\":0,\"value\":%u,\"op\":\"SCMP_CMP_GE\"}", FAMILY_LIMIT);
    oci_rule(out, calls[c], EAFNOSUPPORT, args, &sep);
    snprintf(args, sizeof args,
             "{\"index\":0,\"value\":%u,\"op\":\"SCMP_CMP_EQ\"},"
             "{\"index\":2,\"value\":%u,\"op\":\"SCMP_CMP_NE\"}",
             AF_NETLINK, NETLINK_ROUTE);
    oci_rule(out, calls[c], EAFNOSUPPORT, args, &sep);
  }
  inet_refusals(&(struct oci_out){out, &sep}, oci_sink);
}

/* text as a C string literal named name */
static void emit_string(FILE *out, const char *name, const char *text)
{
  fprintf(out, "static const char %s[] = \"", name);
  for (const char *p = text; *p; p++)
    fprintf(out, *p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
  fprintf(out, "\";\n");
}

static int emit_oci(FILE *out)
{
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  if (!mem)
    return -1;
  emit_oci_json(mem);
  fclose(mem);
  emit_string(out, "capsule_seccomp_oci_syscalls", text);
  free(text);
  mem = open_memstream(&text, &len);
  if (!mem)
    return -1;
  const char *sep = "";
  oci_names(mem, semaphore_syscalls, EPERM, &sep);
  fclose(mem);
  emit_string(out, "capsule_seccomp_oci_semaphores", text);
  free(text);
  return 0;
}

int main(int argc, char **argv)
{
  if (argc != 2)
    return 2;
  FILE *out = fopen(argv[1], "w");
  if (!out)
    return 1;
  fprintf(out, "/* generated by seccomp_gen.c at build time: do not edit */\n");
  for (unsigned v = 0; v < MAIN_VARIANTS; v++) {
    char name[64];
    snprintf(name, sizeof name, "capsule_seccomp_main_%u", v);
    if (emit(out, name, v) < 0)
      return 1;
  }
  fprintf(out,
          "#define CAPSULE_SECCOMP_DENY_SEMAPHORES %d\n#define CAPSULE_SECCOMP_NO_SETID %d\n"
          "#define CAPSULE_SECCOMP_NOTIFY %d\n#define CAPSULE_SECCOMP_NOTIFY_OPEN %d\n",
          MAIN_DENY_SEMAPHORES, MAIN_NO_SETID, MAIN_NOTIFY, MAIN_NOTIFY_OPEN);
  fprintf(out,
          "static const struct {\n  const struct sock_filter *filter;\n  unsigned short len;\n} "
          "capsule_seccomp_mains[%d] = {\n",
          MAIN_VARIANTS);
  for (unsigned v = 0; v < MAIN_VARIANTS; v++)
    fprintf(out,
            "    {capsule_seccomp_main_%u, sizeof capsule_seccomp_main_%u / sizeof(struct "
            "sock_filter)},\n",
            v, v);
  fprintf(out, "};\n");
  if (emit(out, "capsule_seccomp_filter_command_list", FILTER_COMMAND_LIST) < 0)
    return 1;
  if (emit_oci(out) < 0)
    return 1;
  return fclose(out) == 0 ? 0 : 1;
}
