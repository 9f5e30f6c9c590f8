/* The state's database layer (db.h): SQLite here, PostgreSQL through the
 * module's table (db_pg.h), one set of calls for the state's modules. */
#include "gateway/db.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/module.h"
#include "gateway/db_checkpoint.h"
#include "gateway/db_pg.h"

/* BEGIN IMMEDIATE on PostgreSQL: this transaction-level advisory lock
 * ("caps"), the one every writer of a capsule state takes */
#define PG_WRITE_LOCK 0x63617073

/* SQLite: statements kept prepared after their finalize (reset, their
 * bindings cleared), found again by their text: the dashboard and the
 * call pipeline prepare the same few statements again and again, and
 * parsing and planning cost more than running most of them. */
#define STMT_CACHE 32

struct gw_db {
  enum gw_db_kind kind;
  sqlite3 *lite;
  sqlite3_stmt *cache[STMT_CACHE];
  unsigned cache_next; /* the slot replaced next when all are taken */
  /* PostgreSQL */
  const struct gw_db_pg_module *pg;
  struct gw_pg *conn;
  pthread_mutex_t mu;
  bool in_tx;      /* between BEGIN and COMMIT or ROLLBACK */
  int64_t changes; /* of the last statement */
  char msg[600];   /* the last failure */
  enum gw_db_fault fault;
  bool constraint;
};

struct gw_stmt {
  struct gw_db *db;
  sqlite3_stmt *lite;
  /* PostgreSQL: the rewritten SQL, its text parameters, the result */
  char *sql;
  int nparams;
  char **params;
  bool ran;
  struct gw_pg_res *res;
  int row, nrows;
  unsigned char **blobs; /* decoded bytea columns of the current row */
  int *blob_len;
  int ncols_decoded;
};

bool gw_db_is_url(const char *s)
{
  return s && (strncmp(s, "postgres://", 11) == 0 || strncmp(s, "postgresql://", 13) == 0);
}

enum gw_db_kind gw_db_kind(const struct gw_db *db) { return db->kind; }

/* ---- SQLite ---- */

/* The busy handler: a lock held for a moment (a checkpoint's last copy,
 * another process's short transaction) is tried again every 100 µs for
 * the first 2 ms, rather than after SQLite's own sleeps of 1, 2, 5... ms
 * (each one a stall of every call queued behind the waiting writer),
 * then every 5 ms, 15 s in all as before. */
static int busy_wait(void *ctx, int tries)
{
  (void)ctx;
  enum { QUICK = 20, QUICK_US = 100, SLOW_US = 5000, TOTAL_MS = 15000 };
  if (tries < QUICK)
    return usleep(QUICK_US), 1;
  if (tries < QUICK + (TOTAL_MS - QUICK * QUICK_US / 1000) * 1000 / SLOW_US)
    return usleep(SLOW_US), 1;
  return 0;
}

