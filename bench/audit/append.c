/* The state's per-call costs that do not depend on the tool, on one
 * handle of a new SQLite state in a temporary directory under /var/tmp:
 * N audit records appended one by one (each its own transaction and move
 * of the high-water mark, as a call alone in serve's group commit), then
 * N checks of one access token (a kept token, as serve's every request).
 * Prints the wall time of each, per operation; run it under
 * `perf stat -e task-clock,raw_syscalls:sys_enter` for CPU and system
 * calls. Usage: audit_append [N]   (N = 5000) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/error.h"
#include "gateway/access.h"
#include "gateway/state.h"

static double now_us(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int fail(struct cap_error *err)
{
  fprintf(stderr, "audit_append: %s\n", err->message ? err->message : "failed");
  return 1;
}

int main(int argc, char **argv)
{
  int n = argc > 1 ? atoi(argv[1]) : 5000;
  if (n <= 0) {
    fputs("usage: audit_append [N]   (N > 0)\n", stderr);
    return 2;
  }
  char dir[] = "/var/tmp/capsule-bench-audit.XXXXXX";
  if (!mkdtemp(dir)) {
    perror("audit_append: mkdtemp");
    return 1;
  }
  setenv("CAPSULE_STATE_KEY", "", 1); /* the key made in dir */
  struct gw_state *st = NULL;
  struct cap_error err = {0};
  char token[GW_ACCESS_TOKEN_LEN + 1];
  int rc = 1;
  if (gw_state_open(dir, &st, &err) < 0 || gw_access_issue(st, "b", "u", false, token, &err) < 0) {
    rc = fail(&err);
    goto out;
  }
  for (int i = 0; i < 100; i++) /* warm: the statements prepared, the mark held */
    if (gw_audit_change(st, "bench", "u", "cap", "tool", "warm-up", &err) < 0) {
      rc = fail(&err);
      goto out;
    }
  double t0 = now_us();
  for (int i = 0; i < n; i++) {
    struct gw_audit_record r = {
        .user = "user", .capability = "cap", .tool = "tool", .decision = "allow", .outcome = "ok"};
    if (gw_audit_append(st, &r, &err) < 0) {
      rc = fail(&err);
      goto out;
    }
  }
  double t1 = now_us();
  for (int i = 0; i < n; i++) {
    char *user = NULL;
    bool op = false;
    if (gw_access_check(st, token, &user, &op, &err) < 0) {
      rc = fail(&err);
      goto out;
    }
    free(user);
  }
  double t2 = now_us();
  size_t records = 0;
  if (gw_audit_verify(st, &records, &err) < 0) {
    rc = fail(&err);
    goto out;
  }
  printf("audit append %.1f us, token check %.2f us (%d each; %zu records verify)\n", (t1 - t0) / n,
         (t2 - t1) / n, n, records);
  rc = 0;
out:
  cap_error_clear(&err);
  gw_state_close(st);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    rc = 1;
  return rc;
}
