/* The dashboard's HTTP side (front/ui.h), on libmicrohttpd with a thread
 * per connection, in the module capsule-serve-http.so. Every request:
 * the Host must be the address served and an Origin, when sent, this
 * server's own (403); then either a static asset, the login, or a page
 * for a signed-in operator. Sign-in: GET /login gives the form a cookie
 * scoped to /login (its issue time and 192 random bits) and a CSRF token
 * that is that cookie's MAC under a key of this process: nothing is kept
 * for it, so no flood of forms can push out a sign-in in progress;
 * POST /login with an operator's access token makes a new
 * session (new id, new CSRF token: no fixation) bound to the token's user
 * and to a path of its own, /s/KEY (KEY 256 random bits): its pages live
 * there and its cookie has Path=/s/KEY. Browsers send a host's cookies to
 * every port of it, but only under the cookie's path: another service on
 * 127.0.0.1 the operator visits never receives the session's cookie
 * without knowing KEY, and an id that leaked anyway is refused without
 * its KEY (docs/dashboard.md). Sessions live here, in memory, and the
 * signed-in ones (with their KEY) in the state too (hooks ui_sess_*), so
 * that serve processes on one state share them: 256 random bits in a
 * cookie capsule_ui (HttpOnly, SameSite=Strict, Secure and the __Secure-
 * prefix under TLS), ended by logout, 30 minutes idle or
 * 12 hours. Every POST carries the session's CSRF token (403 without it).
 * Every answer carries a strict Content-Security-Policy (scripts and
 * styles from this server's own files only, nothing inline), and is
 * never cached. */
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/escape.h"
#include "core/sha256.h"
#include "core/text.h"
#include "front/serve_conn.h"
#include "front/serve_guard.h"
#include "front/serve_internal.h"
#include "front/ui.h"
#include "front/ui_assets.h"

#define CSP                                                                                        \
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "  \
  "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

struct ui_sess {
  char id[65], csrf[65];
  char key[65]; /* signed in: its path is /s/KEY */
  char *user;   /* the operator signed in */
  char *token;  /* the one it signed in with, checked again on each request */
  uint64_t created_ms, last_ms;
};

struct serve_ui {
  struct MHD_Daemon *d;
  struct serve *sv;
  const struct serve_hooks *hooks;
  struct serve_guard guard;
  pthread_mutex_t mu;
  struct ui_sess sessions[UI_MAX_SESSIONS];
  size_t n;
  struct cap_hmac_sha256 form_mac; /* the login form's CSRF tokens: form_csrf */
  char *cookie;                    /* its name */
  bool stopping;
  struct serve_conns conns; /* pending and trusted connections (serve_conn.h) */
};

