/* A warm server's keeper's egress spool (src/gateway/egress_spool.c): what
 * its proxy decided with no call in, left by a keeper that ended first, is
 * stored by the next state open with no call, once; a file still locked
 * by its keeper is not; the bounds are kept and what passes them counted;
 * a torn last row is dropped; a claimed file is not stored again. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "gateway/egress_spool.h"
#include "gateway/state.h"
#include "gateway/state_int.h"
#include "gateway/state_query.h"
#include "unit.h"

static char dir[] = "/tmp/capsule-unit-spool.XXXXXX";
static char run[64], spool_dir[80];

struct counted {
  size_t rows, free_rows, suppressed;
  long long suppressed_count;
  bool saw_host;
};

static void count_row(void *arg, const struct gw_egress_record *r)
{
  struct counted *c = arg;
  c->rows++;
  c->free_rows += r->call_seq == 0;
  if (strcmp(r->decision, "suppressed") == 0) {
    c->suppressed++;
    c->suppressed_count += r->count;
  }
  c->saw_host = c->saw_host || strcmp(r->host, "denied.invalid") == 0;
}

/* Opens the state (its open stores what is left) and counts the rows of
 * capability cap */
static struct counted open_and_count(const char *cap)
{
  struct counted c = {0};
  struct gw_state *st = NULL;
  struct cap_error err = {0};
  CHECK(gw_state_open(dir, &st, &err) == 0);
  if (!st)
    return c;
  struct gw_egress_filter f = {.capability = cap, .limit = 10000};
  bool more = false;
  CHECK(gw_egress_query(st, &f, count_row, &c, &more, &err) == 0);
  gw_state_close(st);
  cap_error_clear(&err);
  return c;
}

static size_t files_left(void)
{
  DIR *d = opendir(spool_dir);
  size_t n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    n += e->d_name[0] != '.';
  if (d)
    closedir(d);
  return n;
}

static void deny(struct gw_egress_spool *s, int port)
{
  struct proxy_egress_event ev = {.time_ms = 1700000000000,
                                  .decision = PROXY_DENY,
                                  .kind = "connect",
                                  .host = "denied.invalid",
                                  .port = (unsigned)port,
                                  .reason = "not allowed",
                                  .count = 1};
  gw_egress_spool_event(s, &ev);
}

static void test_left_and_cleared(void)
{
  struct gw_egress_spool s;
  gw_egress_spool_init(&s, run, "a", "alice");
  deny(&s, 1);
  CHECK(files_left() == 1);
  gw_egress_spool_clear(&s); /* a call took it */
  deny(&s, 2);
  struct gw_egress_batch b;
  gw_egress_batch_init(&b);
  struct gw_egress_row r = {.decision = PROXY_ALLOW, .host = cap_xstrdup("ok.invalid"), .port = 3};
  gw_egress_batch_add(&b, &r, 0);
  gw_egress_spool_batch(&s, &b); /* a call gone before its answer */
  gw_egress_batch_free(&b);
  gw_egress_spool_close(&s);
  struct counted c = open_and_count("a");
  CHECK(c.rows == 2 && c.free_rows == 2 && c.saw_host);
  CHECK(files_left() == 0);
  c = open_and_count("a"); /* stored once */
  CHECK(c.rows == 2);

  gw_egress_spool_init(&s, run, "a", "alice"); /* one emptied by its call: nothing left */
  deny(&s, 4);
  gw_egress_spool_clear(&s);
  gw_egress_spool_close(&s);
  CHECK(files_left() == 0);
  CHECK(open_and_count("a").rows == 2);
}

static void test_bound(void)
{
  struct gw_egress_spool s;
  gw_egress_spool_init(&s, run, "b", "bob");
  for (int i = 0; i < GW_EGRESS_BATCH_MAX + 5; i++)
    deny(&s, i % 65535 + 1);
  gw_egress_spool_close(&s);
  struct counted c = open_and_count("b");
  CHECK(c.rows == GW_EGRESS_BATCH_MAX + 1);
  CHECK(c.suppressed == 1 && c.suppressed_count == 5);
}

/* A keeper killed mid-row: the rows before it are stored */
static void test_torn(void)
{
  struct gw_egress_spool s;
  gw_egress_spool_init(&s, run, "c", "carol");
  deny(&s, 1);
  deny(&s, 2);
  char path[128];
  snprintf(path, sizeof path, "%s/%s", spool_dir, s.name);
  gw_egress_spool_close(&s);
  int fd = open(path, O_WRONLY | O_APPEND);
  CHECK(fd >= 0 && write(fd, "\x01\x02\x03", 3) == 3);
  close(fd);
  CHECK(open_and_count("c").rows == 2);
  CHECK(files_left() == 0);
}

/* Its keeper alive (the lock held): left; once it is gone, stored */
static void test_locked(void)
{
  int ready[2], go[2];
  CHECK(pipe(ready) == 0 && pipe(go) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    struct gw_egress_spool s;
    gw_egress_spool_init(&s, run, "d", "dave");
    deny(&s, 1);
    char c = 1;
    if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) < 0)
      _exit(1);
    _exit(0); /* killed, as by SIGKILL: the file left as it is */
  }
  char c;
  CHECK(read(ready[0], &c, 1) == 1);
  CHECK(open_and_count("d").rows == 0);
  CHECK(files_left() == 1);
  CHECK(write(go[1], &c, 1) == 1);
  int status;
  waitpid(pid, &status, 0);
  CHECK(open_and_count("d").rows == 1);
  CHECK(files_left() == 0);
  close(ready[0]);
  close(ready[1]);
  close(go[0]);
  close(go[1]);
}

/* A recovery killed between its commit and the file's removal: the claim
 * it committed keeps the next open from storing the rows again (here the
 * claim is written first, then the file left) */
static void test_claimed(void)
{
  struct gw_state *st = NULL;
  struct cap_error err = {0};
  CHECK(gw_state_open(dir, &st, &err) == 0);
  if (!st)
    return cap_error_clear(&err);
  struct gw_egress_spool s;
  gw_egress_spool_init(&s, run, "e", "erin");
  deny(&s, 1);
  _cleanup_free_ char *claim = cap_xasprintf("egress-spool:%s", s.name);
  struct gw_stmt *q =
      gw_state_prep(st, "INSERT INTO meta (key, value) VALUES (?, 'egress')", claim, NULL);
  CHECK(q && gw_stmt_step(q) == GW_DB_DONE);
  gw_stmt_finalize(q);
  gw_state_close(st);
  gw_egress_spool_close(&s);
  CHECK(files_left() == 1);
  CHECK(open_and_count("e").rows == 0);
  CHECK(files_left() == 0);
}

static void setup(void)
{
  CHECK(mkdtemp(dir) != NULL);
  setenv("CAPSULE_STATE_KEY", "", 1);
  snprintf(run, sizeof run, "%s/run", dir);
  snprintf(spool_dir, sizeof spool_dir, "%s/egress", run);
  CHECK(mkdir(run, 0700) == 0);
  CHECK(open_and_count("x").rows == 0); /* the database made */
}

static void cleanup(void)
{
  _cleanup_free_ char *cmd = cap_xasprintf("rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

UNIT_MAIN(setup, test_left_and_cleared, test_bound, test_torn, test_locked, test_claimed, cleanup)
