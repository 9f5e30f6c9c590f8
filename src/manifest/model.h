/* The canonical capability: what every manifest format lowers to, and what
 * the sandbox, proxy and gateway enforce. Fully resolved: every default is
 * filled in by the lowering, nothing is inherited, nothing left implicit.
 *
 * A cap_spec owns everything it points to (plain malloc'd strings and
 * arrays); cap_spec_free releases it. JSON Schemas and setting values are
 * kept as document trees in spec->doc, which the spec also owns. */
#ifndef CAPSULE_MANIFEST_MODEL_H
#define CAPSULE_MANIFEST_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/node.h"

struct cap_js_validator;

enum cap_format {
  CAP_FORMAT_SELU,         /* manifest.yaml */
  CAP_FORMAT_COVENANT,     /* agent.toml */
  CAP_FORMAT_TALOS,        /* manifest.json with "functions" */
  CAP_FORMAT_NONO,         /* nono capability manifest JSON */
  CAP_FORMAT_NONO_PROFILE, /* nono profile (JSONC), compiled as nono's profile show does */
};

/* A list of owned strings. */
struct cap_strv {
  char **v;
  size_t len;
};

enum cap_access { CAP_ACCESS_READ, CAP_ACCESS_WRITE, CAP_ACCESS_READWRITE };
enum cap_fs_type { CAP_FS_DIRECTORY, CAP_FS_FILE };

/* Why a grant exists, shown in the resolved manifest as "origin". */
enum cap_grant_origin {
  CAP_ORIGIN_MANIFEST,  /* declared by the manifest */
  CAP_ORIGIN_SYSTEM,    /* system directories every sandbox gets read-only */
  CAP_ORIGIN_PACKAGE,   /* the capability's own directory */
  CAP_ORIGIN_WORKSPACE, /* the per-session or configured workspace */
  CAP_ORIGIN_CACHE,     /* a capability's persistent cache (Selu cache.enabled) */
  CAP_ORIGIN_OPERATOR,  /* granted by the operator in the state (`capsule grant`) */
};

/* The placeholders a Selu lowering grants and the gateway replaces with a
 * directory of its own at call time (gateway/volumes.h). */
#define CAP_SESSION_WORKSPACE "$CAPSULE_SESSION_WORKSPACE"
#define CAP_CAPABILITY_CACHE "$CAPSULE_CAPABILITY_CACHE"

struct cap_fs_grant {
  char *path; /* unresolved (may start with ~ or a $CAPSULE_ variable) */
  char *at;   /* where it appears inside the sandbox (Selu's /workspace); NULL: at path */
  enum cap_access access;
  enum cap_fs_type type;
  enum cap_grant_origin origin;
  /* a directory the gateway made for this call under its state directory
   * (a session's workspace, a cache): the one grant the sandbox lets
   * below a state directory. Never set from a manifest. */
  bool volume;
};

struct cap_http_rule {
  char *method; /* "GET", or "*" */
  char *path;   /* glob: * one segment, ** any number */
};

struct cap_endpoint {
  char *host; /* "host", "host:port", "*.suffix[:port]" */
  struct cap_http_rule *rules;
  size_t n_rules;
};

enum cap_net_mode { CAP_NET_BLOCKED, CAP_NET_PROXY, CAP_NET_UNRESTRICTED };

struct cap_ports {
  uint16_t *v;
  size_t len;
};

struct cap_network {
  enum cap_net_mode mode;
  /* proxy mode: hosts reachable on any allowed port: "example.com",
   * ".suffix" (subdomains only), "*" (any host) */
  struct cap_strv allow_domains;
  struct cap_endpoint *endpoints; /* host[:port] entries, optional L7 rules */
  size_t n_endpoints;
  struct cap_ports connect; /* empty: any port the host rules allow */
  struct cap_ports bind;
  struct cap_ports localhost; /* host loopback ports forwarded in */
  bool dns;
};

enum cap_inject_mode {
  CAP_INJECT_HEADER,
  CAP_INJECT_URL_PATH,
  CAP_INJECT_QUERY_PARAM,
  CAP_INJECT_BASIC_AUTH,
};

/* A nono credential route: the proxy injects the secret upstream. */
struct cap_credential_route {
  char *name;
  char *upstream;
  char *source; /* env://, file://, op://, bw://, apple-password://, or bare */
  enum cap_inject_mode mode;
  char *header;           /* header mode */
  char *format;           /* header mode, "{}" placeholder */
  char *path_pattern;     /* url_path mode */
  char *path_replacement; /* url_path mode */
  char *query_param_name; /* query_param mode */
  char *env_var;          /* phantom-token variable name, or NULL */
  struct cap_http_rule *rules;
  size_t n_rules;
};

enum cap_secret_scope { CAP_SCOPE_SYSTEM, CAP_SCOPE_USER };

/* How a secret reaches the tool. */
enum cap_delivery { CAP_DELIVERY_ENV, CAP_DELIVERY_HANDLER /* Talos: the handler's context */ };

/* A secret the tool needs by name (Selu env credentials, Talos credentials),
 * resolved from capsule's store at call time. */