static uint64_t mono_ms(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static void random_hex(char out[65])
{
  unsigned char b[32];
  if (getrandom(b, sizeof b, 0) != sizeof b)
    abort(); /* the kernel's generator cannot fail once seeded */
  sodium_bin2hex(out, 65, b, sizeof b);
}

/* ---- sessions (under u->mu) ---- */

static void sess_drop(struct serve_ui *u, size_t i)
{
  free(u->sessions[i].user);
  if (u->sessions[i].token)
    sodium_memzero(u->sessions[i].token, strlen(u->sessions[i].token));
  free(u->sessions[i].token);
  sodium_memzero(&u->sessions[i], sizeof u->sessions[i]);
  u->sessions[i] = u->sessions[--u->n];
}

static void sess_expire(struct serve_ui *u, uint64_t now)
{
  for (size_t i = u->n; i-- > 0;)
    if (now - u->sessions[i].last_ms > UI_SESSION_IDLE_MS ||
        now - u->sessions[i].created_ms > UI_SESSION_MAX_MS)
      sess_drop(u, i);
}

static struct ui_sess *sess_load(struct serve_ui *u, const char *id, uint64_t now);

static struct ui_sess *sess_find(struct serve_ui *u, const char *id)
{
  uint64_t now = mono_ms();
  sess_expire(u, now);
  for (size_t i = 0; id && strlen(id) == 64 && i < u->n; i++)
    if (sodium_memcmp(u->sessions[i].id, id, 64) == 0) {
      u->sessions[i].last_ms = now;
      return &u->sessions[i];
    }
  return id && strlen(id) == 64 ? sess_load(u, id, now) : NULL;
}

/* Room for one more signed-in session: the one used longest ago goes
 * (only signed-in sessions are kept: signing in needs a token). */
static void sess_room(struct serve_ui *u)
{
  if (u->n < UI_MAX_SESSIONS)
    return;
  size_t old = 0;
  for (size_t i = 1; i < u->n; i++)
    if (u->sessions[i].last_ms < u->sessions[old].last_ms)
      old = i;
  sess_drop(u, old);
}

/* The login form's cookie: its issue time (16 hex digits, ms) and 192
 * random bits; its CSRF token the cookie's MAC. */
static void form_cookie_new(char out[65])
{
  random_hex(out);
  char t[17];
  snprintf(t, sizeof t, "%016llx", (unsigned long long)mono_ms());
  memcpy(out, t, 16);
}

static void form_csrf(const struct serve_ui *u, const char *cookie, char out[65])
{
  unsigned char mac[32];
  cap_hmac_sha256(&u->form_mac, cookie, 64, mac);
  sodium_bin2hex(out, 65, mac, sizeof mac);
}

/* A login form's cookie issued less than UI_SESSION_IDLE_MS ago (what
 * makes it this process's is its CSRF token: form_csrf). */
static bool form_fresh(const char *cookie)
{
  if (!cookie || strlen(cookie) != 64 || strspn(cookie, "0123456789abcdef") != 64)
    return false;
  char t[17];
  memcpy(t, cookie, 16);
  t[16] = '\0';
  unsigned long long issued = strtoull(t, NULL, 16);
  uint64_t now = mono_ms();
  return issued <= now && now - issued <= UI_SESSION_IDLE_MS;
}

static struct ui_sess *sess_new(struct serve_ui *u, char *user, const char *token)
{
  sess_room(u);
  struct ui_sess *s = &u->sessions[u->n++];
  random_hex(s->id);
  random_hex(s->csrf);
  random_hex(s->key);
  s->user = user;
  s->token = token ? cap_xstrdup(token) : NULL;
  s->created_ms = s->last_ms = mono_ms();
  /* every serve on the state honours it */
  u->hooks->ui_sess_save(u->sv, s->id, s->csrf, s->key, user, token);
  return s;
}

/* A signed-in session another serve on the state began (or this one,
 * before a restart), taken into the table. */
static struct ui_sess *sess_load(struct serve_ui *u, const char *id, uint64_t now)
{
  char csrf[65], key[65];
  char *user = NULL, *token = NULL;
  uint64_t age = 0;
  if (u->hooks->ui_sess_load(u->sv, id, csrf, key, &user, &token, &age) != 1)
    return NULL;
  sess_room(u);
  struct ui_sess *s = &u->sessions[u->n++];
  memcpy(s->id, id, 64);
  s->id[64] = '\0';
  memcpy(s->csrf, csrf, sizeof csrf);
  sodium_memzero(csrf, sizeof csrf);
  memcpy(s->key, key, sizeof key);
  sodium_memzero(key, sizeof key);
  s->user = user;
  s->token = token;
  s->created_ms = now > age ? now - age : 0;
  s->last_ms = now;
  return s;
}

/* Ends a signed-in session here and in the state. */
static void sess_end(struct serve_ui *u, struct ui_sess *s)
{
  u->hooks->ui_sess_forget(u->sv, s->id);
  sess_drop(u, (size_t)(s - u->sessions));
}

/* ---- answers ---- */

struct answer {
  unsigned status;
  const char *type;
  struct cap_buf body;
  char *location;
  char *cookie; /* a Set-Cookie value */
};

static enum MHD_Result send_answer(struct MHD_Connection *c, struct answer *a)
{
  struct MHD_Response *r = MHD_create_response_from_buffer(
      a->body.len, a->body.data ? a->body.data : (char *)"", MHD_RESPMEM_MUST_COPY);
  if (!r)
    return MHD_NO;
  if (a->body.len)
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, a->type);
  MHD_add_response_header(r, "Content-Security-Policy", CSP);
  MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(r, "X-Frame-Options", "DENY");
  MHD_add_response_header(r, "Referrer-Policy",
                          "same-origin"); /* no-referrer makes a form's Origin "null" */
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  if (a->location)
    MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, a->location);
  if (a->cookie)
    MHD_add_response_header(r, MHD_HTTP_HEADER_SET_COOKIE, a->cookie);
  enum MHD_Result ret = MHD_queue_response(c, a->status, r);
  MHD_destroy_response(r);
  cap_buf_free(&a->body);
  free(a->location);
  free(a->cookie);
  return ret;
}

