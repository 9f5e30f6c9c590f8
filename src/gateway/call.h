/* One tool call through the whole pipeline: resolve the capability and
 * tool, decide by policy (per-user override > operator default > the
 * manifest's recommendation > block; `ask` prompts on the terminal or
 * leaves a pending approval, gateway/approval.h), validate the arguments
 * against the compiled schema, resolve credentials (user scope over
 * system), run the tool in its sandbox with a deadline and an output cap,
 * and audit exactly one record.
 * Each step is a named function in call.c (resolve, policy, validate,
 * credentials, run, audit). Runtimes: Covenant agents (one JSON line in,
 * one out, runtime/covenant.h), Talos functions (the module's export
 * called through a Node shim, runtime/talos.h) and Selu gRPC servers (warm
 * instances, gateway/selu.h). */
#ifndef CAPSULE_GATEWAY_CALL_H
#define CAPSULE_GATEWAY_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/cancel.h"
#include "core/wait_hook.h"
#include "gateway/registry.h"
#include "gateway/state.h"

#define GW_DEFAULT_DEADLINE_MS 120000
#define GW_DEFAULT_OUTPUT_CAP (16u << 20)

/* A state connection shared with other threads (capsule serve's): gw_call
 * holds the lock while it uses the state, and lets it go while a warm
 * server answers (gw_call.warm_only), so the connection stays one. */
struct gw_state_lock {
  void (*acquire)(void *ctx);
  void (*release)(void *ctx);
  void *ctx;
};

/* The human's answer to `ask`, obtained by a front door before the call
 * (MCP elicitation, front/mcp.h): it stands for the terminal's prompt. */
enum gw_answer { GW_ANSWER_NONE, GW_ANSWER_YES, GW_ANSWER_NO };

struct proxy_egress_sink;

