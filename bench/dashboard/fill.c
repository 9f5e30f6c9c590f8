/* Fills a state's audit log with N records for bench/dashboard/run.sh:
 * a chain whose every record verifies on its own (its MAC under the
 * state key, prev the hash before it), written in one transaction
 * (gw_audit_append's fsync of the high-water mark per record would take
 * hours for a million), on a SQLite state. Records mix 20 capabilities, 50 users and the
 * decisions a gateway writes; one record in 100,000 has "needle" in its
 * outcome. Usage: dashboard_fill STATE N
 * On a PostgreSQL state (STATE a postgres:// URL) it writes the same
 * records to stdout instead, in COPY's text format, for
 * `psql -c '\copy audit FROM STDIN'` (bench/dashboard/run-pg.sh).
 * With --sql CAPABILITY USER DECISION TEXT BEFORE ("" for none) it prints
 * instead the statement the dashboard's audit page prepares
 * (gw_audit_query_sql) with those values in place of its parameters, for
 * the sqlite3 shell; --sql-pg the same as the PostgreSQL driver sends it
 * (gw_db_sql_pg), for psql. */
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "gateway/db.h"
#include "gateway/state.h"
#include "gateway/state_int.h"
#include "gateway/state_query.h"

static const char *const decisions[] = {
    "allow", "allow", "allow", "ask-approved", "block", "approval-pending", "denied"};

/* The statement with each '?' replaced by its value, quoted; for kind
 * PostgreSQL then rewritten as its driver does (no placeholder is left:
 * "user" quoted, the substring test strpos). */
static int print_sql(char **v, enum gw_db_kind kind)
{
  struct gw_audit_filter f = {
      .capability = v[0], .user = v[1], .decision = v[2], .text = v[3], .before = atol(v[4])};
  struct cap_buf sql = {0}, out = {0};
  gw_audit_query_sql(&f, kind, &sql);
  cap_buf_putc(&sql, '\0');
  const char *values[6];
  size_t n = 0;
  for (int k = 0; k < 4; k++)
    if (*v[k])
      values[n++] = v[k];
  if (f.before > 0)
    values[n++] = v[4];
  size_t used = 0;
  for (const char *c = sql.data; *c; c++) {
    if (*c != '?') {
      cap_buf_putc(&out, *c);
      continue;
    }
    const char *x = values[used++];
    bool number = x[strspn(x, "0123456789")] == '\0';
    if (!number)
      cap_buf_putc(&out, '\'');
    for (; *x; x++)
      cap_buf_puts(&out, *x == '\'' ? "''" : (char[]){*x, 0});
    if (!number)
      cap_buf_putc(&out, '\'');
  }
  cap_buf_putc(&out, '\0');
  int nparams = 0;
  char *pg = kind == GW_DB_POSTGRES ? gw_db_sql_pg(out.data, &nparams) : NULL;
  printf("%s;\n", pg ? pg : out.data);
  free(pg);
  cap_buf_free(&sql);
  cap_buf_free(&out);
  return used == n && nparams == 0 ? 0 : 1;
}

/* Record i of the bench's log, after prev, its MAC under st's key. */
static void make_record(struct gw_state *st, long i, int64_t seq, const char *prev,
                        struct gw_audit_record *r, char user[16], char cap[16], char outcome[48])
{
  snprintf(user, 16, "user%ld", i % 50);
  snprintf(cap, 16, "cap%ld", (i / 7) % 20);
  snprintf(outcome, 48, i % 100000 == 4242 ? "needle %ld" : "ok %ld", i);
  *r = (struct gw_audit_record){.seq = seq,
                                .user = user,
                                .capability = cap,
                                .tool = "run",
                                .decision = decisions[i % 7],
                                .duration_ms = i % 900,
                                .outcome = outcome};
  gw_sha256_hex(&i, sizeof i, r->args_hash);
  snprintf(r->time, sizeof r->time, "2026-11-%02ldT%02ld:%02ld:%02ld.000Z", 1 + i / 86400 % 25,
           i / 3600 % 24, i / 60 % 60, i % 60);
  snprintf(r->prev, sizeof r->prev, "%s", prev);
  gw_audit_mac(st, r, r->hash);
}

