/* The audit log: a chain of records, each HMAC-SHA-256 (under a key
 * derived from the state key) over the previous hash and the record; the
 * chain's head MACed in meta; and a high-water mark outside the database
 * (DIR/audit-hwm: record count and head hash, MACed) so that deleting,
 * truncating or rolling back the database shows as a gap. The markers
 * of calls in flight are state_inflight.c's. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/cleanup.h"
#include "core/escape.h"
#include "core/text.h"
#include "gateway/state.h"
#include "gateway/state_int.h"

/* ---- audit ---- */

/* What a record's MAC covers: prev and every field, each length-prefixed,
 * appended to b in one piece (no printf: the dashboard builds one per
 * record shown). */
void gw_audit_mac_input(const struct gw_audit_record *r, struct cap_buf *b)
{
  static const char tag[] = "capsule-audit-v1 ";
  const char *fields[] = {r->time,     r->user,    r->capability,  r->tool, r->args_hash,
                          r->decision, r->outcome, r->result_hash, r->prev};
  enum { N = sizeof fields / sizeof fields[0] };
  size_t lens[N], total = sizeof tag - 1 + 2 * 22;
  for (size_t i = 0; i < N; i++)
    total += (lens[i] = strlen(fields[i])) + 22;
  cap_buf_reserve(b, total);
  char *p = b->data + b->len;
  memcpy(p, tag, sizeof tag - 1);
  p += sizeof tag - 1;
  p += cap_fmt_i64(p, r->seq);
  *p++ = ' ';
  p += cap_fmt_i64(p, r->duration_ms);
  for (size_t i = 0; i < N; i++) {
    *p++ = ' ';
    p += cap_fmt_i64(p, (int64_t)lens[i]);
    *p++ = ':';
    memcpy(p, fields[i], lens[i]);
    p += lens[i];
  }
  b->len = (size_t)(p - b->data);
  b->data[b->len] = '\0';
}

/* HMAC-SHA-256 under the audit key, from its states after the key's
 * blocks (made once at open), on the CPU's SHA extensions where it has
 * them (core/sha256.h): the same MAC as libsodium's, several times as fast. */
void gw_audit_mac_bytes(const struct gw_state *st, const void *msg, size_t len, char out[65])
{
  unsigned char mac[32];
  cap_hmac_sha256(&st->keys->audit_mac, msg, len, mac);
  sodium_bin2hex(out, 65, mac, sizeof mac);
}

void gw_audit_mac(const struct gw_state *st, const struct gw_audit_record *r, char out[65])
{
  struct cap_buf b = {0};
  gw_audit_mac_input(r, &b);
  gw_audit_mac_bytes(st, b.data, b.len, out);
  cap_buf_free(&b);
}

/* "seq hash mac": the chain's head, MACed so it cannot be rolled back to an
 * earlier record without the key */
static void head_text(const struct gw_state *st, int64_t seq, const char *hash, char *out,
                      size_t size)
{
  char body[128];
  int len = snprintf(body, sizeof body, "capsule-audit-head-v1 %lld %s", (long long)seq, hash);
  char hex[65];
  gw_audit_mac_bytes(st, body, (size_t)len, hex); /* libsodium's HMAC, from the kept key blocks */
  snprintf(out, size, "%lld %s %s", (long long)seq, hash, hex);
}

static int advance_mark(struct gw_state *st, const struct gw_hwm *base,
                        const struct gw_audit_record *rec, struct cap_error *err);

