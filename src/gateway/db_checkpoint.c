/* Checkpoints apart (db.h, gw_db_checkpoints_apart). SQLite checkpoints
 * a WAL database itself when a commit leaves 1,000 pages or more in the
 * log: in that commit, on the committing connection, which copies the
 * log's pages into the database and syncs both files before its COMMIT
 * returns. In serve every call's audit record is committed under the
 * state lock (state_group.c), so each such commit held every call in
 * flight for as long as the copy and two syncs took: about a third of
 * the record's time under the lock at eight connections. Here, in a
 * process that asked for it, a commit that crosses the threshold only
 * wakes a thread of the process's own, which checkpoints on a connection
 * of its own: PASSIVE first, as SQLite's own is (it waits for no reader
 * nor writer: the writers go on appending meanwhile), then a short FULL
 * step so that the log can start over (checkpoint()). A log past 8x the
 * threshold (the thread cannot keep up, or could not start) is
 * checkpointed by the committing connection, as SQLite would. */
#include "gateway/db_checkpoint.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "gateway/db.h"

#define CKPT_PAGES 1000        /* SQLite's own threshold (its default autocheckpoint) */
#define CKPT_INLINE_PAGES 8000 /* past it, the committer checkpoints, as SQLite would */

static struct {
  pthread_mutex_t mu;
  pthread_mutex_t in_sqlite; /* held by the thread while it is in SQLite; and across a fork */
  pthread_cond_t wake;
  bool on;                 /* asked for: connections opened from now on are attached */
  bool started;            /* the thread runs */
  bool failed;             /* it could not start: each committer checkpoints itself */
  bool due;                /* a commit crossed the threshold since the last checkpoint */
  char *path;              /* the one database the thread checkpoints */
  unsigned apart, inline_; /* checkpoints run, by the thread and by committers */
} ck = {.mu = PTHREAD_MUTEX_INITIALIZER,
        .in_sqlite = PTHREAD_MUTEX_INITIALIZER,
        .wake = PTHREAD_COND_INITIALIZER};

/* FULL's busy handler. FULL takes the writers' lock first, then waits for
 * the readers still on an older snapshot while it holds it: every writer
 * (serve's calls' records) waits as long as it does. So it waits 2 ms at
 * the most for each lock (a writer's transaction, a reader's), then gives
 * up, the log's pages it could copy copied: a reader that keeps its
 * snapshot (another process's long read) holds the log's restart off, not
 * the writers, and the next commit past the threshold tries again. */
static int full_wait(void *ctx, int tries)
{
  (void)ctx;
  if (tries >= 20)
    return 0;
  usleep(100);
  return 1;
}

/* One checkpoint: PASSIVE first, the log's pages copied while the
 * writers go on; then FULL, which holds the writers off only to copy what
 * they added meanwhile and sync: the log is then all in the database, so
 * the next writer starts it over (a PASSIVE one alone, with writers
 * always appending, never catches up, and the log would only grow) */
static void checkpoint(void)
{
  /* a connection of its own each time (one in 1,000 pages): nothing of it
   * outlives the checkpoint, so the process's last connection to close is
   * still its own, which empties the log */
  sqlite3 *db = NULL;
  pthread_mutex_lock(&ck.in_sqlite);
  if (sqlite3_open_v2(ck.path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) ==
          SQLITE_OK &&
      sqlite3_exec(db, "PRAGMA schema_version", NULL, NULL, NULL) == SQLITE_OK) { /* WAL open */
    sqlite3_busy_handler(db, full_wait, NULL);
    if (sqlite3_wal_checkpoint_v2(db, "main", SQLITE_CHECKPOINT_PASSIVE, NULL, NULL) == SQLITE_OK)
      sqlite3_wal_checkpoint_v2(db, "main", SQLITE_CHECKPOINT_FULL, NULL, NULL);
  }
  sqlite3_close(db);
  pthread_mutex_unlock(&ck.in_sqlite);
  __atomic_fetch_add(&ck.apart, 1, __ATOMIC_RELAXED);
}

