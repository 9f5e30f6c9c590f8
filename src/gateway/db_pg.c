/* The PostgreSQL driver (the module capsule-state-pg.so): libpq calls
 * behind the table in db_pg.h. Thread safety is the caller's (db.c holds
 * a mutex around every call on one connection). */
#include "gateway/db_pg.h"

#include <libpq-fe.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VISIBLE __attribute__((visibility("default")))

/* Statements with parameters are prepared once per session (as SQLite's
 * stay prepared per connection, db.c): a dashboard page's or a call's
 * statements are then parsed and planned once, not on every request. */
#define PREPARED_MAX 64

struct gw_pg {
  PGconn *conn;
  char *prepared[PREPARED_MAX]; /* by the number in its name, capsule_N; NULL: dropped */
  size_t n_prepared;
  char msg[512];
  char state[6];
  char **listening; /* channels LISTENed on this connection */
  size_t n_listening;
};

/* libpq's message on one line: its line breaks and tabs as spaces, no
 * trailing blank. */
static void one_line(char *m)
{
  char *w = m;
  for (const char *r = m; *r; r++) {
    char ch = *r == '\n' || *r == '\t' ? ' ' : *r;
    if (ch == ' ' && (w == m || w[-1] == ' '))
      continue;
    *w++ = ch;
  }
  while (w > m && w[-1] == ' ')
    w--;
  *w = '\0';
}

static void set_msg(struct gw_pg *c, const char *m, const char *state)
{
  snprintf(c->msg, sizeof c->msg, "%s", m && *m ? m : "unknown error");
  one_line(c->msg);
  snprintf(c->state, sizeof c->state, "%s", state ? state : "");
}

static void quiet(void *arg, const char *message)
{
  (void)arg;
  (void)message; /* notices (e.g. "relation exists, skipping") are not errors */
}

/* A server that does not answer (a host that drops packets) is an error
 * after this long, not a hang of TCP's own timeout; the URL's own
 * connect_timeout, like its other parameters, comes after and wins. */
#define CONNECT_TIMEOUT_S "10"

static struct gw_pg *pg_connect(const char *url, char **why)
{
  const char *const keys[] = {"connect_timeout", "application_name", "dbname", NULL};
  const char *const values[] = {CONNECT_TIMEOUT_S, "capsule", url, NULL};
  PGconn *conn = PQconnectdbParams(keys, values, 1);
  if (!conn || PQstatus(conn) != CONNECTION_OK) {
    *why = strdup(conn ? PQerrorMessage(conn) : "out of memory");
    if (*why)
      one_line(*why);
    PQfinish(conn);
    return NULL;
  }
  PQsetNoticeProcessor(conn, quiet, NULL);
  struct gw_pg *c = calloc(1, sizeof *c);
  if (!c) {
    PQfinish(conn);
    *why = strdup("out of memory");
    return NULL;
  }
  c->conn = conn;
  return c;
}

static void forget_listening(struct gw_pg *c)
{
  for (size_t i = 0; i < c->n_listening; i++)
    free(c->listening[i]);
  free(c->listening);
  c->listening = NULL;
  c->n_listening = 0;
}

/* A new session has nothing prepared. */
static void forget_prepared(struct gw_pg *c)
{
  for (size_t i = 0; i < c->n_prepared; i++)
    free(c->prepared[i]);
  c->n_prepared = 0;
}

static void pg_finish(struct gw_pg *c)
{
  if (!c)
    return;
  PQfinish(c->conn);
  forget_listening(c);
  forget_prepared(c);
  free(c);
}

/* The number of sql's prepared statement on this session, prepared on its
 * first use; -1 where it is not (the cache full, a transaction already
 * failed, or preparing failed: it then runs unprepared, and fails there
 * as it would have). */
static int prepared(struct gw_pg *c, const char *sql, int n)
{
  for (size_t i = 0; i < c->n_prepared; i++)
    if (c->prepared[i] && strcmp(c->prepared[i], sql) == 0)
      return (int)i;
  if (c->n_prepared == PREPARED_MAX || PQtransactionStatus(c->conn) != PQTRANS_IDLE)
    return -1; /* inside a transaction a failed PREPARE would abort it */
  char name[32];
  snprintf(name, sizeof name, "capsule_%zu", c->n_prepared);
  char *copy = strdup(sql);
  PGresult *r = copy ? PQprepare(c->conn, name, sql, n, NULL) : NULL;
  bool ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  c->prepared[c->n_prepared++] = ok ? copy : NULL; /* the name is spent either way */
  if (!ok)
    free(copy);
  return ok ? (int)c->n_prepared - 1 : -1;
}

static PGresult *run(struct gw_pg *c, const char *sql, int n, const char *const *params)
{
  if (n == 0 && !params)
    return PQexec(c->conn, sql);
  int k = prepared(c, sql, n);
  if (k < 0)
    return PQexecParams(c->conn, sql, n, NULL, params, NULL, NULL, 0);
  char name[32];
  snprintf(name, sizeof name, "capsule_%d", k);
  PGresult *r = PQexecPrepared(c->conn, name, n, params, NULL, NULL, 0);
  const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
  if (state && strcmp(state, "0A000") == 0 && PQtransactionStatus(c->conn) == PQTRANS_IDLE) {
    /* "cached plan must not change result type": a table changed under
     * it (another gateway's migration); dropped, and run afresh */
    free(c->prepared[k]);
    c->prepared[k] = NULL;
    PQclear(r);
    r = PQexecParams(c->conn, sql, n, NULL, params, NULL, NULL, 0);
  }
  return r;
}