int gw_db_open_sqlite(const char *path, struct gw_db **ret, struct cap_error *err)
{
  struct gw_db *db = cap_xcalloc(1, sizeof *db);
  db->kind = GW_DB_SQLITE;
  *ret = db;
  if (sqlite3_open_v2(path, &db->lite,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      NULL) != SQLITE_OK)
    return cap_error_set(err, EIO, "cannot open: %s", sqlite3_errmsg(db->lite));
  sqlite3_busy_handler(db->lite, busy_wait, NULL);
  /* keep the WAL and its index between opens: every capsule process opens
   * the state (as root every run, for its ids), and making the two files
   * anew each time was most of an open's cost. A size limit empties the
   * kept WAL when the last connection closes (after its checkpoint): a
   * full one is read frame by frame by the next first opener, on every
   * run (a 1.8 MB WAL cost a root run more than the open it saved).
   * The limit (any, at a last close: the WAL is cut to nothing) is above
   * the WAL's size at its automatic checkpoint (1,000 pages of 4 KiB),
   * so while connections are open the WAL restarts over blocks it has:
   * cut to 1 MiB after each checkpoint, three frames in four went to
   * new blocks the file system allocated and zeroed, about 3 us of CPU
   * an audit record (bench/audit/append.c) */
  int persist = 1;
  sqlite3_file_control(db->lite, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
  if (sqlite3_exec(db->lite,
                   "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                   "PRAGMA journal_size_limit=8388608;",
                   NULL, NULL, NULL) != SQLITE_OK)
    return cap_error_set(err, EIO, "cannot prepare its tables: %s", sqlite3_errmsg(db->lite));
  gw_db_checkpoint_attach(db->lite, path);
  return 0;
}

/* ---- PostgreSQL ---- */

static pthread_once_t pg_once = PTHREAD_ONCE_INIT;
static const struct gw_db_pg_module *pg_module;
static struct cap_error pg_module_err;

static void pg_load(void)
{
  pg_module = cap_module_open(GW_DB_PG_MODULE_NAME, GW_DB_PG_MODULE_SYMBOL, sizeof *pg_module,
                              "PostgreSQL state", &pg_module_err);
}

int gw_db_open_pg(const char *url, struct gw_db **ret, struct cap_error *err)
{
  *ret = NULL;
  pthread_once(&pg_once, pg_load);
  if (!pg_module)
    return cap_error_set(err, pg_module_err.code, "%s", pg_module_err.message);
  if (gw_db_url_password_ambiguous(url)) { /* libpq would print part of it */
    char where[512];
    gw_db_url_redact(url, where, sizeof where);
    return cap_error_set(err, EINVAL,
                         "the state database URL %s: its password holds '@', '/', '?' or '#', "
                         "which a URL reserves: percent-encode them (%%40 %%2F %%3F %%23), or give "
                         "the password in PGPASSWORD or ~/.pgpass",
                         where);
  }
  char *why = NULL;
  struct gw_pg *conn = pg_module->connect(url, &why);
  if (!conn) {
    char where[512];
    gw_db_url_redact(url, where, sizeof where);
    cap_error_set(err, ECONNREFUSED,
                  "cannot connect to the state database %s: %s (is the server up, and is this "
                  "the URL? --state or CAPSULE_STATE names it)",
                  where, why ? why : "unknown error");
    free(why);
    return -ECONNREFUSED;
  }
  struct gw_db *db = cap_xcalloc(1, sizeof *db);
  db->kind = GW_DB_POSTGRES;
  db->pg = pg_module;
  db->conn = conn;
  pthread_mutex_init(&db->mu, NULL);
  *ret = db;
  return 0;
}

static void pg_fail(struct gw_db *db)
{
  const char *state = db->pg->sqlstate(db->conn);
  snprintf(db->msg, sizeof db->msg, "%s", db->pg->errmsg(db->conn));
  db->constraint = strncmp(state, "23", 2) == 0;
  db->fault =
      db->pg->broken(db->conn) || strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0
          ? GW_DB_FAULT_CONNECTION
      : strcmp(state, "53100") == 0 ? GW_DB_FAULT_FULL
      : strcmp(state, "25006") == 0 ? GW_DB_FAULT_READONLY
      : strcmp(state, "55P03") == 0 ? GW_DB_FAULT_BUSY
                                    : GW_DB_FAULT_OTHER;
}

/* Runs sql (mutex held). A connection that went away between
 * transactions is made again first; inside one, the transaction is lost
 * and the statement fails (nothing is retried that may have been done). */
static enum gw_pg_status pg_run(struct gw_db *db, const char *sql, int n, const char *const *params,
                                struct gw_pg_res **res)
{
  *res = NULL;
  db->constraint = false;
  if (db->pg->broken(db->conn)) {
    if (db->in_tx) {
      snprintf(db->msg, sizeof db->msg,
               "the connection to the state database was lost inside a transaction");
      db->fault = GW_DB_FAULT_CONNECTION;
      return GW_PG_FAILED;
    }
    if (!db->pg->reset(db->conn)) {
      pg_fail(db);
      return GW_PG_FAILED;
    }
  }
  enum gw_pg_status st = db->pg->query(db->conn, sql, n, params, res);
  if (st == GW_PG_FAILED)
    pg_fail(db);
  else
    db->changes = db->pg->changes(*res);
  return st;
}

static int pg_exec(struct gw_db *db, const char *sql)
{
  bool begin = strncmp(sql, "BEGIN", 5) == 0,
       end = strcmp(sql, "COMMIT") == 0 || strcmp(sql, "ROLLBACK") == 0;
  if (strcmp(sql, "ROLLBACK") == 0 && db->in_tx && db->pg->broken(db->conn)) {
    db->in_tx = false; /* the server dropped the transaction with the connection */
    return GW_DB_OK;
  }
  _cleanup_free_ char *text = NULL;
  if (strcmp(sql, "BEGIN IMMEDIATE") == 0)
    text = cap_xasprintf("BEGIN; SELECT pg_advisory_xact_lock(%d)", PG_WRITE_LOCK);
  else if (strcmp(sql, "BEGIN") == 0) /* a read: one snapshot */
    text = cap_xstrdup("BEGIN ISOLATION LEVEL REPEATABLE READ");
  else {
    int n = 0;
    text = gw_db_sql_pg(sql, &n);
  }
  if (!text) {
    snprintf(db->msg, sizeof db->msg, "malformed SQL");
    return GW_DB_ERROR;
  }
  struct gw_pg_res *res = NULL;
  pthread_mutex_lock(&db->mu);
  enum gw_pg_status st = pg_run(db, text, 0, NULL, &res);
  if (begin && st != GW_PG_FAILED)
    db->in_tx = true;
  if (end || (begin && st == GW_PG_FAILED && !db->pg->broken(db->conn)))
    db->in_tx = false;
  if (begin && st == GW_PG_FAILED && !db->pg->broken(db->conn)) {
    struct gw_pg_res *r2 = NULL;
    if (db->pg->query(db->conn, "ROLLBACK", 0, NULL, &r2) != GW_PG_FAILED)
      db->pg->clear(r2);
  }
  pthread_mutex_unlock(&db->mu);
  if (res)
    db->pg->clear(res);
  return st == GW_PG_FAILED ? GW_DB_ERROR : GW_DB_OK;
}

/* ---- both ---- */

void gw_db_close(struct gw_db *db)
{
  if (!db)
    return;
  if (db->kind == GW_DB_SQLITE) {
    for (size_t i = 0; i < STMT_CACHE; i++)
      sqlite3_finalize(db->cache[i]);
    sqlite3_close(db->lite);
  } else {
    db->pg->finish(db->conn);
    pthread_mutex_destroy(&db->mu);
  }
  free(db);
}

int gw_db_exec(struct gw_db *db, const char *sql)
{
  if (db->kind == GW_DB_POSTGRES)
    return pg_exec(db, sql);
  /* a transaction's own words, as often as calls: kept prepared (the
   * cache), not parsed again by sqlite3_exec */
  if (strcmp(sql, "BEGIN IMMEDIATE") == 0 || strcmp(sql, "COMMIT") == 0 ||
      strcmp(sql, "ROLLBACK") == 0) {
    struct gw_stmt *s = gw_db_prepare(db, sql);
    int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
    gw_stmt_finalize(s);
    return rc == GW_DB_DONE ? GW_DB_OK : GW_DB_ERROR;
  }
  return sqlite3_exec(db->lite, sql, NULL, NULL, NULL) == SQLITE_OK ? GW_DB_OK : GW_DB_ERROR;
}

int64_t gw_db_changes(struct gw_db *db)
{
  return db->kind == GW_DB_SQLITE ? sqlite3_changes(db->lite) : db->changes;
}

int gw_db_version(struct gw_db *db, int64_t v[2])
{
  if (db->kind != GW_DB_SQLITE)
    return -ENOTSUP;
  struct gw_stmt *s = gw_db_prepare(db, "PRAGMA data_version");
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  v[0] = rc == GW_DB_ROW ? gw_stmt_int64(s, 0) : 0;
  gw_stmt_finalize(s);
  v[1] = sqlite3_total_changes64(db->lite);
  return rc == GW_DB_ROW ? 0 : -EIO;
}

int64_t gw_db_total_changes(struct gw_db *db)
{
  return db->kind == GW_DB_SQLITE ? sqlite3_total_changes64(db->lite) : 0;
}

const char *gw_db_errmsg(struct gw_db *db)
{
  return db->kind == GW_DB_SQLITE ? sqlite3_errmsg(db->lite) : db->msg;
}

enum gw_db_fault gw_db_fault(struct gw_db *db)
{
  if (db->kind == GW_DB_POSTGRES)
    return db->fault;
  switch (sqlite3_errcode(db->lite)) {
  case SQLITE_FULL: return GW_DB_FAULT_FULL;
  case SQLITE_READONLY:
  case SQLITE_CANTOPEN:
  case SQLITE_PERM: return GW_DB_FAULT_READONLY;
  case SQLITE_BUSY: return GW_DB_FAULT_BUSY;
  default: return GW_DB_FAULT_OTHER;
  }
}

int gw_db_schema_version(struct gw_db *db, int *v)
{
  *v = 0;
  struct gw_stmt *s = gw_db_prepare(
      db, db->kind == GW_DB_SQLITE ? "PRAGMA user_version"
                                   : "SELECT CASE WHEN to_regclass('capsule_schema') IS NULL THEN 0"
                                     " ELSE -1 END");
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  if (rc == GW_DB_ROW)
    *v = gw_stmt_int(s, 0);
  gw_stmt_finalize(s);
  if (rc != GW_DB_ROW || *v >= 0)
    return rc == GW_DB_ROW ? 0 : -EIO;
  s = gw_db_prepare(db, "SELECT max(version) FROM capsule_schema");
  rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  *v = rc == GW_DB_ROW ? gw_stmt_int(s, 0) : 0;
  gw_stmt_finalize(s);
  return rc == GW_DB_ROW ? 0 : -EIO;
}

int gw_db_set_schema_version(struct gw_db *db, int v)
{
  char sql[160];
  if (db->kind == GW_DB_SQLITE)
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v);
  else
    snprintf(sql, sizeof sql,
             "CREATE TABLE IF NOT EXISTS capsule_schema (version INTEGER NOT NULL);"
             " DELETE FROM capsule_schema; INSERT INTO capsule_schema VALUES (%d)",
             v);
  return gw_db_exec(db, sql) == GW_DB_OK ? 0 : -EIO;
}

