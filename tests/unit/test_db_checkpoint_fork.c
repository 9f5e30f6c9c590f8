/* A hostile review of gateway/db_checkpoint.c: a process that asked for
 * checkpoints apart forks while its thread checkpoints (capsule mcp forks
 * a call's child under its state lock, which the thread does not take);
 * the child opens the same database and commits. SQLite's own mutexes
 * (its global ones, the file's inode's) are plain pthread mutexes: one
 * held by the thread at the fork stays held for good in the child, whose
 * open then never returns. Each child has 30 s (SIGALRM) to open, write
 * and close; none may be killed by it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "gateway/db.h"
#include "gateway/db_checkpoint.h"
#include "unit.h"

static char dir[] = "/tmp/capsule-db-ckpt-fork-XXXXXX";

static bool commit_many(struct gw_db *db, int n)
{
  for (int i = 0; i < n; i++)
    if (gw_db_exec(db, "INSERT INTO t VALUES (randomblob(3000))") != GW_DB_OK)
      return false;
  return true;
}

static _Noreturn void child(const char *path)
{
  alarm(30);
  struct gw_db *db = NULL;
  struct cap_error err = {0};
  bool ok = gw_db_open_sqlite(path, &db, &err) == 0 &&
            gw_db_exec(db, "INSERT INTO t VALUES (x'00')") == GW_DB_OK;
  if (!ok)
    fprintf(stderr, "child: %s\n", db ? gw_db_errmsg(db) : err.message);
  gw_db_close(db);
  _exit(ok ? 0 : 1);
}

static void test_fork_while_checkpointing(void)
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
  unsigned hung = 0, failed = 0, forks = 0;
  for (int round = 0; round < 25 && !hung; round++) {
    unsigned before = 0, now = 0, inl = 0;
    gw_db_checkpoint_counts(&before, &inl);
    CHECK(commit_many(db, 1000)); /* wakes the thread */
    /* forks while it works (until its count moves, at most 200) */
    for (int i = 0; i < 200; i++) {
      pid_t pid = fork();
      if (pid == 0)
        child(path);
      int status = 0;
      forks++;
      CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
      if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        hung++;
      else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        failed++;
      gw_db_checkpoint_counts(&now, &inl);
      if (now > before || hung)
        break;
    }
  }
  if (hung)
    fprintf(stderr, "%u of %u children hung in SQLite (a mutex held at the fork)\n", hung, forks);
  CHECK(hung == 0);
  CHECK(failed == 0);
  gw_db_close(db);
  cap_error_clear(&err);
  _cleanup_free_ char *cmd = cap_xasprintf("rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

UNIT_MAIN(test_fork_while_checkpointing)
