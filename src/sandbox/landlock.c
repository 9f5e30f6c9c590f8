/* Landlock: the second, independent layer over the same grants the mount
 * tree expresses. Debian 12's headers predate most of Landlock, so the ABI
 * is defined here. Rights by ABI: 1 fs, 2 REFER, 3 TRUNCATE, 4 TCP
 * bind/connect, 5 IOCTL_DEV, 6 signal and abstract-unix-socket scoping,
 * 9 RESOLVE_UNIX (connecting to pathname unix sockets; below 9 the
 * supervisor in supervise.c holds that line). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "net/egress_plan.h"
#include "net/proxy.h"
#include "sandbox/capture.h"
#include "sandbox/mount_plan.h"
#include "sandbox/spawn_internal.h"
#include "sandbox/supervise.h"

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif

struct ll_ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

struct ll_path_beneath_attr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));

struct ll_net_port_attr {
  uint64_t allowed_access;
  uint64_t port;
};

#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_RULE_NET_PORT 2

#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_REMOVE_DIR (1ULL << 4)
#define LL_FS_REMOVE_FILE (1ULL << 5)
#define LL_FS_MAKE_CHAR (1ULL << 6)
#define LL_FS_MAKE_DIR (1ULL << 7)
#define LL_FS_MAKE_REG (1ULL << 8)
#define LL_FS_MAKE_SOCK (1ULL << 9)
#define LL_FS_MAKE_FIFO (1ULL << 10)
#define LL_FS_MAKE_BLOCK (1ULL << 11)
#define LL_FS_MAKE_SYM (1ULL << 12)
#define LL_FS_REFER (1ULL << 13)
#define LL_FS_TRUNCATE (1ULL << 14)
#define LL_FS_IOCTL_DEV (1ULL << 15)
#define LL_FS_RESOLVE_UNIX (1ULL << 16) /* ABI 9 */

#define LL_NET_BIND_TCP (1ULL << 0)
#define LL_NET_CONNECT_TCP (1ULL << 1)

#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LL_SCOPE_SIGNAL (1ULL << 1)

#define LL_FS_READ (LL_FS_READ_FILE | LL_FS_READ_DIR | LL_FS_EXECUTE)
#define LL_FS_WRITE                                                                                \
  (LL_FS_WRITE_FILE | LL_FS_REMOVE_DIR | LL_FS_REMOVE_FILE | LL_FS_MAKE_DIR | LL_FS_MAKE_REG |     \
   LL_FS_MAKE_SOCK | LL_FS_MAKE_FIFO | LL_FS_MAKE_SYM | LL_FS_REFER | LL_FS_TRUNCATE)
/* rights that make sense on a file, not a directory */
#define LL_FS_FILE_RIGHTS                                                                          \
  (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV |         \
   LL_FS_RESOLVE_UNIX)

int landlock_abi(void)
{
#ifdef CAPSULE_TEST_HOOKS /* tests/sandbox/no_landlock.sh: a host without Landlock */
  if (getenv("CAPSULE_TEST_NO_LANDLOCK"))
    return 0;
#endif
  long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : (int)abi;
}