int gw_db_column_exists(struct gw_db *db, const char *table, const char *column, bool *exists)
{
  struct gw_stmt *s =
      gw_db_prepare(db, db->kind == GW_DB_SQLITE
                            ? "SELECT count(*) FROM pragma_table_info(?) WHERE name = ?"
                            : "SELECT count(*) FROM information_schema.columns WHERE table_schema ="
                              " current_schema() AND table_name = ? AND column_name = ?");
  int rc = GW_DB_ERROR;
  if (s) {
    gw_stmt_bind_text(s, 1, table);
    gw_stmt_bind_text(s, 2, column);
    rc = gw_stmt_step(s);
  }
  *exists = rc == GW_DB_ROW && gw_stmt_int64(s, 0) > 0;
  gw_stmt_finalize(s);
  return rc == GW_DB_ROW ? 0 : -EIO;
}

struct gw_stmt *gw_db_prepare(struct gw_db *db, const char *sql)
{
  if (db->kind == GW_DB_SQLITE) {
    sqlite3_stmt *ls = NULL;
    for (size_t i = 0; !ls && i < STMT_CACHE; i++)
      if (db->cache[i] && strcmp(sqlite3_sql(db->cache[i]), sql) == 0) {
        ls = db->cache[i];
        db->cache[i] = NULL;
      }
    if (!ls && sqlite3_prepare_v2(db->lite, sql, -1, &ls, NULL) != SQLITE_OK)
      return NULL;
    struct gw_stmt *s = cap_xcalloc(1, sizeof *s);
    s->db = db;
    s->lite = ls;
    return s;
  }
  int n = 0;
  char *text = gw_db_sql_pg(sql, &n);
  if (!text) {
    snprintf(db->msg, sizeof db->msg, "malformed SQL");
    return NULL;
  }
  struct gw_stmt *s = cap_xcalloc(1, sizeof *s);
  s->db = db;
  s->sql = text;
  s->nparams = n;
  s->params = cap_xcalloc((size_t)n + 1, sizeof *s->params);
  return s;
}

