/* A call's record appended after its answer (gateway/audit_later.c) and
 * the in-flight markers it leaves (gateway/state_inflight.c), each case in
 * a child process that then ends as a kill would leave it (_exit, its
 * marker locks gone), the parent opening the state after it:
 * - answered, then appended: one record, outcome ok, nothing recovered;
 * - answered, never appended (killed after the answer): the next open
 *   appends the record from the marker as the call ended (ok, its
 *   duration, its result's hash), once;
 * - a spare marker that last held a finished record begun again by a
 *   shorter call: written over without a truncate (its start padded with
 *   zeros), and recovered as interrupted with its start read right.
 * Exit 0 when all hold. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "gateway/call.h"
#include "gateway/state.h"

static int failed;

static void check(bool ok, const char *what)
{
  printf("  %s %s\n", ok ? "ok  " : "FAIL", what);
  failed += !ok;
}

struct last {
  size_t n, ok;
  char outcome[64], result[65];
  int64_t duration;
};

static void note(void *arg, const struct gw_audit_record *r)
{
  struct last *l = arg;
  if (strcmp(r->tool, "t") != 0)
    return;
  l->n++;
  l->ok += r->outcome && strcmp(r->outcome, "ok") == 0;
  snprintf(l->outcome, sizeof l->outcome, "%s", r->outcome ? r->outcome : "");
  snprintf(l->result, sizeof l->result, "%s", r->result_hash);
  l->duration = r->duration_ms;
}

/* The records of tool "t" in dir's log, the state opened (and so its
 * abandoned markers recorded) first. */
static struct last records(const char *dir)
{
  struct last l = {0};
  struct gw_state *st = NULL;
  struct cap_error err = {0};
  if (gw_state_open(dir, &st, &err) == 0) {
    gw_audit_each(st, 0, note, &l, &err);
    gw_state_close(st);
  }
  cap_error_clear(&err);
  return l;
}

static struct gw_audit_record rec(const char *outcome)
{
  struct gw_audit_record r = {
      .user = "u", .capability = "c", .tool = "t", .decision = "allow", .outcome = outcome};
  memset(r.args_hash, 'a', 64);
  return r;
}

/* A child's state, its markers kept as spares as serve keeps them. */
static struct gw_state *child_state(const char *dir)
{
  struct gw_state *st = NULL;
  struct cap_error err = {0};
  if (gw_state_open(dir, &st, &err) < 0)
    _exit(2);
  gw_inflight_spares(true);
  return st;
}

/* In a child: a call begun (its user user_len bytes long, when not 0),
 * answered (its record in the marker), then appended when commit
 * says so; a second call begun on the spare when again says so; then
 * _exit (as a kill: the locks go, nothing else). */
static void child(const char *dir, bool commit, bool again, size_t user_len)
{
  struct cap_error err = {0};
  struct gw_state *st = child_state(dir);
  struct gw_audit_record r = rec("ok");
  char *user = calloc(1, user_len + 1);
  memset(user, 'x', user_len);
  if (user_len)
    r.user = user;
  struct gw_inflight m;
  if (gw_inflight_begin(st, &r, &m, &err) < 0)
    _exit(3);
  r.duration_ms = 7;
  memset(r.result_hash, 'b', 64);
  struct gw_audit_later *l = gw_audit_later_take(&r, &m);
  if (!l || m.fd >= 0)
    _exit(4);
  if (commit && gw_audit_later_commit(l, st, &err) < 0)
    _exit(5);
  if (again) {
    struct gw_audit_record s = rec("ok");
    s.user = ""; /* shorter than the finished text the spare holds */
    struct gw_inflight m2;
    if (gw_inflight_begin(st, &s, &m2, &err) < 0)
      _exit(6);
  }
  _exit(0);
}

/* In a child: a call answered whose append commits but then fails (the
 * high-water mark made a directory meanwhile: it cannot be moved); exit 0
 * when the append said so and the next call's record is not taken for
 * after its answer (the process appends first again). */
static void child_mark_fails(const char *dir)
{
  struct cap_error err = {0};
  struct gw_state *st = child_state(dir);
  struct gw_audit_record r = rec("ok");
  struct gw_inflight m;
  if (gw_inflight_begin(st, &r, &m, &err) < 0)
    _exit(3);
  struct gw_audit_later *l = gw_audit_later_take(&r, &m);
  char hwm[256], kept[256];
  snprintf(hwm, sizeof hwm, "%s/audit-hwm", dir);
  snprintf(kept, sizeof kept, "%s/audit-hwm.kept", dir);
  if (!l || rename(hwm, kept) < 0 || mkdir(hwm, 0700) < 0)
    _exit(4);
  if (gw_audit_later_commit(l, st, &err) == 0)
    _exit(5);
  struct gw_inflight m2;
  if (gw_inflight_begin(st, &r, &m2, &err) < 0)
    _exit(6);
  if (gw_audit_later_take(&r, &m2))
    _exit(7);
  _exit(0);
}