static uint64_t fs_rights_for_abi(int abi)
{
  uint64_t all = (LL_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */
  if (abi >= 2)
    all |= LL_FS_REFER;
  if (abi >= 3)
    all |= LL_FS_TRUNCATE;
  if (abi >= 5)
    all |= LL_FS_IOCTL_DEV;
  if (abi >= 9)
    all |= LL_FS_RESOLVE_UNIX;
  return all;
}

bool sandbox_grant_is_unix_socket(const struct cap_fs_grant *g)
{
  struct stat st;
  _cleanup_free_ char *path = sandbox_expand_path(g->path); /* "~/x" as the mount tree has it */
  /* lstat: the grant path itself must be the socket; a symlink to a socket
   * (which a tool could have put there in an earlier run) is not one */
  return g->access != CAP_ACCESS_READ && path[0] == '/' && lstat(path, &st) == 0 &&
         S_ISSOCK(st.st_mode);
}

static size_t add_unique_port(uint16_t *out, size_t n, size_t max, uint16_t port)
{
  for (size_t i = 0; i < n; i++)
    if (out[i] == port)
      return n;
  if (n < max)
    out[n++] = port;
  return n;
}

size_t landlock_connect_ports(const struct cap_spec *spec, uint16_t *out, size_t max)
{
  size_t n = 0;
  if (spec->network.mode == CAP_NET_PROXY && n < max)
    out[n++] = PROXY_PORT; /* the way out */
  for (size_t i = 0; i < spec->network.localhost.len && n < max; i++)
    out[n++] = spec->network.localhost.v[i];
  /* the transparent path: the resolver (DNS over TCP), the ports of the
   * synthetic addresses (the namespace holds nothing else to reach) */
  struct egress_plan plan;
  egress_plan_build(spec, &plan);
  if (spec->network.mode == CAP_NET_PROXY)
    n = add_unique_port(out, n, max, EGRESS_DNS_PORT);
  for (size_t i = 0; i < plan.n_listeners; i++)
    n = add_unique_port(out, n, max, plan.listeners[i].port);
  egress_plan_free(&plan);
  return n;
}

static int add_path(int ruleset, const char *path, uint64_t access, uint64_t handled,
                    struct cap_error *err)
{
  _cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? 0 : cap_error_errno(err, errno, "landlock: cannot open %s", path);
  struct stat st;
  if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
    access &= LL_FS_FILE_RIGHTS;
  struct ll_path_beneath_attr attr = {.allowed_access = access & handled, .parent_fd = fd};
  if (!attr.allowed_access)
    return 0;
  if (syscall(__NR_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &attr, 0) < 0)
    return cap_error_errno(err, errno, "landlock: cannot add a rule for %s", path);
  return 0;
}

static int add_port(int ruleset, uint16_t port, uint64_t access, struct cap_error *err)
{
  struct ll_net_port_attr attr = {.allowed_access = access, .port = port};
  if (syscall(__NR_landlock_add_rule, ruleset, LL_RULE_NET_PORT, &attr, 0) < 0)
    return cap_error_errno(err, errno, "landlock: cannot add a rule for port %u", port);
  return 0;
}

/* Runs inside the sandbox after pivot_root: paths are the sandbox's own, the
 * same strings as the host paths they were bound from. */
size_t sandbox_command_paths(const char *name, char (*out)[4096], size_t max)
{
  static const char *const dirs[] = {"/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"};
  size_t n = 0;
  if (strchr(name, '/')) {
    if (max && realpath(name, out[0]))
      n = 1;
    return n;
  }
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0] && n < max; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dirs[i], name);
    if (access(path, F_OK) == 0 && realpath(path, out[n]))
      n++;
  }
  return n;
}

/* With an allowlist, EXECUTE is granted on those programs alone (plus the
 * command capsule starts and the dynamic loader, which the kernel opens
 * for every ELF program). */
static int add_allowed_commands(int ruleset, const struct cap_spec *spec, const char *command,
                                uint64_t handled, struct cap_error *err)
{
  char paths[8][4096];
  int r = 0;
  for (size_t i = 0; i <= spec->process.allowed_commands.len && r == 0; i++) {
    const char *name =
        i < spec->process.allowed_commands.len ? spec->process.allowed_commands.v[i] : command;
    size_t n = sandbox_command_paths(name, paths, 8);
    for (size_t k = 0; k < n && r == 0; k++)
      r = add_path(ruleset, paths[k], LL_FS_EXECUTE | LL_FS_READ_FILE, handled, err);
  }
  static const char *const loaders[] = {"/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1",
                                        "/lib/ld-linux.so.2"};
  for (size_t i = 0; i < sizeof loaders / sizeof loaders[0] && r == 0; i++)
    if (realpath(loaders[i], paths[0]))
      r = add_path(ruleset, paths[0], LL_FS_EXECUTE | LL_FS_READ_FILE, handled, err);
  return r;
}