static enum MHD_Result plain(struct MHD_Connection *c, unsigned status, const char *text)
{
  struct answer a = {.status = status, .type = "text/plain; charset=utf-8"};
  cap_buf_puts(&a.body, text);
  cap_buf_putc(&a.body, '\n');
  return send_answer(c, &a);
}

static enum MHD_Result redirect(struct MHD_Connection *c, const char *to, char *cookie)
{
  struct answer a = {.status = MHD_HTTP_SEE_OTHER, .location = cap_xstrdup(to), .cookie = cookie};
  return send_answer(c, &a);
}

/* The cookie of session s, under its own path /s/KEY; the login form's
 * (value) under /login. */
static char *cookie_for(const struct serve_ui *u, const struct ui_sess *s)
{
  return cap_xasprintf("%s=%s; Path=/s/%s; HttpOnly; SameSite=Strict%s", u->cookie, s->id, s->key,
                       u->guard.tls ? "; Secure" : "");
}

static char *cookie_form(const struct serve_ui *u, const char *value)
{
  return cap_xasprintf("%s=%s; Path=/login; HttpOnly; SameSite=Strict%s", u->cookie, value,
                       u->guard.tls ? "; Secure" : "");
}

static char *cookie_gone(const struct serve_ui *u, const char *key)
{
  return cap_xasprintf("%s=; Path=/s/%s; Max-Age=0; HttpOnly; SameSite=Strict%s", u->cookie, key,
                       u->guard.tls ? "; Secure" : "");
}

/* A session's path /s/KEY/REST: KEY (64 hex digits) in *key, REST ("/"
 * at least) returned; NULL for any other path. */
static const char *session_path(const char *url, const char **key)
{
  if (strncmp(url, "/s/", 3) != 0)
    return NULL;
  for (int i = 0; i < 64; i++)
    if (!strchr("0123456789abcdef", url[3 + i]) || !url[3 + i])
      return NULL;
  if (url[67] != '/' && url[67])
    return NULL;
  *key = url + 3;
  return url[67] ? url + 67 : "/";
}

static enum MHD_Result login_page(struct MHD_Connection *c, unsigned status, const char *csrf,
                                  const char *message, char *cookie)
{
  struct answer a = {.status = status, .type = "text/html; charset=utf-8", .cookie = cookie};
  cap_buf_puts(&a.body, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                        "<title>capsule: sign in</title><link rel=\"stylesheet\" "
                        "href=\"/static/ui.css\"></head><body class=\"login\"><main>"
                        "<h1>capsule</h1>");
  if (message) {
    cap_buf_puts(&a.body, "<p class=\"error\" role=\"alert\">");
    cap_escape_html(&a.body, message, strlen(message));
    cap_buf_puts(&a.body, "</p>");
  }
  cap_buf_printf(&a.body,
                 "<form method=\"post\" action=\"/login\"><input type=\"hidden\" name=\"csrf\" "
                 "value=\"%s\"><label>Operator token <input type=\"password\" name=\"token\" "
                 "id=\"token\" autocomplete=\"off\" required></label> <button type=\"submit\" "
                 "id=\"signin\">Sign in</button></form><p class=\"hint\">An operator's token "
                 "from <code>capsule access issue NAME --operator</code>.</p></main></body>"
                 "</html>\n",
                 csrf);
  return send_answer(c, &a);
}

/* ---- the request ---- */

struct ui_req {
  struct cap_buf body;
  bool too_big;
  struct ui_param *params;
  size_t n_params;
};

static void add_param(struct ui_req *q, const char *name, size_t nlen, const char *value,
                      size_t vlen)
{
  q->params = cap_xrealloc(q->params, (q->n_params + 1) * sizeof *q->params);
  q->params[q->n_params++] = (struct ui_param){cap_xstrndup(name, nlen), cap_xstrndup(value, vlen)};
}

static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
  (void)kind;
  if (key)
    add_param(cls, key, strlen(key), value ? value : "", value ? strlen(value) : 0);
  return MHD_YES;
}

static void form_arg(void *arg, const char *name, const char *value)
{
  add_param(arg, name, strlen(name), value, strlen(value));
}

