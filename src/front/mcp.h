/* MCP (the Model Context Protocol) in front of the call pipeline: a
 * JSON-RPC 2.0 dispatcher that knows no transport. A transport (stdio in
 * `capsule mcp`, Streamable HTTP later) hands it one message at a time
 * (mcp_session_receive) and gets zero or more messages back through
 * io->send; a tool call runs in a child process (gw_call, the one
 * pipeline), so the transport also polls the session's descriptors
 * (mcp_session_poll / mcp_session_events) to learn when calls end, to send
 * progress, and to let notifications/cancelled stop a run.
 *
 * Revisions: 2025-06-18 and 2025-11-25 (initialize, sessions). Methods:
 * initialize, ping, tools/list, tools/call, logging/setLevel;
 * notifications/initialized and notifications/cancelled; answers to our
 * elicitation/create (policy ask, when the client declared elicitation)
 * and to the requests of third-party MCP servers relayed to the client
 * (front/mcp_relay.c), which also serves resources, prompts and
 * completion with --capability naming such a server, and subscriptions
 * to its resources (front/mcp_subscribe.c: their updates are sent
 * outside any request, for_id NULL). Tool names: CAPABILITY__TOOL from
 * a table (front/mcp_tools.c), or the tools' own names with one capability.
 *
 * Ownership: the session borrows cfg (and everything it points to) for
 * its whole life. Not thread-safe: one thread drives a session. */
#ifndef CAPSULE_FRONT_MCP_H
#define CAPSULE_FRONT_MCP_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gateway/call.h"
#include "gateway/ready_memo.h"
#include "gateway/registry.h"
#include "gateway/state.h"

#define MCP_MAX_MESSAGE (4u << 20) /* a larger message is refused */
#define MCP_MAX_RUNNING 16         /* tool calls in flight per session */
#define MCP_PAGE_SIZE 100          /* tools per tools/list page */

struct mcp_config {
  const struct gw_registry *reg;
  struct gw_state *st;        /* for policies (tools/list); NULL: the manifests' own */
  const char *state_dir;      /* each call's child opens its own state here */
  const char *only;           /* --capability: serve this one with its tools' own names */
  struct gw_call base;        /* user, deadline, dirs, hidden paths: every call starts as this */
  size_t page_size;           /* 0: MCP_PAGE_SIZE */
  bool skip_readiness;        /* list every tool without the readiness dry run (fuzzing) */
  const char *server_version; /* serverInfo.version */
  bool list_changed;          /* the transport carries notifications/tools/list_changed */
  bool local_methods;         /* capsule/call is offered (serve's unix socket: the CLI) */
  pid_t peer_pid;             /* serve's unix socket: the peer's pid (SO_PEERCRED); else 0 */
  const char *operator_key;   /* serve's unix socket: capsule/approve's key (STATE/serve.key) */
  /* The warm path (serve): with base.state_lock set, st shared with other
   * threads and these two given, a call a warm server answers runs the
   * pipeline in a thread of this process on st, not in a child; the
   * registry it started with is held (reg_hold: a token for reg_release)
   * until it ends. Called on the session's thread only. */
  void *(*reg_hold)(void *ctx);
  void (*reg_release)(void *ctx, void *held);
  void *reg_ctx;
  /* serve: a call (or relayed request) in flight counted against its
   * user's across every session (run_take false: refused as too many),
   * and given back when it ends; NULL: only the session's own bound */
  bool (*run_take)(void *ctx, const char *user);
  void (*run_give)(void *ctx, const char *user);
  void *run_ctx;
  /* `capsule mcp`: the warm path for the calls that run apart only; a
   * third-party MCP server's call keeps a child of its own */
  bool no_warm_relay;
  /* serve and `capsule mcp`: a Selu call that runs apart is first
   * offered here (a warm instance answering in the warm Selu process of
   * front/serve.h, no fork);
   * GW_OUTCOME_NOT_WARM: nothing ran, it runs apart. cancel_fd readable
   * (its peer shut for writing, or closed) cancels the call; -1: none.
   * NULL: none. */
  enum gw_outcome (*selu_warm)(void *ctx, const struct gw_registry *reg, const struct gw_call *call,
                               int cancel_fd, struct gw_result *res, struct cap_error *err);
  void *selu_warm_ctx;
  /* reg's readiness remembered (serve: a session's tool table is built
   * per sessionless request); NULL: a dry run per capability per table */
  struct gw_ready_memo *ready_memo;
};

struct mcp_io {
  /* One whole JSON-RPC message (no newline); the transport frames it.
   * for_id: the id (JSON text) of the request it belongs to (its answer,
   * or progress and elicitation while it runs), NULL for none; final: it
   * is that request's answer, the last message for it. json NULL (with
   * final): the request ends without an answer (it was cancelled). */
  void (*send)(void *ctx, const char *for_id, bool final, const char *json, size_t len);
  void *ctx;
  /* May be NULL. The request id_json that the session with io ctx from
   * received goes on in this one (ctx): its messages and its answer go
   * through this io from now on (2026-07-28: the retry of a call held for
   * the client's input in another sessionless session); false when the
   * transport cannot move it there. */
  bool (*adopt)(void *ctx, void *from, const char *id_json);
};

