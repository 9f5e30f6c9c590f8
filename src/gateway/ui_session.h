/* The dashboard's signed-in sessions in the state (table ui_sessions,
 * schema version 10), so that several `capsule serve --ui` processes on
 * one PostgreSQL state (or one SQLite state) honour each other's sessions
 * and sign-outs. A row is keyed by the SHA-256 of the session id (the
 * cookie's value is never stored, as access tokens are not); the session's
 * CSRF token and the access token it signed in with (checked again on
 * every request, so a revoked token ends it everywhere) are sealed with
 * the state key (XChaCha20-Poly1305, the row's key and user as associated
 * data: a user changed in the database fails the seal).
 * Times are wall-clock ms: a session ends idle_ms after its last use (the
 * row touched at most once a GW_UI_SESSION_TOUCH_MS) or max_ms after it
 * began, whichever comes first. Thread safety: that of the gw_state. */
#ifndef CAPSULE_GATEWAY_UI_SESSION_H
#define CAPSULE_GATEWAY_UI_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "gateway/state.h"

#define GW_UI_SESSION_TOUCH_MS 60000

struct gw_ui_session {
  char csrf[65];
  char path_key[65];  /* the session's own path, /s/KEY */
  char *user, *token; /* owned: gw_ui_session_clear (wipes the token) */
  int64_t created_ms, last_ms;
};
void gw_ui_session_clear(struct gw_ui_session *s);

/* Stores a new session (id: 64 hex digits). */
int gw_ui_session_put(struct gw_state *st, const char *id, const struct gw_ui_session *s,
                      struct cap_error *err);
/* The session id names, when it is there and has not ended (an ended one
 * is removed); *found says which. */
int gw_ui_session_get(struct gw_state *st, const char *id, int64_t idle_ms, int64_t max_ms,
                      struct gw_ui_session *out, bool *found, struct cap_error *err);
/* Whether the session is still there and has not ended; its last use
 * moved to now when it was stored more than GW_UI_SESSION_TOUCH_MS ago.
 * token (NULL: not asked): and it is still an operator's access token
 * (gateway/access.h), read in the same statement (one round trip to a
 * PostgreSQL state for a dashboard request's checks). */
int gw_ui_session_touch(struct gw_state *st, const char *id, const char *token, int64_t idle_ms,
                        int64_t max_ms, bool *alive, struct cap_error *err);
/* Ends it (sign-out, a revoked token); on PostgreSQL announced on
 * GW_ACCESS_CHANNEL (gateway/access.h). */
int gw_ui_session_rm(struct gw_state *st, const char *id, struct cap_error *err);

#endif