/* The records on a PostgreSQL state, as COPY text on stdout (none of
 * their values holds a tab, a newline or a backslash); the log must be
 * empty. */
static int copy_out(struct gw_state *st, long n)
{
  struct gw_stmt *s = gw_db_prepare(st->db, "SELECT count(*) FROM audit");
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  int64_t have = rc == GW_DB_ROW ? gw_stmt_int64(s, 0) : -1;
  gw_stmt_finalize(s);
  if (have != 0)
    return fprintf(stderr, "dashboard_fill: the audit log is not empty (%lld)\n", (long long)have),
           1;
  char prev[65], user[16], cap[16], outcome[48];
  snprintf(prev, sizeof prev, "%064d", 0);
  for (long i = 0; i < n; i++) {
    struct gw_audit_record r;
    make_record(st, i, i + 1, prev, &r, user, cap, outcome);
    printf("%lld\t%s\t%s\t%s\t%s\t%s\t%s\t%lld\t%s\t\t%s\t%s\n", (long long)r.seq, r.time, r.user,
           r.capability, r.tool, r.args_hash, r.decision, (long long)r.duration_ms, r.outcome,
           r.prev, r.hash);
    snprintf(prev, sizeof prev, "%s", r.hash);
  }
  return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
  if (argc == 7 && strcmp(argv[1], "--sql") == 0)
    return print_sql(argv + 2, GW_DB_SQLITE);
  if (argc == 7 && strcmp(argv[1], "--sql-pg") == 0)
    return print_sql(argv + 2, GW_DB_POSTGRES);
  if (argc != 3)
    return fprintf(stderr, "usage: dashboard_fill STATE N\n"), 2;
  long n = atol(argv[2]);
  struct gw_state *st = NULL;
  struct cap_error err = {0};
  if (gw_state_open(argv[1], &st, &err) < 0)
    return fprintf(stderr, "%s\n", err.message), 1;
  if (gw_db_kind(st->db) == GW_DB_POSTGRES) {
    int rc = copy_out(st, n);
    gw_state_close(st);
    return rc;
  }
  /* the file itself, beside the state's own connection (which gives the
   * audit key): one prepared statement reused for every row */
  char path[4096];
  snprintf(path, sizeof path, "%s/state.db", argv[1]);
  sqlite3 *db = NULL;
  if (sqlite3_open(path, &db) != SQLITE_OK)
    return fprintf(stderr, "%s: %s\n", path, sqlite3_errmsg(db)), 1;
  sqlite3_busy_timeout(db, 10000);
  sqlite3_stmt *ins = NULL, *last = NULL;
  sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
  sqlite3_prepare_v2(db, "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1", -1, &last, NULL);
  long seq = 0;
  char prev[65];
  snprintf(prev, sizeof prev, "%064d", 0);
  if (sqlite3_step(last) == SQLITE_ROW) {
    seq = sqlite3_column_int64(last, 0);
    snprintf(prev, sizeof prev, "%s", (const char *)sqlite3_column_text(last, 1));
  }
  sqlite3_finalize(last);
  sqlite3_prepare_v2(db, "INSERT INTO audit VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", -1, &ins,
                     NULL);
  for (long i = 0; i < n; i++) {
    char user[16], cap[16], outcome[48];
    struct gw_audit_record r;
    make_record(st, i, ++seq, prev, &r, user, cap, outcome);
    const char *text[] = {r.time, r.user, r.capability, r.tool, r.args_hash, r.decision};
    sqlite3_bind_int64(ins, 1, r.seq);
    for (int k = 0; k < 6; k++)
      sqlite3_bind_text(ins, 2 + k, text[k], -1, SQLITE_STATIC);
    sqlite3_bind_int64(ins, 8, r.duration_ms);
    sqlite3_bind_text(ins, 9, r.outcome, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 10, "", -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 11, r.prev, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 12, r.hash, -1, SQLITE_STATIC);
    if (sqlite3_step(ins) != SQLITE_DONE)
      return fprintf(stderr, "insert: %s\n", sqlite3_errmsg(db)), 1;
    sqlite3_reset(ins);
    snprintf(prev, sizeof prev, "%s", r.hash);
  }
  sqlite3_finalize(ins);
  sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
  sqlite3_close(db);
  gw_state_close(st);
  return 0;
}