struct cap_secret {
  char *name;
  enum cap_secret_scope scope;
  char *type; /* "secret" */
  bool required;
  char *label;       /* may be NULL */
  char *description; /* "" when none */
  enum cap_delivery delivery;
  bool shown; /* Talos `secret: false`: not secret, its value may be listed */
};

enum cap_mode3 { CAP_MODE_ISOLATED, CAP_MODE_SAME_SANDBOX, CAP_MODE_ALL };

struct cap_process {
  struct cap_strv allowed_commands;
  struct cap_strv blocked_commands;
  enum cap_mode3 signal_mode;
  enum cap_mode3 process_info_mode;
  bool ipc_full; /* ipc_mode "full" vs "shared_memory_only" */
  /* capsule always supervises; the declared value is kept for the record */
  char *declared_exec_strategy; /* NULL when not declared */
  /* exec_strategy "supervised" (a nono profile: security.capability_elevation):
   * an open outside the grants is put to the operator (sandbox/supervise.h) */
  bool expand_opens;
};

struct cap_rollback {
  bool enabled;
  struct cap_strv exclude_patterns;
  struct cap_strv exclude_globs;
};

/* 0 means "no limit" for every field. */
struct cap_limits {
  uint64_t memory_bytes;
  double cpu_fraction; /* cores; 0 = unlimited */
  uint64_t cpu_ms_per_task;
  uint64_t wall_ms;
  uint64_t pids;
  uint64_t nofile;
  uint64_t disk_bytes;      /* size of the private tmp and workspace quota */
  uint64_t workspace_bytes; /* bound on a session workspace's or a cache's total size */
};

enum cap_runtime_kind {
  CAP_RUNTIME_GRPC,       /* Selu: CapabilityService on a port */
  CAP_RUNTIME_JSONL,      /* Covenant: one JSON line in, one out */
  CAP_RUNTIME_HERMES,     /* Covenant runtime = "hermes": HTTP endpoint */
  CAP_RUNTIME_TALOS_NODE, /* Talos: JS module exports */
  CAP_RUNTIME_EXEC,       /* nono: an arbitrary command */
  CAP_RUNTIME_MCP,        /* x-capsule.mcp_server: an MCP server over stdio */
};

struct cap_runtime {
  enum cap_runtime_kind kind;
  char *image;             /* Selu image reference, else NULL */
  char *entry;             /* package-relative entry, else NULL */
  char *interpreter;       /* "python3", "node", or NULL */
  struct cap_strv command; /* argv run from the package directory; may be empty */
  uint16_t port;           /* gRPC port, 0 otherwise */
  /* warm instances of a gRPC server (0 for other runtimes) */
  uint32_t max_concurrency;    /* calls served at once by one instance */
  uint64_t idle_timeout_ms;    /* stopped after this long without a call */
  uint64_t startup_timeout_ms; /* to become healthy, else the call fails */
  /* Selu sharing.mode: exclusive (an instance per user and session) or
   * shared (one instance for every session, max_concurrency calls at once,
   * credentials per call only) */
  bool shared;
  bool stream_invoke; /* x-capsule.invoke: stream (the orchestrator's StreamInvoke) */
};

enum cap_policy { CAP_POLICY_ALLOW, CAP_POLICY_ASK, CAP_POLICY_BLOCK };

/* Where a tool's recommended policy came from (closed set). */
enum cap_policy_source {
  CAP_POLICY_SOURCE_DEFAULT, /* nothing said: block */
  CAP_POLICY_SOURCE_RECOMMENDED_POLICY,
  CAP_POLICY_SOURCE_REQUIRES_CONFIRMATION,
};

struct cap_tool {
  char *name;
  char *description;
  const struct cap_node *input_schema;  /* in spec->doc */
  struct cap_js_validator *validator;   /* compiled input_schema, owned */
  enum cap_policy policy;               /* recommended policy */
  enum cap_policy_source policy_source; /* where policy came from */
  bool terminal_on_success;
  uint32_t line, col; /* where the tool is declared */
};

struct cap_setting {
  char *name;
  char *label;
  char *type;                           /* "number", "string", "boolean", "select" */
  const struct cap_node *default_value; /* typed, in spec->doc; NULL when none */
  char *description;
  struct cap_strv options; /* select: the allowed values */
};

struct cap_trigger {
  char *id; /* scoped "toolId:triggerId" */
  char *local_id;
  char *label;
  char *description;
  const struct cap_node *params; /* Talos task parameters as declared, in spec->doc; or NULL */
};

enum cap_backend { CAP_BACKEND_CAPSULE, CAP_BACKEND_GVISOR };

struct cap_sandbox {
  bool required;
  char *declared_backend; /* as written (Covenant), or NULL */
  enum cap_backend backend;
  char *filesystem; /* the format's own filesystem mode, or NULL */
  bool private_tmp; /* a private tmpfs at /tmp */
  char *workspace;  /* host path, "$CAPSULE_SESSION_WORKSPACE", or NULL */
  bool cache;       /* Selu cache.enabled: a persistent /cache per user and capability */
};

