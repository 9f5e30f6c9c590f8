/* `capsule serve`'s main thread (front/serve.h): the registry and its
 * reloads, the MCP sessions (unix socket and HTTP), the queue the HTTP
 * threads feed, signals, draining, the status file. */
#include "front/serve.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/clock.h"
#include "core/io.h"
#include "core/json.h"
#include "core/text.h"
#include "front/serve_core.h"
#include "front/serve_internal.h"
#include "front/ui.h"
#include "image/image.h"
#include "gateway/access.h"
#include "gateway/registry.h"

#define IDLE_SESSION_MS (60 * 60 * 1000)
#define LISTEN_FLUSH_MS 3000   /* at the stop: for listens' answers to reach their clients */
#define SERVE_RECOVER_MS 10000 /* how often serve stores what processes gone left (state.h) */

static uint64_t now_ms(void) { return cap_now_ms(CLOCK_MONOTONIC); }

bool serve_stopping(struct serve *sv) { return __atomic_load_n(&sv->stopping, __ATOMIC_ACQUIRE); }

/* ---- the queue from the HTTP threads ---- */

static void inbound_free(struct inbound *in);

void serve_enqueue(struct serve *sv, struct inbound *in)
{
  pthread_mutex_lock(&sv->queue_mu);
  if (sv->queue_closed) { /* after the last drain: nothing would answer it */
    pthread_mutex_unlock(&sv->queue_mu);
    if (in->stream)
      stream_fail(in->stream, 503, "the server is stopping");
    inbound_free(in);
    return;
  }
  if (sv->tail)
    sv->tail->next = in;
  else
    sv->head = in;
  sv->tail = in;
  pthread_mutex_unlock(&sv->queue_mu);
  uint64_t one = 1;
  if (write(sv->wake, &one, sizeof one) < 0) {
    /* the counter is full: the main thread has plenty to wake for */
  }
}

void serve_lock_state(struct serve *sv) { pthread_mutex_lock(&sv->state_mu); }
void serve_unlock_state(struct serve *sv) { pthread_mutex_unlock(&sv->state_mu); }

char *serve_authenticate(struct serve *sv, const char *token)
{
  char *user = NULL;
  bool op = false;
  /* a token kept since the last revoke is known without the state's lock
   * (taken by calls for their whole pipeline at eight connections) */
  if (gw_access_check_kept(sv->opt->st, token, &user, &op) == 0)
    return user;
  struct cap_error err = {0};
  pthread_mutex_lock(&sv->state_mu);
  int r = gw_access_check(sv->opt->st, token, &user, &op, &err);
  pthread_mutex_unlock(&sv->state_mu);
  cap_error_clear(&err);
  return r == 0 ? user : NULL;
}

static void inbound_free(struct inbound *in)
{
  if (in->stream)
    stream_unref(in->stream);
  free(in->session_id);
  free(in->user);
  free(in->body);
  free(in->id_json);
  free(in->last_event_id);
  free(in);
}

/* ---- sessions ---- */

void serve_gen_unref(struct gen *g)
{
  if (g && --g->refs == 0) {
    gw_registry_free(&g->reg);
    gw_ready_memo_free(g->ready);
    free(g);
  }
}

static struct route *find_route(struct sess *x, const char *id)
{
  for (size_t i = 0; i < x->n_routes; i++)
    if (strcmp(x->routes[i].id, id) == 0)
      return &x->routes[i];
  return NULL;
}

static void drop_route(struct sess *x, struct route *r)
{
  stream_finish(r->stream);
  serve_replay_keep(x, r->stream);
  stream_unref(r->stream);
  free(r->id);
  *r = x->routes[--x->n_routes];
}

/* A slow reader gets 5 s each time it fills, then loses its session. */
static void write_all(struct sess *x, const char *data, size_t len)
{
  if (!x->dead && cap_write_all_wait(x->fd, data, len, 0, 5000) < 0)
    x->dead = true;
}

static void sess_send(void *ctx, const char *for_id, bool final, const char *json, size_t len)
{
  struct sess *x = ctx;
  if (!x->http) {
    if (json) {
      write_all(x, json, len);
      write_all(x, "\n", 1);
    }
    return;
  }
  struct route *r = for_id ? find_route(x, for_id) : NULL;
  if (!r && !for_id && json && x->listen) /* the session's own: on its GET stream */
    serve_replay_push(x, x->listen, json, len, false);
  if (!r)
    return; /* nothing waits for it (no GET stream is open) */
  if (json)
    serve_replay_push(x, r->stream, json, len, final);
  if (final)
    drop_route(x, r);
}

