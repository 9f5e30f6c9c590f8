/* Access tokens for the network front doors (`capsule serve`): a bearer
 * token names who calls (its user) and whether it may act as the operator
 * (approvals, policy changes). A token is shown once when issued; the
 * state keeps its SHA-256 only (a token is 256 random bits, so a plain
 * hash is as hard to invert as the token is to guess). Names are
 * [A-Za-z0-9_.-]{1,64}. Thread safety: that of the gw_state passed. */
#ifndef CAPSULE_GATEWAY_ACCESS_H
#define CAPSULE_GATEWAY_ACCESS_H

#include <stdbool.h>

#include "core/error.h"
#include "gateway/state.h"

#define GW_ACCESS_PREFIX "capsule_"
#define GW_ACCESS_TOKEN_LEN (sizeof GW_ACCESS_PREFIX - 1 + 64) /* the prefix, 64 hex digits */
/* On PostgreSQL a token revoked, or a dashboard session ended
 * (gateway/ui_session.h), is announced on this channel (NOTIFY, at the
 * commit): a serve that took a session as standing checks it again. */
#define GW_ACCESS_CHANNEL "capsule_access"

struct gw_access {
  const char *name, *user, *created;
  bool operator_;
};

/* A new token for name into token (NUL-terminated); -EEXIST when the name
 * is taken, -EINVAL for a name outside the set above. */
int gw_access_issue(struct gw_state *st, const char *name, const char *user, bool operator_,
                    char token[GW_ACCESS_TOKEN_LEN + 1], struct cap_error *err);
/* Removes name; *found false when there was none. */
int gw_access_revoke(struct gw_state *st, const char *name, bool *found, struct cap_error *err);
typedef void (*gw_access_fn)(void *arg, const struct gw_access *a);
/* Every token's row, by name (never a token). */
int gw_access_list(struct gw_state *st, gw_access_fn fn, void *arg, struct cap_error *err);
/* Who presents token: 0 with *user (the caller frees it) and *operator_;
 * -EACCES when no token matches. */
int gw_access_check(struct gw_state *st, const char *token, char **user, bool *operator_,
                    struct cap_error *err);
/* gw_access_check's answer from the tokens st keeps alone (access.c: a
 * SQLite state's, dropped at every revoke): 0 with *user and *operator_,
 * -ENOENT when token is not kept (gw_access_check, under the handle's
 * lock, then says). Reads no database: safe without the handle's lock. */
int gw_access_check_kept(struct gw_state *st, const char *token, char **user, bool *operator_);

#endif