/* Deny entries inside a directory grant. Landlock can only grant, and a
 * right on a directory reaches everything below it, so a grant holding a
 * denied path is given as rules on each of its entries but the denied one,
 * down the path to it: the denied path gets no rule, and stays closed to
 * this layer too if its mount mask were ever gone. The directories on the
 * way keep only READ_DIR (listing names); entries created in them after the
 * start get no rights there. Symlinks need no rule (what they point to has
 * its own). Bounded: a grant with more entries on the way fails the run. */
#define LL_DENY_ENTRY_BUDGET 8192

struct ll_denies {
  const struct sandbox_mask *m;
  size_t n;
};

/* 1: path is a deny mask; 2: a deny mask lies strictly below it; 0: neither */
static int deny_relation(const struct ll_denies *d, const char *path)
{
  size_t n = strlen(path);
  int rel = 0;
  for (size_t i = 0; i < d->n; i++) {
    const char *at = d->m[i].at;
    if (!d->m[i].deny)
      continue;
    if (strcmp(at, path) == 0)
      return 1;
    if ((n == 1 || (strncmp(at, path, n) == 0 && at[n] == '/')) && at[n == 1 ? 0 : n])
      rel = 2;
  }
  return rel;
}

static int add_around_denies(int ruleset, const char *dir, uint64_t access, uint64_t handled,
                             const struct ll_denies *d, size_t *budget, struct cap_error *err)
{
  int r = add_path(ruleset, dir, access & LL_FS_READ_DIR, handled, err);
  _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *dd = fd >= 0 ? fdopendir(fd) : NULL;
  if (!dd)
    return r; /* nothing below to grant */
  fd = -1;
  struct dirent *e;
  while (r == 0 && (e = readdir(dd))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    if ((*budget)-- == 0) {
      r = cap_error_set(err, E2BIG,
                        "landlock: %s holds more than %d entries on the way to a deny entry; "
                        "grant a narrower directory",
                        dir, LL_DENY_ENTRY_BUDGET);
      break;
    }
    _cleanup_free_ char *path = cap_xasprintf("%s/%s", strcmp(dir, "/") == 0 ? "" : dir, e->d_name);
    struct stat st;
    int rel = deny_relation(d, path);
    if (rel == 1 || lstat(path, &st) < 0 || S_ISLNK(st.st_mode))
      continue;
    if (rel == 2 && S_ISDIR(st.st_mode))
      r = add_around_denies(ruleset, path, access, handled, d, budget, err);
    else
      r = add_path(ruleset, path, access, handled, err);
  }
  closedir(dd);
  return r;
}

/* The declared grants: read and write rights as granted; with a command
 * list, programs run only from where they were installed, so a tool cannot
 * write a copy of a blocked program and run that. */
static int add_grants(int ruleset, const struct cap_spec *spec, const struct ll_denies *denies,
                      uint64_t handled, struct cap_error *err)
{
  size_t budget = LL_DENY_ENTRY_BUDGET;
  bool allowlist = spec->process.allowed_commands.len > 0;
  bool restrict_exec = allowlist || spec->process.blocked_commands.len > 0;
  int r = 0;
  for (size_t i = 0; i < spec->n_grants && r == 0; i++) {
    const struct cap_fs_grant *g = &spec->grants[i];
    uint64_t access = 0;
    if (g->access != CAP_ACCESS_WRITE)
      access |= LL_FS_READ;
    if (g->access != CAP_ACCESS_READ)
      access |= LL_FS_WRITE;
    if (allowlist || (restrict_exec && g->access != CAP_ACCESS_READ))
      access &= ~LL_FS_EXECUTE;
    /* a pathname unix socket is reached only where it is granted itself */
    if (sandbox_grant_is_unix_socket(g))
      access |= LL_FS_RESOLVE_UNIX;
    /* as the mount tree has it */
    _cleanup_free_ char *path = g->at ? cap_xstrdup(g->at) : sandbox_expand_path(g->path);
    int rel = g->type == CAP_FS_DIRECTORY ? deny_relation(denies, path) : 0;
    if (rel == 2)
      r = add_around_denies(ruleset, path, access, handled, denies, &budget, err);
    else if (rel == 0)
      r = add_path(ruleset, path, access, handled, err);
  }
  return r;
}