/* A sessionless request (the retry of a call held for input, mcp_hold.c)
 * goes on in the sessionless session x of the same user holding the
 * call: its route moves there (mcp.h, mcp_io.adopt) */
static bool sess_adopt(void *ctx, void *from_ctx, const char *id)
{
  struct sess *x = ctx, *from = from_ctx;
  struct route *r = find_route(from, id);
  if (!r || !x->http || !from->http || !x->sessionless || !from->sessionless || x->dead ||
      strcmp(x->user, from->user) != 0 || find_route(x, id))
    return false;
  x->routes = cap_xrealloc(x->routes, (x->n_routes + 1) * sizeof *x->routes);
  x->routes[x->n_routes++] = *r;
  *r = from->routes[--from->n_routes];
  x->last_ms = now_ms();
  return true;
}

/* A warm call's thread holds the registry it started with (mcp.h) */
static void *sess_reg_hold(void *ctx)
{
  struct sess *x = ctx;
  x->gen->refs++;
  return x->gen;
}

static void sess_reg_release(void *ctx, void *held)
{
  (void)ctx;
  serve_gen_unref(held);
}

static void call_lock_acquire(void *ctx) { pthread_mutex_lock(&((struct serve *)ctx)->state_mu); }
static void call_lock_release(void *ctx) { pthread_mutex_unlock(&((struct serve *)ctx)->state_mu); }

struct sess *serve_sess_new(struct serve *sv, bool http, int fd, const char *user)
{
  struct sess *x = cap_xcalloc(1, sizeof *x);
  x->sv = sv;
  x->http = http;
  x->fd = fd;
  x->user = cap_xstrdup(user);
  x->gen = sv->cur;
  x->gen->refs++;
  unsigned char raw[16];
  randombytes_buf(raw, sizeof raw);
  sodium_bin2hex(x->id, sizeof x->id, raw, sizeof raw);
  x->cfg = (struct mcp_config){
      .reg = &x->gen->reg,
      .ready_memo = x->gen->ready,
      .st = sv->opt->st,
      .state_dir = sv->opt->state_dir,
      .only = sv->opt->only,
      .server_version = sv->opt->version,
      .list_changed = true,   /* HTTP: on a 2025 session's GET stream, when it has one open */
      .local_methods = !http, /* the CLI's capsule/call: its peer is who SO_PEERCRED says */
      .reg_hold = sess_reg_hold,
      .reg_release = sess_reg_release,
      .reg_ctx = x,
      .run_take = serve_run_take,
      .run_give = serve_run_give,
      .selu_warm = serve_selu_call,
      .selu_warm_ctx = sv,
      .base = {.user = x->user,
               .warn = serve_call_warn,
               .warn_ctx = (void *)sv->opt,
               .state_lock = &sv->call_lock,
               .deadline_ms = sv->opt->deadline_ms,
               .log_dir = sv->logs,
               .run_dir = sv->run,
               .cache_dir = sv->cache,
               .volumes_dir = sv->volumes,
               .image_dir = sv->images,
               .hidden = (const char *const *)sv->hidden,
               .n_hidden = sv->n_hidden},
  };
  struct mcp_io io = {.send = sess_send, .adopt = sess_adopt, .ctx = x};
  x->s = mcp_session_new(&x->cfg, &io);
  x->last_ms = now_ms();
  x->next = sv->sessions;
  sv->sessions = x;
  sv->n_sessions++;
  sv->status_dirty = true;
  return x;
}

static void listen_end(struct sess *x)
{
  if (!x->listen)
    return;
  stream_finish(x->listen);
  serve_replay_keep(x, x->listen);
  stream_unref(x->listen);
  x->listen = NULL;
}

static void sess_free(struct sess *x)
{
  mcp_session_free(x->s); /* stops its calls */
  listen_end(x);
  serve_fast_end(x);
  while (x->n_routes)
    drop_route(x, &x->routes[0]);
  free(x->routes);
  serve_replay_end(x);
  if (x->fd >= 0)
    close(x->fd);
  cap_buf_free(&x->line);
  serve_gen_unref(x->gen);
  free(x->user);
  free(x);
}

