/* The dashboard's signed-in sessions in the state (the hooks ui_sess_*
 * of serve_internal.h over gateway/ui_session.h), under serve's state
 * lock: several serve processes on one state (several hosts on one
 * PostgreSQL) honour each other's sign-ins and sign-outs. A failure is
 * logged; a session that could not be stored, or whose row cannot be
 * read, counts as signed out at its next request (sign in again): the row
 * is what says a session stands (on PostgreSQL, a check is taken as
 * standing for a short while: ui_live.c). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "front/serve_core.h"
#include "front/ui.h"
#include "gateway/ui_session.h"

static int64_t wall_ms(void)
{
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void warn(struct serve *sv, struct cap_error *err)
{
  serve_log(sv, "warning", err->message, NULL, NULL, "via", "dashboard");
  cap_error_clear(err);
}

void ui_sess_save(struct serve *sv, const char *id, const char *csrf, const char *key,
                  const char *user, const char *token)
{
  struct gw_ui_session s = {.user = (char *)user, .token = (char *)token};
  memcpy(s.csrf, csrf, sizeof s.csrf);
  memcpy(s.path_key, key, sizeof s.path_key);
  s.created_ms = s.last_ms = wall_ms();
  struct cap_error err = {0};
  serve_lock_state(sv);
  int r = gw_ui_session_put(sv->opt->st, id, &s, &err);
  serve_unlock_state(sv);
  if (r < 0)
    warn(sv, &err);
}

int ui_sess_load(struct serve *sv, const char *id, char csrf[65], char key[65], char **user,
                 char **token, uint64_t *age_ms)
{
  struct gw_ui_session s;
  bool found = false;
  struct cap_error err = {0};
  serve_lock_state(sv);
  int r =
      gw_ui_session_get(sv->opt->st, id, UI_SESSION_IDLE_MS, UI_SESSION_MAX_MS, &s, &found, &err);
  serve_unlock_state(sv);
  if (r < 0) {
    warn(sv, &err);
    return 0;
  }
  if (!found)
    return 0;
  memcpy(csrf, s.csrf, 65);
  memcpy(key, s.path_key, 65);
  *user = s.user;
  *token = s.token;
  int64_t age = wall_ms() - s.created_ms;
  *age_ms = age > 0 ? (uint64_t)age : 0;
  s.user = s.token = NULL;
  gw_ui_session_clear(&s);
  return 1;
}

/* On PostgreSQL a check that found the session standing vouches for it
 * a short while (ui_live.c): a page then costs no round trip of its own
 * for it. */
bool ui_sess_alive(struct serve *sv, const char *id, const char *token)
{
  if (ui_live_vouched(sv, id, token))
    return true;
  uint64_t at = 0, epoch = ui_live_epoch(sv, &at); /* before the check */
  bool alive = false;
  struct cap_error err = {0};
  serve_lock_state(sv);
  int r = gw_ui_session_touch(sv->opt->st, id, token, UI_SESSION_IDLE_MS, UI_SESSION_MAX_MS, &alive,
                              &err);
  serve_unlock_state(sv);
  if (r < 0)
    warn(sv, &err);
  if (alive)
    ui_live_vouch(sv, id, token, epoch, at);
  return alive;
}

void ui_sess_forget(struct serve *sv, const char *id)
{
  ui_live_revoked(sv); /* at once here; elsewhere when they hear it */
  struct cap_error err = {0};
  serve_lock_state(sv);
  int r = gw_ui_session_rm(sv->opt->st, id, &err);
  serve_unlock_state(sv);
  if (r < 0)
    warn(sv, &err);
}
