/* What serve.c (the main loop, sessions, the unix socket, reload) and
 * serve_http.c (Streamable HTTP on libmicrohttpd's threads) share.
 *
 * Threads: one main thread owns every MCP session and the registry; HTTP
 * requests arrive on libmicrohttpd's per-connection threads, which hand
 * each message to the main thread (serve_enqueue) and wait on a stream
 * for what it answers. The state database is used under serve.state_mu
 * (the main thread holds it while it runs sessions, and so while it forks
 * a call's child). */
#ifndef CAPSULE_FRONT_SERVE_INTERNAL_H
#define CAPSULE_FRONT_SERVE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "core/buf.h"
#include "front/mcp.h"
#include "front/serve.h"

/* One message on a stream: its JSON and its sequence number (a resumable
 * stream's: the session's count, which its SSE id carries). */
struct stream_event {
  char *json;
  size_t len;
  uint64_t seq;
};

/* The messages for one HTTP request, from the main thread to the HTTP
 * thread that answers it. Reference counted (both threads hold it).
 * A resumable stream (a 2025 session's SSE stream: docs/serve.md
 * "Resuming a stream") keeps its events after they are sent, until the
 * session's replay bound forgets them (serve_replay.c), and may be read
 * again by a later reader (a GET with Last-Event-ID), which replaces the
 * one before it; any other stream's events are freed as they are sent. */
struct stream {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int refs;
  struct stream_event *ev; /* ev[head..n): held */
  size_t n, head;
  uint64_t last_seq; /* the newest event's */
  bool done;         /* the answer was queued, or the session is gone */
  bool closed;       /* the (current) reader left before the end */
  bool accepted;     /* the main thread took the request (an SSE answer may start) */
  int http_status;   /* set instead of messages: the request was refused */
  char *error;       /* its reason */
  char *session_id;  /* the session an initialize opened */
  /* resumption, set by the main thread before it accepts the request */
  bool resumable;
  unsigned number;    /* the stream's number in its session: its ids' first half */
  uint64_t prime_seq; /* the id its SSE answer starts with */
  uint64_t forgot;    /* the newest event forgotten (0: none) */
  uint64_t sent;      /* the newest event the current reader wrote */
  unsigned reader;    /* the current reader's generation: an older one ends */
  /* on a GET's stream that resumes another: that stream (a reference),
   * the reader's generation and the last event the client has */
  struct stream *resume;
  unsigned resume_gen;
  uint64_t resume_after;
};

struct stream *stream_new(void);
void stream_unref(struct stream *s);
/* seq: the event's number (a resumable stream's, from its session); 0:
 * the stream's own count. false: not queued (a reader that reads
 * nothing has STREAM_MAX_QUEUED waiting). */
bool stream_push_event(struct stream *s, uint64_t seq, const char *json, size_t len, bool final);
void stream_push(struct stream *s, const char *json, size_t len, bool final);
void stream_fail(struct stream *s, int http_status, const char *error);
void stream_finish(struct stream *s);
/* With s->mu held: the index of the first event after seq held, or
 * s->n. */
size_t stream_next(const struct stream *s, uint64_t after);
/* An SSE event id: "NUMBER-SEQ" (out holds 48 bytes); parsed back, 0 for
 * anything else (-EINVAL). */
#define STREAM_ID_MAX 48
void stream_event_id(char out[STREAM_ID_MAX], unsigned number, uint64_t seq);
int stream_parse_event_id(const char *id, unsigned *number, uint64_t *seq);

/* a POST's message; a DELETE (the session ends); a GET (the session's
 * stream for what belongs to no request) */
enum inbound_kind { INBOUND_MESSAGE, INBOUND_DELETE, INBOUND_LISTEN };

/* One HTTP message for the main thread. */
struct inbound {
  struct inbound *next;
  enum inbound_kind kind;
  char *session_id; /* NULL: an initialize, or a sessionless (2026-07-28) request */
  bool sessionless; /* 2026-07-28: a session for this request alone */
  bool listen;      /* subscriptions/listen: bounded per user (SERVE_MAX_LISTENS_PER_USER) */
  char *user;       /* the token's */
  char *body;
  size_t len;
  char *id_json;         /* a request's id, NULL for notifications and answers */
  struct stream *stream; /* where its answer goes (a reference), or NULL */
  bool sse;              /* its answer may be an SSE stream (resumable in a session) */
  char *last_event_id;   /* a GET's Last-Event-ID: the stream it resumes */
};

struct serve;
void serve_enqueue(struct serve *sv, struct inbound *in);
/* Checks a bearer token under the state lock: its user (the caller frees
 * it), or NULL. */
char *serve_authenticate(struct serve *sv, const char *token);
void serve_log(struct serve *sv, const char *level, const char *msg, const char *k1, const char *v1,
               const char *k2, const char *v2);
/* The same, the line's time when (CLOCK_REALTIME) rather than now: a line
 * written after the event it tells of. */
void serve_log_at(struct serve *sv, const struct timespec *when, const char *level, const char *msg,
                  const char *k1, const char *v1, const char *k2, const char *v2);