static void req_done(void *cls, struct MHD_Connection *c, void **con_cls,
                     enum MHD_RequestTerminationCode code)
{
  (void)cls;
  (void)c;
  (void)code;
  struct ui_req *q = *con_cls;
  if (!q)
    return;
  for (size_t i = 0; i < q->n_params; i++) {
    sodium_memzero(q->params[i].value, strlen(q->params[i].value)); /* a token, perhaps */
    free(q->params[i].name);
    free(q->params[i].value);
  }
  free(q->params);
  if (q->body.data)
    sodium_memzero(q->body.data, q->body.len);
  cap_buf_free(&q->body);
  free(q);
  *con_cls = NULL;
}

static const char *param(const struct ui_req *q, const char *name)
{
  struct ui_request rq = {.params = q->params, .n_params = q->n_params};
  return ui_param(&rq, name);
}

/* The Origin a browser sent must be this server's: a Host it answers to
 * (or, on a wildcard address, the Host this request names). */
static bool origin_ok(const struct serve_ui *u, struct MHD_Connection *c)
{
  const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
  if (!origin || !u->guard.wildcard)
    return serve_guard_origin_ok(&u->guard, origin);
  const char *host = serve_guard_request_host(c);
  const char *scheme = u->guard.tls ? "https://" : "http://";
  return host && strncmp(origin, scheme, strlen(scheme)) == 0 &&
         strcasecmp(origin + strlen(scheme), host) == 0;
}

static enum MHD_Result asset(struct MHD_Connection *c, const char *url)
{
  const struct ui_asset *f = ui_asset_find(url);
  if (!f)
    return plain(c, MHD_HTTP_NOT_FOUND, "Not Found");
  struct answer a = {.status = MHD_HTTP_OK, .type = f->type};
  cap_buf_append(&a.body, f->data, f->len);
  return send_answer(c, &a);
}

/* POST /login, its form's cookie and CSRF token checked (form_valid),
 * with u->mu not held. */
static enum MHD_Result do_login(struct serve_ui *u, struct MHD_Connection *c, struct ui_req *q,
                                const char *csrf)
{
  const char *token = param(q, "token");
  char *user = NULL;
  int r = token ? u->hooks->ui_login(u->sv, token, &user) : -EACCES;
  if (r < 0) {
    return login_page(c, MHD_HTTP_UNAUTHORIZED, csrf,
                      r == -EPERM ? "That token is not an operator's (capsule access issue NAME "
                                    "--operator)."
                                  : "Unknown or revoked token.",
                      NULL);
  }
  pthread_mutex_lock(&u->mu);
  struct ui_sess *s = sess_new(u, user, token); /* a new id, not the form's */
  char *cookie = cookie_for(u, s);
  _cleanup_free_ char *home = cap_xasprintf("/s/%s/", s->key);
  pthread_mutex_unlock(&u->mu);
  u->hooks->ui_log(u->sv, "signed in", user);
  return redirect(c, home, cookie);
}

static enum MHD_Result page(struct serve_ui *u, struct MHD_Connection *c, const char *url,
                            const char *method, struct ui_req *q, struct ui_sess *s);

/* The session's token checked again (revoked since?). Called and returns
 * with u->mu held; the session found again by its id (another thread may
 * have moved it meanwhile), or NULL once it is dropped. */
static struct ui_sess *recheck(struct serve_ui *u, struct ui_sess *s)
{
  char sid[65];
  memcpy(sid, s->id, sizeof sid);
  _cleanup_free_ char *token = cap_xstrdup(s->token);
  pthread_mutex_unlock(&u->mu);
  /* the token still an operator's, and the session not signed out
   * through another serve on the state: one statement */
  bool alive = u->hooks->ui_sess_alive(u->sv, sid, token);
  sodium_memzero(token, strlen(token));
  pthread_mutex_lock(&u->mu);
  s = sess_find(u, sid);
  if (!alive && s) {
    sess_end(u, s);
    s = NULL;
  }
  return s;
}
static enum MHD_Result events(struct serve_ui *u, struct MHD_Connection *c, const char *sid);