static enum gw_pg_status pg_query(struct gw_pg *c, const char *sql, int n,
                                  const char *const *params, struct gw_pg_res **res)
{
  *res = NULL;
  PGresult *r = run(c, sql, n, params);
  ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
    *res = (struct gw_pg_res *)r;
    return st == PGRES_TUPLES_OK ? GW_PG_ROWS : GW_PG_COMMAND;
  }
  set_msg(c, r ? PQresultErrorMessage(r) : PQerrorMessage(c->conn),
          r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL);
  PQclear(r);
  return GW_PG_FAILED;
}

static const char *pg_errmsg(struct gw_pg *c) { return c->msg; }
static const char *pg_sqlstate(struct gw_pg *c) { return c->state; }
static bool pg_broken(struct gw_pg *c) { return PQstatus(c->conn) != CONNECTION_OK; }

static bool pg_reset(struct gw_pg *c)
{
  PQreset(c->conn);
  forget_listening(c); /* a new session listens to nothing, */
  forget_prepared(c);  /* has nothing prepared */
  if (PQstatus(c->conn) == CONNECTION_OK)
    return true;
  set_msg(c, PQerrorMessage(c->conn), "08006");
  return false;
}

static int pg_ntuples(const struct gw_pg_res *r) { return PQntuples((const PGresult *)r); }

static int pg_nfields(const struct gw_pg_res *r) { return PQnfields((const PGresult *)r); }

static const char *pg_fname(const struct gw_pg_res *r, int col)
{
  return PQfname((const PGresult *)r, col);
}

static const char *pg_value(const struct gw_pg_res *r, int row, int col)
{
  const PGresult *p = (const PGresult *)r;
  if (row >= PQntuples(p) || col >= PQnfields(p) || PQgetisnull(p, row, col))
    return NULL;
  return PQgetvalue(p, row, col);
}

#define BYTEAOID 17
static bool pg_is_bytea(const struct gw_pg_res *r, int col)
{
  return PQftype((const PGresult *)r, col) == BYTEAOID;
}

static int64_t pg_changes(const struct gw_pg_res *r)
{
  const char *t = PQcmdTuples((PGresult *)r);
  return t && *t ? strtoll(t, NULL, 10) : 0;
}

static void pg_clear(struct gw_pg_res *r) { PQclear((PGresult *)r); }

static int listen_once(struct gw_pg *c, const char *channel)
{
  for (size_t i = 0; i < c->n_listening; i++)
    if (strcmp(c->listening[i], channel) == 0)
      return 0;
  char *ident = PQescapeIdentifier(c->conn, channel, strlen(channel));
  if (!ident)
    return -1;
  char sql[256];
  snprintf(sql, sizeof sql, "LISTEN %s", ident);
  PQfreemem(ident);
  struct gw_pg_res *res;
  if (pg_query(c, sql, 0, NULL, &res) == GW_PG_FAILED)
    return -1;
  pg_clear(res);
  char **v = realloc(c->listening, (c->n_listening + 1) * sizeof *v);
  if (!v)
    return -1;
  c->listening = v;
  c->listening[c->n_listening++] = strdup(channel);
  return 0;
}

/* Which of channels had a notification: a bit each (bit i: channels[i]). */
static unsigned take_notify(struct gw_pg *c, const char *const *channels, size_t n)
{
  unsigned got = 0;
  PGnotify *note;
  while ((note = PQnotifies(c->conn))) {
    for (size_t i = 0; i < n; i++)
      if (strcmp(note->relname, channels[i]) == 0)
        got |= 1u << i;
    PQfreemem(note);
  }
  return got;
}

static int pg_wait_notify(struct gw_pg *c, const char *const *channels, size_t n, int timeout_ms)
{
  for (size_t i = 0; i < n; i++)
    if (listen_once(c, channels[i]) < 0)
      return -1;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    if (!PQconsumeInput(c->conn)) {
      set_msg(c, PQerrorMessage(c->conn), "08006");
      return -1;
    }
    unsigned got = take_notify(c, channels, n);
    if (got)
      return (int)got;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    long spent = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
    if (spent >= timeout_ms)
      return 0;
    struct pollfd p = {.fd = PQsocket(c->conn), .events = POLLIN};
    if (p.fd < 0 || poll(&p, 1, (int)(timeout_ms - spent)) < 0) {
      set_msg(c, "the connection to the database is gone", "08006");
      return -1;
    }
  }
}

VISIBLE const struct gw_db_pg_module capsule_state_pg_module = {
    .size = sizeof(struct gw_db_pg_module),
    .connect = pg_connect,
    .finish = pg_finish,
    .query = pg_query,
    .errmsg = pg_errmsg,
    .sqlstate = pg_sqlstate,
    .broken = pg_broken,
    .reset = pg_reset,
    .ntuples = pg_ntuples,
    .nfields = pg_nfields,
    .fname = pg_fname,
    .value = pg_value,
    .is_bytea = pg_is_bytea,
    .changes = pg_changes,
    .clear = pg_clear,
    .wait_notify = pg_wait_notify,
};
