/* A hostile review of gateway/db_checkpoint.c: a reader that keeps an old
 * snapshot (another process's long read: an export to a slow pipe) while
 * the log fills. The thread's FULL step takes the writers' lock, then
 * waits for the readers; it must not hold the writers off for long while
 * it waits (serve's calls commit their records behind it): here a writer
 * that does not wait (busy timeout 0) tries every millisecond while the
 * thread checkpoints three times (woken by commits of its own process's), and is never turned away
 * 500 times in a row (half a second at the least). */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "gateway/db.h"
#include "gateway/db_checkpoint.h"
#include "unit.h"

static char dir[] = "/tmp/capsule-db-ckpt-reader-XXXXXX";

static bool commit_many(struct gw_db *db, int n)
{
  for (int i = 0; i < n; i++)
    if (gw_db_exec(db, "INSERT INTO t VALUES (randomblob(3000))") != GW_DB_OK)
      return false;
  return true;
}

/* A child holding a read transaction (its snapshot) until go is closed */
static pid_t reader(const char *path, int ready, int go, int go_end)
{
  pid_t pid = fork();
  if (pid != 0)
    return pid;
  close(go_end);
  sqlite3 *db = NULL;
  char c = 1;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
      sqlite3_exec(db, "BEGIN; SELECT count(*) FROM t;", NULL, NULL, NULL) != SQLITE_OK ||
      write(ready, &c, 1) != 1)
    _exit(1);
  while (read(go, &c, 1) > 0) {
  }
  sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
  sqlite3_close(db);
  _exit(0);
}

/* An attached connection's commits, every 20 ms until stop: the thread
 * woken again and again (it waits on them apart from the writer) */
static volatile bool stop;
static void *waker(void *arg)
{
  while (!stop) {
    commit_many(arg, 1);
    usleep(20000);
  }
  return NULL;
}

static void test_reader(void)
{
  if (!mkdtemp(dir)) {
    CHECK(!"mkdtemp");
    return;
  }
  _cleanup_free_ char *path = cap_xasprintf("%s/state.db", dir);
  gw_db_checkpoints_apart();
  struct gw_db *db = NULL;
  struct cap_error err = {0};
  CHECK(gw_db_open_sqlite(path, &db, &err) == 0);
  CHECK(gw_db_exec(db, "CREATE TABLE t (b BLOB)") == GW_DB_OK);
  CHECK(commit_many(db, 10));
  int ready[2], go[2];
  CHECK(pipe(ready) == 0 && pipe(go) == 0);
  pid_t pid = reader(path, ready[1], go[0], go[1]);
  close(go[0]);
  char c;
  CHECK(pid > 0 && read(ready[0], &c, 1) == 1);
  sqlite3 *w = NULL; /* the writer that does not wait */
  CHECK(sqlite3_open_v2(path, &w, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
  sqlite3_busy_timeout(w, 0);
  unsigned before = 0, now = 0, inl = 0;
  CHECK(commit_many(db, 1000)); /* the log past the threshold */
  gw_db_checkpoint_counts(&before, &inl);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, waker, db) == 0);
  unsigned run = 0, longest = 0;
  for (int i = 0; i < 60000; i++) { /* a minute's tries at the most */
    int rc = sqlite3_exec(w, "INSERT INTO t VALUES (randomblob(3000))", NULL, NULL, NULL);
    run = rc == SQLITE_BUSY ? run + 1 : 0;
    longest = run > longest ? run : longest;
    gw_db_checkpoint_counts(&now, &inl);
    if (now >= before + 3 || longest >= 500)
      break;
    usleep(1000);
  }
  if (longest >= 500)
    fprintf(stderr, "a writer was turned away %u times in a row (1 ms apart)\n", longest);
  CHECK(now >= before + 3 || longest >= 500);
  CHECK(longest < 500);
  stop = true;
  pthread_join(t, NULL);
  sqlite3_close(w);
  close(go[1]);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(ready[0]);
  close(ready[1]);
  gw_db_close(db);
  cap_error_clear(&err);
  _cleanup_free_ char *cmd = cap_xasprintf("rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

UNIT_MAIN(test_reader)
