/* The command's side of the sandbox, after pid 1 forked it: drop to the
 * sandbox's ids with an empty capability bounding set, rlimits,
 * no_new_privs, Landlock, seccomp, a clean environment (the proxy's
 * variables in proxy mode), then exec. A failure ends the child through
 * sandbox_child_fail. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "net/proxy.h"
#include "sandbox/spawn_internal.h"

long sandbox_raw_setresgid(gid_t gid) { return syscall(SYS_setresgid, gid, gid, gid); }
long sandbox_raw_setresuid(uid_t uid) { return syscall(SYS_setresuid, uid, uid, uid); }

/* Takes the sandbox's own ids right away, keeping the capabilities the new
 * user namespace gave: files the setup creates then belong to a mapped id
 * (as root, capsule's uid 0 is deliberately not mapped). */
void sandbox_become_ids(uid_t uid, gid_t gid)
{
  CHILD_TRY(prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0), "keepcaps: %s", strerror(errno));
  CHILD_TRY(sandbox_raw_setresgid(gid), "cannot switch to the sandbox gid: %s", strerror(errno));
  CHILD_TRY(sandbox_raw_setresuid(uid), "cannot switch to the sandbox uid: %s", strerror(errno));
  struct __user_cap_header_struct head = {.version = _LINUX_CAPABILITY_VERSION_3};
  struct __user_cap_data_struct data[2];
  CHILD_TRY(syscall(SYS_capget, &head, data), "capget: %s", strerror(errno));
  data[0].effective = data[0].permitted;
  data[1].effective = data[1].permitted;
  CHILD_TRY(syscall(SYS_capset, &head, data), "capset: %s", strerror(errno));
}

static void set_rlimit(int resource, uint64_t value)
{
  struct rlimit rl = {.rlim_cur = value, .rlim_max = value};
  setrlimit(resource, &rl);
}

/* Every descriptor from `from` up close-on-exec, one by one (a kernel
 * without CLOSE_RANGE_CLOEXEC): those /proc lists, else every number below
 * 2^20 (RLIMIT_NOFILE may already be lower than open ones). */
static void mark_cloexec_from(int from)
{
  DIR *d = opendir("/proc/self/fd");
  for (struct dirent *e; d && (e = readdir(d));)
    if (atoi(e->d_name) >= from && atoi(e->d_name) != dirfd(d))
      fcntl(atoi(e->d_name), F_SETFD, FD_CLOEXEC);
  if (d) {
    closedir(d);
    return;
  }
  for (int fd = from; fd < (1 << 20); fd++)
    fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* The command: drop everything, then exec. Never returns. */
void __attribute__((noreturn))
sandbox_exec_command(const struct cap_spec *spec, const struct sandbox_options *opt,
                     const struct sandbox_mount_plan *plan, struct sandbox_limits *lim,
                     const struct proxy *px, uid_t uid, gid_t gid, bool refuse_setid)
{
  /* into the cgroups first, before anything of the tool runs (limits.h) */
  int joined = limits_join(lim);
  CHILD_TRY(joined, "cannot move the sandbox into its cgroup: %s", strerror(-joined));
  /* every capability the kernel knows: EINVAL past the last one */
  for (int cap = 0; cap <= 63; cap++)
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno == EINVAL)
      break;
  CHILD_TRY(syscall(SYS_setgroups, 0, NULL) < 0 && errno != EPERM ? -1 : 0, "setgroups: %s",
            strerror(errno));
  CHILD_TRY(sandbox_raw_setresgid(gid), "cannot switch to the sandbox gid: %s", strerror(errno));
  CHILD_TRY(sandbox_raw_setresuid(uid), "cannot switch to the sandbox uid: %s", strerror(errno));

  if (spec->limits.nofile)
    set_rlimit(RLIMIT_NOFILE, spec->limits.nofile);
  set_rlimit(RLIMIT_CORE, 0);

  CHILD_TRY(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs: %s", strerror(errno));
  struct cap_error err = {0};
  if (landlock_apply(spec, plan, opt->argv[0], opt->rootfs != NULL, &err) < 0)
    sandbox_child_fail("%s", err.message);
  if (seccomp_apply(spec, refuse_setid, &err) < 0)
    sandbox_child_fail("%s", err.message);

  const char *workdir = opt->workdir ? opt->workdir : spec->sandbox.private_tmp ? "/tmp" : "/";
  if (chdir(workdir) < 0)
    sandbox_child_fail("cannot enter the working directory %s: %s", workdir, strerror(errno));

  /* a clean environment: a safe set plus what the caller passed */
  clearenv();
  setenv("PATH", "/usr/local/bin:/usr/bin:/bin", 1);
  setenv("HOME", spec->sandbox.private_tmp ? "/tmp" : "/", 1);
  setenv("TMPDIR", "/tmp", 1);
  setenv("LANG", "C.UTF-8", 1);
  setenv("CAPSULE_SANDBOX", "1", 1);
  if (spec->network.mode == CAP_NET_PROXY) {
    static const char *const vars[] = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                                       "http_proxy", "https_proxy", "all_proxy"};
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", PROXY_PORT);
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
      setenv(vars[i], url, 1);
    setenv("NO_PROXY", "localhost,127.0.0.1", 1);
    setenv("no_proxy", "localhost,127.0.0.1", 1);
    size_t n = 0;
    if (px && proxy_ca_bundle(px, &n)) { /* what common TLS stacks read for their trust */
      static const char *const ca_vars[] = {"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS",
                                            "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                                            "GIT_SSL_CAINFO"};
      for (size_t i = 0; i < sizeof ca_vars / sizeof ca_vars[0]; i++)
        setenv(ca_vars[i], PROXY_CA_FILE, 1);
    }
    char *const *phantoms = px ? proxy_tool_env(px, &n) : NULL;
    for (size_t i = 0; i < n; i++)
      putenv(phantoms[i]);
  }
  for (size_t i = 0; i < opt->n_extra_env; i++)
    putenv(opt->extra_env[i]);

  if (opt->redirect_stdio)
    for (int i = 0; i < 3; i++)
      CHILD_TRY(dup2(opt->stdio[i], i), "cannot set up the command's stdio: %s", strerror(errno));
  signal(SIGPIPE, SIG_DFL); /* capsule may ignore it; the tool gets the default */
  /* no controlling terminal unless the caller asked for one */
  CHILD_TRY(opt->tty ? 0 : setsid(), "setsid: %s", strerror(errno));
  sigset_t none; /* pid 1 forked this with every signal blocked */
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  /* nothing inherited beyond stdio crosses into the tool; a kernel before
   * 5.11 knows no CLOSE_RANGE_CLOEXEC: each descriptor is marked instead */
  if (syscall(__NR_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
    mark_cloexec_from(3);
  /* the fallback limits last, when nothing of capsule's allocates any more
   * (a sanitizer build's runtime maps memory for its bookkeeping) */
  limits_apply_rlimits(lim, spec);
  execvp(opt->argv[0], opt->argv);
  sandbox_child_fail("%ccannot run %s: %s", SANDBOX_REPORT_EXEC, opt->argv[0], strerror(errno));
}