static bool run_child(const char *dir, bool commit, bool again, size_t user_len)
{
  pid_t p = fork();
  if (p == 0)
    child(dir, commit, again, user_len);
  int status = 0;
  return p > 0 && waitpid(p, &status, 0) == p && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The one marker under dir/run/calls whose text starts with the tag:
 * its fields counted, and whether its start (the seventh) was padded
 * with zeros; false when there is none. */
static bool marker(const char *dir, size_t *fields, bool *padded)
{
  char cmd[512];
  snprintf(cmd, sizeof cmd, "ls %s/run/calls", dir);
  FILE *ls = popen(cmd, "r");
  char name[256];
  bool found = false;
  while (ls && fgets(name, sizeof name, ls)) {
    name[strcspn(name, "\n")] = '\0';
    char path[1024], buf[8192];
    snprintf(path, sizeof path, "%s/run/calls/%s", dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
      close(fd);
    if (n <= 0 || strcmp(buf, "capsule-inflight-v1") != 0)
      continue;
    buf[n] = '\0';
    *fields = 0;
    for (char *p = buf; p < buf + n; p += strlen(p) + 1)
      if (++*fields == 7)
        *padded = *p == '0';
    found = true;
  }
  if (ls)
    pclose(ls);
  return found;
}

static char *state_in(char *tmp)
{
  if (!mkdtemp(tmp))
    exit(1);
  static char dirs[5][128];
  static int k;
  snprintf(dirs[k], sizeof dirs[k], "%s/state", tmp);
  return dirs[k++];
}

int main(void)
{
  char ta[] = "/tmp/capsule-audit-later-XXXXXX", tb[] = "/tmp/capsule-audit-later-XXXXXX",
       tc[] = "/tmp/capsule-audit-later-XXXXXX", td[] = "/tmp/capsule-audit-later-XXXXXX",
       te[] = "/tmp/capsule-audit-later-XXXXXX";
  const char *a = state_in(ta), *b = state_in(tb), *c = state_in(tc), *d = state_in(td),
             *e = state_in(te);
  setenv("CAPSULE_STATE_KEY", "", 1); /* the key file in each state directory */

  check(run_child(a, true, false, 0), "answered, then appended (child)");
  struct last l = records(a);
  check(l.n == 1 && strcmp(l.outcome, "ok") == 0, "answered, then appended: one record, ok");

  check(run_child(b, false, false, 0), "answered, never appended (child)");
  l = records(b);
  check(l.n == 1 && strcmp(l.outcome, "ok") == 0 && l.duration == 7 && l.result[0] == 'b' &&
            strlen(l.result) == 64,
        "killed after the answer: the record from the marker, as the call ended, once");
  l = records(b);
  check(l.n == 1, "recorded once: a second open adds nothing");

  check(run_child(c, true, true, 700), "a spare begun again by a shorter call (child)");
  size_t fields = 0;
  bool padded = false;
  check(marker(c, &fields, &padded) && fields == 8 && padded,
        "the spare written over, padded, not cut: eight fields, the start zero-padded");
  l = records(c);
  check(l.n == 2 && strcmp(l.outcome, "interrupted") == 0 && l.duration >= 0 &&
            l.duration < 3600 * 1000,
        "the padded marker recovered as interrupted, its start read right");

  /* e: a marker too long to keep as a spare (its user 5,000 bytes): the
   * next call's is a new one, not padded to it */
  check(run_child(e, true, true, 5000), "a long marker's call, then a short one (child)");
  fields = 0;
  padded = true;
  check(marker(e, &fields, &padded) && fields == 8 && !padded,
        "a marker past 4 KiB not kept: the next call's is its own, not padded");
  l = records(e);
  check(l.n == 2 && l.ok == 1 && strcmp(l.outcome, "interrupted") == 0,
        "the long call's record and the short one's, interrupted");

  /* d: the state made first (its mark a file), then the child */
  check(records(d).n == 0, "a fourth state");
  pid_t p = fork();
  if (p == 0)
    child_mark_fails(d);
  int status = 0;
  check(p > 0 && waitpid(p, &status, 0) == p && WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "an append that failed after its COMMIT says so, and the process appends first again");
  char hwm[256], kept[256];
  snprintf(hwm, sizeof hwm, "%s/audit-hwm", d);
  snprintf(kept, sizeof kept, "%s/audit-hwm.kept", d);
  if (rmdir(hwm) < 0 || rename(kept, hwm) < 0)
    failed++;
  l = records(d);
  check(l.ok == 1 && l.n == 2 && strcmp(l.outcome, "interrupted") == 0,
        "committed, then the mark failed: one record, not a second from the marker (and the "
        "next call, begun, interrupted)");

  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf %s %s %s %s %s", ta, tb, tc, td, te);
  if (system(cmd) != 0)
    failed++;
  printf("audit later: %s\n", failed ? "FAILED" : "all passed");
  return failed ? 1 : 0;
}