/* Streams their clients left: a 2026-07-28 request is cancelled by it
 * (the revision's way); any call still waiting for an elicitation answer
 * that can no longer come is dropped. A 2025 call runs on (the spec:
 * a disconnection is not a cancellation), its stream (resumable) kept
 * for a GET with Last-Event-ID, as the GET stream is. */
static void closed_streams(struct sess *x)
{
  if (x->listen && !x->listen->resumable) {
    pthread_mutex_lock(&x->listen->mu);
    bool gone = x->listen->closed;
    pthread_mutex_unlock(&x->listen->mu);
    if (gone)
      listen_end(x);
  }
  for (size_t i = 0; i < x->n_routes;) {
    struct stream *st = x->routes[i].stream;
    pthread_mutex_lock(&st->mu);
    bool closed = st->closed;
    pthread_mutex_unlock(&st->mu);
    if (closed && st->resumable && !x->routes[i].cut) {
      x->routes[i].cut = true;
      mcp_session_cancel(x->s, x->routes[i].id, true);
      continue; /* the route may be gone: its answer came */
    }
    if (!closed || st->resumable) {
      i++;
      continue;
    }
    _cleanup_free_ char *id = cap_xstrdup(x->routes[i].id);
    drop_route(x, &x->routes[i]);
    mcp_session_cancel(x->s, id, !x->sessionless);
  }
}

static void reap(struct serve *sv)
{
  uint64_t now = now_ms();
  for (struct sess **p = &sv->sessions; *p;) {
    struct sess *x = *p;
    if (x->http && !x->dead && now - x->last_ms > IDLE_SESSION_MS && !mcp_session_busy(x->s) &&
        !x->n_fast && !mcp_session_listening(x->s))
      x->dead = true;
    if (x->sessionless && !x->n_routes && !mcp_session_busy(x->s))
      x->dead = true;
    if (!x->dead) {
      serve_replay_trim(x); /* what was sent since, past the total */
      p = &x->next;
      continue;
    }
    *p = x->next;
    sv->n_sessions--;
    sv->status_dirty = true;
    if (!x->sessionless)
      serve_log(sv, "info", "session ended", "session", x->id, "user", x->user);
    sess_free(x);
  }
}

bool serve_sess_room(struct serve *sv)
{
  if (sv->n_sessions >= SERVE_MAX_SESSIONS && serve_room_evict(sv))
    reap(sv);
  return sv->n_sessions < SERVE_MAX_SESSIONS;
}

struct sess *serve_find_sess(struct serve *sv, const char *id)
{
  for (struct sess *x = sv->sessions; x; x = x->next)
    if (x->http && !x->dead && strcmp(x->id, id) == 0)
      return x;
  return NULL;
}

/* ---- HTTP messages, on the main thread ---- */

static void add_route(struct sess *x, struct inbound *in)
{
  if (!in->stream || !in->id_json)
    return;
  x->routes = cap_xrealloc(x->routes, (x->n_routes + 1) * sizeof *x->routes);
  x->routes[x->n_routes++] = (struct route){.id = cap_xstrdup(in->id_json), .stream = in->stream};
  in->stream = NULL; /* the route holds the reference now */
}

/* The subscriptions/listen streams user has open */
static size_t listens_of(const struct serve *sv, const char *user)
{
  size_t k = 0;
  for (const struct sess *x = sv->sessions; x; x = x->next)
    if (!x->dead && strcmp(x->user, user) == 0)
      k += mcp_session_listening(x->s);
  return k;
}

/* Every subscriptions/listen stream answered and closed (the revision's
 * graceful end): serve stops */
static void listens_end(struct serve *sv)
{
  for (struct sess *x = sv->sessions; x; x = x->next) {
    if (!mcp_session_listening(x->s))
      continue;
    for (size_t i = 0; x->sessionless && i < x->n_routes; i++) { /* its listen's stream */
      pthread_mutex_lock(&x->routes[i].stream->mu);
      x->routes[i].stream->refs++;
      pthread_mutex_unlock(&x->routes[i].stream->mu);
      sv->ended = cap_xrealloc(sv->ended, (sv->n_ended + 1) * sizeof *sv->ended);
      sv->ended[sv->n_ended++] = x->routes[i].stream;
    }
    mcp_session_listens_end(x->s);
  }
}

