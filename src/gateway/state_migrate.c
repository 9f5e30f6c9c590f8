/* `capsule state migrate`: an SQLite state directory copied into an empty
 * PostgreSQL state, in one transaction, then verified: every table's
 * rows read back from both sides agree (count and an order-free digest),
 * and the copied audit chain verifies under the same key. */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/escape.h"
#include "gateway/state.h"
#include "gateway/state_int.h"

/* Rows only one side has by design: the database's own identity. */
static const char meta_filter[] = " WHERE key NOT IN ('key_fingerprint', 'state_id')";

/* A new database's notice of migrated credentials (none): replaced by the
 * source's. */
static const char meta_new_filter[] =
    " WHERE key NOT IN ('key_fingerprint', 'state_id', 'migrated_shared')";

static const char *table_filter(const char *table, bool empty_check)
{
  if (strcmp(table, "meta") != 0)
    return "";
  return empty_check ? meta_new_filter : meta_filter;
}

/* A name capsule's schema could hold: the SQL text is built from the
 * source's table and column names, and the source is a file its owner
 * (or whatever could write it) edits at will. */
static bool ident_ok(const char *name)
{
  if (!*name || strlen(name) > 63 || (*name >= '0' && *name <= '9'))
    return false;
  for (const char *p = name; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
      return false;
  return true;
}

static int bad_ident(struct cap_error *err, const char *what, const char *table, const char *name)
{
  struct cap_buf b = {0};
  cap_escape_text(&b, name, strlen(name));
  int r = cap_error_set(err, EINVAL,
                        "the source state has a %s named \"%s\"%s%s, which capsule's schema "
                        "never holds: it was edited; refusing to build SQL from it",
                        what, b.data ? b.data : "", table ? " in table " : "", table ? table : "");
  cap_buf_free(&b);
  return r;
}

/* The source's tables, by name. */
static int source_tables(struct gw_state *src, char ***names, size_t *n, struct cap_error *err)
{
  struct gw_stmt *s = gw_state_prep(src,
                                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name"
                                    " NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
                                    NULL);
  int rc = GW_DB_ERROR;
  *names = NULL;
  *n = 0;
  while (s && (rc = gw_stmt_step(s)) == GW_DB_ROW) {
    *names = cap_xrealloc(*names, (*n + 1) * sizeof **names);
    const char *name = gw_stmt_text(s, 0);
    (*names)[(*n)++] = cap_xstrdup(name ? name : "");
  }
  gw_stmt_finalize(s);
  if (rc != GW_DB_DONE)
    return gw_state_db_error(src, err, "cannot list the tables");
  for (size_t i = 0; i < *n; i++)
    if (!ident_ok((*names)[i]))
      return bad_ident(err, "table", NULL, (*names)[i]);
  return 0;
}

static void free_names(char **names, size_t n)
{
  for (size_t i = 0; i < n; i++)
    free(names[i]);
  free(names);
}

/* A table's rows: how many, and the XOR of each row's SHA-256 (the order
 * rows come in does not matter; a row is its columns' kinds and text,
 * a blob as hex). */
static int table_digest(struct gw_state *st, const char *table, bool empty_check, int64_t *rows,
                        unsigned char sum[32], struct cap_error *err)
{
  _cleanup_free_ char *sql =
      cap_xasprintf("SELECT * FROM %s%s", table, table_filter(table, empty_check));
  struct gw_stmt *s = gw_state_prep(st, sql, NULL);
  int rc = GW_DB_ERROR;
  *rows = 0;
  memset(sum, 0, 32);
  while (s && (rc = gw_stmt_step(s)) == GW_DB_ROW) {
    struct cap_buf b = {0};
    for (int i = 0; i < gw_stmt_columns(s); i++) {
      enum gw_db_type t = gw_stmt_type(s, i);
      if (t == GW_DB_NULL) {
        cap_buf_printf(&b, "N;");
      } else if (t == GW_DB_BLOB) {
        const unsigned char *p = gw_stmt_blob(s, i);
        int len = gw_stmt_bytes(s, i);
        cap_buf_printf(&b, "B%d:", len);
        for (int k = 0; k < len; k++)
          cap_buf_printf(&b, "%02x", p[k]);
        cap_buf_printf(&b, ";");
      } else {
        const char *v = gw_stmt_text(s, i);
        cap_buf_printf(&b, "T%zu:%s;", strlen(v), v);
      }
    }
    unsigned char h[32];
    crypto_hash_sha256(h, (const unsigned char *)(b.data ? b.data : ""), b.len);
    cap_buf_free(&b);
    for (int k = 0; k < 32; k++)
      sum[k] ^= h[k];
    (*rows)++;
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot read a table to compare");
}

/* The target holds nothing yet (its own identity rows aside). */
static int check_empty(struct gw_state *dst, char **tables, size_t n, struct cap_error *err)
{
  for (size_t i = 0; i < n; i++) {
    int64_t rows;
    unsigned char sum[32];
    int r = table_digest(dst, tables[i], true, &rows, sum, err);
    if (r < 0)
      return r;
    if (rows > 0)
      return cap_error_set(err, EEXIST,
                           "the target %s holds a state already (%lld rows in %s): `state "
                           "migrate` copies into an empty database only",
                           gw_state_where(dst), (long long)rows, tables[i]);
  }
  return 0;
}

/* One row of the source as an INSERT into the target. */
static int copy_row(struct gw_state *dst, const char *table, struct gw_stmt *row,
                    struct cap_error *err)
{
  struct cap_buf sql = {0};
  int n = gw_stmt_columns(row);
  for (int i = 0; i < n; i++) {
    const char *name = gw_stmt_name(row, i);
    if (!name || !ident_ok(name))
      return bad_ident(err, "column", table, name ? name : "");
  }
  cap_buf_printf(&sql, "INSERT OR IGNORE INTO %s (", table);
  for (int i = 0; i < n; i++)
    cap_buf_printf(&sql, "%s%s", i ? ", " : "", gw_stmt_name(row, i));
  cap_buf_printf(&sql, ") VALUES (");
  for (int i = 0; i < n; i++)
    cap_buf_printf(&sql, "%s?", i ? ", " : "");
  cap_buf_printf(&sql, ")");
  struct gw_stmt *ins = gw_state_prep(dst, sql.data, NULL);
  cap_buf_free(&sql);
  for (int i = 0; ins && i < n; i++) {
    switch (gw_stmt_type(row, i)) {
    case GW_DB_NULL: break;
    case GW_DB_INTEGER: gw_stmt_bind_int64(ins, i + 1, gw_stmt_int64(row, i)); break;
    case GW_DB_BLOB:
      gw_stmt_bind_blob(ins, i + 1, gw_stmt_blob(row, i), (size_t)gw_stmt_bytes(row, i));
      break;
    case GW_DB_TEXT: gw_stmt_bind_text(ins, i + 1, gw_stmt_text(row, i)); break;
    }
  }
  int rc = ins ? gw_stmt_step(ins) : GW_DB_ERROR;
  gw_stmt_finalize(ins);
  if (rc == GW_DB_DONE)
    return 0;
  _cleanup_free_ char *what = cap_xasprintf("cannot copy a row of %s", table);
  return gw_state_db_error(dst, err, what);
}

static int copy_table(struct gw_state *src, struct gw_state *dst, const char *table,
                      struct cap_error *err)
{
  _cleanup_free_ char *sql = cap_xasprintf("SELECT * FROM %s", table);
  struct gw_stmt *s = gw_state_prep(src, sql, NULL);
  int rc = GW_DB_ERROR, r = 0;
  while (s && r == 0 && (rc = gw_stmt_step(s)) == GW_DB_ROW)
    r = copy_row(dst, table, s, err);
  gw_stmt_finalize(s);
  if (r == 0 && rc != GW_DB_DONE)
    r = gw_state_db_error(src, err, "cannot read the source");
  return r;
}

/* Identity columns continue after the copied rows. */
static int advance_identities(struct gw_state *dst, struct cap_error *err)
{
  struct gw_stmt *s = gw_state_prep(dst,
                                    "SELECT table_name, column_name FROM"
                                    " information_schema.columns WHERE table_schema ="
                                    " current_schema() AND is_identity = 'YES'",
                                    NULL);
  int rc = GW_DB_ERROR, r = 0;
  while (s && r == 0 && (rc = gw_stmt_step(s)) == GW_DB_ROW) {
    const char *t = gw_stmt_text(s, 0), *c = gw_stmt_text(s, 1);
    _cleanup_free_ char *sql = cap_xasprintf(
        "SELECT setval(pg_get_serial_sequence('%s', '%s'), coalesce(max(%s), 0) + 1, false)"
        " FROM %s",
        t, c, c, t);
    struct gw_stmt *u = gw_state_prep(dst, sql, NULL);
    if (!u || gw_stmt_step(u) != GW_DB_ROW)
      r = gw_state_db_error(dst, err, "cannot continue an identity column");
    gw_stmt_finalize(u);
  }
  gw_stmt_finalize(s);
  if (r == 0 && rc != GW_DB_DONE)
    r = gw_state_db_error(dst, err, "cannot read the identity columns");
  return r;
}

static int copy_all(struct gw_state *src, struct gw_state *dst, char **tables, size_t n,
                    struct cap_error *err)
{
  struct gw_db *db = gw_state_db(dst);
  if (gw_db_exec(db, "BEGIN IMMEDIATE") != GW_DB_OK)
    return gw_state_db_error(dst, err, "cannot begin the copy");
  int r = check_empty(dst, tables, n, err);
  if (r == 0 && gw_db_exec(db, "DELETE FROM meta WHERE key = 'migrated_shared'") != GW_DB_OK)
    r = gw_state_db_error(dst, err, "cannot prepare the copy");
  for (size_t i = 0; r == 0 && i < n; i++)
    r = copy_table(src, dst, tables[i], err);
  if (r == 0)
    r = advance_identities(dst, err);
  if (r == 0 && gw_db_exec(db, "COMMIT") != GW_DB_OK)
    r = gw_state_db_error(dst, err, "cannot commit the copy");
  if (r < 0)
    gw_db_exec(db, "ROLLBACK");
  return r;
}

/* Both sides, table by table. */
static int compare(struct gw_state *src, struct gw_state *dst, char **tables, size_t n,
                   gw_migrate_fn fn, void *arg, struct cap_error *err)
{
  for (size_t i = 0; i < n; i++) {
    int64_t a, b;
    unsigned char x[32], y[32];
    int r = table_digest(src, tables[i], false, &a, x, err);
    if (r == 0)
      r = table_digest(dst, tables[i], false, &b, y, err);
    if (r < 0)
      return r;
    if (a != b || memcmp(x, y, 32) != 0)
      return cap_error_set(err, EBADMSG,
                           "the copy of %s does not match its source (%lld rows there, %lld "
                           "here): nothing should be using the target; drop it and migrate again",
                           tables[i], (long long)a, (long long)b);
    if (fn)
      fn(arg, tables[i], a);
  }
  return 0;
}

/* This host's mark of the new database: where the copied chain ends. */
static int mark_head(struct gw_state *dst, struct cap_error *err)
{
  struct gw_stmt *s =
      gw_state_prep(dst, "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1", NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  struct gw_hwm mark = {0};
  snprintf(mark.hash, sizeof mark.hash, "%064d", 0);
  if (rc == GW_DB_ROW) {
    mark.seq = gw_stmt_int64(s, 0);
    snprintf(mark.hash, sizeof mark.hash, "%s", gw_stmt_text(s, 1));
  }
  gw_stmt_finalize(s);
  if (rc != GW_DB_ROW && rc != GW_DB_DONE)
    return gw_state_db_error(dst, err, "cannot read the audit log");
  _cleanup_close_ int lock = gw_hwm_lock(dst, err);
  return lock < 0 ? lock : gw_hwm_write(dst, &mark, false, err);
}

int gw_state_migrate(const char *from, const char *to, gw_migrate_fn fn, void *arg,
                     size_t *audit_records, struct cap_error *err)
{
  *audit_records = 0;
  if (!gw_db_is_url(to)) { /* postgre://u:pw@h, a typo, still holds a password */
    char where[512];
    gw_db_url_redact(to, where, sizeof where);
    return cap_error_set(err, EINVAL, "--to takes a postgres:// or postgresql:// URL, not %s",
                         where);
  }
  /* the target is sealed and chained under the source's key */
  _cleanup_free_ char *keyfile = cap_xasprintf("%s/key", from);
  const char *k = getenv("CAPSULE_STATE_KEY"), *kf = getenv("CAPSULE_STATE_KEY_FILE");
  if ((!k || !*k) && (!kf || !*kf) && access(keyfile, F_OK) == 0)
    setenv("CAPSULE_STATE_KEY_FILE", keyfile, 1);
  struct gw_state *src = NULL, *dst = NULL;
  int r = gw_state_open(from, &src, err);
  size_t n_src = 0;
  if (r == 0 && (r = gw_audit_verify(src, &n_src, err)) < 0)
    r = cap_error_set(err, -r,
                      "the source's audit log does not verify (%s); fix or export it first: "
                      "nothing was copied",
                      err->message);
  if (r == 0)
    r = gw_state_open(to, &dst, err);
  char **tables = NULL;
  size_t n = 0;
  if (r == 0)
    r = source_tables(src, &tables, &n, err);
  if (r == 0)
    r = copy_all(src, dst, tables, n, err);
  if (r == 0)
    r = compare(src, dst, tables, n, fn, arg, err);
  if (r == 0)
    r = mark_head(dst, err);
  if (r == 0 && (r = gw_audit_verify(dst, audit_records, err)) == 0 && *audit_records != n_src)
    r = cap_error_set(err, EBADMSG, "the copied audit log holds %zu records, the source %zu",
                      *audit_records, n_src);
  free_names(tables, n);
  gw_state_close(dst);
  gw_state_close(src);
  return r;
}
