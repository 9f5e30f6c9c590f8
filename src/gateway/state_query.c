/* The dashboard's reads of the state (state_query.h). */
#include "gateway/state_query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "gateway/state_int.h"

const char *gw_chain_status_name(enum gw_chain_status s)
{
  static const char *const names[] = {"ok", "edited", "unlinked"};
  return names[s];
}

/* The statement for f: only the filters given, each a bound parameter
 * (a clause like "? IS NULL OR seq < ?" would keep SQLite from walking
 * the rowid from the page's start: a deep page scanned from the top).
 * The substring test is each backend's own (instr, strpos). The LIMIT
 * (the page's size and one more: whether there are more) is written in,
 * not bound: PostgreSQL plans "LIMIT $n" for a tenth of the table, so its
 * generic plan never wins and every execution of the prepared statement
 * was planned again (0.1 ms of a 0.4 ms page); with the number in the
 * text, the plan is made once per connection. */
static size_t page_rows(size_t limit) { return (limit ? limit : 100) + 1; }

void gw_audit_query_sql(const struct gw_audit_filter *f, enum gw_db_kind kind, struct cap_buf *out)
{
  cap_buf_puts(out, "SELECT a.seq, a.time, a.user, a.capability, a.tool, a.args_hash, a.decision,"
                    " a.duration_ms, a.outcome, a.result_hash, a.prev, a.hash, p.hash FROM audit a"
                    " LEFT JOIN audit p ON p.seq = a.seq - 1 WHERE 1 = 1");
  if (f->capability && *f->capability)
    cap_buf_puts(out, " AND a.capability = ?");
  if (f->user && *f->user)
    cap_buf_puts(out, " AND a.user = ?");
  if (f->decision && *f->decision)
    cap_buf_puts(out, " AND a.decision = ?");
  if (f->text && *f->text)
    cap_buf_printf(out,
                   " AND %s(a.user || ' ' || a.capability || ' ' || a.tool || ' ' || a.decision"
                   " || ' ' || a.outcome, ?) > 0",
                   kind == GW_DB_POSTGRES ? "strpos" : "instr");
  if (f->before > 0)
    cap_buf_puts(out, " AND a.seq < ?");
  cap_buf_puts(out, " ORDER BY a.seq DESC LIMIT ");
  cap_buf_put_i64(out, (int64_t)page_rows(f->limit));
}

static const char *col(struct gw_stmt *s, int i)
{
  const char *v = gw_stmt_text(s, i);
  return v ? v : "";
}

/* Column i into out, cut to fit (no printf: a page copies 500 of them). */
static void copy_col(char *out, size_t size, struct gw_stmt *s, int i)
{
  const char *v = col(s, i);
  size_t n = strnlen(v, size - 1);
  memcpy(out, v, n);
  out[n] = '\0';
}

/* Records whose MAC this handle has checked, by sequence number (one slot
 * each, direct-mapped: a page's records never share one): the exact bytes
 * the MAC covered and the MAC they gave. A record shown again whose bytes
 * are the same has the same MAC, so it is not computed again; any change
 * to a byte of it (an edit in the database) misses and is checked anew.
 * What is kept is what the database holds (no key, nothing secret). */
#define SEEN_SLOTS 4096

struct seen_slot {
  int64_t seq;
  size_t len;
  unsigned char *msg;
  char mac[65];
};

struct gw_audit_seen {
  struct seen_slot slot[SEEN_SLOTS];
  struct cap_buf msg; /* the record at hand's bytes, its allocation reused */
};

void gw_audit_seen_free(struct gw_state *st)
{
  if (!st->seen)
    return;
  for (size_t i = 0; i < SEEN_SLOTS; i++)
    free(st->seen->slot[i].msg);
  cap_buf_free(&st->seen->msg);
  free(st->seen);
  st->seen = NULL;
}

/* r's MAC under the state key, from the slot when r's bytes are those
 * checked before. */
static void mac_of(struct gw_state *st, const struct gw_audit_record *r, char mac[65])
{
  if (!st->seen)
    st->seen = cap_xcalloc(1, sizeof *st->seen);
  struct cap_buf *m = &st->seen->msg;
  m->len = 0;
  gw_audit_mac_input(r, m);
  struct seen_slot *sl = &st->seen->slot[(uint64_t)r->seq % SEEN_SLOTS];
  if (sl->msg && sl->seq == r->seq && sl->len == m->len && memcmp(sl->msg, m->data, m->len) == 0) {
    memcpy(mac, sl->mac, 65);
    return;
  }
  gw_audit_mac_bytes(st, m->data, m->len, mac);
  free(sl->msg);
  sl->msg = cap_xmalloc(m->len ? m->len : 1);
  memcpy(sl->msg, m->data, m->len);
  sl->len = m->len;
  sl->seq = r->seq;
  memcpy(sl->mac, mac, 65);
}

/* Whether two MACs in hex are the same, in constant time (as
 * sodium_memcmp, eight words at a time rather than a byte). */
static bool mac_equal(const char *a, const char *b)
{
  uint64_t diff = 0;
  for (size_t i = 0; i < 64; i += 8) {
    uint64_t x, y;
    memcpy(&x, a + i, 8);
    memcpy(&y, b + i, 8);
    diff |= x ^ y;
  }
  return diff == 0;
}