enum cap_tool_source {
  CAP_TOOL_SOURCE_MANIFEST, /* the manifest lists the tools */
  CAP_TOOL_SOURCE_DYNAMIC,  /* the capability lists them at runtime (Selu) */
};
/* A Covenant agent's settlement priority. */
enum cap_priority { CAP_PRIORITY_NONE, CAP_PRIORITY_LOW, CAP_PRIORITY_NORMAL, CAP_PRIORITY_HIGH };

struct cap_spec {
  struct cap_doc *doc; /* owns tool schemas and setting defaults */

  /* identity */
  char *id;
  char *name;
  char *version;
  char *description;
  char *class_name; /* Selu "tool" / "environment"; NULL elsewhere */
  char *log_name;   /* Talos logName */
  enum cap_format format;
  char *source_path; /* manifest file as given */
  char *package_dir; /* absolute directory of the manifest */

  struct cap_runtime runtime;

  /* tools */
  enum cap_tool_source tool_source;
  char *discovery_tool_name; /* dynamic only, else NULL */
  struct cap_tool *tools;
  size_t n_tools;

  struct cap_fs_grant *grants;
  size_t n_grants;
  struct cap_strv deny;

  struct cap_network network;
  struct cap_credential_route *routes;
  size_t n_routes;
  struct cap_secret *secrets;
  size_t n_secrets;
  struct cap_process process;
  struct cap_rollback rollback;
  struct cap_limits limits;
  struct cap_sandbox sandbox;

  struct cap_setting *settings;
  size_t n_settings;
  struct cap_trigger *triggers;
  size_t n_triggers;

  /* Covenant */
  struct cap_strv actions_required;
  struct cap_strv actions_optional;
  uint64_t budget_credits_per_hour;
  enum cap_priority priority;
  struct cap_strv hermes_tools_allowed;
  char *hermes_approval_policy;

  /* x-capsule extras */
  char *notes;

  /* Talos: what the plugin declares for its host (shown, not enforced) */
  struct cap_talos_meta {
    char *category;
    bool default_enabled;
    bool has_oauth;
    char *oauth_provider;
    struct cap_strv oauth_scopes;
    char *oauth_authorize_url;
    const struct cap_node *modules; /* as declared, in doc; or NULL */
    const struct cap_node *sidecar; /* as declared, in doc; or NULL (never run) */
  } talos;
};

struct cap_spec *cap_spec_new(enum cap_format format);
/* Frees n tools (their strings and validators) and the array. */
void cap_tools_free(struct cap_tool *tools, size_t n);
void cap_spec_free(struct cap_spec *spec);
void cap_spec_freep(struct cap_spec **spec);

/* Builders used by the lowerings; all copy their string arguments. */
void cap_strv_push(struct cap_strv *sv, const char *s);
void cap_strv_free(struct cap_strv *sv);
bool cap_strv_contains(const struct cap_strv *sv, const char *s);
void cap_ports_push(struct cap_ports *p, uint16_t port);
struct cap_fs_grant *cap_spec_add_grant(struct cap_spec *spec, const char *path,
                                        enum cap_access access, enum cap_fs_type type,
                                        enum cap_grant_origin origin);
struct cap_tool *cap_spec_add_tool(struct cap_spec *spec);
struct cap_secret *cap_spec_add_secret(struct cap_spec *spec);
struct cap_endpoint *cap_spec_add_endpoint(struct cap_spec *spec, const char *host);
struct cap_credential_route *cap_spec_add_route(struct cap_spec *spec);
struct cap_setting *cap_spec_add_setting(struct cap_spec *spec);
struct cap_trigger *cap_spec_add_trigger(struct cap_spec *spec);
void cap_rules_push(struct cap_http_rule **rules, size_t *n, const char *method, const char *path);
void cap_rules_free(struct cap_http_rule *rules, size_t n);
/* Deep-copies a subtree into spec->doc (schemas outlive the parse tree). */
const struct cap_node *cap_spec_adopt_node(struct cap_spec *spec, const struct cap_node *n);

/* The read-only system directories every sandbox sees (usr, lib, ...). */
void cap_spec_add_system_grants(struct cap_spec *spec);

const char *cap_format_name(enum cap_format f);
const char *cap_access_name(enum cap_access a);
const char *cap_policy_name(enum cap_policy p);
const char *cap_net_mode_name(enum cap_net_mode m);
const char *cap_inject_mode_name(enum cap_inject_mode m);
const char *cap_mode3_name(enum cap_mode3 m);
const char *cap_runtime_kind_name(enum cap_runtime_kind k);
const char *cap_origin_name(enum cap_grant_origin o);
const char *cap_delivery_name(enum cap_delivery d);
const char *cap_policy_source_name(enum cap_policy_source s);
const char *cap_backend_name(enum cap_backend b);
const char *cap_tool_source_name(enum cap_tool_source s);
/* NULL for CAP_PRIORITY_NONE */
const char *cap_priority_name(enum cap_priority p);

#endif