/* The streams listens_end answered, sent or left by their clients (their
 * responses freed: only our reference stays), within LISTEN_FLUSH_MS */
static void listens_flushed(struct serve *sv)
{
  uint64_t until = now_ms() + LISTEN_FLUSH_MS;
  for (size_t i = 0; i < sv->n_ended; i++) {
    for (;;) {
      pthread_mutex_lock(&sv->ended[i]->mu);
      bool sent = sv->ended[i]->refs == 1;
      pthread_mutex_unlock(&sv->ended[i]->mu);
      if (sent || now_ms() >= until)
        break;
      poll(NULL, 0, 10);
    }
    stream_unref(sv->ended[i]);
  }
  free(sv->ended);
  sv->ended = NULL;
  sv->n_ended = 0;
}

/* A request whose id is one of its session's requests still in flight:
 * ids are unique within a session (the answers are routed by them), so it
 * gets a JSON-RPC error of its own and the first keeps its answer. */
static void refuse_duplicate(struct inbound *in)
{
  _cleanup_free_ char *json =
      cap_xasprintf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32600,\"message\":"
                    "\"Invalid Request: a request with this id is still in flight in this session; "
                    "use an id of its own for each request\"}}",
                    in->id_json);
  pthread_mutex_lock(&in->stream->mu);
  in->stream->accepted = true;
  pthread_cond_broadcast(&in->stream->cv);
  pthread_mutex_unlock(&in->stream->mu);
  stream_push(in->stream, json, strlen(json), true);
}

static void on_inbound(struct serve *sv, struct inbound *in)
{
  struct sess *x = in->session_id ? serve_find_sess(sv, in->session_id) : NULL;
  if (in->session_id && !x) {
    if (in->stream)
      stream_fail(in->stream, 404, "Session not found: start a new one with initialize");
    return;
  }
  if (x && strcmp(x->user, in->user) != 0) {
    if (in->stream)
      stream_fail(in->stream, 403, "this session belongs to another user");
    return;
  }
  if (in->kind == INBOUND_DELETE) {
    x->dead = true;
    stream_fail(in->stream, 200, NULL);
    return;
  }
  if (in->kind == INBOUND_LISTEN) { /* one GET stream a session: a new one replaces it */
    x->last_ms = now_ms();
    if (in->last_event_id) { /* resumes the stream it names: the GET stream stays */
      serve_replay_resume(x, in->last_event_id, in->stream);
      return;
    }
    listen_end(x);
    serve_replay_open(x, in->stream);
    pthread_mutex_lock(&in->stream->mu);
    in->stream->accepted = true;
    pthread_cond_broadcast(&in->stream->cv);
    pthread_mutex_unlock(&in->stream->mu);
    x->listen = in->stream;
    in->stream = NULL;
    return;
  }
  if (in->listen && in->stream && listens_of(sv, in->user) >= SERVE_MAX_LISTENS_PER_USER) {
    stream_fail(in->stream, 429,
                "Too Many Requests: this user has as many subscriptions/listen "
                "streams open as serve allows; close one first");
    return;
  }
  if (!x) { /* initialize, or a sessionless request */
    if (sv->stopping || !serve_sess_room(sv)) {
      if (in->stream)
        stream_fail(in->stream, 503, "too many sessions; try again later");
      return;
    }
    x = serve_sess_new(sv, true, -1, in->user);
    x->sessionless = in->sessionless;
    if (!x->sessionless && in->stream) {
      pthread_mutex_lock(&in->stream->mu);
      in->stream->session_id = cap_xstrdup(x->id);
      pthread_mutex_unlock(&in->stream->mu);
    }
  }
  x->last_ms = now_ms();
  if (in->stream && in->id_json && find_route(x, in->id_json)) {
    refuse_duplicate(in);
    return;
  }
  if (in->stream && in->sse && in->id_json)
    serve_replay_open(x, in->stream);
  if (in->stream) { /* an SSE answer may start: progress and the result follow */
    pthread_mutex_lock(&in->stream->mu);
    in->stream->accepted = true;
    pthread_cond_broadcast(&in->stream->cv);
    pthread_mutex_unlock(&in->stream->mu);
  }
  add_route(x, in);
  if (x->n_fast && serve_fast_cancel(x, in->body, in->len))
    return;
  mcp_session_receive(x->s, in->body, in->len);
  if (!in->session_id && !x->sessionless) {
    if (mcp_session_initialized(x->s))
      serve_log(sv, "info", "session started", "session", x->id, "user", x->user);
    else
      x->dead = true;
  }
}