bool serve_stopping(struct serve *sv);
/* gw_call.warn for the calls serve runs, ctx its struct serve_options: a
 * line of its log, level "warning", msg "this host cannot enforce", the
 * text as "detail" (from a call's child process too: one write). */
void serve_call_warn(void *ctx, const char *text);
/* The state lock, which the main thread holds while it works (SQLite
 * included): held around a fork, no other thread is inside SQLite. */
void serve_lock_state(struct serve *sv);
void serve_unlock_state(struct serve *sv);

/* serve_grpc.c: Selu's two gRPC services on opt->grpc_addr (TLS with
 * opt's certificate; a non-loopback address needs it or --insecure), in a
 * process of its own (forked here, before serve initialised gRPC). */
struct serve_grpc;
int serve_grpc_start(struct serve *sv, const struct serve_options *opt, struct serve_grpc **ret,
                     struct cap_error *err);
/* serve reloaded its registry: the gRPC calls take the new one. */
void serve_grpc_reloaded(struct serve_grpc *g);
/* Stops taking calls, lets those in flight finish up to drain_ms. */
void serve_grpc_stop(struct serve_grpc *g, int drain_ms);

/* serve_grpc_mcp.c: serve's warm Selu process (front/serve.h's
 * serve_selu_open, its host serve), the MCP doors' Selu calls on a
 * running instance made there without a fork (mcp_config.selu_warm is
 * serve_selu_call, its ctx serve). start: at serve's start, before any
 * thread, listener or connection, when reg has a Selu capability (forks;
 * a failure is logged, and Selu calls run apart); serve_selu_reloaded
 * and serve_selu_stop (serve.h) at a reload and at its end. */
void serve_selu_start(struct serve *sv, const struct gw_registry *reg);
enum gw_outcome serve_selu_call(void *ctx, const struct gw_registry *reg,
                                const struct gw_call *call, int cancel_fd, struct gw_result *res,
                                struct cap_error *err);

/* serve_grpc_calls.c: the gRPC process's call process. What a call's
 * child sends back on its pipe: this head, then the result or the error's
 * message. */
struct serve_grpc_head {
  int32_t outcome; /* enum gw_outcome */
  int32_t code;    /* the error's errno */
};
/* A gRPC call's deadline: serve's (--deadline; 0: the pipeline's
 * default), or the client's (its grpc-timeout; 0: none) when sooner. */
static inline uint64_t serve_grpc_deadline(uint64_t serve_ms, uint64_t client_ms)
{
  uint64_t mine = serve_ms ? serve_ms : GW_DEFAULT_DEADLINE_MS;
  return client_ms && client_ms < mine ? client_ms : serve_ms;
}
struct grpc_serve_call;
struct gw_registry;
/* Hands the call to the call process on sock; its child answers on out
 * (a stream socket: shut by the gRPC process, the call is cancelled). */
int serve_grpc_send(int sock, const struct grpc_serve_call *call, const char *user, int out);
/* The call process: takes calls on sock until it closes, a child each,
 * reloading reg when a byte arrives on reload_fd. */
_Noreturn void serve_grpc_calls(const struct serve_options *opt, struct gw_registry *reg, int sock,
                                int reload_fd);
/* The capability and tool a gRPC tool name means: --capability's (only)
 * tool, or the longest prefix before a '.' that is a capability of reg. */
struct cap_spec;
const struct cap_spec *serve_grpc_resolve(const struct gw_registry *reg, const char *only,
                                          const char *name, const char **tool);

/* serve_grpc_warm.c: the gRPC process's warm path, on the call's own
 * worker thread (any number at once): a Selu call on a running instance
 * through the pipeline, with no fork and no state opened per call. false:
 * the call needs more (gw_call.warm_only), nothing ran nor was audited,
 * and it goes to the call process; true: *h and *text (owned) are its
 * answer, as a call's child would send them, and *later (NULL: none)
 * the call's audit record still to append once the answer went
 * (serve_grpc_warm_commit). reload_fd (owned): a byte there, and the next
 * call reloads the registry. */
struct serve_grpc_warm;
struct gw_audit_later;
struct serve_grpc_warm *serve_grpc_warm_new(const struct serve_options *opt, int reload_fd);
bool serve_grpc_warm_call(struct serve_grpc_warm *w, const struct grpc_serve_call *call,
                          const char *user, struct serve_grpc_head *h, char **text,
                          struct gw_audit_later **later);
/* A warm call's record appended, after its answer (gateway/call.h's
 * gw_audit_later_commit, on a pooled connection); l may be NULL. */
void serve_grpc_warm_commit(struct serve_grpc_warm *w, struct gw_audit_later *l);
void serve_grpc_warm_free(struct serve_grpc_warm *w);
/* A bearer token checked on a pooled connection (the one the call then
 * takes: its page cache current, no other lock): 0 with *user (owned),
 * -EACCES for no such token, another -errno when it could not be read. */
int serve_grpc_warm_access(struct serve_grpc_warm *w, const char *token, char **user);
/* One call on the warm path by capability id (serve_grpc_mcp.c's):
 * GW_OUTCOME_NOT_WARM when it needs more (nothing ran nor was audited),
 * else the pipeline's outcome, result (res->json, owned) and error. */