struct gw_call {
  const char *capability, *tool;
  const char *args; /* the arguments as JSON text */
  size_t args_len;
  const char *user; /* who calls */
  uint64_t deadline_ms;
  size_t output_cap;
  bool may_prompt;          /* ask on the controlling terminal when policy says ask */
  enum gw_answer answer;    /* already asked through the client; GW_ANSWER_NONE: not */
  int64_t approval_ttl_ms;  /* a new approval's life; 0: GW_APPROVAL_TTL_MS_DEFAULT */
  int64_t approval_wait_ms; /* a pending approval: wait this long for its decision; 0: none */
  const char *log_dir;      /* the tools' stderr goes to LOG_DIR/<capability>.log */
  const char *run_dir;      /* warm instances' sockets (Selu) */
  const char *cache_dir;    /* discovered tools (Selu tool_source: dynamic) */
  const char *session_id;   /* the agent's session, passed to Selu; NULL: one per call */
  const char *thread_id;    /* the conversation thread in the session (Selu's thread_id), or NULL */
  const char *volumes_dir;  /* Selu workspaces and caches (gateway/volumes.h) */
  const char *image_dir;    /* the image store (image/image.h) Selu images run from */
  /* Selu artifacts (the orchestrator's contract): files uploaded into the
   * arguments' "attachments", and where the result's artifacts are saved
   * (NULL: left in the capability) */
  const char *const *attach;
  size_t n_attach;
  const char *artifacts_dir;
  /* serve --grpc's artifact store (gateway/artifact_store.h), or NULL: the
   * arguments' "attachments" that name its artifacts (the user's) are
   * uploaded to a Selu capability speaking the orchestrator's contract
   * (any other capability refuses the call), and the result's artifacts
   * are downloaded into it, named by the store's ids */
  const char *artifact_store;
  const char *const *hidden; /* masked in every sandbox: capsule's state (gw_state_private_paths) */
  size_t n_hidden;
  /* sandbox_options.id_base: set by gw_call itself (as root, the
   * capability's own host ids, gw_state_id_range); callers leave it 0 */
  uint32_t id_base;
  /* a Covenant agent's issuer: its capability tokens must hold the agent's
   * required actions (gateway/tokens.h), and the agent reads it in its
   * request line; NULL: the local issuer key as "USER@local" (every front
   * door: call, MCP, serve, gRPC), `dispatch --issuer` names another */
  const struct gw_issuer *issuer;
  /* set by gw_call itself: where a Covenant run leaves the CPU ms its
   * sandbox used (its budget is spent by them, gateway/budget.h) */
  uint64_t *cpu_ms;
  /* set by gw_call itself: where the call's egress proxy reports its
   * decisions (net/proxy.h), stored with the call's audit record
   * (gateway/egress_store.h); runtimes pass it as proxy_options.sink */
  const struct proxy_egress_sink *egress_sink;
  /* set by gw_call itself for a capability with warm servers (Selu, MCP)
   * on a call that may start one (not selu_warm_only): the count of its
   * revokes (gateway/instance.h, gw_grants_epoch), read before the call's
   * first state read; a keeper starts only while it is unchanged, and
   * checks it again once its status is out */
  bool grants_epoch_read;
  uint64_t grants_epoch;
  /* A third-party MCP server's messages to its client relayed through a
   * front door (struct gw_mcp_relay); NULL: its requests are refused and
   * its notifications dropped. */
  struct gw_mcp_relay *relay;
  /* Not a tool call but one MCP request to the capability's server
   * (resources/read, prompts/get...): the method, with args as its
   * params; the tool is not looked up, no policy applies (the capability
   * is served), and the audit record names the method as the tool. */
  const char *mcp_method;
  /* What this host cannot enforce of the capability's limits (a Selu
   * workspace's bound held as a check, not a quota), told to warn (the
   * library never prints): text for the operator; NULL: not told. */
  void (*warn)(void *ctx, const char *text);
  void *warn_ctx;
  /* Only what serve --grpc's warm path may do (a process that must never
   * fork a child that speaks gRPC): a Selu
   * tool on an instance already running, policy allow. Anything else (no
   * instance yet, policy ask, a dynamic tool not yet discovered, another
   * runtime) ends the call with GW_OUTCOME_NOT_WARM before anything ran
   * or was decided, and without an audit record: the caller runs it again
   * without warm_only, in a process of its own. */
  bool selu_warm_only;
  /* Selu: gRPC channels kept between calls (gateway/selu.h), or NULL: a
   * new connection and channel per call */
  struct gw_channels *channels;
  /* NULL: the state is the caller's alone; else taken around its use */
  const struct gw_state_lock *state_lock;
  /* state_lock is held on entry (the caller took it for its own checks
   * just before): not taken again, one hand-over fewer; let go as ever */
  bool state_held;
  /* at_end(at_end_ctx) under state_lock (when there is one), after the call's record,
   * before it is let go (serve's fast path's own bookkeeping: no second
   * taking of the lock); NULL: none */
  void (*at_end)(void *ctx);
  void *at_end_ctx;
  /* Set (serve --grpc's warm path), a call that succeeded, with no
   * egress decisions to store and no at_end, has its record written into
   * its in-flight marker (gw_inflight_answered) and handed here instead
   * of appended: the caller answers, then gw_audit_later_commit. NULL, or
   * *audit_later left NULL: the record was appended before return. */
  struct gw_audit_later **audit_later;
  /* The call runs in a long-lived process's thread (serve's warm path):
   * only a warm server may answer it (a third-party MCP server's
   * keeper, gateway/mcp_keeper.c); no sandbox is started for the call
   * alone, which would need a process of its own. */
  bool warm_only;
  /* The same thread, for a tool run in a fresh sandbox per call (a
   * Covenant agent, a Selu server): the run step in a child process of
   * its own (gw_run_apart), the rest here, on this state connection;
   * *run_pid holds that child's pid while it runs (0 otherwise), for the
   * caller to stop it with SIGTERM. */
  bool run_apart;
  pid_t *run_pid;
  /* Selu: fired by another thread, the call on the instance is cancelled
   * (the server told) and audited as failed, cancelled by the client;
   * any other call whose run fails once it fired (its caller stopped it)
   * is audited as cancelled by the client too; NULL: not cancellable
   * (core/cancel.h) */
  struct cap_cancel *cancel;
  /* Selu: run once before the call may wait long (a lease not granted at
   * once, an instance not answering within CAP_WAIT_SOON_US, artifacts
   * moved): serve --grpc's thread hands over taking new calls then
   * (core/wait_hook.h); NULL: nothing */
  struct cap_wait_hook *wait;
};

/* What a front door's MCP client and a third-party MCP server exchange
 * besides the call (runtime/mcp_client.c): one stream socket carries, as
 * lines, the server's notifications and requests out and the client's
 * answers (and notifications/cancelled) in. */
struct gw_mcp_relay {
  int fd;
  const char *client_caps;    /* JSON object the server is told the client offers; NULL: {} */
  const char *progress_token; /* JSON, passed in the call's _meta; NULL: none */
  const char *log_level;      /* logging/setLevel sent to a server offering logging; NULL: none */
  /* out (owned by the caller): the server's result or error object as it
   * sent it; withheld (NULL) when the call could not be audited */
  char *raw_result, *raw_error;
  /* in: keep the warm server's connection when the request succeeds
   * (resources/subscribe), made a watcher's (gateway/mcp_keeper.c); out:
   * watching set, watch_fd is it (the caller owns it) */
  bool want_watch, watching;
  int watch_fd;
  /* fd -1: the server's messages are not relayed (its requests refused,
   * its notifications dropped); then with cancellable, cancel_fd readable
   * (or closed) stops the call as a cancellation */
  bool cancellable;
  int cancel_fd;
};

