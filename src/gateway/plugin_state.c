#include "gateway/plugin_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/clock.h"
#include "gateway/state_int.h"

const char *const gw_grant_kind_names[4] = {"host", "read", "write", "rw"};

/* Runs a statement that returns no rows (or ignores them). */
static int exec_done(struct gw_state *st, struct gw_stmt *s, const char *what,
                     struct cap_error *err)
{
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  while (rc == GW_DB_ROW)
    rc = gw_stmt_step(s);
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, what);
}

/* Runs a DELETE ... RETURNING 1; *found when it removed a row. */
static int exec_rm(struct gw_state *st, struct gw_stmt *s, bool *found, const char *what,
                   struct cap_error *err)
{
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  *found = rc == GW_DB_ROW;
  while (rc == GW_DB_ROW)
    rc = gw_stmt_step(s);
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, what);
}

static char *column_dup(struct gw_stmt *s, int i)
{
  const char *t = (const char *)gw_stmt_text(s, i);
  return t ? cap_xstrdup(t) : NULL;
}

/* ---- settings ---- */

int gw_setting_set(struct gw_state *st, const char *cap, const char *user, const char *name,
                   const char *value, struct cap_error *err)
{
  char now[32];
  gw_state_now(now);
  return exec_done(st,
                   gw_state_prep(st,
                                 "INSERT INTO settings VALUES (?, ?, ?, ?, ?) ON CONFLICT"
                                 " (capability, user, name) DO UPDATE SET value = excluded.value,"
                                 " updated = excluded.updated",
                                 cap, user ? user : "", name, value, now, NULL),
                   "cannot store the setting", err);
}

int gw_setting_rm(struct gw_state *st, const char *cap, const char *user, const char *name,
                  bool *found, struct cap_error *err)
{
  return exec_rm(st,
                 gw_state_prep(st,
                               "DELETE FROM settings WHERE capability = ? AND user = ? AND"
                               " name = ? RETURNING 1",
                               cap, user ? user : "", name, NULL),
                 found, "cannot remove the setting", err);
}