static enum gw_chain_status chain_of(struct gw_state *st, const struct gw_audit_record *r,
                                     const char *before)
{
  static const char zero[] = "0000000000000000000000000000000000000000000000000000000000000000";
  char mac[65];
  mac_of(st, r, mac);
  if (strlen(r->hash) != 64 || !mac_equal(mac, r->hash))
    return GW_CHAIN_EDITED;
  const char *want = r->seq == 1 ? zero : before;
  return want && strcmp(want, r->prev) == 0 ? GW_CHAIN_OK : GW_CHAIN_UNLINKED;
}

int gw_audit_query(struct gw_state *st, const struct gw_audit_filter *f, gw_audit_row_fn fn,
                   void *arg, bool *more, struct cap_error *err)
{
  size_t limit = f->limit ? f->limit : 100;
  *more = false;
  struct cap_buf sql = {0};
  gw_audit_query_sql(f, gw_db_kind(st->db), &sql);
  struct gw_stmt *s = gw_db_prepare(st->db, sql.data);
  cap_buf_free(&sql);
  if (!s)
    return gw_state_db_error(st, err, "cannot search the audit log");
  int i = 1;
  const char *text[] = {f->capability, f->user, f->decision, f->text};
  for (size_t k = 0; k < sizeof text / sizeof text[0]; k++)
    if (text[k] && *text[k])
      gw_stmt_bind_text(s, i++, text[k]);
  if (f->before > 0)
    gw_stmt_bind_int64(s, i, f->before);
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
    copy_col(r.time, sizeof r.time, s, 1);
    copy_col(r.args_hash, sizeof r.args_hash, s, 5);
    copy_col(r.result_hash, sizeof r.result_hash, s, 9);
    copy_col(r.prev, sizeof r.prev, s, 10);
    copy_col(r.hash, sizeof r.hash, s, 11);
    const char *before = gw_stmt_is_null(s, 12) ? NULL : col(s, 12);
    fn(arg, &r, chain_of(st, &r, before));
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot search the audit log");
}

/* ---- the egress log ---- */

static void egress_query_sql(const struct gw_egress_filter *f, enum gw_db_kind kind,
                             struct cap_buf *out)
{
  cap_buf_puts(out, "SELECT seq, time, capability, user, call_seq, decision, kind, host, port,"
                    " method, path, credential, reason, count, bytes_up, bytes_down FROM egress"
                    " WHERE 1 = 1");
  if (f->capability && *f->capability)
    cap_buf_puts(out, " AND capability = ?");
  if (f->user && *f->user)
    cap_buf_puts(out, " AND user = ?");
  if (f->decision && *f->decision)
    cap_buf_puts(out, " AND decision = ?");
  if (f->text && *f->text)
    cap_buf_printf(out,
                   " AND %s(coalesce(host, '') || ' ' || coalesce(method, '') || ' ' ||"
                   " coalesce(path, '') || ' ' || coalesce(reason, ''), ?) > 0",
                   kind == GW_DB_POSTGRES ? "strpos" : "instr");
  if (f->call_seq > 0)
    cap_buf_puts(out, " AND call_seq = ?");
  if (f->before > 0)
    cap_buf_puts(out, " AND seq < ?");
  cap_buf_puts(out, " ORDER BY seq DESC LIMIT "); /* written in, as the audit log's */
  cap_buf_put_i64(out, (int64_t)page_rows(f->limit));
}

static void egress_bind(struct gw_stmt *s, const struct gw_egress_filter *f)
{
  int i = 1;
  const char *text[] = {f->capability, f->user, f->decision, f->text};
  for (size_t k = 0; k < sizeof text / sizeof text[0]; k++)
    if (text[k] && *text[k])
      gw_stmt_bind_text(s, i++, text[k]);
  if (f->call_seq > 0)
    gw_stmt_bind_int64(s, i++, f->call_seq);
  if (f->before > 0)
    gw_stmt_bind_int64(s, i, f->before);
}

int gw_egress_query(struct gw_state *st, const struct gw_egress_filter *f, gw_egress_row_fn fn,
                    void *arg, bool *more, struct cap_error *err)
{
  size_t limit = f->limit ? f->limit : 100;
  *more = false;
  struct cap_buf sql = {0};
  egress_query_sql(f, gw_db_kind(st->db), &sql);
  struct gw_stmt *s = gw_db_prepare(st->db, sql.data);
  cap_buf_free(&sql);
  if (!s)
    return gw_state_db_error(st, err, "cannot search the egress log");
  egress_bind(s, f);
  int rc;
  size_t n = 0;
  while ((rc = gw_stmt_step(s)) == GW_DB_ROW) {
    if (n++ == limit) {
      *more = true;
      continue;
    }
    struct gw_egress_record r = {.seq = gw_stmt_int64(s, 0),
                                 .time = col(s, 1),
                                 .capability = col(s, 2),
                                 .user = col(s, 3),
                                 .call_seq = gw_stmt_is_null(s, 4) ? 0 : gw_stmt_int64(s, 4),
                                 .decision = col(s, 5),
                                 .kind = col(s, 6),
                                 .host = col(s, 7),
                                 .port = gw_stmt_int64(s, 8),
                                 .method = col(s, 9),
                                 .path = col(s, 10),
                                 .credential = col(s, 11),
                                 .reason = col(s, 12),
                                 .count = gw_stmt_int64(s, 13),
                                 .bytes_up = gw_stmt_int64(s, 14),
                                 .bytes_down = gw_stmt_int64(s, 15)};
    fn(arg, &r);
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot search the egress log");
}