static void bind_owned(struct gw_stmt *s, int i, char *v)
{
  if (i < 1 || i > s->nparams) {
    free(v);
    return;
  }
  free(s->params[i - 1]);
  s->params[i - 1] = v;
}

void gw_stmt_bind_text(struct gw_stmt *s, int i, const char *v)
{
  if (s->lite)
    sqlite3_bind_text(s->lite, i, v, -1, SQLITE_TRANSIENT);
  else
    bind_owned(s, i, v ? cap_xstrdup(v) : NULL);
}

void gw_stmt_bind_int64(struct gw_stmt *s, int i, int64_t v)
{
  if (s->lite)
    sqlite3_bind_int64(s->lite, i, v);
  else
    bind_owned(s, i, cap_xasprintf("%" PRId64, v));
}

void gw_stmt_bind_blob(struct gw_stmt *s, int i, const void *v, size_t n)
{
  if (s->lite) {
    sqlite3_bind_blob(s->lite, i, v, (int)n, SQLITE_TRANSIENT);
    return;
  }
  char *hex = cap_xmalloc(2 * n + 3);
  memcpy(hex, "\\x", 2);
  for (size_t k = 0; k < n; k++)
    snprintf(hex + 2 + 2 * k, 3, "%02x", ((const unsigned char *)v)[k]);
  hex[2 + 2 * n] = '\0';
  bind_owned(s, i, hex);
}

