/* Access tokens (gateway/access.h): the `access` table of the state
 * database (schema version 5, state.c). */
#include "gateway/access.h"

#include <errno.h>
#include <sodium.h>
#include <string.h>

#include "core/buf.h"
#include "gateway/state_int.h"

static bool valid_name(const char *name)
{
  size_t n = strlen(name);
  if (n == 0 || n > 64)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-'))
      return false;
  }
  return true;
}

int gw_access_issue(struct gw_state *st, const char *name, const char *user, bool operator_,
                    char token[GW_ACCESS_TOKEN_LEN + 1], struct cap_error *err)
{
  if (!valid_name(name))
    return cap_error_set(
        err, EINVAL, "access name \"%s\" is not 1 to 64 of the characters A-Z a-z 0-9 _ . -", name);
  unsigned char raw[32];
  randombytes_buf(raw, sizeof raw);
  memcpy(token, GW_ACCESS_PREFIX, sizeof GW_ACCESS_PREFIX - 1);
  sodium_bin2hex(token + sizeof GW_ACCESS_PREFIX - 1, 65, raw, sizeof raw);
  sodium_memzero(raw, sizeof raw);
  char hash[65], now[32];
  gw_sha256_hex(token, strlen(token), hash);
  gw_state_now(now);
  struct gw_stmt *s = gw_state_prep(st, "INSERT INTO access VALUES (?, ?, ?, ?, ?)", name, hash,
                                    user, operator_ ? "1" : "0", now, NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  gw_stmt_finalize(s);
  if (rc == GW_DB_DONE)
    return 0;
  sodium_memzero(token, GW_ACCESS_TOKEN_LEN + 1);
  if (rc == GW_DB_CONSTRAINT)
    return cap_error_set(err, EEXIST,
                         "access \"%s\" exists; revoke it first (`capsule access revoke %s`)", name,
                         name);
  return gw_state_db_error(st, err, "cannot store the access token");
}

int gw_access_revoke(struct gw_state *st, const char *name, bool *found, struct cap_error *err)
{
  struct gw_stmt *s =
      gw_state_prep(st, "DELETE FROM access WHERE name = ? RETURNING 1", name, NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  *found = rc == GW_DB_ROW;
  if (rc == GW_DB_ROW)
    rc = gw_stmt_step(s);
  gw_stmt_finalize(s);
  if (rc != GW_DB_DONE)
    return gw_state_db_error(st, err, "cannot revoke the access token");
  if (*found) /* the dashboards signed in with it (ui_live.c) */
    gw_db_notify(st->db, GW_ACCESS_CHANNEL, name);
  return 0;
}

int gw_access_list(struct gw_state *st, gw_access_fn fn, void *arg, struct cap_error *err)
{
  struct gw_stmt *s =
      gw_state_prep(st, "SELECT name, user, operator, created FROM access ORDER BY name", NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  for (; rc == GW_DB_ROW; rc = gw_stmt_step(s)) {
    struct gw_access a = {.name = (const char *)gw_stmt_text(s, 0),
                          .user = (const char *)gw_stmt_text(s, 1),
                          .operator_ = gw_stmt_int(s, 2) != 0,
                          .created = (const char *)gw_stmt_text(s, 3)};
    fn(arg, &a);
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot read the access tokens");
}

int gw_access_check(struct gw_state *st, const char *token, char **user, bool *operator_,
                    struct cap_error *err)
{
  char hash[65];
  gw_sha256_hex(token, strlen(token), hash);
  struct gw_stmt *s =
      gw_state_prep(st, "SELECT user, operator FROM access WHERE token_sha256 = ?", hash, NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  const char *u = rc == GW_DB_ROW ? (const char *)gw_stmt_text(s, 0) : NULL;
  if (u) {
    *user = cap_xstrdup(u);
    *operator_ = gw_stmt_int(s, 1) != 0;
  }
  gw_stmt_finalize(s);
  if (rc == GW_DB_ROW && !u) /* NOT NULL in the schema; the database is not ours to trust */
    return cap_error_set(err, EIO,
                         "the state's access row of this token names no user: the "
                         "access table was edited (capsule access revoke it)");
  if (rc == GW_DB_ROW)
    return 0;
  if (rc == GW_DB_DONE)
    return cap_error_set(err, EACCES, "no such access token");
  return gw_state_db_error(st, err, "cannot read the access tokens");
}