struct gw_issuer {
  unsigned char pubkey[32];
  const char *display; /* "LOGIN@local" */
  bool local;          /* the state's own issuer key (`capsule token issue local ...`) */
};

struct gw_result {
  char *json;               /* the tool's JSON result; owned */
  bool terminal_on_success; /* the tool says: end the agent's tool loop here */
};

/* What became of a call (or of one of its steps). Only src/cli turns
 * outcomes into exit codes; err says why when not GW_OUTCOME_OK. */
enum gw_outcome {
  GW_OUTCOME_OK = 0,
  GW_OUTCOME_FAILED,              /* invalid input, or the tool failed */
  GW_OUTCOME_HOST_CANNOT_ENFORCE, /* this host cannot run it as the manifest requires */
  GW_OUTCOME_DENIED,              /* blocked by policy, or its approval was denied */
  GW_OUTCOME_AWAITING_APPROVAL,   /* policy asks first, and an approval is pending */
  GW_OUTCOME_KILLED_BY_LIMIT,     /* the tool was stopped by a limit (wall clock, ...) */
  GW_OUTCOME_NOT_WARM, /* gw_call.warm_only and the call needs more: nothing ran, nothing audited */
};

/* One call: *res is set on GW_OUTCOME_OK. */
enum gw_outcome gw_call(const struct gw_call *call, const struct gw_registry *reg,
                        struct gw_state *st, struct gw_result *res, struct cap_error *err);

/* Whether a run apart (gw_call.run_apart) can carry spec's runtime: a
 * Covenant agent, a Selu server, a Talos function without OAuth. */
bool gw_runs_apart(const struct cap_spec *spec);

/* One run step, for gw_run_apart: *out (allocated) on GW_OUTCOME_OK. */
typedef enum gw_outcome (*gw_run_fn)(void *arg, char **out, struct cap_error *err);
/* fn(arg) in a child process forked now (call->state_lock held, let go
 * while it runs); what it produced (its outcome, error, *out, the relay's
 * raw answer, *call->cpu_ms) carried back. gateway/call_apart.c. */
enum gw_outcome gw_run_apart(const struct gw_call *call, gw_run_fn fn, void *arg, char **out,
                             struct cap_error *err);

/* The path of the capability's stderr log in log_dir (made 0700 when
 * missing), rotated first when it has grown past its bound (the smaller of
 * 8 MiB and the capability's disk limit): <id>.log.1 keeps the one before.
 * NULL without a log_dir. The caller frees it. */
char *gw_tool_log_prepare(const char *log_dir, const struct cap_spec *spec);
/* What one run may append to that log (sandbox_options.log_max_bytes): the
 * same bound, so a log stays within twice it. */
uint64_t gw_tool_log_bound(const struct cap_spec *spec);

/* A random (version 4) UUID, as text. */
void gw_uuid4(char out[37]);

/* The effective policy and where it came from ("user", "operator", or the
 * tool's policy_source). */
int gw_effective_policy(struct gw_state *st, const char *cap, const struct cap_tool *tool,
                        const char *user, enum cap_policy *policy, const char **source,
                        struct cap_error *err);

/* A call's record left for after its answer (gw_call.audit_later): the
 * record and its marker (gateway/audit_later.c). gw_audit_later_take
 * writes rec into the marker m (gw_inflight_answered) and takes both
 * (m left ended, {.fd = -1}), or returns NULL having changed nothing.
 * gw_audit_later_commit appends the record on st as any call's (its
 * marker spoilt at the COMMIT, then parked) and frees l; on an error, or
 * with no st, the marker keeps the record for the next gw_state_open
 * (unless it was committed), and gw_audit_later_take gives nothing until
 * gw_audit_later_resume. */
struct gw_audit_later;
struct gw_audit_later *gw_audit_later_take(const struct gw_audit_record *rec,
                                           struct gw_inflight *m);
int gw_audit_later_commit(struct gw_audit_later *l, struct gw_state *st, struct cap_error *err);
/* An append before the answer succeeded: records may go after answers
 * again (after a gw_audit_later_commit that failed, they do not). */
void gw_audit_later_resume(void);

#endif