static void drop_blobs(struct gw_stmt *s)
{
  for (int i = 0; i < s->ncols_decoded; i++)
    free(s->blobs[i]);
  free(s->blobs);
  free(s->blob_len);
  s->blobs = NULL;
  s->blob_len = NULL;
  s->ncols_decoded = 0;
}

static int pg_step(struct gw_stmt *s)
{
  struct gw_db *db = s->db;
  drop_blobs(s);
  if (s->ran) {
    if (s->res && ++s->row < s->nrows)
      return GW_DB_ROW;
    return s->res ? GW_DB_DONE : GW_DB_ERROR;
  }
  s->ran = true;
  pthread_mutex_lock(&db->mu);
  enum gw_pg_status st = pg_run(db, s->sql, s->nparams, (const char *const *)s->params, &s->res);
  bool constraint = db->constraint;
  pthread_mutex_unlock(&db->mu);
  if (st == GW_PG_FAILED)
    return constraint ? GW_DB_CONSTRAINT : GW_DB_ERROR;
  s->nrows = st == GW_PG_ROWS ? db->pg->ntuples(s->res) : 0;
  s->row = 0;
  return s->nrows > 0 ? GW_DB_ROW : GW_DB_DONE;
}

int gw_stmt_step(struct gw_stmt *s)
{
  if (!s->lite)
    return pg_step(s);
  int rc = sqlite3_step(s->lite);
  return rc == SQLITE_ROW || rc == SQLITE_DONE || rc == SQLITE_CONSTRAINT ? rc : GW_DB_ERROR;
}

