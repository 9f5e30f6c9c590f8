/* The dashboard's reads of the state (state_query.h). */
#include "gateway/state_query.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "gateway/state_int.h"

const char *gw_chain_status_name(enum gw_chain_status s)
{
  static const char *const names[] = {"ok", "edited", "unlinked"};
  return names[s];
}

/* One statement, each filter bound or NULL (NULL matches anything); the
 * casts give PostgreSQL the parameters' types, and the substring test is
 * each backend's own (instr, strpos). */
static const char audit_query_sql[] =
    "SELECT a.seq, a.time, a.user, a.capability, a.tool, a.args_hash, a.decision, a.duration_ms,"
    " a.outcome, a.result_hash, a.prev, a.hash, p.hash FROM audit a"
    " LEFT JOIN audit p ON p.seq = a.seq - 1"
    " WHERE (CAST(?1 AS TEXT) IS NULL OR a.capability = ?1)"
    " AND (CAST(?2 AS TEXT) IS NULL OR a.user = ?2)"
    " AND (CAST(?3 AS TEXT) IS NULL OR a.decision = ?3)"
    " AND (CAST(?4 AS TEXT) IS NULL OR %s(a.user || ' ' || a.capability || ' ' || a.tool || ' ' ||"
    " a.decision || ' ' || a.outcome, ?4) > 0)"
    " AND (CAST(?5 AS BIGINT) IS NULL OR a.seq < ?5) ORDER BY a.seq DESC LIMIT ?6";

static void bind_filter(struct gw_stmt *s, int i, const char *v)
{
  gw_stmt_bind_text(s, i, v && *v ? v : NULL);
}

static const char *col(struct gw_stmt *s, int i)
{
  const char *v = gw_stmt_text(s, i);
  return v ? v : "";
}

static enum gw_chain_status chain_of(const struct gw_state *st, const struct gw_audit_record *r,
                                     const char *before)
{
  char mac[65], zero[65];
  gw_audit_mac(st, r, mac);
  if (sodium_memcmp(mac, r->hash, 64) != 0)
    return GW_CHAIN_EDITED;
  snprintf(zero, sizeof zero, "%064d", 0);
  const char *want = r->seq == 1 ? zero : before;
  return want && strcmp(want, r->prev) == 0 ? GW_CHAIN_OK : GW_CHAIN_UNLINKED;
}

int gw_audit_query(struct gw_state *st, const struct gw_audit_filter *f, gw_audit_row_fn fn,
                   void *arg, bool *more, struct cap_error *err)
{
  size_t limit = f->limit ? f->limit : 100;
  *more = false;
  char sql[sizeof audit_query_sql + 16];
  snprintf(sql, sizeof sql, audit_query_sql,
           gw_db_kind(st->db) == GW_DB_POSTGRES ? "strpos" : "instr");
  struct gw_stmt *s = gw_db_prepare(st->db, sql);
  if (!s)
    return gw_state_db_error(st, err, "cannot search the audit log");
  bind_filter(s, 1, f->capability);
  bind_filter(s, 2, f->user);
  bind_filter(s, 3, f->decision);
  bind_filter(s, 4, f->text);
  if (f->before > 0)
    gw_stmt_bind_int64(s, 5, f->before);
  else
    gw_stmt_bind_text(s, 5, NULL);
  gw_stmt_bind_int64(s, 6, (int64_t)limit + 1); /* one more: whether there are more */
  int rc;
  size_t n = 0;
  while ((rc = gw_stmt_step(s)) == GW_DB_ROW) {
    if (n++ == limit) {
      *more = true;
      continue;
    }
    struct gw_audit_record r = {.seq = gw_stmt_int64(s, 0),
                                .user = col(s, 2),
                                .capability = col(s, 3),
                                .tool = col(s, 4),
                                .decision = col(s, 6),
                                .duration_ms = gw_stmt_int64(s, 7),
                                .outcome = col(s, 8)};
    snprintf(r.time, sizeof r.time, "%s", col(s, 1));
    snprintf(r.args_hash, sizeof r.args_hash, "%s", col(s, 5));
    snprintf(r.result_hash, sizeof r.result_hash, "%s", col(s, 9));
    snprintf(r.prev, sizeof r.prev, "%s", col(s, 10));
    snprintf(r.hash, sizeof r.hash, "%s", col(s, 11));
    const char *before = gw_stmt_is_null(s, 12) ? NULL : col(s, 12);
    fn(arg, &r, chain_of(st, &r, before));
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot search the audit log");
}