static void drain_queue(struct serve *sv)
{
  uint64_t n;
  if (read(sv->wake, &n, sizeof n) < 0) {
    /* nothing queued */
  }
  pthread_mutex_lock(&sv->queue_mu);
  struct inbound *in = sv->head;
  sv->head = sv->tail = NULL;
  pthread_mutex_unlock(&sv->queue_mu);
  while (in) {
    struct inbound *next = in->next;
    on_inbound(sv, in);
    inbound_free(in);
    in = next;
  }
}

/* ---- the status file ---- */

/* ---- the loop ---- */

static void on_signal(struct serve *sv, uint64_t *drain_until)
{
  struct signalfd_siginfo si;
  while (read(sv->signal_fd, &si, sizeof si) == sizeof si) {
    if (si.ssi_signo == SIGHUP) {
      serve_log(sv, "info", "reload requested (SIGHUP)", NULL, NULL, NULL, NULL);
      serve_reload(sv);
    } else if (!sv->stopping) {
      __atomic_store_n(&sv->stopping, true, __ATOMIC_RELEASE);
      *drain_until = now_ms() + (sv->opt->drain_ms ? sv->opt->drain_ms : SERVE_DRAIN_MS);
      serve_log(sv, "info", "draining", "signal", strsignal((int)si.ssi_signo), NULL, NULL);
      listens_end(sv);
      if (sv->http)
        serve_http_quiesce(sv->http);
      serve_ui_quiesce(sv->ui);
      close(sv->listen_fd);
      sv->listen_fd = -1;
      sv->status_dirty = true;
    }
  }
}

static size_t busy(const struct serve *sv)
{
  size_t k = __atomic_load_n(&sv->fast_in_flight, __ATOMIC_SEQ_CST);
  for (struct sess *x = sv->sessions; x; x = x->next)
    k += mcp_session_busy(x->s);
  return k;
}

/* One turn: wait, then handle what is ready. False when the drain is over. */
static bool turn(struct serve *sv, uint64_t *drain_until)
{
  size_t cap = 4 + sv->n_sessions * (1 + MCP_MAX_RUNNING);
  struct pollfd *fds = cap_xcalloc(cap, sizeof *fds);
  size_t n = 0;
  int timeout = 1000;
  fds[n++] = (struct pollfd){.fd = sv->wake, .events = POLLIN};
  fds[n++] = (struct pollfd){.fd = sv->signal_fd, .events = POLLIN};
  fds[n++] = (struct pollfd){.fd = sv->watch.fd, .events = POLLIN};
  fds[n++] = (struct pollfd){.fd = sv->listen_fd, .events = POLLIN};
  for (struct sess *x = sv->sessions; x; x = x->next) {
    if (!x->http)
      fds[n++] = (struct pollfd){.fd = x->fd, .events = POLLIN};
    int t;
    n += mcp_session_poll(x->s, fds + n, MCP_MAX_RUNNING, &t);
    if (t >= 0 && t < timeout)
      timeout = t;
  }
  timeout = caps_watch_timeout(&sv->watch, timeout);
  poll(fds, n, timeout);
  pthread_mutex_lock(&sv->state_mu);
  if (fds[1].revents)
    on_signal(sv, drain_until);
  bool reload = caps_watch_turn(&sv->watch, fds[2].revents);
  if (fds[0].revents)
    drain_queue(sv);
  if (fds[3].revents && sv->listen_fd >= 0)
    serve_accept_unix(sv);
  for (size_t i = 4; i < n; i++)
    for (struct sess *x = sv->sessions; fds[i].revents && x; x = x->next)
      if (!x->http && x->fd == fds[i].fd && !x->dead)
        serve_read_unix(x);
  for (struct sess *x = sv->sessions; x; x = x->next) {
    mcp_session_events(x->s, NULL, 0);
    if (x->http)
      closed_streams(x);
  }
  if (reload)
    serve_reload(sv);
  reap(sv);
  if (now_ms() >= sv->recover_ms) { /* no other capsule may open the state meanwhile */
    gw_state_recover(sv->opt->st);
    sv->recover_ms = now_ms() + SERVE_RECOVER_MS;
  }
  if (sv->status_dirty || sv->stopping)
    serve_write_status(sv);
  bool go_on = !sv->stopping || (busy(sv) && now_ms() < *drain_until);
  pthread_mutex_unlock(&sv->state_mu);
  free(fds);
  return go_on;
}