static const char *pg_value(struct gw_stmt *s, int i)
{
  return s->res && s->row < s->nrows ? s->db->pg->value(s->res, s->row, i) : NULL;
}

const char *gw_stmt_text(struct gw_stmt *s, int i)
{
  return s->lite ? (const char *)sqlite3_column_text(s->lite, i) : pg_value(s, i);
}

int64_t gw_stmt_int64(struct gw_stmt *s, int i)
{
  if (s->lite)
    return sqlite3_column_int64(s->lite, i);
  const char *v = pg_value(s, i);
  if (!v)
    return 0;
  if (strcmp(v, "t") == 0 || strcmp(v, "f") == 0) /* a boolean */
    return *v == 't';
  return strtoll(v, NULL, 10);
}

int gw_stmt_int(struct gw_stmt *s, int i) { return (int)gw_stmt_int64(s, i); }

bool gw_stmt_is_null(struct gw_stmt *s, int i)
{
  return s->lite ? sqlite3_column_type(s->lite, i) == SQLITE_NULL : pg_value(s, i) == NULL;
}

int gw_stmt_columns(struct gw_stmt *s)
{
  if (s->lite)
    return sqlite3_column_count(s->lite);
  return s->res ? s->db->pg->nfields(s->res) : 0;
}

const char *gw_stmt_name(struct gw_stmt *s, int i)
{
  if (s->lite)
    return sqlite3_column_name(s->lite, i);
  return s->res ? s->db->pg->fname(s->res, i) : NULL;
}

enum gw_db_type gw_stmt_type(struct gw_stmt *s, int i)
{
  if (!s->lite)
    return pg_value(s, i) == NULL           ? GW_DB_NULL
           : s->db->pg->is_bytea(s->res, i) ? GW_DB_BLOB
                                            : GW_DB_TEXT;
  switch (sqlite3_column_type(s->lite, i)) {
  case SQLITE_NULL: return GW_DB_NULL;
  case SQLITE_INTEGER: return GW_DB_INTEGER;
  case SQLITE_BLOB: return GW_DB_BLOB;
  default: return GW_DB_TEXT;
  }
}

