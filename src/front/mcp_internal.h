/* What the MCP dispatcher's files share (mcp.c: JSON-RPC and the
 * lifecycle; mcp_tools.c: the name table and tools/list; mcp_call.c:
 * tools/call, elicitation, the calls' child processes). */
#ifndef CAPSULE_FRONT_MCP_INTERNAL_H
#define CAPSULE_FRONT_MCP_INTERNAL_H

#include <pthread.h>
#include <regex.h>
#include <sys/types.h>

#include "core/buf.h"
#include "core/json.h"
#include "front/mcp.h"
#include "gateway/selu.h"

/* JSON-RPC and MCP error codes */
enum {
  MCP_PARSE_ERROR = -32700,
  MCP_INVALID_REQUEST = -32600,
  MCP_METHOD_NOT_FOUND = -32601,
  MCP_INVALID_PARAMS = -32602,
  MCP_INTERNAL_ERROR = -32603,
  MCP_UNSUPPORTED_VERSION = -32022, /* 2026-07-28: UnsupportedProtocolVersionError */
  MCP_HEADER_MISMATCH = -32020,     /* 2026-07-28: HeaderMismatchError (HTTP 400) */
};

/* The sessionless revision: each request names it in its _meta */
#define MCP_MODERN "2026-07-28"
#define MCP_META_VERSION "io.modelcontextprotocol/protocolVersion"
#define MCP_META_CLIENT_CAPS "io.modelcontextprotocol/clientCapabilities"
/* serve's unix socket: STATE/serve.key, presented in an initialize's (or a
 * 2026 request's) params._meta, makes the client's elicitation answers
 * count (docs/serve.md) */
#define MCP_META_KEY "dev.capsule/key"

/* One MCP tool: where its name leads. */
struct mcp_tool {
  char *name; /* as MCP lists it */
  const struct cap_spec *spec;
  const struct cap_tool *tool;
};

struct mcp_table {
  struct mcp_tool *v; /* in listing order: capabilities by id, tools as declared */
  size_t n;
  struct gw_tools *dynamic; /* per capability: a dynamic one's cached tools */
  size_t n_dynamic;
  bool built;
};

#define MCP_KILL_GRACE_MS 5000     /* a stopped run's grace before SIGKILL */
#define MCP_PROGRESS_EVERY_MS 1000 /* a run with a progress token: a notification this often */
#define MCP_MAX_ASKED 8            /* a server's requests to the client in flight per call */
#define MCP_ASK_TTL_MS 600000      /* a 2026-07-28 input_required's requestState: its life */
#define MCP_MAX_ROUTES 4096        /* prompts and resources of servers routed per session */
#define MCP_MAX_TEMPLATES 256   /* a server's resource templates compiled (the rest fit nothing) */
#define MCP_HOLD_MS 120000      /* a call held for the client's input: its deadline (mcp_hold.c) */
#define MCP_MAX_HELD_PER_USER 8 /* calls of a user held for input at once */
#define MCP_MAX_HELD 256        /* ...and of every user */

/* Where a prompt (CAPABILITY__NAME), a resource (its URI) or a resource
 * template (its uriTemplate) of a third-party MCP server leads
 * (mcp_gather.c) */
enum mcp_route_kind { MCP_ROUTE_RESOURCE, MCP_ROUTE_PROMPT, MCP_ROUTE_TEMPLATE };
struct mcp_route {
  enum mcp_route_kind kind;
  char *key, *cap, *orig; /* orig: the prompt's own name; NULL for the others */
  regex_t *rx;            /* a template's URIs (mcp_template.c); NULL for the others */
};
#define MCP_GATHER_PAGES 32        /* pages of one server's list gathered */
#define MCP_MAX_RELAYED (4u << 20) /* bytes of a server's messages relayed per call */

/* A request a third-party MCP server made of the client, relayed: our id
 * for it, and the server's (JSON text) */
struct mcp_asked {
  int64_t ours;
  char *theirs;
  /* 2026-07-28 (mcp_hold.c): the request as an input request
   * ({"method":...,"params":...}), until the client's retry answers it */
  char *request;
  bool sent; /* named in an input_required already sent */
};

/* Where a run's pipeline runs (mcp_call.c, where_to_run) */
enum run_where {
  RUN_CHILD, /* a child process, which opens its own state */
  RUN_WARM,  /* a thread of this process; a warm server answers */
  RUN_APART, /* a thread of this process; the run step alone in a child (gw_run_apart) */
};

struct mcp_job; /* what a run's pipeline reads (mcp_run.c) */