/* What the sandbox itself provides: its /proc, /dev, /dev/shm, private
 * /tmp, the session CA, and / listable. */
static int add_sandbox_paths(int ruleset, const struct cap_spec *spec, uint64_t handled,
                             struct cap_error *err)
{
  bool restrict_exec =
      spec->process.allowed_commands.len > 0 || spec->process.blocked_commands.len > 0;
  int r = add_path(ruleset, "/proc", LL_FS_READ_FILE | LL_FS_READ_DIR, handled, err);
  if (r == 0)
    r = add_path(ruleset, "/dev", LL_FS_READ | LL_FS_WRITE_FILE | LL_FS_IOCTL_DEV, handled, err);
  /* listing / (it holds only the sandbox's own mount points) helps tools find
   * their way; Landlock rights are inherited downwards, so not when some
   * grant is write-only and must stay unlistable */
  bool write_only = false;
  for (size_t i = 0; i < spec->n_grants; i++)
    write_only |= spec->grants[i].access == CAP_ACCESS_WRITE;
  if (r == 0 && !write_only)
    r = add_path(ruleset, "/", LL_FS_READ_DIR, handled, err);
  if (r == 0) /* POSIX shared memory lives here (private to the sandbox) */
    r = add_path(ruleset, "/dev/shm", (LL_FS_READ | LL_FS_WRITE) & ~LL_FS_EXECUTE, handled, err);
  if (r == 0 && spec->sandbox.private_tmp)
    r = add_path(ruleset, "/tmp", (LL_FS_READ | LL_FS_WRITE) & ~(restrict_exec ? LL_FS_EXECUTE : 0),
                 handled, err);
  if (r == 0 && spec->network.mode == CAP_NET_PROXY) /* the session CA bundle, when there is one */
    r = add_path(ruleset, PROXY_CA_DIR, LL_FS_READ_FILE | LL_FS_READ_DIR, handled, err);
  /* capsule's resolv.conf and hosts, mounted over /etc's (mount.c): a
   * rule of their own, as a mount's root is reached from the mount point */
  if (r == 0 && spec->network.mode == CAP_NET_PROXY)
    r = add_path(ruleset, "/etc/resolv.conf", LL_FS_READ_FILE, handled, err);
  if (r == 0 && spec->network.mode == CAP_NET_PROXY)
    r = add_path(ruleset, "/etc/hosts", LL_FS_READ_FILE, handled, err);
  return r;
}

/* TCP: connect only to the ports the sandbox may reach, bind only those
 * declared. */
static int add_ports(int ruleset, const struct cap_spec *spec, struct cap_error *err)
{
  uint16_t ports[SANDBOX_MAX_LISTENERS];
  size_t n = capture_planned(spec)
                 ? 0
                 : landlock_connect_ports(spec, ports, sizeof ports / sizeof ports[0]);
  int r = 0;
  for (size_t i = 0; i < n && r == 0; i++)
    r = add_port(ruleset, ports[i], LL_NET_CONNECT_TCP, err);
  for (size_t i = 0; i < spec->network.bind.len && r == 0; i++)
    r = add_port(ruleset, spec->network.bind.v[i], LL_NET_BIND_TCP, err);
  for (size_t i = 0; i < spec->network.localhost.len && r == 0; i++)
    r = add_port(ruleset, spec->network.localhost.v[i], LL_NET_BIND_TCP, err);
  return r;
}