struct mcp_session;

struct mcp_session *mcp_session_new(const struct mcp_config *cfg, const struct mcp_io *io);
/* Stops every running call (SIGTERM, then SIGKILL) and frees. NULL is fine. */
void mcp_session_free(struct mcp_session *s);

/* One message from the client: a request, a notification, or an answer to
 * one of ours. Anything malformed gets its JSON-RPC error through io. */
void mcp_session_receive(struct mcp_session *s, const char *msg, size_t len);

/* The descriptors to watch (at most max) and how long to wait at most
 * (*timeout_ms, -1: no deadline) before calling mcp_session_events. */
size_t mcp_session_poll(struct mcp_session *s, struct pollfd *fds, size_t max, int *timeout_ms);
/* After poll: reads what ended, sends results and progress. */
void mcp_session_events(struct mcp_session *s, const struct pollfd *fds, size_t n);
/* The registry was replaced (the caller changed cfg->reg): the tool table
 * is built anew on its next use, and an initialized session is sent
 * notifications/tools/list_changed when cfg->list_changed. Calls in
 * flight keep running: they hold copies of their names. */
void mcp_session_registry_changed(struct mcp_session *s);
/* Stops the call that request id_json (JSON text) made, as
 * notifications/cancelled does; only_waiting: only while it waits for the
 * client's answer to an elicitation (its stream is gone: nothing can
 * answer it). */
void mcp_session_cancel(struct mcp_session *s, const char *id_json, bool only_waiting);
/* subscriptions/listen streams open (mcp_listen.c), which keep a
 * sessionless session alive; at a stop, each is answered (the revision's
 * graceful end) and closed. */
size_t mcp_session_listening(const struct mcp_session *s);
void mcp_session_listens_end(struct mcp_session *s);
/* Whether initialize succeeded. */
bool mcp_session_initialized(const struct mcp_session *s);

/* The 2026-07-28 Streamable HTTP's standard headers (NULL: absent) */
struct mcp_http_headers {
  const char *version; /* MCP-Protocol-Version */
  const char *method;  /* Mcp-Method */
  const char *name;    /* Mcp-Name, perhaps "=?base64?...?=" */
};
/* Whether the dispatcher has a request method of that name (over HTTP a
 * 2026-07-28 request for another one is 404, as its transport says) */
bool mcp_method_known(const char *name);
struct cap_node;
/* Whether h agrees with msg (the parsed body) as the revision requires
 * of a 2026-07-28 message (its _meta or MCP-Protocol-Version names it;
 * any other passes): false with *why (the caller frees it), the text of
 * the HeaderMismatch error (-32020, HTTP 400). mcp_headers.c */
bool mcp_headers_match(const struct cap_node *msg, const struct mcp_http_headers *h, char **why);
/* Calls still running, or waiting for the client's answer. */
size_t mcp_session_busy(const struct mcp_session *s);

/* serve's fast path: a tools/call a warm MCP server answers, run on the
 * thread that received it rather than through the session's loop, the
 * same pipeline (policy, validation, credentials, the warm server, the
 * audit record) and the same answer. take, on the session's thread (its
 * lock held): the call, when the session's path would run it so and
 * nothing could come before its answer (a warm third-party MCP server's
 * tool, no progress token, a client that declared no sampling,
 * elicitation or roots and set no log level, not the 2026-07-28 form);
 * NULL: the message goes the usual way. run, on any thread, without the
 * session (which may end meanwhile), called with the session's state
 * lock still held from take (one hand-over fewer), which it lets go,
 * at_end(ctx) called under it once the call is recorded (the registry's
 * hold let go by then: mcp_fast_end_hold): *answer the JSON-RPC answer
 * (allocated), NULL when cancel_fd turned readable (a cancellation: no
 * answer; *quiet true once the pipeline ends, set by at_end: nothing can
 * have signalled cancel_fd, which is then not polled). free, on any
 * thread once at_end ran. */
struct mcp_fast;
/* parse, first and without the lock: the message's name, id and
 * arguments when it is a tools/call the fast path could take (NULL
 * else), for take, which leaves it to msg_free (NULL-safe). */
struct mcp_fast_msg;
struct mcp_fast_msg *mcp_fast_parse(const char *msg, size_t len);
void mcp_fast_msg_free(struct mcp_fast_msg *m);
struct mcp_fast *mcp_fast_take(struct mcp_session *s, struct mcp_fast_msg *m);
void mcp_fast_run(struct mcp_fast *f, int cancel_fd, const bool *quiet, void (*at_end)(void *ctx),
                  void *ctx, char **answer);
/* In at_end (the state lock held): the registry's hold let go */
void mcp_fast_end_hold(struct mcp_fast *f);
void mcp_fast_free(struct mcp_fast *f);
/* The call's request id (JSON text), until run */
const char *mcp_fast_id(const struct mcp_fast *f);

#endif