/* A call in flight: a child process (or, on the warm path, a thread)
 * running gw_call, or one waiting for the client's answer to our
 * elicitation. */
struct mcp_run {
  /* counted against its user's calls in flight (mcp_config.run_take):
   * given back at its drop, whichever session drops it */
  void (*run_give)(void *ctx, const char *user);
  void *run_ctx;
  char *run_user;
  const char *method;   /* NULL: tools/call; else an MCP request relayed to the server (static) */
  bool gather;          /* method runs on every MCP-server capability (mcp_gather.c) */
  bool relayed;         /* the capability is an MCP server: its messages are relayed */
  bool cli;             /* capsule/call: answered with the pipeline's report */
  size_t relayed_bytes; /* of the server's messages so far (MCP_MAX_RELAYED) */
  uint64_t deadline_ms; /* the call's own deadline; 0: the session's */
  struct mcp_asked asked[MCP_MAX_ASKED];
  struct cap_buf line; /* what the child sent past its last full line */
  char *report;        /* the child's last line: {"outcome": ...} */
  char *id_json;       /* the request's id, as JSON text */
  char *token_json;    /* progressToken as JSON text, or NULL */
  char *cap, *tool;    /* capsule's names */
  char *args;          /* the arguments, JSON text */
  int64_t elicit_id;   /* our elicitation/create request's id; 0 when none */
  pid_t pid;           /* the child, or 0 */
  bool threaded;       /* a thread of this process runs it (RUN_WARM, RUN_APART) */
  bool tool_known;     /* the tool was found (in the name table, or a capability's) */
  pid_t run_pid;       /* RUN_APART: the run step's child while it runs (atomic), else 0 */
  bool term_sent;      /* RUN_APART cancelled: SIGTERM reached its run step's child */
  bool cancel_told;    /* RUN_APART cancelled: fd shut for writing (a warm Selu call's signal) */
  pthread_t thread;
  struct mcp_job *job; /* what the thread reads (owned; freed once it is joined) */
  int fd;              /* the child's report; -1 */
  uint64_t started_ms; /* monotonic */
  uint64_t next_progress_ms;
  uint64_t kill_at_ms; /* cancelled: SIGKILL at this time when still alive; 0 */
  int64_t progress;
  bool cancelled;
  bool modern;          /* asked in the 2026-07-28 form */
  bool want_watch;      /* resources/subscribe: keep the warm server's connection */
  bool for_listen;      /* a step of a subscriptions/listen (mcp_listen.c): its answer not sent */
  int64_t listen_token; /* ...of the listen with this token (not one opened anew with its id) */
  int watch_fd;         /* that connection, handed back with the report; -1 */
  /* 2026-07-28: what the request's _meta declares a relayed server may
   * ask for (mcp_hold.c), as a capabilities object, and its parts */
  char *client_caps;
  bool offers_sampling, offers_elicitation, offers_roots;
  bool held;           /* answered input_required: waits for the client's retry */
  uint64_t hold_until; /* monotonic: then cancelled */
  char hold_nonce[33]; /* its requestState's, in the held table */
  bool ended;          /* its report came while held (the retry gets it) */
  int end_status;
};

#define MCP_MAX_SUBSCRIPTIONS 64 /* resources subscribed per session */
#define MCP_MAX_WATCHES 8        /* servers watched per session */

/* A resource the client subscribed to (mcp_subscribe.c) */
struct mcp_subscription {
  char *cap, *uri; /* uri "": no resource, the server's lists (a listen's) */
  char *listen;    /* the subscriptions/listen's id (JSON) it is for; NULL: resources/subscribe's */
};

/* A connection to a warm server's keeper kept for what it says between
 * calls (notifications/resources/updated...) */
struct mcp_watch {
  char *cap;
  int fd;
  struct cap_buf in;
};

#define MCP_MAX_LISTENS 8 /* subscriptions/listen streams open per session */

/* A subscriptions/listen request open (mcp_listen.c) */
#define MCP_MAX_LISTEN_URIS 16 /* resourceSubscriptions taken per listen */

struct mcp_listen {
  char *id_json;                   /* its id, the subscription's; NULL: a free slot */
  bool tools;                      /* toolsListChanged honoured */
  bool prompts, resources;         /* promptsListChanged, resourcesListChanged asked */
  bool acked;                      /* the acknowledgement sent: notifications may follow */
  int64_t token;                   /* this listen's, among those of its id (its steps carry it) */
  bool lists_tried;                /* the served server watched for its lists' changes */
  char *uris[MCP_MAX_LISTEN_URIS]; /* resourceSubscriptions asked */
  size_t n_uris, next;             /* ...and the next to subscribe to on its server */
};