static int hexval(char c)
{
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* bytea's hex output form (\x...) decoded, kept until the next step. */
static void pg_blob(struct gw_stmt *s, int i, const unsigned char **p, int *n)
{
  *p = NULL;
  *n = 0;
  const char *v = pg_value(s, i);
  if (!v || i < 0 || i > 1000)
    return;
  if (i >= s->ncols_decoded) {
    s->blobs = cap_xrealloc(s->blobs, (size_t)(i + 1) * sizeof *s->blobs);
    s->blob_len = cap_xrealloc(s->blob_len, (size_t)(i + 1) * sizeof *s->blob_len);
    for (int k = s->ncols_decoded; k <= i; k++) {
      s->blobs[k] = NULL;
      s->blob_len[k] = -1;
    }
    s->ncols_decoded = i + 1;
  }
  if (s->blob_len[i] < 0) {
    size_t len = strlen(v);
    bool hex = s->db->pg->is_bytea(s->res, i) && len >= 2 && v[0] == '\\' && v[1] == 'x';
    size_t out = hex ? (len - 2) / 2 : len;
    unsigned char *b = cap_xmalloc(out + 1);
    for (size_t k = 0; k < out; k++)
      b[k] = hex ? (unsigned char)(hexval(v[2 + 2 * k]) << 4 | hexval(v[3 + 2 * k]))
                 : (unsigned char)v[k];
    s->blobs[i] = b;
    s->blob_len[i] = (int)out;
  }
  *p = s->blobs[i];
  *n = s->blob_len[i];
}

const void *gw_stmt_blob(struct gw_stmt *s, int i)
{
  if (s->lite)
    return sqlite3_column_blob(s->lite, i);
  const unsigned char *p;
  int n;
  pg_blob(s, i, &p, &n);
  return p;
}

int gw_stmt_bytes(struct gw_stmt *s, int i)
{
  if (s->lite)
    return sqlite3_column_bytes(s->lite, i);
  const unsigned char *p;
  int n;
  pg_blob(s, i, &p, &n);
  return n;
}

/* A finished SQLite statement back into the cache (one of the same text
 * already there: finalized). */
static void keep_prepared(struct gw_db *db, sqlite3_stmt *ls)
{
  sqlite3_reset(ls);
  sqlite3_clear_bindings(ls);
  size_t free_slot = STMT_CACHE;
  for (size_t i = 0; i < STMT_CACHE; i++) {
    if (!db->cache[i]) {
      free_slot = free_slot == STMT_CACHE ? i : free_slot;
    } else if (strcmp(sqlite3_sql(db->cache[i]), sqlite3_sql(ls)) == 0) {
      sqlite3_finalize(ls);
      return;
    }
  }
  if (free_slot == STMT_CACHE) {
    free_slot = db->cache_next++ % STMT_CACHE;
    sqlite3_finalize(db->cache[free_slot]);
  }
  db->cache[free_slot] = ls;
}

void gw_stmt_finalize(struct gw_stmt *s)
{
  if (!s)
    return;
  if (s->lite) {
    keep_prepared(s->db, s->lite);
  } else {
    drop_blobs(s);
    if (s->res)
      s->db->pg->clear(s->res);
    for (int i = 0; i < s->nparams; i++)
      free(s->params[i]);
    free(s->params);
    free(s->sql);
  }
  free(s);
}

/* ---- PostgreSQL only ---- */

int gw_db_notify(struct gw_db *db, const char *channel, const char *payload)
{
  if (db->kind != GW_DB_POSTGRES)
    return 0;
  struct gw_stmt *s = gw_db_prepare(db, "SELECT pg_notify(?, ?)");
  if (!s)
    return -EIO;
  gw_stmt_bind_text(s, 1, channel);
  gw_stmt_bind_text(s, 2, payload);
  int rc = gw_stmt_step(s);
  gw_stmt_finalize(s);
  return rc == GW_DB_ROW ? 0 : -EIO;
}

int gw_db_wait_notify(struct gw_db *db, const char *channel, int timeout_ms)
{
  int r = gw_db_wait_notify_any(db, &channel, 1, timeout_ms);
  return r > 0 ? 1 : r;
}

int gw_db_wait_notify_any(struct gw_db *db, const char *const *channels, size_t n, int timeout_ms)
{
  if (db->kind != GW_DB_POSTGRES)
    return -ENOTSUP;
  if (n == 0 || n > 8)
    return -EINVAL;
  pthread_mutex_lock(&db->mu);
  int r = -1;
  if (!db->pg->broken(db->conn) || (!db->in_tx && db->pg->reset(db->conn)))
    r = db->pg->wait_notify(db->conn, channels, n, timeout_ms);
  if (r < 0)
    pg_fail(db);
  pthread_mutex_unlock(&db->mu);
  return r < 0 ? -EIO : r;
}

static int lock_call(struct gw_db *db, const char *fn, int64_t key)
{
  if (db->kind != GW_DB_POSTGRES)
    return -ENOTSUP;
  _cleanup_free_ char *sql = cap_xasprintf("SELECT %s(%" PRId64 ")", fn, key);
  struct gw_stmt *s = gw_db_prepare(db, sql);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  int v = rc == GW_DB_ROW ? (int)gw_stmt_int64(s, 0) : -EIO;
  gw_stmt_finalize(s);
  return v;
}

int gw_db_try_lock(struct gw_db *db, int64_t key)
{
  return lock_call(db, "pg_try_advisory_lock", key);
}

int gw_db_unlock(struct gw_db *db, int64_t key)
{
  int r = lock_call(db, "pg_advisory_unlock", key);
  return r < 0 ? r : 0;
}