/* /login: the form (its cookie kept while valid), or the sign-in. */
static enum MHD_Result login_route(struct serve_ui *u, struct MHD_Connection *c, bool post,
                                   const char *cookie, struct ui_req *q)
{
  char csrf[65];
  bool keep = form_fresh(cookie);
  if (keep)
    form_csrf(u, cookie, csrf);
  const char *sent = post ? param(q, "csrf") : NULL;
  if (post && !keep)
    return plain(c, MHD_HTTP_UNAUTHORIZED, "Unauthorized: sign in at /login");
  if (post && sent && strlen(sent) == 64 && sodium_memcmp(sent, csrf, 64) == 0)
    return do_login(u, c, q, csrf);
  /* the form (again, after a POST with a token not its cookie's: a form
   * another serve process showed, or forged), with a new cookie */
  char fresh[65];
  if (post || !keep) {
    form_cookie_new(fresh);
    form_csrf(u, fresh, csrf);
  }
  return login_page(c, post ? MHD_HTTP_FORBIDDEN : MHD_HTTP_OK, csrf,
                    post ? "The form's CSRF token is missing or not this form's: sign in again."
                         : NULL,
                    post || !keep ? cookie_form(u, fresh) : NULL);
}

/* Everything but the assets, with u->mu held (released here). */
static enum MHD_Result route(struct serve_ui *u, struct MHD_Connection *c, const char *url,
                             const char *method, struct ui_req *q)
{
  bool post = strcmp(method, "POST") == 0, login = strcmp(url, "/login") == 0;
  const char *cookie = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, u->cookie);
  if (login) {
    pthread_mutex_unlock(&u->mu);
    return login_route(u, c, post, cookie, q);
  }
  const char *key = NULL, *rest = session_path(url, &key);
  struct ui_sess *s = sess_find(u, cookie);
  /* a signed-in session under its own path only: an id without its KEY
   * is worth nothing */
  if (s && (!rest || sodium_memcmp(s->key, key, 64) != 0))
    s = NULL;
  if (!s) {
    pthread_mutex_unlock(&u->mu);
    return post ? plain(c, MHD_HTTP_UNAUTHORIZED, "Unauthorized: sign in at /login")
                : redirect(c, "/login", NULL);
  }
  if (post) {
    const char *csrf = param(q, "csrf");
    if (!csrf || strlen(csrf) != 64 || sodium_memcmp(csrf, s->csrf, 64) != 0) {
      pthread_mutex_unlock(&u->mu);
      return plain(c, MHD_HTTP_FORBIDDEN,
                   "Forbidden: the form's CSRF token is missing or not this session's "
                   "(reload the page)");
    }
  }
  char sess_key[65];
  memcpy(sess_key, s->key, sizeof sess_key);
  if (!(s = recheck(u, s))) {
    pthread_mutex_unlock(&u->mu);
    return post ? plain(c, MHD_HTTP_UNAUTHORIZED, "Unauthorized: the token was revoked")
                : redirect(c, "/login", cookie_gone(u, sess_key));
  }
  serve_conns_trust(&u->conns, c, s->user); /* a signed-in operator's: out of the pending share */
  if (post && strcmp(rest, "/logout") == 0) {
    sess_end(u, s);
    pthread_mutex_unlock(&u->mu);
    return redirect(c, "/login", cookie_gone(u, sess_key));
  }
  if (!post && strcmp(rest, "/events") == 0) {
    char sid[65];
    memcpy(sid, s->id, sizeof sid);
    pthread_mutex_unlock(&u->mu);
    return events(u, c, sid);
  }
  return page(u, c, rest, method, q, s);
}

static enum MHD_Result page(struct serve_ui *u, struct MHD_Connection *c, const char *url,
                            const char *method, struct ui_req *q, struct ui_sess *s)
{
  _cleanup_free_ char *user = cap_xstrdup(s->user);
  _cleanup_free_ char *base = cap_xasprintf("/s/%s", s->key);
  char csrf[65];
  memcpy(csrf, s->csrf, sizeof csrf);
  pthread_mutex_unlock(&u->mu);
  struct ui_request rq = {.method = method,
                          .path = url,
                          .params = q->params,
                          .n_params = q->n_params,
                          .user = user,
                          .csrf = csrf,
                          .base = base};
  struct ui_response out = {0};
  u->hooks->ui_page(u->sv, &rq, &out);
  struct answer a = {.status = out.status ? (unsigned)out.status : MHD_HTTP_OK,
                     .type = "text/html; charset=utf-8",
                     .body = out.body,
                     .location = out.location};
  if (a.location && a.location[0] == '/') { /* within the session's path */
    a.location = cap_xasprintf("%s%s", base, out.location);
    free(out.location);
  }
  if (a.location)
    a.status = MHD_HTTP_SEE_OTHER;
  return send_answer(c, &a);
}

/* ---- the live stream: an event when the pending approvals or the audit
 * log's head change ---- */