struct cap_wait_hook;
struct serve_warm_call {
  const char *capability, *tool, *args, *user;
  size_t args_len;
  uint64_t deadline_ms; /* 0: serve's */
  const char *session_id, *thread_id;
  struct cap_cancel *cancel;     /* fired: the call on the instance cancelled; NULL: none */
  struct cap_wait_hook *wait;    /* run before a long wait (gw_call.wait); NULL: none */
  struct gw_audit_later **later; /* gw_call.audit_later; NULL: appended before the answer */
};
struct gw_result;
enum gw_outcome serve_grpc_warm_run(struct serve_grpc_warm *w, const struct serve_warm_call *in,
                                    struct gw_result *res, struct cap_error *err);
/* Closes the idle state connections (the audit mark's last batch made
 * durable), at the gRPC process's exit. */
void serve_grpc_warm_close_states(struct serve_grpc_warm *w);
/* Once a warm call's answer went (or did not): the leases its call
 * parked are ended and the next asked (gw_channels_flush). */
void serve_grpc_warm_flush(struct serve_grpc_warm *w);
/* Closes idle state connections beyond keep (a burst's, once its workers
 * have ended). */
void serve_grpc_warm_trim_states(struct serve_grpc_warm *w, size_t keep);

/* serve_http.c, in the module capsule-serve-http.so (libmicrohttpd),
 * opened by serve_http_load.c on the first serve_http_start. The module
 * holds its own copies of the libraries libcapsule links statically
 * (SQLite, libsodium), never initialised: it reaches the state and the
 * queue only through these hooks, into the executable's copies. */
struct ui_request;
struct ui_response;
struct serve_hooks {
  void (*enqueue)(struct serve *sv, struct inbound *in);
  char *(*authenticate)(struct serve *sv, const char *token);
  bool (*stopping)(struct serve *sv);
  /* the dashboard (ui.c in the module, ui_pages.c here) */
  int (*ui_login)(struct serve *sv, const char *token, char **user);
  void (*ui_page)(struct serve *sv, const struct ui_request *rq, struct ui_response *out);
  void (*ui_pulse)(struct serve *sv, uint64_t out[2]);
  uint64_t (*ui_wait)(struct serve *sv, uint64_t seen, int timeout_ms);
  void (*ui_bound)(struct serve *sv, const char *addr);   /* the address listened on */
  void (*http_bound)(struct serve *sv, const char *addr); /* --mcp-http's, its port the one bound */
  void (*ui_log)(struct serve *sv, const char *msg, const char *user);
  /* signed-in sessions kept in the state, shared by every serve on it
   * (ui_store.c, gateway/ui_session.h): save a new one; load one this
   * process does not hold (1 found, with *age_ms since it began; 0 not);
   * whether it still stands (not signed out elsewhere, not ended, and
   * token still an operator's: one statement); forget */
  void (*ui_sess_save)(struct serve *sv, const char *id, const char *csrf, const char *key,
                       const char *user, const char *token);
  int (*ui_sess_load)(struct serve *sv, const char *id, char csrf[65], char key[65], char **user,
                      char **token, uint64_t *age_ms);
  bool (*ui_sess_alive)(struct serve *sv, const char *id, const char *token);
  void (*ui_sess_forget)(struct serve *sv, const char *id);
  /* A tools/call on session answered on this thread when it can be
   * (serve_fast.c, mcp.h's fast path): true with *answer (allocated; NULL:
   * cancelled, no answer); false: enqueue it */
  bool (*fast_call)(struct serve *sv, const char *session, const char *user, const char *body,
                    size_t len, char **answer);
};
struct serve_http;
int serve_http_start(struct serve *sv, const struct serve_hooks *hooks,
                     const struct serve_options *opt, struct serve_http **ret,
                     struct cap_error *err);
void serve_http_quiesce(struct serve_http *h);
void serve_http_stop(struct serve_http *h);

#define SERVE_HTTP_MODULE_NAME "capsule-serve-http.so"
#define SERVE_HTTP_MODULE_SYMBOL "serve_http_module_v1"
struct serve_ui;
int serve_ui_start(struct serve *sv, const struct serve_hooks *hooks,
                   const struct serve_options *opt, struct serve_ui **ret, struct cap_error *err);
void serve_ui_quiesce(struct serve_ui *u);
void serve_ui_stop(struct serve_ui *u);

struct serve_http_module {
  size_t size;
  int (*ui_start)(struct serve *sv, const struct serve_hooks *hooks,
                  const struct serve_options *opt, struct serve_ui **ret, struct cap_error *err);
  void (*ui_quiesce)(struct serve_ui *u);
  void (*ui_stop)(struct serve_ui *u);
  int (*start)(struct serve *sv, const struct serve_hooks *hooks, const struct serve_options *opt,
               struct serve_http **ret, struct cap_error *err);
  void (*quiesce)(struct serve_http *h);
  void (*stop)(struct serve_http *h);
};

#endif