struct mcp_session {
  const struct mcp_config *cfg;
  struct mcp_io io;
  bool initialized;
  const char *version; /* the negotiated revision */
  bool client_elicits; /* the client declared elicitation (form) */
  bool req_elicits;    /* the 2026-07-28 request being answered declares it in its _meta */
  /* what the client declared that a relayed server may ask for, as a
   * capabilities object ({"sampling":{},"elicitation":{},"roots":{}}) */
  char *client_caps;
  bool client_samples, client_elicits_any, client_roots;
  char *log_level; /* logging/setLevel's level (JSON text), or NULL */
  bool modern;     /* the request being answered is 2026-07-28's: results carry resultType */
  bool offers_prompts,
      offers_resources; /* initialize declared them (a reload tells their change) */
  int64_t next_id;      /* our requests' ids */
  struct mcp_table table;
  struct mcp_run *runs[MCP_MAX_RUNNING];
  struct mcp_route *routes; /* from the last gathered lists */
  size_t n_routes;
  struct mcp_subscription subs[MCP_MAX_SUBSCRIPTIONS];
  struct mcp_watch watches[MCP_MAX_WATCHES];
  struct mcp_listen listens[MCP_MAX_LISTENS];
};

/* Sending */
/* for_id: the request the message belongs to (NULL: none); final: it is
 * that request's answer */
void mcp_send_buf(struct mcp_session *s, const char *for_id, bool final, struct cap_buf *b);
void mcp_send_error(struct mcp_session *s, const char *id_json, int code, const char *message,
                    const char *data_json);
/* {"jsonrpc":"2.0","id":ID,"result": ...: the caller writes the result
 * value and closes with mcp_result_end */
void mcp_result_begin(struct cap_jw *w, struct cap_buf *b, const char *id_json);
void mcp_result_end(struct mcp_session *s, const char *id_json, struct cap_jw *w,
                    struct cap_buf *b);

/* The name table (mcp_tools.c) */
void mcp_table_build(struct mcp_session *s);
void mcp_table_free(struct mcp_table *t);
const struct mcp_tool *mcp_table_find(const struct mcp_table *t, const char *name);
void mcp_tools_list(struct mcp_session *s, const char *id_json, const struct cap_node *params);

/* Calls (mcp_call.c) */
void mcp_tools_call(struct mcp_session *s, const char *id_json, const struct cap_node *params);
void mcp_capsule_call(struct mcp_session *s, const char *id_json, const struct cap_node *params);
/* capsule/approve (mcp_local.c): `capsule approve`/`deny` through serve */
void mcp_capsule_approve(struct mcp_session *s, const char *id_json, const struct cap_node *params);
/* capsule/list (mcp_local.c): `capsule list` through serve */
void mcp_capsule_list(struct mcp_session *s, const char *id_json, const struct cap_node *params);

/* Prompts (mcp_prompts.c): relayed to a served MCP server, else Talos
 * prompt.md files */
bool mcp_has_prompts(const struct mcp_session *s);
void mcp_prompts_list(struct mcp_session *s, const char *id_json, const struct cap_node *params);
void mcp_prompts_get(struct mcp_session *s, const char *id_json, const struct cap_node *params);
/* The served Talos plugins' prompts, as items of an open array */
void mcp_talos_prompts_write(const struct mcp_session *s, struct cap_jw *w);

/* One request on capability cap's MCP server (args: the params' JSON,
 * taken), as mcp_forward does for the served one */
void mcp_forward_to(struct mcp_session *s, const char *id_json, char *args, const char *method,
                    const char *cap);
/* Lists gathered from every MCP-server capability (mcp_gather.c) */
bool mcp_gather_wanted(const struct mcp_session *s);
void mcp_gather_start(struct mcp_session *s, const char *id_json, const char *method);
void mcp_gather_run(const struct mcp_session *s, struct gw_state *st, const struct gw_call *base,
                    const char *method, struct gw_mcp_relay *relay);
void mcp_gather_learn(struct mcp_session *s, const char *method, const char *result);
/* completion/complete to the server of params.ref (a gathered prompt,
 * template or resource); false: no route */
bool mcp_gather_complete(struct mcp_session *s, const char *id_json, const struct cap_node *params);
/* RFC 6570 templates' URIs (mcp_template.c): compiled (NULL: not a
 * template capsule reads), whether uri is one of them, freed; and the
 * three in one */