int gw_setting_get(struct gw_state *st, const char *cap, const char *user, const char *name,
                   char **value, struct cap_error *err)
{
  *value = NULL;
  struct gw_stmt *s = gw_state_prep(st,
                                    "SELECT value FROM settings WHERE capability = ? AND name = ?"
                                    " AND (user = ? OR user = '') ORDER BY user = '' LIMIT 1",
                                    cap, name, user ? user : "", NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  if (rc == GW_DB_ROW)
    *value = column_dup(s, 0);
  gw_stmt_finalize(s);
  return rc == GW_DB_ROW || rc == GW_DB_DONE
             ? 0
             : gw_state_db_error(st, err, "cannot read the settings");
}

int gw_setting_list(struct gw_state *st, const char *cap, gw_setting_fn fn, void *arg,
                    struct cap_error *err)
{
  struct gw_stmt *s = gw_state_prep(st,
                                    "SELECT user, name, value, updated FROM settings WHERE"
                                    " capability = ? ORDER BY name, user",
                                    cap, NULL);
  int rc = GW_DB_ERROR;
  while (s && (rc = gw_stmt_step(s)) == GW_DB_ROW)
    fn(arg, (const char *)gw_stmt_text(s, 0), (const char *)gw_stmt_text(s, 1),
       (const char *)gw_stmt_text(s, 2), (const char *)gw_stmt_text(s, 3));
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot read the settings");
}

/* ---- triggers ---- */

int gw_trigger_state_get(struct gw_state *st, const char *cap, const char *trigger,
                         const char *user, char **state, struct cap_error *err)
{
  *state = NULL;
  struct gw_stmt *s = gw_state_prep(st,
                                    "SELECT state FROM trigger_state WHERE capability = ? AND"
                                    " trigger = ? AND user = ?",
                                    cap, trigger, user ? user : "", NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  if (rc == GW_DB_ROW)
    *state = column_dup(s, 0);
  gw_stmt_finalize(s);
  if (rc != GW_DB_ROW && rc != GW_DB_DONE)
    return gw_state_db_error(st, err, "cannot read the trigger's state");
  if (!*state)
    *state = cap_xstrdup("{}");
  return 0;
}

int gw_trigger_commit(struct gw_state *st, const char *cap, const char *trigger, const char *user,
                      const char *new_state, const char *event, int64_t *seq, struct cap_error *err)
{
  *seq = 0;
  char now[32];
  gw_state_now(now);
  if (gw_db_exec(st->db, "BEGIN IMMEDIATE") != GW_DB_OK)
    return gw_state_db_error(st, err, "cannot store the trigger's state");
  int r =
      exec_done(st,
                gw_state_prep(st,
                              "INSERT INTO trigger_state VALUES (?, ?, ?, ?, ?) ON CONFLICT"
                              " (capability, trigger, user) DO UPDATE SET state = excluded.state,"
                              " last_poll = excluded.last_poll",
                              cap, trigger, user ? user : "", new_state, now, NULL),
                "cannot store the trigger's state", err);
  if (r == 0 && event) {
    struct gw_stmt *ins =
        gw_state_prep(st,
                      "INSERT INTO events (time, capability, trigger, user, event)"
                      " VALUES (?, ?, ?, ?, ?) RETURNING seq",
                      now, cap, trigger, user ? user : "", event, NULL);
    int rc = ins ? gw_stmt_step(ins) : GW_DB_ERROR;
    if (rc == GW_DB_ROW) {
      *seq = gw_stmt_int64(ins, 0);
      rc = gw_stmt_step(ins);
    }
    gw_stmt_finalize(ins);
    if (rc != GW_DB_DONE)
      r = gw_state_db_error(st, err, "cannot store the event");
  }
  if (r == 0 && gw_db_exec(st->db, "COMMIT") != GW_DB_OK)
    r = gw_state_db_error(st, err, "cannot store the trigger's state");
  if (r < 0) {
    gw_db_exec(st->db, "ROLLBACK");
    *seq = 0;
  }
  return r;
}

int gw_trigger_configure(struct gw_state *st, const char *cap, const char *trigger, int enabled,
                         const char *call_cap, const char *call_tool, const char *call_params,
                         struct cap_error *err)
{
  int r = exec_done(st,
                    gw_state_prep(st,
                                  "INSERT OR IGNORE INTO trigger_config VALUES (?, ?, NULL, NULL,"
                                  " NULL, NULL)",
                                  cap, trigger, NULL),
                    "cannot store the trigger's configuration", err);
  if (r == 0 && enabled >= 0)
    r = exec_done(st,
                  gw_state_prep(st,
                                "UPDATE trigger_config SET enabled = ? WHERE capability = ? AND"
                                " trigger = ?",
                                enabled ? "1" : "0", cap, trigger, NULL),
                  "cannot store the trigger's configuration", err);
  if (r == 0 && call_cap)
    r = exec_done(st,
                  gw_state_prep(st,
                                "UPDATE trigger_config SET call_capability = NULLIF(?, ''),"
                                " call_tool = NULLIF(?, ''), call_params = NULLIF(?, '')"
                                " WHERE capability = ? AND trigger = ?",
                                call_cap, call_tool ? call_tool : "",
                                call_params ? call_params : "", cap, trigger, NULL),
                  "cannot store the trigger's configuration", err);
  return r;
}

int gw_trigger_config(struct gw_state *st, const char *cap, const char *trigger, bool dflt,
                      bool *enabled, char **call_cap, char **call_tool, char **call_params,
                      struct cap_error *err)
{
  *enabled = dflt;
  *call_cap = *call_tool = NULL;
  if (call_params)
    *call_params = NULL;
  struct gw_stmt *s = gw_state_prep(st,
                                    "SELECT enabled, call_capability, call_tool, call_params FROM"
                                    " trigger_config WHERE capability = ? AND trigger = ?",
                                    cap, trigger, NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  if (rc == GW_DB_ROW) {
    if (!gw_stmt_is_null(s, 0))
      *enabled = gw_stmt_int(s, 0) != 0;
    *call_cap = column_dup(s, 1);
    *call_tool = column_dup(s, 2);
    if (call_params)
      *call_params = column_dup(s, 3);
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_ROW || rc == GW_DB_DONE
             ? 0
             : gw_state_db_error(st, err, "cannot read the trigger's configuration");
}

int gw_trigger_lease(struct gw_state *st, const char *cap, const char *trigger, const char *user,
                     const char *holder, int64_t ttl_ms, bool *taken, struct cap_error *err)
{
  int64_t now = (int64_t)cap_now_ms(CLOCK_REALTIME);
  char now_s[24], exp_s[24];
  snprintf(now_s, sizeof now_s, "%lld", (long long)now);
  snprintf(exp_s, sizeof exp_s, "%lld", (long long)(now + ttl_ms));
  /* one statement: taken only when there is no row, or it has expired,
   * or it is the holder's own */
  struct gw_stmt *s = gw_state_prep(
      st,
      "INSERT INTO trigger_leases VALUES (?, ?, ?, ?, CAST(? AS INTEGER))"
      " ON CONFLICT (capability, trigger, user) DO UPDATE SET holder = excluded.holder,"
      " expires = excluded.expires WHERE trigger_leases.expires < CAST(? AS INTEGER)"
      " OR trigger_leases.holder = excluded.holder RETURNING 1",
      cap, trigger, user ? user : "", holder, exp_s, now_s, NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  *taken = rc == GW_DB_ROW;
  while (rc == GW_DB_ROW)
    rc = gw_stmt_step(s);
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot take the trigger's lease");
}

int gw_trigger_release(struct gw_state *st, const char *cap, const char *trigger, const char *user,
                       const char *holder, struct cap_error *err)
{
  return exec_done(st,
                   gw_state_prep(st,
                                 "DELETE FROM trigger_leases WHERE capability = ? AND trigger = ?"
                                 " AND user = ? AND holder = ?",
                                 cap, trigger, user ? user : "", holder, NULL),
                   "cannot release the trigger's lease", err);
}

int gw_events_each(struct gw_state *st, int64_t after, gw_event_fn fn, void *arg,
                   struct cap_error *err)
{
  char after_s[24];
  snprintf(after_s, sizeof after_s, "%lld", (long long)after);
  struct gw_stmt *s = gw_state_prep(st,
                                    "SELECT seq, time, capability, trigger, user, event FROM events"
                                    " WHERE seq > CAST(? AS INTEGER) ORDER BY seq",
                                    after_s, NULL);
  int rc = GW_DB_ERROR;
  while (s && (rc = gw_stmt_step(s)) == GW_DB_ROW) {
    struct gw_event e = {
        .seq = gw_stmt_int64(s, 0),
        .time = (const char *)gw_stmt_text(s, 1),
        .capability = (const char *)gw_stmt_text(s, 2),
        .trigger = (const char *)gw_stmt_text(s, 3),
        .user = (const char *)gw_stmt_text(s, 4),
        .event = (const char *)gw_stmt_text(s, 5),
    };
    fn(arg, &e);
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot read the events");
}

/* ---- operator grants ---- */

int gw_grant_add(struct gw_state *st, const char *cap, enum gw_grant_kind kind, const char *value,
                 struct cap_error *err)
{
  char now[32];
  gw_state_now(now);
  return exec_done(
      st,
      gw_state_prep(st,
                    "INSERT INTO grants VALUES (?, ?, ?, ?) ON CONFLICT"
                    " (capability, kind, value) DO UPDATE SET created = excluded.created",
                    cap, gw_grant_kind_names[kind], value, now, NULL),
      "cannot store the grant", err);
}

int gw_grant_rm(struct gw_state *st, const char *cap, enum gw_grant_kind kind, const char *value,
                bool *found, struct cap_error *err)
{
  return exec_rm(st,
                 gw_state_prep(st,
                               "DELETE FROM grants WHERE capability = ? AND kind = ? AND"
                               " value = ? RETURNING 1",
                               cap, gw_grant_kind_names[kind], value, NULL),
                 found, "cannot remove the grant", err);
}

/* Rows of 4 (capability, kind, value, created) to fn. */
static void grant_rows(char *const *row, size_t n, gw_grant_fn fn, void *arg)
{
  for (size_t i = 0; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; k++)
      if (strcmp(row[i + 1], gw_grant_kind_names[k]) == 0)
        fn(arg, row[i], (enum gw_grant_kind)k, row[i + 2], row[i + 3]);
}

int gw_grant_list(struct gw_state *st, const char *cap, gw_grant_fn fn, void *arg,
                  struct cap_error *err)
{
  /* a capability's, as last read while nothing changed since
   * (gateway/state_cache.c): a call reads them each time */
  struct cap_buf key = {0};
  char *const *kept;
  size_t n;
  if (cap)
    gw_state_cache_key(&key, "grants", &cap, 1);
  if (cap && gw_state_cache_get(st, key.data, &kept, &n)) {
    cap_buf_free(&key);
    grant_rows(kept, n, fn, arg);
    return 0;
  }
  struct gw_stmt *s = gw_state_prep(st,
                                    "SELECT capability, kind, value, created FROM grants WHERE"
                                    " CAST(? AS TEXT) IS NULL OR capability = ? ORDER BY 1, 2, 3",
                                    cap, cap, NULL);
  int rc = GW_DB_ERROR;
  struct cap_strv rows = {0};
  while (s && (rc = gw_stmt_step(s)) == GW_DB_ROW)
    for (int i = 0; i < 4; i++)
      cap_strv_push(&rows, (const char *)gw_stmt_text(s, i));
  gw_stmt_finalize(s);
  if (rc == GW_DB_DONE && cap)
    gw_state_cache_put(st, key.data, (const char *const *)rows.v, rows.len);
  cap_buf_free(&key);
  if (rc == GW_DB_DONE)
    grant_rows(rows.v, rows.len, fn, arg);
  cap_strv_free(&rows);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot read the grants");
}