static void ui_bound(struct serve *sv, const char *addr) { sv->ui_addr = cap_xstrdup(addr); }
static void http_bound(struct serve *sv, const char *addr) { sv->http_addr = cap_xstrdup(addr); }

static void ui_log(struct serve *sv, const char *msg, const char *user)
{
  serve_log(sv, "info", msg, "user", user, "via", "dashboard");
}

static const struct serve_hooks hooks = {.enqueue = serve_enqueue,
                                         .fast_call = serve_fast_call,
                                         .authenticate = serve_authenticate,
                                         .stopping = serve_stopping,
                                         .ui_login = ui_login,
                                         .ui_page = ui_page,
                                         .ui_pulse = ui_pulse,
                                         .ui_wait = ui_wait,
                                         .ui_bound = ui_bound,
                                         .http_bound = http_bound,
                                         .ui_log = ui_log,
                                         .ui_sess_save = ui_sess_save,
                                         .ui_sess_load = ui_sess_load,
                                         .ui_sess_alive = ui_sess_alive,
                                         .ui_sess_forget = ui_sess_forget};

/* A gRPC address off this host needs TLS, or --insecure said aloud. */
static int check_grpc_addr(const struct serve_options *opt, struct cap_error *err)
{
  const char *a = opt->grpc_addr;
  bool local = strncmp(a, "unix:", 5) == 0 || strncmp(a, "127.", 4) == 0 ||
               strncmp(a, "[::1]:", 6) == 0 || strncmp(a, "localhost:", 10) == 0;
  if (local || opt->tls_cert || opt->insecure)
    return 0;
  return cap_error_set(err, EINVAL,
                       "--grpc %s is not a loopback address: give --tls-cert and --tls-key, or "
                       "--insecure to serve plaintext to the network",
                       a);
}

/* serve's threads under SCHED_BATCH (before any thread or fork: they
 * and the warm servers' keepers it starts inherit it), where it runs
 * under the default policy (one chosen by hand, a real-time one say, is
 * left as it is). A waking thread then does not preempt the one running:
 * a call's hand-overs (the audit's group commit posting each waiting
 * call, the state lock let go, the keeper's answer) no longer switch the
 * thread that hands over out mid-work, a context switch a call fewer or
 * more under concurrent load. Only the scheduler's hint: no check, limit
 * or isolation depends on it (a tool may set its own policy back). */
static void serve_sched_batch(void)
{
  if (sched_getscheduler(0) != SCHED_OTHER)
    return;
  struct sched_param p = {.sched_priority = 0};
  (void)sched_setscheduler(0, SCHED_BATCH, &p); /* refused (a seccomp filter): as it was */
}