struct stream_state {
  struct serve_ui *u;
  char sid[65];
  uint64_t pulse[2]; /* the approvals' digest, the audit log's head */
  uint64_t moved;    /* ui_wait's count */
  int quiet;         /* seconds since the state was last read */
  bool started;
  struct cap_buf pending;
  size_t off;
};

static bool sess_alive(struct serve_ui *u, const char *sid)
{
  pthread_mutex_lock(&u->mu);
  struct ui_sess *s = sess_find(u, sid);
  bool alive = s && s->user && recheck(u, s);
  pthread_mutex_unlock(&u->mu);
  return alive;
}

/* The next events: once a second the session and serve are checked; the
 * state is read when ui_wait says something may have changed (on
 * PostgreSQL, a notification; on SQLite, every second), and at least every
 * QUIET_LOOK_S seconds besides. */
#define QUIET_LOOK_S 15

static void next_events(struct stream_state *st)
{
  bool look = !st->started;
  if (st->started) {
    uint64_t moved = st->u->hooks->ui_wait(st->u->sv, st->moved, 1000);
    look = moved != st->moved || ++st->quiet >= QUIET_LOOK_S;
    st->moved = moved;
  }
  uint64_t now[2] = {st->pulse[0], st->pulse[1]};
  if (look) {
    st->u->hooks->ui_pulse(st->u->sv, now);
    st->quiet = 0;
  }
  const char *retry = st->started ? "" : "retry: 2000\n";
  bool sent = false;
  if (!st->started || now[0] != st->pulse[0]) {
    cap_buf_printf(&st->pending, "%sevent: approvals\ndata: %llu\n\n", retry,
                   (unsigned long long)now[0]);
    retry = "";
    sent = true;
  }
  if (!st->started || now[1] != st->pulse[1]) {
    cap_buf_printf(&st->pending, "%sevent: audit\ndata: %llu\n\n", retry,
                   (unsigned long long)now[1]);
    sent = true;
  }
  if (!sent)
    cap_buf_puts(&st->pending, ": keepalive\n\n");
  st->started = true;
  memcpy(st->pulse, now, sizeof now);
}

static ssize_t events_read(void *cls, uint64_t pos, char *buf, size_t max)
{
  (void)pos;
  struct stream_state *st = cls;
  if (st->off >= st->pending.len) {
    cap_buf_free(&st->pending);
    st->off = 0;
    if (__atomic_load_n(&st->u->stopping, __ATOMIC_ACQUIRE) || st->u->hooks->stopping(st->u->sv) ||
        !sess_alive(st->u, st->sid))
      return MHD_CONTENT_READER_END_OF_STREAM;
    next_events(st);
    if (__atomic_load_n(&st->u->stopping, __ATOMIC_ACQUIRE) || st->u->hooks->stopping(st->u->sv))
      return MHD_CONTENT_READER_END_OF_STREAM;
  }
  size_t n = st->pending.len - st->off < max ? st->pending.len - st->off : max;
  memcpy(buf, st->pending.data + st->off, n);
  st->off += n;
  return (ssize_t)n;
}

static void events_free(void *cls)
{
  struct stream_state *st = cls;
  cap_buf_free(&st->pending);
  free(st);
}

static enum MHD_Result events(struct serve_ui *u, struct MHD_Connection *c, const char *sid)
{
  struct stream_state *st = cap_xcalloc(1, sizeof *st);
  st->u = u;
  memcpy(st->sid, sid, sizeof st->sid);
  struct MHD_Response *r =
      MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, events_read, st, events_free);
  if (!r) {
    events_free(st);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  MHD_add_response_header(r, "Content-Security-Policy", CSP);
  MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
  enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  return ret;
}

