/* Checkpoints apart (db_checkpoint.c): a long-lived process's SQLite
 * checkpoints on a thread of its own, off its committers' path. */
#ifndef CAPSULE_GATEWAY_DB_CHECKPOINT_H
#define CAPSULE_GATEWAY_DB_CHECKPOINT_H

#include <sqlite3.h>

/* db.c, at each SQLite open: the connection's checkpoints handed to the
 * thread when the process asked for it (gw_db_checkpoints_apart) and
 * path is its database (the first attached) */
void gw_db_checkpoint_attach(sqlite3 *db, const char *path);
/* The checkpoints of attached connections this process ran so far: by
 * the thread, and by committers (past the bound, or with no thread) */
void gw_db_checkpoint_counts(unsigned *apart, unsigned *inline_);

#endif