int landlock_check_needed(const struct cap_spec *spec, struct cap_error *err)
{
  int abi = landlock_abi();
  /* as nono: allow_same_sandbox promises scoping and fails closed without
   * it; isolated (the default) goes on with the pid namespace alone */
  if (abi < 6 && spec->process.signal_mode == CAP_MODE_SAME_SANDBOX)
    return cap_error_set(err, ENOTSUP,
                         "signal_mode \"allow_same_sandbox\" needs Landlock signal scoping (ABI "
                         "6, Linux 6.12), which this kernel does not offer (ABI %d)",
                         abi);
  if (abi > 0)
    return 0;
  /* a mount is read-only or read-write: a write-only grant would be bound
   * read-write, more than declared */
  for (size_t i = 0; i < spec->n_grants; i++)
    if (spec->grants[i].access == CAP_ACCESS_WRITE)
      return cap_error_set(err, ENOTSUP,
                           "the write-only grant %s needs Landlock, which this kernel does not "
                           "offer (enable it with lsm=landlock); without it the grant would be "
                           "readable too: grant it read-write or read-only; refusing rather than "
                           "running with more than declared",
                           spec->grants[i].path);
  if (spec->process.allowed_commands.len || spec->process.blocked_commands.len)
    return cap_error_set(err, ENOTSUP,
                         "allowed_commands/blocked_commands need Landlock, which this kernel "
                         "does not offer (enable it with lsm=landlock)");
  return 0;
}

int landlock_apply(const struct cap_spec *spec, const struct sandbox_mount_plan *plan,
                   const char *command, bool image_root, struct cap_error *err)
{
  int abi = landlock_abi();
  int r = landlock_check_needed(spec, err); /* again: the parent checked first */
  if (r < 0 || abi <= 0) /* the mount tree and namespaces still enforce the grants */
    return r;
  uint64_t handled = fs_rights_for_abi(abi);
  struct ll_ruleset_attr attr = {.handled_access_fs = handled};
  size_t attr_size = sizeof(uint64_t);
  if (abi >= 4 && spec->network.mode != CAP_NET_UNRESTRICTED) {
    /* an any-port capture redirects after Landlock's check, which sees
     * the port the tool asked for: connect is then left to the namespace
     * (only loopback) and the proxy's checks */
    attr.handled_access_net = LL_NET_BIND_TCP | (capture_planned(spec) ? 0 : LL_NET_CONNECT_TCP);
    attr_size = 2 * sizeof(uint64_t);
  }
  if (abi >= 6) {
    attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET;
    if (spec->process.signal_mode != CAP_MODE_ALL)
      attr.scoped |= LL_SCOPE_SIGNAL;
    attr_size = sizeof(attr);
  }
  _cleanup_close_ int ruleset = (int)syscall(__NR_landlock_create_ruleset, &attr, attr_size, 0);
  if (ruleset < 0)
    return cap_error_errno(err, errno, "landlock: cannot create a ruleset");
  struct ll_denies denies = {plan ? plan->masks : NULL, plan ? plan->n_masks : 0};
  r = add_grants(ruleset, spec, &denies, handled, err);
  if (r == 0 && spec->process.allowed_commands.len)
    r = add_allowed_commands(ruleset, spec, command, handled, err);
  if (r == 0)
    r = add_sandbox_paths(ruleset, spec, handled, err);
  /* an image's root is the tool's own program and libraries, mounted
   * read-only: read and run anything in it (what a container allows) */
  if (r == 0 && image_root)
    r = add_path(ruleset, "/",
                 LL_FS_READ & ~(spec->process.allowed_commands.len ? LL_FS_EXECUTE : 0), handled,
                 err);
  if (r == 0 && attr.handled_access_net)
    r = add_ports(ruleset, spec, err);
  if (r < 0)
    return r;
  if (syscall(__NR_landlock_restrict_self, ruleset, 0) < 0)
    return cap_error_errno(err, errno, "landlock: cannot restrict the process");
  return 0;
}
