/* The PostgreSQL driver's table: the module capsule-state-pg.so (db_pg.c,
 * linked with libpq), opened by the first gw_db_open_pg (db.c). It
 * knows libpq only: SQL arrives rewritten, parameters as text (a BLOB as
 * bytea's hex form), results are read as text. */
#ifndef CAPSULE_GATEWAY_DB_PG_H
#define CAPSULE_GATEWAY_DB_PG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GW_DB_PG_MODULE_NAME "capsule-state-pg.so"
#define GW_DB_PG_MODULE_SYMBOL "capsule_state_pg_module"

struct gw_pg;
struct gw_pg_res;

enum gw_pg_status { GW_PG_FAILED = -1, GW_PG_COMMAND = 0, GW_PG_ROWS = 1 };

struct gw_db_pg_module {
  size_t size;
  /* NULL with *why (allocated) when the server cannot be reached. */
  struct gw_pg *(*connect)(const char *url, char **why);
  void (*finish)(struct gw_pg *c);
  /* One statement with n text parameters (NULL: SQL NULL); *res set for
   * GW_PG_ROWS and GW_PG_COMMAND. n 0 and params NULL: several statements. */
  enum gw_pg_status (*query)(struct gw_pg *c, const char *sql, int n, const char *const *params,
                             struct gw_pg_res **res);
  /* The last failure: message, SQLSTATE ("" when none), and whether the
   * connection is gone. */
  const char *(*errmsg)(struct gw_pg *c);
  const char *(*sqlstate)(struct gw_pg *c);
  bool (*broken)(struct gw_pg *c);
  /* Reconnects a broken connection: true when it is back. */
  bool (*reset)(struct gw_pg *c);
  int (*ntuples)(const struct gw_pg_res *r);
  int (*nfields)(const struct gw_pg_res *r);
  const char *(*fname)(const struct gw_pg_res *r, int col);
  const char *(*value)(const struct gw_pg_res *r, int row, int col); /* NULL for NULL */
  bool (*is_bytea)(const struct gw_pg_res *r, int col);
  int64_t (*changes)(const struct gw_pg_res *r);
  void (*clear)(struct gw_pg_res *r);
  /* LISTEN (once per channel), then wait: 1 notified, 0 timeout, -1 error. */
  /* LISTENs on each of channels (n <= 8), then waits: a bit per channel
   * notified (bit i: channels[i]), 0 on timeout, -1 on error */
  int (*wait_notify)(struct gw_pg *c, const char *const *channels, size_t n, int timeout_ms);
};

#endif