/* The last record (seq 0 and a zero hash when the log is empty). */
static int last_record(struct gw_state *st, struct gw_hwm *out, struct cap_error *err)
{
  struct gw_stmt *s =
      gw_state_prep(st, "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1", NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  out->seq = 0;
  snprintf(out->hash, sizeof out->hash, "%064d", 0);
  if (rc == GW_DB_ROW) {
    out->seq = gw_stmt_int64(s, 0);
    snprintf(out->hash, sizeof out->hash, "%s", (const char *)gw_stmt_text(s, 1));
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_ROW || rc == GW_DB_DONE
             ? 0
             : gw_state_db_error(st, err, "cannot read the audit log");
}

/* The last record, at the start of an append's write transaction (so of
 * the newest snapshot, which no one else can move until it ends): the one
 * this handle's last append left when nothing was committed since by
 * another connection (PRAGMA data_version, a read of the write-ahead
 * log's index, moves: another thread's pooled connection, another
 * process, the CLI) and no row changed by this one (its total changes:
 * any write of its own, a transaction rolled back included); else read
 * from the log. *v is the version read (v[0] -1: none, PostgreSQL). */
static int last_record_kept(struct gw_state *st, struct gw_hwm *out, int64_t v[2],
                            struct cap_error *err)
{
  v[0] = v[1] = -1;
  if (st->url || gw_db_version(st->db, v) < 0) {
    v[0] = v[1] = -1;
    st->audit_last_ok = false;
  } else if (st->audit_last_ok && v[0] == st->audit_last_version[0] &&
             v[1] == st->audit_last_version[1]) {
    out->seq = st->audit_last_seq;
    memcpy(out->hash, st->audit_last_hash, sizeof out->hash);
    return 0;
  }
  st->audit_last_ok = false;
  return last_record(st, out, err);
}

/* Kept after a commit: the version its transaction began at (no one
 * else committed in between: it held the write lock) with this
 * connection's changes as they are now. */
static void keep_last(struct gw_state *st, const int64_t v[2], const struct gw_hwm *last)
{
  st->audit_last_ok = v[0] >= 0;
  st->audit_last_seq = last->seq;
  memcpy(st->audit_last_hash, last->hash, sizeof st->audit_last_hash);
  st->audit_last_version[0] = v[0];
  st->audit_last_version[1] = gw_db_total_changes(st->db);
}

/* After a connection lost around a COMMIT: whether the record is in (the
 * connection is made again for the question; false when it cannot be). */
static bool landed(struct gw_state *st, const struct gw_audit_record *r)
{
  char seq[24];
  snprintf(seq, sizeof seq, "%lld", (long long)r->seq);
  struct gw_stmt *s =
      gw_state_prep(st, "SELECT 1 FROM audit WHERE seq = ? AND hash = ?", seq, r->hash, NULL);
  bool in = s && gw_stmt_step(s) == GW_DB_ROW;
  gw_stmt_finalize(s);
  return in;
}

/* Record r, the next after *last (which it becomes), inserted in the
 * open transaction. */
static int insert_record(struct gw_state *st, struct gw_audit_record *r, struct gw_hwm *last)
{
  r->seq = last->seq + 1;
  snprintf(r->prev, sizeof r->prev, "%s", last->hash);
  gw_state_now(r->time);
  gw_audit_mac(st, r, r->hash);
  char seq[24], dur[24];
  snprintf(seq, sizeof seq, "%lld", (long long)r->seq);
  snprintf(dur, sizeof dur, "%lld", (long long)r->duration_ms);
  struct gw_stmt *ins =
      gw_state_prep(st, "INSERT INTO audit VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", seq,
                    r->time, r->user, r->capability, r->tool, r->args_hash, r->decision, dur,
                    r->outcome, r->result_hash, r->prev, r->hash, NULL);
  int rc = ins && gw_stmt_step(ins) == GW_DB_DONE ? GW_DB_DONE : GW_DB_ERROR;
  gw_stmt_finalize(ins);
  last->seq = r->seq;
  snprintf(last->hash, sizeof last->hash, "%s", r->hash);
  return rc;
}

/* The records rs[0..n) appended in order in one transaction (all in, or
 * none), the chain's head and the high-water mark moved once, to the
 * last of them. */
static int append_records(struct gw_state *st, struct gw_audit_record *const *rs,
                          struct gw_inflight *const *markers, size_t n, struct cap_error *err)
{
  if (gw_db_exec(st->db, "BEGIN IMMEDIATE") != GW_DB_OK)
    return gw_state_db_error(st, err, "cannot append to the audit log");
  struct gw_hwm last, base;
  int64_t v[2];
  int rc = last_record_kept(st, &last, v, err) == 0 ? GW_DB_DONE : GW_DB_ERROR;
  base = last;
  for (size_t i = 0; i < n && rc == GW_DB_DONE; i++)
    rc = insert_record(st, rs[i], &last);
  if (rc == GW_DB_DONE) {
    char head[256];
    head_text(st, last.seq, last.hash, head, sizeof head);
    struct gw_stmt *h = gw_state_prep(st,
                                      "INSERT INTO meta VALUES ('audit_head', ?) ON CONFLICT (key)"
                                      " DO UPDATE SET value = excluded.value",
                                      head, NULL);
    rc = h && gw_stmt_step(h) == GW_DB_DONE ? GW_DB_DONE : GW_DB_ERROR;
    gw_stmt_finalize(h);
  }
  if (rc != GW_DB_DONE || gw_db_exec(st->db, "COMMIT") != GW_DB_OK) {
    st->audit_last_ok = false;
    cap_error_clear(err);
    bool lost = gw_db_fault(st->db) == GW_DB_FAULT_CONNECTION;
    int e = gw_state_db_error(st, err, "cannot append to the audit log");
    gw_db_exec(st->db, "ROLLBACK");
    if (!lost || !landed(st, rs[n - 1])) /* one transaction: the last in, all in */
      return e;
    cap_error_clear(err); /* the server committed it and went away before saying so */
  } else {
    keep_last(st, v, &last);
  }
  for (size_t i = 0; markers && i < n; i++) /* in: a kill from now on records nothing twice */
    if (markers[i])
      gw_inflight_recorded(markers[i]);
  /* PostgreSQL: a dashboard following the log (LISTEN) sees each now;
   * best effort, outside the writers' lock (a no-op on SQLite) */
  for (size_t i = 0; i < n; i++) {
    char seq[24];
    snprintf(seq, sizeof seq, "%lld", (long long)rs[i]->seq);
    gw_db_notify(st->db, GW_AUDIT_CHANNEL, seq);
  }
  int m = advance_mark(st, &base, rs[n - 1], err);
  if (m < 0 && gw_db_fault(st->db) == GW_DB_FAULT_CONNECTION) {
    /* the records are in; the server went away before the mark's check
     * of them: the mark stays behind (a lower bound, moved on by the next
     * record), and the calls are not failed for it (their markers would
     * then be recorded again, as interrupted) */
    cap_error_clear(err);
    m = 0;
  }
  return m;
}

/* s as text the database takes (*owned, or s itself when it is): each
 * byte that is not UTF-8 as U+FFFD. PostgreSQL refuses such bytes in a
 * UTF8 database, and the record would be lost: a tool's error text, a
 * name a client sent, are anyone's bytes. */
static const char *as_text(const char *s, char **owned)
{
  *owned = NULL;
  if (!s || cap_utf8_valid(s, strlen(s), NULL))
    return s;
  struct cap_buf b = {0};
  for (size_t i = 0, n = strlen(s); i < n;) {
    uint32_t cp;
    enum cap_text_kind kind;
    size_t u = cap_escape_scan(s + i, n - i, &cp, &kind);
    if (kind == CAP_TEXT_INVALID || kind == CAP_TEXT_CUT) {
      cap_buf_puts(&b, "\xef\xbf\xbd");
      u = 1;
    } else {
      cap_buf_append(&b, s + i, u);
    }
    i += u;
  }
  return *owned = cap_buf_steal(&b);
}

/* A record's text fields, as the database takes them while it is
 * appended (as_text), then as the caller gave them. */
struct as_texts {
  const char **at[5];
  const char *was[5];
  char *owned[5];
};

int gw_audit_append_marked(struct gw_state *st, struct gw_audit_record *const *rs,
                           struct gw_inflight *const *markers, size_t n, struct cap_error *err)
{
  struct as_texts *t = cap_xcalloc(n ? n : 1, sizeof *t);
  for (size_t k = 0; k < n; k++) {
    struct gw_audit_record *r = rs[k];
    const char **at[] = {&r->user, &r->capability, &r->tool, &r->decision, &r->outcome};
    for (size_t i = 0; i < ARRAY_SIZE(at); i++) {
      t[k].at[i] = at[i];
      t[k].was[i] = *at[i];
      *at[i] = as_text(t[k].was[i], &t[k].owned[i]);
    }
  }
  int64_t changes = gw_db_total_changes(st->db);
  int ret = n ? append_records(st, rs, markers, n, err) : 0;
  /* the log's rows: no read kept (state_cache.c) is of them */
  gw_state_cache_quiet(st, gw_db_total_changes(st->db) - changes);
  for (size_t k = 0; k < n; k++)
    for (size_t i = 0; i < ARRAY_SIZE(t[k].at); i++) {
      *t[k].at[i] = t[k].was[i];
      free(t[k].owned[i]);
    }
  free(t);
  return ret;
}

int gw_audit_append_many(struct gw_state *st, struct gw_audit_record *const *rs, size_t n,
                         struct cap_error *err)
{
  return gw_audit_append_marked(st, rs, NULL, n, err);
}

int gw_audit_append(struct gw_state *st, struct gw_audit_record *r, struct cap_error *err)
{
  return gw_audit_append_many(st, &r, 1, err);
}

int gw_audit_change(struct gw_state *st, const char *kind, const char *who, const char *capability,
                    const char *tool, const char *what, struct cap_error *err)
{
  struct gw_audit_record r = {.user = who,
                              .capability = capability ? capability : "",
                              .tool = tool ? tool : "",
                              .decision = kind,
                              .outcome = what};
  return gw_audit_append(st, &r, err);
}

static void row_record(struct gw_stmt *s, struct gw_audit_record *r)
{
  r->seq = gw_stmt_int64(s, 0);
  snprintf(r->time, sizeof r->time, "%s", (const char *)gw_stmt_text(s, 1));
  r->user = (const char *)gw_stmt_text(s, 2);
  r->capability = (const char *)gw_stmt_text(s, 3);
  r->tool = (const char *)gw_stmt_text(s, 4);
  snprintf(r->args_hash, sizeof r->args_hash, "%s", (const char *)gw_stmt_text(s, 5));
  r->decision = (const char *)gw_stmt_text(s, 6);
  r->duration_ms = gw_stmt_int64(s, 7);
  r->outcome = (const char *)gw_stmt_text(s, 8);
  snprintf(r->result_hash, sizeof r->result_hash, "%s", (const char *)gw_stmt_text(s, 9));
  snprintf(r->prev, sizeof r->prev, "%s", (const char *)gw_stmt_text(s, 10));
  snprintf(r->hash, sizeof r->hash, "%s", (const char *)gw_stmt_text(s, 11));
}

int gw_audit_each(struct gw_state *st, int64_t after, gw_audit_fn fn, void *arg,
                  struct cap_error *err)
{
  struct gw_stmt *s = gw_state_prep(st, "SELECT * FROM audit WHERE seq > ? ORDER BY seq", NULL);
  int rc = GW_DB_ERROR;
  if (s) {
    gw_stmt_bind_int64(s, 1, after);
    while ((rc = gw_stmt_step(s)) == GW_DB_ROW) {
      struct gw_audit_record r;
      row_record(s, &r);
      fn(arg, &r);
    }
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot read the audit log");
}

/* The chain in order: *n records, prev the last one's hash. */
static int walk_chain(struct gw_state *st, size_t *n, char prev[65], struct cap_error *err)
{
  struct gw_stmt *s = gw_state_prep(st, "SELECT * FROM audit ORDER BY seq", NULL);
  int rc = GW_DB_ERROR, r = 0;
  snprintf(prev, 65, "%064d", 0);
  int64_t expect = 1;
  while (s && r == 0 && (rc = gw_stmt_step(s)) == GW_DB_ROW) {
    struct gw_audit_record rec;
    row_record(s, &rec);
    char mac[65];
    gw_audit_mac(st, &rec, mac);
    if (rec.seq != expect)
      r = cap_error_set(err, EBADMSG,
                        "audit record %lld follows %lld: records were dropped or reordered",
                        (long long)rec.seq, (long long)(expect - 1));
    else if (strcmp(rec.prev, prev) != 0)
      r = cap_error_set(err, EBADMSG,
                        "audit record %lld does not follow the record before it: the chain was "
                        "reordered or a record was replaced",
                        (long long)rec.seq);
    else if (sodium_memcmp(mac, rec.hash, 64) != 0)
      r = cap_error_set(err, EBADMSG,
                        "audit record %lld was edited: its hash does not match its contents",
                        (long long)rec.seq);
    snprintf(prev, 65, "%s", rec.hash);
    expect++;
    (*n)++;
  }
  gw_stmt_finalize(s);
  if (r == 0 && rc != GW_DB_DONE)
    r = gw_state_db_error(st, err, "cannot read the audit log");
  return r;
}

/* The head kept in meta, inside the database. */
static int check_head(struct gw_state *st, size_t n, const char *last, struct cap_error *err)
{
  struct gw_stmt *h = gw_state_prep(st, "SELECT value FROM meta WHERE key = 'audit_head'", NULL);
  int hr = h ? gw_stmt_step(h) : GW_DB_ERROR, r = 0;
  char want[256];
  head_text(st, (int64_t)n, last, want, sizeof want);
  if (hr == GW_DB_ROW) {
    const char *have = (const char *)gw_stmt_text(h, 0);
    if (strcmp(have, want) != 0)
      r = cap_error_set(err, EBADMSG,
                        "the audit log ends at record %zu but its recorded head says otherwise: "
                        "records were dropped from the end, or the head was forged",
                        n);
  } else if (hr == GW_DB_DONE && n > 0) {
    r = cap_error_set(err, EBADMSG, "the audit log's head record is missing");
  } else if (hr != GW_DB_DONE) {
    r = gw_state_db_error(st, err, "cannot read the audit log's head");
  }
  gw_stmt_finalize(h);
  return r;
}

/* The hash of record seq into out ("" when there is none). */
static int record_hash(struct gw_state *st, int64_t seq, char out[65], struct cap_error *err)
{
  struct gw_stmt *s = gw_state_prep(st, "SELECT hash FROM audit WHERE seq = ?", NULL);
  int rc = GW_DB_ERROR;
  out[0] = '\0';
  if (s) {
    gw_stmt_bind_int64(s, 1, seq);
    if ((rc = gw_stmt_step(s)) == GW_DB_ROW)
      snprintf(out, 65, "%s", (const char *)gw_stmt_text(s, 0));
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_ROW || rc == GW_DB_DONE
             ? 0
             : gw_state_db_error(st, err, "cannot read the audit log");
}

/* The mark outside the database against the log inside it: fewer records
 * than capsule wrote, or a different record where the mark's head was,
 * is a gap (deletion, truncation, or an older state.db restored). */
static int check_mark(struct gw_state *st, const struct gw_hwm *mark, enum gw_hwm_status status,
                      size_t n, struct cap_error *err)
{
  if (status == GW_HWM_MISSING)
    return cap_error_set(err, EBADMSG,
                         "gap: the audit high-water mark %s/%s is missing (capsule keeps "
                         "it with every record): it was deleted, so truncation or a restored "
                         "state.db cannot be ruled out",
                         st->dir, st->hwm_name);
  if (status == GW_HWM_FORGED)
    return cap_error_set(err, EBADMSG,
                         "gap: the audit high-water mark %s/%s does not verify under the "
                         "state key: it was edited or replaced",
                         st->dir, st->hwm_name);
  if (mark->seq > (int64_t)n)
    return cap_error_set(err, EBADMSG,
                         "gap: the audit log holds %zu records but capsule wrote %lld (records "
                         "%zu to %lld are gone): records were deleted or truncated, or an older "
                         "state.db was restored",
                         n, (long long)mark->seq, n + 1, (long long)mark->seq);
  char have[65];
  int r = mark->seq > 0 ? record_hash(st, mark->seq, have, err) : 0;
  if (r == 0 && mark->seq > 0 && strcmp(have, mark->hash) != 0)
    r = cap_error_set(err, EBADMSG,
                      "gap: audit record %lld is not the one capsule wrote: an older state.db "
                      "was restored and written to since (the records after its copy are gone)",
                      (long long)mark->seq);
  return r;
}

int gw_audit_verify(struct gw_state *st, size_t *n, struct cap_error *err)
{
  *n = 0;
  /* the mark first: it is written after its record commits, so the
   * snapshot read next holds at least what it names */
  struct gw_hwm mark;
  enum gw_hwm_status status;
  int r = gw_hwm_read(st, &mark, &status, err);
  /* the mark moves in place: a read that met a write half done is read
   * again (a forged mark stays forged) */
  for (int i = 0; r == 0 && status == GW_HWM_FORGED && i < 3; i++) {
    nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
    r = gw_hwm_read(st, &mark, &status, err);
  }
  if (r < 0)
    return r;
  /* one snapshot: appends by other processes do not tear the walk */
  if (gw_db_exec(st->db, "BEGIN") != GW_DB_OK)
    return gw_state_db_error(st, err, "cannot read the audit log");
  char last[65];
  r = walk_chain(st, n, last, err);
  if (r == 0) /* the mark first: it names a gap by its size */
    r = check_mark(st, &mark, status, *n, err);
  if (r == 0)
    r = check_head(st, *n, last, err);
  gw_db_exec(st->db, "COMMIT");
  return r;
}

int gw_audit_init_mark(struct gw_state *st, struct cap_error *err)
{
  if (st->url && strcmp(st->hwm_name, "audit-hwm") == 0)
    return 0; /* a database's migration: its mark is named once its id is read */
  struct gw_hwm mark;
  int r = last_record(st, &mark, err);
  return r < 0 ? r : gw_hwm_write(st, &mark, true, err);
}

/* Moves the mark to a newly committed record, rec, appended after base
 * (the last record its transaction read). A mark that is missing, does
 * not verify, is ahead, or names a record the log no longer holds is
 * left as it is: it is the evidence verify reports. */
static int advance_mark(struct gw_state *st, const struct gw_hwm *base,
                        const struct gw_audit_record *rec, struct cap_error *err)
{
  int r = gw_hwm_hold(st, err);
  if (r < 0)
    return r;
  struct gw_hwm mark;
  enum gw_hwm_status status;
  r = gw_hwm_read_held(st, &mark, &status, err);
  if (r < 0 || status != GW_HWM_OK || mark.seq >= rec->seq)
    goto out;
  /* the mark names the record these follow, as read in their
   * transaction: that record is in the log, no need to look it up */
  bool follows = mark.seq == base->seq && strcmp(mark.hash, base->hash) == 0;
  char have[65] = "";
  if (mark.seq > 0 && !follows &&
      ((r = record_hash(st, mark.seq, have, err)) < 0 || strcmp(have, mark.hash)))
    goto out;
  struct gw_hwm next = {.seq = rec->seq};
  snprintf(next.hash, sizeof next.hash, "%s", rec->hash);
  r = gw_hwm_advance(st, &next, err);
out:
  gw_hwm_release(st);
  return r;
}