regex_t *mcp_template_compile(const char *tmpl);
bool mcp_template_fits(const regex_t *rx, const char *uri);
void mcp_template_free(regex_t *rx);
bool mcp_template_match(const char *tmpl, const char *uri);
bool mcp_gather_route(struct mcp_session *s, const char *id_json, const struct cap_node *params,
                      const char *method);
void mcp_routes_free(struct mcp_session *s);
/* The capability whose server the last resources/list says has uri;
 * NULL: none, or more than one */
const char *mcp_gather_listed(const struct mcp_session *s, const char *uri);
void mcp_call_answer(struct mcp_session *s, int64_t id, const struct cap_node *msg);
void mcp_call_cancel(struct mcp_session *s, const struct cap_node *params);
void mcp_runs_free(struct mcp_session *s);
/* Runs an MCP request other than tools/call (resources/read, prompts/get...)
 * on the served capability's MCP server, as a call (mcp_relay.c) */
void mcp_forward(struct mcp_session *s, const char *id_json, const struct cap_node *params,
                 const char *method);
struct mcp_run *mcp_run_new(struct mcp_session *s, const char *id_json, const char *cap);
/* A run of method on cap's MCP server (args taken), not started; NULL
 * (answered with an error) when the session has too many in flight */
struct mcp_run *mcp_relayed_run(struct mcp_session *s, const char *id, char *args,
                                const char *method, const char *cap);
/* Where the run's pipeline runs and its start (mcp_run.c) */
void mcp_run_start(struct mcp_session *s, struct mcp_run *r, enum gw_answer answer);
void mcp_job_free(struct mcp_job *j);
/* A cancelled RUN_APART run: SIGTERM to its run step's child, SIGKILL
 * MCP_KILL_GRACE_MS later (called again until then) */
void mcp_run_signal_apart(struct mcp_run *r, uint64_t now);
/* Every thread's run of the session stopped and joined (the state lock
 * let go meanwhile) */
void mcp_runs_stop_threads(struct mcp_session *s);
/* The run's report (r->report) as the request's answer, the run freed
 * (mcp_call.c) */
void mcp_run_finish(struct mcp_session *s, struct mcp_run *r, int status);
/* A report's fields as they are, not yet written as its JSON line: a
 * thread's run (serve's fast path) answers from them, not from its
 * report written and parsed again. NULL: absent (JSON null). */
struct mcp_report {
  bool has_outcome; /* false: a report without one (answered as a run that gave none) */
  enum gw_outcome outcome;
  const char *error, *result, *mcp_result, *mcp_error;
  bool terminal_on_success;
};
/* mcp_run_finish from the fields, the same answer (r->report unused,
 * r->cli false) */
void mcp_run_finish_fields(struct mcp_session *s, struct mcp_run *r, int status,
                           const struct mcp_report *rep);
/* Frees the run and its slot; a tool error as the request's answer */
void mcp_run_drop(struct mcp_session *s, struct mcp_run *r);
void mcp_send_tool_error(struct mcp_session *s, const char *id_json, const char *message);
/* The question policy `ask` puts to the human about run r (mcp_call.c) */
char *mcp_ask_text(const struct mcp_session *s, const struct mcp_run *r);
/* Policy `ask` on a 2026-07-28 tools/call: input_required, the call run
 * on its answer, or the approval queue (mcp_ask.c) */
void mcp_ask_modern(struct mcp_session *s, struct mcp_run *r, const struct cap_node *params);

/* The relay (mcp_relay.c): a line the call's child sent ({"relay": MSG}, owned); the client's
 * answer to a relayed request (true when it was one); the served
 * capability when it is an MCP server (NULL otherwise) */
void mcp_relay_line(struct mcp_session *s, struct mcp_run *r, char *line);
bool mcp_relay_answer(struct mcp_session *s, int64_t id, const struct cap_node *msg);
void mcp_relay_cancel(struct mcp_run *r);
const struct cap_spec *mcp_served_server(const struct mcp_session *s);
void mcp_run_free_asked(struct mcp_run *r);

/* Subscriptions (mcp_subscribe.c): resources/subscribe relayed to the
 * server, whose warm connection the session then keeps (a watcher's);
 * resources/unsubscribe; what the watchers bring, to the client */
void mcp_resources_subscribe(struct mcp_session *s, const char *id, const struct cap_node *params);
void mcp_resources_unsubscribe(struct mcp_session *s, const char *id,
                               const struct cap_node *params);
void mcp_watch_subscribed(struct mcp_session *s, struct mcp_run *r, const char *listen);
/* r's server took uri ("" : its lists) for listen (NULL: the session's
 * resources/subscribe): recorded, r's watcher kept if none is */
