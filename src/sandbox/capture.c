/* The any-port redirect (capture.h). */
#include "sandbox/capture.h"
#include "core/fork_gate.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/egress_plan.h"

static const char *const nft_paths[] = {"/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft"};

const char *capture_nft(void)
{
  for (size_t i = 0; i < sizeof nft_paths / sizeof nft_paths[0]; i++)
    if (access(nft_paths[i], X_OK) == 0)
      return nft_paths[i];
  return NULL;
}

bool capture_planned(const struct cap_spec *spec)
{
  if (spec->network.mode != CAP_NET_PROXY)
    return false;
  struct egress_plan plan;
  egress_plan_build(spec, &plan);
  bool capture = plan.capture;
  egress_plan_free(&plan);
  return capture && capture_nft();
}

/* In the forked helper: CAP_NET_ADMIN kept across the exec (ambient), and
 * nothing else of capsule's: no environment, stdin the rules. */
static void __attribute__((noreturn)) exec_nft(const char *nft, int rules)
{
  struct __user_cap_header_struct head = {.version = _LINUX_CAPABILITY_VERSION_3};
  struct __user_cap_data_struct data[2];
  if (syscall(SYS_capget, &head, data) < 0)
    _exit(126);
  data[0].inheritable = data[1].inheritable = 0;
  data[CAP_TO_INDEX(CAP_NET_ADMIN)].inheritable = CAP_TO_MASK(CAP_NET_ADMIN);
  if (syscall(SYS_capset, &head, data) < 0 ||
      prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_ADMIN, 0, 0) < 0 || dup2(rules, 0) < 0)
    _exit(126);
  int devnull = open("/dev/null", O_WRONLY);
  if (devnull >= 0) {
    dup2(devnull, 1);
    dup2(devnull, 2);
  }
  char *const argv[] = {(char *)"nft", (char *)"-f", (char *)"-", NULL};
  char *const envp[] = {NULL};
  execve(nft, argv, envp);
  _exit(127);
}

int capture_install(struct cap_error *err)
{
  const char *nft = capture_nft();
  if (!nft)
    return cap_error_set(err, ENOENT, "no nft binary: only listed ports are forwarded");
  char rules[512];
  int len = snprintf(rules, sizeof rules,
                     "table ip capsule {\n chain out {\n"
                     "  type nat hook output priority -100; policy accept;\n"
                     "  ip daddr %s meta l4proto tcp redirect to :%d\n }\n}\n",
                     EGRESS_CAPTURE_NET, EGRESS_CAPTURE_PORT);
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return cap_error_errno(err, errno, "nft: pipe");
  if (write(p[1], rules, (size_t)len) != len) { /* a pipe holds far more */
    close(p[0]);
    close(p[1]);
    return cap_error_errno(err, EIO, "nft: cannot write the rules");
  }
  close(p[1]);
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]);
    return cap_error_errno(err, errno, "nft: fork");
  }
  if (pid == 0)
    exec_nft(nft, p[0]);
  close(p[0]);
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return cap_error_errno(err, errno, "nft: wait");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return cap_error_set(err, ENOTSUP,
                         "%s could not load the redirect (exit %d): only listed ports are "
                         "forwarded",
                         nft, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  return 0;
}

bool capture_probe(void)
{
  if (!capture_nft())
    return false;
  cap_fork_prepare();
  pid_t pid =
      (pid_t)syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNET | SIGCHLD, NULL, NULL, NULL, NULL);
  if (pid == 0)
    cap_fork_child();
  else
    cap_fork_parent();
  if (pid < 0)
    return false;
  if (pid == 0) {
    struct cap_error err = {0};
    _exit(capture_install(&err) == 0 ? 0 : 1);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