static void *checkpointer(void *arg)
{
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&ck.mu);
    while (!ck.due)
      pthread_cond_wait(&ck.wake, &ck.mu);
    ck.due = false;
    pthread_mutex_unlock(&ck.mu);
    checkpoint();
    /* the commits until the next writer starts the log over find it full
     * still and ask again: one checkpoint answers them all */
    usleep(20000);
  }
  return NULL;
}

/* Whether the thread takes this checkpoint: started on first need (a
 * process forks before its first commit: serve's spawner is forked
 * before any thread), else false (the committer does it). */
static bool hand_over(void)
{
  bool taken = false;
  pthread_mutex_lock(&ck.mu);
  if (ck.on && !ck.started && !ck.failed) {
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    ck.started = pthread_create(&t, &attr, checkpointer, NULL) == 0;
    ck.failed = !ck.started;
    pthread_attr_destroy(&attr);
  }
  if (ck.on && ck.started) {
    if (!ck.due)
      pthread_cond_signal(&ck.wake);
    ck.due = taken = true;
  }
  pthread_mutex_unlock(&ck.mu);
  return taken;
}

/* SQLite's WAL hook, after each commit of an attached connection (its
 * default is the autocheckpoint this replaces) */
static int on_commit(void *ctx, sqlite3 *db, const char *name, int pages)
{
  (void)ctx;
  if (pages < CKPT_PAGES)
    return SQLITE_OK;
  if (pages >= CKPT_INLINE_PAGES || !hand_over()) {
    sqlite3_wal_checkpoint(db, name);
    __atomic_fetch_add(&ck.inline_, 1, __ATOMIC_RELAXED);
  }
  return SQLITE_OK;
}

/* No fork while the thread is in SQLite: SQLite's mutexes (its global
 * ones, and those of the database file's inode, which a child opening the
 * same file shares) are plain pthread mutexes, and one the thread held at
 * the fork would stay held for good in the child, whose first open of the
 * database would then never return (capsule mcp forks a call's child
 * under its state lock, which keeps its other threads out of SQLite, but
 * not this one). A fork waits for a checkpoint under way: its copy and
 * syncs, and the FULL step's short waits (full_wait) for a lock. */
static void at_fork_prepare(void) { pthread_mutex_lock(&ck.in_sqlite); }
static void at_fork_parent(void) { pthread_mutex_unlock(&ck.in_sqlite); }

/* A fork's child has none of the thread: its connections checkpoint
 * themselves (the hook finds it off), and its locks start free. */
static void at_fork_child(void)
{
  static const pthread_mutex_t fresh_mu = PTHREAD_MUTEX_INITIALIZER;
  static const pthread_cond_t fresh_cond = PTHREAD_COND_INITIALIZER;
  memcpy(&ck.mu, &fresh_mu, sizeof ck.mu);
  memcpy(&ck.in_sqlite, &fresh_mu, sizeof ck.in_sqlite);
  memcpy(&ck.wake, &fresh_cond, sizeof ck.wake);
  ck.on = ck.started = ck.due = false;
  ck.apart = ck.inline_ = 0;
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void register_fork(void) { pthread_atfork(at_fork_prepare, at_fork_parent, at_fork_child); }

void gw_db_checkpoints_apart(void)
{
  pthread_once(&fork_once, register_fork);
  pthread_mutex_lock(&ck.mu);
  if (!ck.on) { /* a fork's child asking anew: its database may be another */
    free(ck.path);
    ck.path = NULL;
  }
  ck.on = true;
  pthread_mutex_unlock(&ck.mu);
}

void gw_db_checkpoint_attach(sqlite3 *db, const char *path)
{
  pthread_mutex_lock(&ck.mu);
  bool ours = ck.on && (!ck.path || strcmp(ck.path, path) == 0);
  if (ours && !ck.path)
    ck.path = cap_xstrdup(path);
  pthread_mutex_unlock(&ck.mu);
  if (ours) /* another database keeps SQLite's own checkpoints */
    sqlite3_wal_hook(db, on_commit, NULL);
}

void gw_db_checkpoint_counts(unsigned *apart, unsigned *inline_)
{
  *apart = __atomic_load_n(&ck.apart, __ATOMIC_RELAXED);
  *inline_ = __atomic_load_n(&ck.inline_, __ATOMIC_RELAXED);
}