void mcp_watch_keep(struct mcp_session *s, struct mcp_run *r, const char *uri, const char *listen);
/* The capability whose server has uri, or NULL */
const char *mcp_subscribe_cap(const struct mcp_session *s, const char *uri);
/* Whether the session watches cap's server */
bool mcp_watching(const struct mcp_session *s, const char *cap);
/* listen's subscriptions dropped, watchers nobody needs closed */
void mcp_watch_forget(struct mcp_session *s, const char *listen);
size_t mcp_watch_poll(struct mcp_session *s, struct pollfd *fds, size_t max);
void mcp_watch_events(struct mcp_session *s, const struct pollfd *fds, size_t n);
void mcp_watch_free(struct mcp_session *s);

/* subscriptions/listen (mcp_listen.c): opened and acknowledged; told the
 * registry changed; ended by the client (true when id_json was one) */
void mcp_listen(struct mcp_session *s, const char *id, const struct cap_node *params);
void mcp_listen_changed(struct mcp_session *s);
bool mcp_listen_cancel(struct mcp_session *s, const char *id_json);
/* A listen's relayed step (resources/subscribe, ping) ended: the next,
 * or the acknowledgement */
void mcp_listen_stepped(struct mcp_session *s, struct mcp_run *r, bool ok);
/* A watched server's notification (method, uri or NULL) for the listens */
void mcp_listen_watched(struct mcp_session *s, const char *cap, const char *method,
                        const char *uri);
void mcp_listens_free(struct mcp_session *s);

/* The capabilities a relayed server may ask a client for (sampling,
 * elicitation, roots) of caps (a node, may be NULL), as a JSON object;
 * each one's presence in the flags */
char *mcp_caps_offered(const struct cap_node *caps, bool *samples, bool *elicits, bool *roots);

/* 2026-07-28's multi round-trip requests for a relayed server's requests
 * (mcp_hold.c): a server's request kept as an input request; after the
 * run's messages were read, the call answered input_required and held;
 * a tools/call retry naming a held call's requestState ("h1."...)
 * resumed (run: the retry's own run, dropped); a held call's deadline.
 * mcp_hold_allowed: whether r's server's requests become input requests
 * (a 2026-07-28 tools/call, resources/read, prompts/get or
 * completion/complete); mcp_hold_relayed: a relayed request in the 2026
 * form (r->args its params) gets its _meta's capabilities and r->args
 * without what is capsule's; true when it was the retry of a held one,
 * resumed (r is gone) */
bool mcp_hold_allowed(const struct mcp_run *r);
bool mcp_hold_relayed(struct mcp_session *s, struct mcp_run *r);
void mcp_hold_request(struct mcp_session *s, struct mcp_run *r, const struct cap_node *msg,
                      const char *method);
void mcp_hold_flush(struct mcp_session *s, struct mcp_run *r);
bool mcp_hold_is_state(const struct cap_node *params);
void mcp_hold_resume(struct mcp_session *s, struct mcp_run *run, const struct cap_node *params);
void mcp_hold_expire(struct mcp_session *s, struct mcp_run *r);
void mcp_hold_forget(struct mcp_run *r);
/* A requestState's MAC (mcp_ask.c): tag "v1" (policy ask) or "h1" (a held
 * call), over the expiry, the nonce, the user, r's capability, tool and
 * arguments; hex into out */
void mcp_state_mac(const struct mcp_session *s, const struct mcp_run *r, const char *tag,
                   uint64_t expiry, const char *nonce, char out[65]);
/* A run stopped as notifications/cancelled stops it (mcp_call.c) */
void mcp_run_cancel(struct mcp_session *s, struct mcp_run *r);
/* A line to the run's server, through its child or thread (mcp_relay.c) */
void mcp_relay_to_server(struct mcp_run *r, struct cap_buf *b);
/* The server's request theirs (its id, JSON text) answered -32601 message */
void mcp_relay_refuse(struct mcp_run *r, const char *theirs, const char *message);
/* A free slot of r->asked for a server's request to the client; NULL: none. */
struct mcp_asked *mcp_relay_slot(struct mcp_run *r);
/* A server's request to the client, from its "method" on: its method and
 * its params (when an object) from msg, and the closing brace. */
void mcp_relay_put_request(struct cap_buf *b, const char *method, const struct cap_node *msg);

/* key (a node, may be NULL) is serve's unix socket's operator key; true
 * where the session has none (HTTP, stdio) */
bool mcp_key_ok(const struct mcp_session *s, const struct cap_node *key);

#endif
