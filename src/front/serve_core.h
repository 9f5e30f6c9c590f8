/* The state of `capsule serve`'s main thread, shared by serve.c (the
 * loop, sessions, reloads) and serve_status.c (the log lines and the
 * status file): internal to src/front. */
#ifndef CAPSULE_FRONT_SERVE_CORE_H
#define CAPSULE_FRONT_SERVE_CORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "front/caps_watch.h"
#include "front/mcp.h"
#include "front/serve.h"
#include "front/serve_internal.h"
#include "gateway/registry.h"

/* A registry and the sessions that started with it. */
struct gen {
  struct gw_registry reg;
  struct gw_ready_memo *ready; /* its capabilities' readiness, for every session's tool table */
  int refs;
};

struct route {
  char *id;
  struct stream *stream;
  bool cut; /* its reader left (a resumable stream: the call runs on) */
};

/* A call on serve's fast path (serve_fast.c): signalling cancel (its
 * thread's eventfd, -1 once signalled) stops it */
struct fast_entry {
  const void *key;
  char *id;
  int cancel;
};

struct sess {
  struct sess *next;
  struct serve *sv;
  char id[33];
  bool http, dead;
  bool sessionless; /* 2026-07-28: ends with its request */
  int fd;           /* unix: the connection */
  struct cap_buf line;
  bool skipping;
  char *user;
  struct gen *gen;
  struct mcp_config cfg;
  struct mcp_session *s;
  struct route *routes;
  size_t n_routes;
  struct stream *listen; /* HTTP: its GET stream (what belongs to no request), or NULL */
  /* resumable streams (serve_replay.c): ended ones kept for a replay,
   * the last event's number, the streams numbered, what is held */
  struct stream **kept;
  size_t n_kept;
  uint64_t replay_seq;
  unsigned replay_streams;
  size_t replay_events, replay_bytes;
  struct fast_entry *fast; /* its calls on the fast path */
  size_t n_fast;
  uint64_t last_ms;
};

struct serve {
  struct serve_grpc *grpc; /* --grpc, or NULL */
  size_t replay_bytes;     /* every session's replay_bytes (serve_replay.c) */
  struct serve_selu *selu; /* the warm Selu process (serve_grpc_mcp.c), or NULL */
  const struct serve_options *opt;
  pthread_mutex_t state_mu, queue_mu;
  struct gw_state_lock call_lock; /* state_mu, for the warm calls' threads (gateway/call.h) */
  struct inbound *head, *tail;
  int wake; /* eventfd */
  bool stopping;
  struct gen *cur;
  struct sess *sessions;
  size_t n_sessions;
  char *logs, *run, *cache, *volumes, *images, *socket_path, *status_path;
  char **hidden;
  size_t n_hidden;
  int listen_fd, signal_fd;
  struct caps_watch watch; /* the capabilities' directory (front/caps_watch.h) */
  uint64_t started_ms;
  char started[32];
  bool status_dirty, bound;
  bool queue_closed; /* under queue_mu: teardown took the last messages */
  struct serve_http *http;
  struct serve_ui *ui;
  char *ui_addr;         /* the dashboard's address, its port the one bound */
  char *http_addr;       /* --mcp-http's, likewise */
  struct ui_live *live;  /* PostgreSQL: the live stream's listener (ui_live.c) */
  size_t fast_in_flight; /* calls on the fast path (atomic: each ends outside state_mu) */
  uint64_t recover_ms;   /* when the state's left markers and spools are next stored */
  /* subscriptions/listen streams answered at the stop: held until their
   * clients have the answer (teardown waits for them, bounded) */
  struct stream **ended;
  size_t n_ended;
  char *key_path; /* STATE/serve.key: what capsule/approve presents (serve_unix.c) */
  char operator_key[65];
};

/* The live stream's listener (ui_live.c): started with the dashboard,
 * stopped after it. */
int ui_live_start(struct serve *sv, struct cap_error *err);
void ui_live_stop(struct serve *sv);

/* The fast path (serve_fast.c): serve_hooks.fast_call; a session's
 * notifications/cancelled for one of its fast calls (true: it was one);
 * its fast calls stopped as it ends. */
bool serve_fast_call(struct serve *sv, const char *session, const char *user, const char *body,
                     size_t len, char **answer);
bool serve_fast_cancel(struct sess *x, const char *body, size_t len);
void serve_fast_end(struct sess *x);
struct sess *serve_find_sess(struct serve *sv, const char *id);
/* Room for one more session (serve.c): at SERVE_MAX_SESSIONS, an idle
 * HTTP session of the user holding the most gives way (serve_room.c's
 * serve_room_evict marks it dead, then it is reaped); false when none
 * can. */
bool serve_sess_room(struct serve *sv);
bool serve_room_evict(struct serve *sv);
/* A user's calls in flight across its sessions (mcp_config.run_take and
 * run_give): at most SERVE_USER_RUNS (serve_room.c). */
#define SERVE_USER_RUNS 64
bool serve_run_take(void *ctx, const char *user);
void serve_run_give(void *ctx, const char *user);

/* Resumable streams (serve_replay.c), on the main thread: st numbered
 * before its request is accepted (not in a sessionless session); an
 * event pushed, numbered and held (the session's bound then kept); an
 * ended stream kept for a replay; all let go as the session ends; a GET
 * with Last-Event-ID pointed at the stream it resumes, or refused (400). */
void serve_replay_open(struct sess *x, struct stream *st);
void serve_replay_push(struct sess *x, struct stream *st, const char *json, size_t len, bool final);
void serve_replay_keep(struct sess *x, struct stream *st);
void serve_replay_end(struct sess *x);
/* Forgets x's sent events while all sessions hold more than the total */
void serve_replay_trim(struct sess *x);
void serve_replay_resume(struct sess *x, const char *last_event_id, struct stream *get);

/* A session (serve.c): an HTTP one, or the unix socket's on fd. */
struct sess *serve_sess_new(struct serve *sv, bool http, int fd, const char *user);
/* A generation's reference dropped (serve.c): freed with its last. */
void serve_gen_unref(struct gen *g);
/* The registry (serve_registry.c): a new generation loaded and made
 * current (the one before kept when the directory cannot be read), and
 * the watch renewed; a reload also moves every session to it. */
int serve_load(struct serve *sv, struct cap_error *err);
void serve_reload(struct serve *sv);
/* The unix socket (serve_unix.c): listening on sv->socket_path; another
 * serve on this state refused; a connection taken; what it sent read. */
int serve_listen_unix(struct serve *sv, struct cap_error *err);
int serve_check_alone(struct serve *sv, struct cap_error *err);
void serve_accept_unix(struct serve *sv);
void serve_read_unix(struct sess *x);

/* "2026-11-25T22:00:00.123Z", now. */
void serve_utc_now(char out[32]);
/* t (CLOCK_REALTIME) as serve_utc_now writes the time */
void serve_utc_at(const struct timespec *t, char out[32]);
/* STATE/serve.json rewritten (by rename) from sv. */
void serve_write_status(struct serve *sv);

#endif
