/* The state's database, behind one interface with two drivers: SQLite
 * (a file in the state directory, the default) and PostgreSQL (libpq, in
 * the module capsule-state-pg.so opened on first use, so that only a
 * process using a PostgreSQL state maps libpq). SQL is written once, in
 * SQLite's dialect restricted to what both understand; for PostgreSQL it
 * is rewritten (gw_db_sql_pg): `?` and `?N` placeholders become `$N`,
 * INSERT OR IGNORE becomes ON CONFLICT DO NOTHING, the column names
 * `user` and `rowid` become "user" and ctid, BLOB becomes BYTEA, INTEGER
 * BIGINT (INTEGER PRIMARY KEY an identity column), and BEGIN IMMEDIATE
 * takes one advisory lock, so that write transactions are serialised
 * across gateways as SQLite serialises its writers. The calls mirror
 * SQLite's: prepare, bind (1-based), step, column (0-based), finalize. */
#ifndef CAPSULE_GATEWAY_DB_H
#define CAPSULE_GATEWAY_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* Step and exec results, SQLite's values. */
enum {
  GW_DB_OK = 0,
  GW_DB_ERROR = 1,
  GW_DB_CONSTRAINT = 19, /* a unique or check constraint refused the row */
  GW_DB_ROW = 100,
  GW_DB_DONE = 101,
};

enum gw_db_kind { GW_DB_SQLITE, GW_DB_POSTGRES };

/* What the last failure was, for the hint in an error message. */
enum gw_db_fault {
  GW_DB_FAULT_OTHER,
  GW_DB_FAULT_FULL,       /* the disk is full */
  GW_DB_FAULT_READONLY,   /* the file or directory cannot be written */
  GW_DB_FAULT_BUSY,       /* another process holds the lock */
  GW_DB_FAULT_CONNECTION, /* the server is unreachable or went away */
};

struct gw_db;
struct gw_stmt;

/* SQLite: the file at path (created), WAL, a busy timeout. */
int gw_db_open_sqlite(const char *path, struct gw_db **ret, struct cap_error *err);
/* PostgreSQL: url is a libpq connection URI (postgres:// or
 * postgresql://). An unreachable server is an error (ECONNREFUSED). */
int gw_db_open_pg(const char *url, struct gw_db **ret, struct cap_error *err);
void gw_db_close(struct gw_db *db);
/* SQLite: the connections this process opens from now on to one database
 * (the first opened) are checkpointed on a thread of the process's own,
 * not in the commit that fills the log (gateway/db_checkpoint.c): for
 * serve and the long-lived processes whose calls commit under one lock.
 * A fork's child checkpoints as SQLite does unless it asks again. */
void gw_db_checkpoints_apart(void);
enum gw_db_kind gw_db_kind(const struct gw_db *db);
/* True for a postgres:// or postgresql:// URI. */
bool gw_db_is_url(const char *s);

/* NULL on error (gw_db_errmsg says why). */
struct gw_stmt *gw_db_prepare(struct gw_db *db, const char *sql);
/* One or more statements without parameters. */
int gw_db_exec(struct gw_db *db, const char *sql);
/* Rows changed by the last INSERT, UPDATE or DELETE. */
int64_t gw_db_changes(struct gw_db *db);
/* SQLite: v[0] PRAGMA data_version (moves when another connection
 * commits), v[1] the rows this connection changed so far; both as they
 * were, nothing changed since. -ENOTSUP on PostgreSQL. */
int gw_db_version(struct gw_db *db, int64_t v[2]);
/* SQLite: the rows this connection changed so far (0 on PostgreSQL). */
int64_t gw_db_total_changes(struct gw_db *db);
const char *gw_db_errmsg(struct gw_db *db);
enum gw_db_fault gw_db_fault(struct gw_db *db);

/* The schema's version: SQLite's PRAGMA user_version, PostgreSQL's table
 * capsule_schema (0 when there is none). */
int gw_db_schema_version(struct gw_db *db, int *v);
int gw_db_set_schema_version(struct gw_db *db, int v);

/* Whether table has a column of that name (SQLite: pragma_table_info;
 * PostgreSQL: information_schema), for a migration that adds one. */
int gw_db_column_exists(struct gw_db *db, const char *table, const char *column, bool *exists);

/* Values are copied. */
void gw_stmt_bind_text(struct gw_stmt *s, int i, const char *v);
void gw_stmt_bind_int64(struct gw_stmt *s, int i, int64_t v);
void gw_stmt_bind_blob(struct gw_stmt *s, int i, const void *v, size_t n);
int gw_stmt_step(struct gw_stmt *s);
/* Valid until the next step or finalize; text is NULL for NULL. */
const char *gw_stmt_text(struct gw_stmt *s, int i);
int64_t gw_stmt_int64(struct gw_stmt *s, int i);
int gw_stmt_int(struct gw_stmt *s, int i);
const void *gw_stmt_blob(struct gw_stmt *s, int i);
int gw_stmt_bytes(struct gw_stmt *s, int i);
bool gw_stmt_is_null(struct gw_stmt *s, int i);
/* The current row's columns: how many, each one's name and kind (on
 * PostgreSQL every value but bytea reads as text). */
enum gw_db_type { GW_DB_NULL, GW_DB_INTEGER, GW_DB_TEXT, GW_DB_BLOB };
int gw_stmt_columns(struct gw_stmt *s);
const char *gw_stmt_name(struct gw_stmt *s, int i);
enum gw_db_type gw_stmt_type(struct gw_stmt *s, int i);
void gw_stmt_finalize(struct gw_stmt *s);

/* ---- PostgreSQL only (no-ops, or -ENOTSUP, on SQLite) ---- */
/* NOTIFY channel, payload (after the current transaction commits). */
int gw_db_notify(struct gw_db *db, const char *channel, const char *payload);
/* LISTEN channel once, then waits up to timeout_ms for a notification on
 * it: 1 when one came, 0 on timeout, negative on error. The connection is
 * held while it waits: a thread that waits long wants a handle (a
 * gw_state_open) of its own. */
int gw_db_wait_notify(struct gw_db *db, const char *channel, int timeout_ms);
/* The same on up to 8 channels at once: a bit per channel notified (bit
 * i: channels[i]), 0 on timeout, negative on error. */
int gw_db_wait_notify_any(struct gw_db *db, const char *const *channels, size_t n, int timeout_ms);
/* A session-level advisory lock named by key, without waiting: 1 taken,
 * 0 held elsewhere; gw_db_unlock releases it. */
int gw_db_try_lock(struct gw_db *db, int64_t key);
int gw_db_unlock(struct gw_db *db, int64_t key);

/* The PostgreSQL rewrite of one SQL text (allocated; NULL when it is not
 * one this layer writes: unterminated quote or comment); *nparams the
 * highest placeholder number. */
char *gw_db_sql_pg(const char *sql, int *nparams);
/* url with the password of its user info (scheme://user:password@...,
 * up to the URL's last '@') and any parameter that may be a password
 * (password in any case, a name with a %-escape) replaced by "***", into
 * out (truncated). */
void gw_db_url_redact(const char *url, char *out, size_t size);
/* Where the password of a postgres:// URL inside text is (an argument
 * such as --state=URL): false when it holds none. */
bool gw_db_url_password_span(const char *text, size_t *off, size_t *len);
/* Whether url's password holds an unencoded '@', '/', '?' or '#': libpq
 * would read part of it as the host, port or parameters (and name it in
 * its errors). */
bool gw_db_url_password_ambiguous(const char *url);

#endif