static int setup(struct serve *sv, const struct serve_options *opt, struct cap_error *err)
{
  sv->opt = opt;
  serve_sched_batch();
  pthread_mutex_init(&sv->state_mu, NULL);
  pthread_mutex_init(&sv->queue_mu, NULL);
  sv->call_lock =
      (struct gw_state_lock){.acquire = call_lock_acquire, .release = call_lock_release, .ctx = sv};
  sv->listen_fd = -1;
  caps_watch_init(&sv->watch, opt->caps_dir);
  sv->logs = cap_xasprintf("%s/logs", opt->state_dir);
  sv->run = cap_xasprintf("%s/run", opt->state_dir);
  sv->cache = cap_xasprintf("%s/cache", opt->state_dir);
  sv->volumes = cap_xasprintf("%s/volumes", opt->state_dir);
  sv->images = image_store_dir(opt->state_dir);
  sv->socket_path = opt->socket_path ? cap_xstrdup(opt->socket_path)
                                     : cap_xasprintf("%s/serve.sock", opt->state_dir);
  sv->status_path = serve_status_path(opt->state_dir);
  sv->n_hidden = gw_state_private_paths(opt->state_dir, &sv->hidden);
  serve_utc_now(sv->started);
  sv->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread: they inherit it */
  signal(SIGPIPE, SIG_IGN);
  sv->signal_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sv->wake < 0 || sv->signal_fd < 0)
    return cap_error_errno(err, errno, "cannot set up the event descriptors");
  int r = serve_load(sv, err);
  if (r == 0 && opt->only && !gw_registry_find(&sv->cur->reg, opt->only))
    r = cap_error_set(err, ENOENT, "no capability \"%s\" in %s; `capsule list` shows them",
                      opt->only, opt->caps_dir);
  if (r == 0)
    r = serve_check_alone(sv, err);
  if (r == 0) /* forks: while serve has no other thread, listener or connection */
    serve_selu_start(sv, &sv->cur->reg);
  if (r == 0)
    r = serve_listen_unix(sv, err);
  if (r == 0 && opt->grpc_addr)
    r = check_grpc_addr(opt, err);
  if (r == 0 && opt->grpc_addr) /* forks: while serve has no other thread */
    r = serve_grpc_start(sv, opt, &sv->grpc, err);
  if (r == 0 && opt->http_addr)
    r = serve_http_start(sv, &hooks, opt, &sv->http, err);
  if (r == 0 && opt->ui_addr)
    r = ui_live_start(sv, err);
  if (r == 0 && opt->ui_addr)
    r = serve_ui_start(sv, &hooks, opt, &sv->ui, err);
  return r;
}

static void teardown(struct serve *sv)
{
  /* calls in flight finish (their children fork under the state lock) */
  serve_grpc_stop(sv->grpc, SERVE_DRAIN_MS);
  pthread_mutex_lock(&sv->state_mu);
  __atomic_store_n(&sv->stopping, true, __ATOMIC_RELEASE);
  listens_end(sv);
  for (struct sess *x = sv->sessions; x; x = x->next)
    x->dead = true;
  reap(sv); /* stops what still runs; every stream ends */
  pthread_mutex_lock(&sv->queue_mu);
  sv->queue_closed = true; /* what comes later is refused at once */
  pthread_mutex_unlock(&sv->queue_mu);
  drain_queue(sv);
  pthread_mutex_unlock(&sv->state_mu);
  listens_flushed(sv);
  if (sv->http)
    serve_http_stop(sv->http); /* joins its threads */
  serve_ui_stop(sv->ui);
  ui_live_stop(sv);
  drain_queue(sv);
  serve_selu_stop(sv->selu, SERVE_DRAIN_MS);
  if (sv->listen_fd >= 0)
    close(sv->listen_fd);
  if (sv->bound) { /* only what this serve made */
    unlink(sv->socket_path);
    unlink(sv->status_path);
    if (sv->key_path)
      unlink(sv->key_path);
  }
  serve_gen_unref(sv->cur);
  gw_state_private_paths_free(sv->hidden, sv->n_hidden);
}

int serve_run(const struct serve_options *opt, struct cap_error *err)
{
  struct serve sv = {0};
  int r = setup(&sv, opt, err);
  if (r == 0) {
    gw_inflight_spares(true); /* a call's marker without a file made per call */
    serve_write_status(&sv);
    serve_log(&sv, "info", "serving", "socket", sv.socket_path, "mcp_http", sv.http_addr);
    if (sv.ui_addr)
      serve_log(&sv, "info", "serving the dashboard", "ui", sv.ui_addr, NULL, NULL);
    if (opt->grpc_addr)
      serve_log(&sv, "info", "serving gRPC", "grpc", opt->grpc_addr, NULL, NULL);
    uint64_t drain_until = 0;
    while (turn(&sv, &drain_until))
      ;
    serve_log(&sv, "info", "stopped", NULL, NULL, NULL, NULL);
  }
  teardown(&sv);
  gw_inflight_spares(false);
  int fds[] = {sv.wake, sv.signal_fd};
  for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
    if (fds[i] >= 0)
      close(fds[i]);
  free(sv.logs);
  free(sv.run);
  free(sv.cache);
  free(sv.volumes);
  free(sv.images);
  free(sv.socket_path);
  free(sv.key_path);
  free(sv.status_path);
  free(sv.ui_addr);
  free(sv.http_addr);
  caps_watch_free(&sv.watch);
  return r;
}
