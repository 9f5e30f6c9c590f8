/* Several reads of a call in one read transaction (state.h,
 * gw_state_read_begin): on SQLite a deferred BEGIN, so the reads share
 * one snapshot and take the WAL's read lock once, where each statement
 * alone is a transaction of its own (a lock taken and let go, the WAL
 * index read again). Nothing is cached: each call's reads start from the
 * database as it is, so a policy set before the call began is what the
 * call sees. On PostgreSQL nothing is done (BEGIN and COMMIT would each
 * be a round trip, more than they save). */
#include "gateway/db.h"
#include "gateway/state.h"
#include "gateway/state_int.h"

bool gw_state_read_begin(struct gw_state *st)
{
  if (gw_db_kind(st->db) != GW_DB_SQLITE)
    return false;
  struct gw_stmt *s = gw_db_prepare(st->db, "BEGIN"); /* kept prepared by db.c */
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE;
}

void gw_state_read_end(struct gw_state *st)
{
  struct gw_stmt *s = gw_db_prepare(st->db, "COMMIT");
  if (s)
    gw_stmt_step(s);
  gw_stmt_finalize(s);
}
