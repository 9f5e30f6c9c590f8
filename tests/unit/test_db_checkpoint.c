/* Unit tests for gateway/db_checkpoint.c: in a process that asked for
 * checkpoints apart, a connection's commits that fill the WAL hand its
 * checkpoint to the process's thread (the log still restarts: its file
 * stays bounded), and a fork's child checkpoints as SQLite does. */
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/buf.h"
#include "gateway/db.h"
#include "gateway/db_checkpoint.h"
#include "unit.h"

static char dir[] = "/tmp/capsule-db-checkpoint-XXXXXX";

static off_t wal_size(const char *db)
{
  char *wal = cap_xasprintf("%s-wal", db);
  struct stat sb;
  off_t n = stat(wal, &sb) == 0 ? sb.st_size : -1;
  free(wal);
  return n;
}

/* n commits of one row of 3,000 bytes each (a page or more of log each) */
static bool commit_many(struct gw_db *db, int n)
{
  for (int i = 0; i < n; i++)
    if (gw_db_exec(db, "INSERT INTO t VALUES (randomblob(3000))") != GW_DB_OK)
      return false;
  return true;
}

/* The thread's count once it passed n (false after 5 s) */
static bool apart_past(unsigned n)
{
  unsigned apart = 0, inl = 0;
  for (int i = 0; i < 500; i++) {
    gw_db_checkpoint_counts(&apart, &inl);
    if (apart > n)
      return true;
    usleep(10000);
  }
  return false;
}

static void test_apart(const char *path)
{
  gw_db_checkpoints_apart();
  struct gw_db *db = NULL;
  struct cap_error err = {0};
  CHECK(gw_db_open_sqlite(path, &db, &err) == 0);
  CHECK(gw_db_exec(db, "CREATE TABLE t (b BLOB)") == GW_DB_OK);
  /* six times past the threshold, each time waiting for the thread (a
   * loaded machine's thread is late, not wrong) */
  for (unsigned round = 0; round < 6; round++)
    CHECK(commit_many(db, 1000) && apart_past(round));
  unsigned apart = 0, inl = 0;
  gw_db_checkpoint_counts(&apart, &inl);
  /* no committer checkpointed: 12,000 pages were written, and a log
   * never started over would have reached the committers' bound (8,000
   * pages): each of the thread's checkpoints copied all of it (FULL) */
  CHECK(inl == 0);
  CHECK(wal_size(path) > 0 && wal_size(path) < 8000 * (4096 + 24));
  gw_db_close(db);
  cap_error_clear(&err);
}

/* A fork's child: no thread there; its connections are not attached
 * (it did not ask), so SQLite checkpoints them itself */
static void test_child(const char *path)
{
  pid_t pid = fork();
  if (pid == 0) {
    struct gw_db *db = NULL;
    struct cap_error err = {0};
    bool ok = gw_db_open_sqlite(path, &db, &err) == 0 && commit_many(db, 3000);
    unsigned apart = 0, inl = 0;
    gw_db_checkpoint_counts(&apart, &inl);
    /* SQLite's own checkpoints: none of the thread's, the log bounded */
    ok = ok && apart == 0 && inl == 0;
    gw_db_close(db);
    cap_error_clear(&err);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
        WEXITSTATUS(status) == 0);
}

static void test_db_checkpoint(void)
{
  if (!mkdtemp(dir)) {
    CHECK(!"mkdtemp");
    return;
  }
  char *path = cap_xasprintf("%s/state.db", dir);
  test_apart(path);
  test_child(path);
  char *cmd = cap_xasprintf("rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
  free(cmd);
  free(path);
}

UNIT_MAIN(test_db_checkpoint)