/* ---- the daemon ---- */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *size, void **con_cls)
{
  (void)version;
  struct serve_ui *u = cls;
  struct ui_req *q = *con_cls;
  if (!q) {
    *con_cls = cap_xcalloc(1, sizeof *q);
    return MHD_YES;
  }
  if (*size) {
    if (!q->too_big && q->body.len + *size <= UI_MAX_BODY)
      cap_buf_append(&q->body, data, *size);
    else
      q->too_big = true;
    *size = 0;
    return MHD_YES;
  }
  /* the cookie's name is set once the port is known and the Host values
   * are final (serve_ui_start): nothing of the guard is read before */
  if (!__atomic_load_n(&u->cookie, __ATOMIC_ACQUIRE))
    return plain(c, MHD_HTTP_SERVICE_UNAVAILABLE, "the server is starting");
  if (!serve_guard_host_ok(&u->guard, serve_guard_request_host(c)))
    return plain(c, MHD_HTTP_FORBIDDEN, "Forbidden: unexpected Host");
  if (!origin_ok(u, c))
    return plain(c, MHD_HTTP_FORBIDDEN, "Forbidden: foreign Origin");
  if (u->hooks->stopping(u->sv))
    return plain(c, MHD_HTTP_SERVICE_UNAVAILABLE, "the server is stopping");
  bool post = strcmp(method, "POST") == 0;
  if (!post && strcmp(method, "GET") && strcmp(method, "HEAD"))
    return plain(c, MHD_HTTP_METHOD_NOT_ALLOWED, "Method Not Allowed");
  if (strncmp(url, "/static/", 8) == 0 || strcmp(url, "/favicon.ico") == 0)
    return asset(c, url);
  if (q->too_big)
    return plain(c, MHD_HTTP_CONTENT_TOO_LARGE, "the form is larger than 64 KiB");
  MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, query_arg, q);
  if (post && q->body.len)
    ui_form_parse(q->body.data, q->body.len, form_arg, q);
  pthread_mutex_lock(&u->mu);
  return route(u, c, url, method, q);
}

int serve_ui_start(struct serve *sv, const struct serve_hooks *hooks,
                   const struct serve_options *opt, struct serve_ui **ret, struct cap_error *err)
{
  struct serve_ui *u = cap_xcalloc(1, sizeof *u);
  u->sv = sv;
  u->hooks = hooks;
  pthread_mutex_init(&u->mu, NULL);
  unsigned char form_key[32];
  if (getrandom(form_key, sizeof form_key, 0) != sizeof form_key)
    abort(); /* as random_hex */
  cap_hmac_sha256_init(&u->form_mac, form_key, sizeof form_key);
  sodium_memzero(form_key, sizeof form_key);
  serve_conns_init(&u->conns, UI_CONN_PENDING, UI_CONN_MAX - UI_CONN_PENDING - 1,
                   UI_CONN_TRUSTED_TIMEOUT_S);
  int port = serve_guard_init(&u->guard, "--ui", opt->ui_addr, opt, err);
  if (port < 0) {
    serve_ui_stop(u);
    return port;
  }
  struct serve_guard *g = &u->guard;
  /* every local user is 127.0.0.1: one address may hold them all, the
   * pending share (serve_conn.h) keeps room for the operator */
  u->d = serve_guard_daemon(g, port, on_request, req_done, u,
                            &(struct serve_guard_limits){UI_CONN_MAX, UI_CONN_MAX,
                                                         SERVE_CONN_PENDING_TIMEOUT_S,
                                                         serve_conns_notify, &u->conns});
  if (!u->d) {
    serve_ui_stop(u);
    return cap_error_set(err, EADDRNOTAVAIL, "cannot listen on %s (in use, or not this host's)",
                         opt->ui_addr);
  }
  int bound = MHD_get_daemon_info(u->d, MHD_DAEMON_INFO_BIND_PORT)->port;
  serve_guard_set_port(g, opt->ui_addr, bound);
  /* one name whatever the port: serve processes behind one address, or
   * restarted on another port, honour one another's sessions (the paths
   * keep the sessions apart) */
  __atomic_store_n(&u->cookie, cap_xasprintf("%scapsule_ui", g->tls ? "__Secure-" : ""),
                   __ATOMIC_RELEASE);
  _cleanup_free_ char *addr = serve_guard_bound_addr(opt->ui_addr, bound);
  hooks->ui_bound(sv, addr);
  *ret = u;
  return 0;
}

void serve_ui_quiesce(struct serve_ui *u)
{
  if (u && u->d) {
    __atomic_store_n(&u->stopping, true, __ATOMIC_RELEASE);
    MHD_quiesce_daemon(u->d);
  }
}

void serve_ui_stop(struct serve_ui *u)
{
  if (!u)
    return;
  __atomic_store_n(&u->stopping, true, __ATOMIC_RELEASE);
  if (u->d)
    MHD_stop_daemon(u->d);
  while (u->n)
    sess_drop(u, 0);
  serve_guard_free(&u->guard);
  pthread_mutex_destroy(&u->mu);
  serve_conns_destroy(&u->conns);
  free(u->cookie);
  free(u);
}
