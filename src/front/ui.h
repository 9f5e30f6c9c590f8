/* The operator dashboard of `capsule serve --ui ADDR` (docs/dashboard.md).
 * Two halves, split where the state is: ui.c, in the module
 * capsule-serve-http.so with libmicrohttpd, owns HTTP (the listener, Host
 * and Origin, the login, sessions and their cookie, CSRF, the security
 * headers, the static assets, the live stream); ui_pages.c and the files
 * beside it, in the executable, render a page from the state and apply a
 * form, reached through serve_hooks.ui_page. A request reaches ui_page
 * only from a signed-in operator, and a POST only with the session's CSRF
 * token. */
#ifndef CAPSULE_FRONT_UI_H
#define CAPSULE_FRONT_UI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/buf.h"

/* Idle and absolute lifetimes of a session, and how many at most. */
#define UI_SESSION_IDLE_MS (30 * 60 * 1000)
#define UI_SESSION_MAX_MS (12 * 60 * 60 * 1000)
#define UI_MAX_SESSIONS 256
/* How long a session found standing in a PostgreSQL state is taken as
 * standing without asking again, unless a revocation or sign-out is heard
 * meanwhile (ui_live.c) */
#define UI_SESSION_VOUCH_MS 2000
#define UI_MAX_BODY 65536
#define UI_MAX_FIELDS 64
/* Connections (front/serve_conn.h): at most UI_CONN_MAX, of which
 * UI_CONN_PENDING not yet signed in; a signed-in one idles 60 s. */
#define UI_CONN_MAX 64
#define UI_CONN_PENDING 16
#define UI_CONN_TRUSTED_TIMEOUT_S 60

struct ui_param {
  char *name, *value;
};

struct ui_request {
  const char *method; /* "GET" or "POST" */
  const char *path;
  const struct ui_param *params; /* the query string's, then the form's */
  size_t n_params;
  const char *user; /* the signed-in operator */
  const char *csrf; /* the session's CSRF token, for the forms a page holds */
  /* the session's path ("/s/KEY", docs/dashboard.md): every link and form
   * of a page starts with it (a redirect's location does not: ui.c adds it) */
  const char *base;
};

/* What ui_page answers: a page (status 200, 404, 400...) or a redirect
 * (303 to location, after a form). body and location are allocated. */
struct ui_response {
  int status;
  struct cap_buf body;
  char *location;
};

/* The value of name in rq (the first), or NULL. */
static inline const char *ui_param(const struct ui_request *rq, const char *name)
{
  for (size_t i = 0; i < rq->n_params; i++)
    if (strcmp(rq->params[i].name, name) == 0)
      return rq->params[i].value;
  return NULL;
}

/* A form body (application/x-www-form-urlencoded: name=value pairs
 * joined by '&', '+' a space, %XX a byte) read pair by pair into fn, at
 * most UI_MAX_FIELDS; a pair without '=' or a name, or that decodes to a
 * NUL, is skipped. Returns how many pairs fn got (ui_form.c, fuzzed by
 * tests/fuzz/fuzz_ui_form.c). */
typedef void (*ui_form_fn)(void *arg, const char *name, const char *value);
size_t ui_form_parse(const char *body, size_t len, ui_form_fn fn, void *arg);

/* Renders or applies (ui_pages.c). */
struct serve;
void ui_page(struct serve *sv, const struct ui_request *rq, struct ui_response *out);
/* What the live stream follows: [0] a number that changes when the
 * pending approvals do, [1] the newest audit record's seq. */
void ui_pulse(struct serve *sv, uint64_t out[2]);
/* Waits up to timeout_ms for something the stream follows to change;
 * returns a count that moved if it may have (ui_live.c: PostgreSQL's
 * notifications; SQLite: once a second, always). */
uint64_t ui_wait(struct serve *sv, uint64_t seen, int timeout_ms);
/* Signed-in sessions in the state (ui_store.c; serve_hooks says what each
 * does). */
void ui_sess_save(struct serve *sv, const char *id, const char *csrf, const char *key,
                  const char *user, const char *token);
int ui_sess_load(struct serve *sv, const char *id, char csrf[65], char key[65], char **user,
                 char **token, uint64_t *age_ms);
bool ui_sess_alive(struct serve *sv, const char *id, const char *token);
void ui_sess_forget(struct serve *sv, const char *id);
/* Session checks serve may skip (ui_live.c, PostgreSQL only): whether the
 * session id signed in with token was found standing less than
 * UI_SESSION_VOUCH_MS ago with nothing heard since; the epoch to pass to
 * ui_live_vouch (0: none can be vouched for) and *at_ms, taken before a
 * check; the check's success recorded; every vouch void (a sign-out
 * here). */
bool ui_live_vouched(struct serve *sv, const char *id, const char *token);
uint64_t ui_live_epoch(struct serve *sv, uint64_t *at_ms);
void ui_live_vouch(struct serve *sv, const char *id, const char *token, uint64_t epoch,
                   uint64_t at_ms);
void ui_live_revoked(struct serve *sv);
/* Who presents token: 0 and *user for an operator token; -EACCES for no
 * token, -EPERM for one that is not an operator's. */
int ui_login(struct serve *sv, const char *token, char **user);

#endif
