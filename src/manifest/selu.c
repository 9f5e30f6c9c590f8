/* Selu manifest.yaml (the published format; docs/manifests.md maps every field) checked
 * and lowered into the canonical spec. The capability is a gRPC server in
 * an image, listening on port 50051 inside the sandbox. Where the seed is
 * silent (host syntax, limits it does not name) capsule takes the strict,
 * secure reading and says so in its messages. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "manifest/formats.h"

#define SELU_GRPC_PORT 50051
/* warm instances, where the seed is silent (x-capsule may change them) */
#define SELU_MAX_CONCURRENCY 4
#define SELU_IDLE_TIMEOUT_MS 300000
#define SELU_STARTUP_TIMEOUT_MS 30000
#define SELU_WALL_MS 120000u
#define SELU_NOFILE 1024u
#define SELU_DISK_BYTES (100u * 1024u * 1024u)
/* a session's workspace and a cache: Selu's Docker volumes are unbounded;
 * capsule bounds each (x-capsule.workspace_max_mb changes it) */
#define SELU_WORKSPACE_BYTES (1024ull << 20)
/* manifest.rs: default_max_concurrent, default_shared_idle_timeout */
#define SELU_SHARED_MAX_CONCURRENT 1
#define SELU_SHARED_IDLE_SECONDS 300
/* where Selu's runner mounts the volumes */
#define SELU_WORKSPACE_AT "/workspace"
#define SELU_CACHE_AT "/cache"

static const char *const top_keys[] = {
    "id",        "class",   "image",      "tool_source", "discovery_tool_name",
    "tools",     "network", "filesystem", "credentials", "resources",
    "x-capsule", "sharing", "cache",      NULL,
};
static const char *const tool_keys[] = {
    "name",
    "description",
    "input_schema",
    "requires_confirmation",
    "recommended_policy",
    "terminal_on_success",
    NULL,
};
static const char *const network_keys[] = {"mode", "hosts", NULL};
static const char *const credential_keys[] = {
    "name", "scope", "credential_type", "required", "description", NULL,
};
static const char *const resource_keys[] = {
    "max_memory_mb", "max_cpu_fraction", "max_cpu_seconds", "pids_limit", NULL,
};

static const char *const class_names[] = {"tool", "environment", NULL};
enum { CLASS_TOOL, CLASS_ENVIRONMENT };
static const char *const tool_source_names[] = {"manifest", "dynamic", NULL};
enum { SOURCE_MANIFEST, SOURCE_DYNAMIC, SOURCE_INVALID };
static const char *const policy_names[] = {"allow", "ask", "block", NULL};
static const char *const net_mode_names[] = {"none", "allowlist", "any", NULL};
enum { NET_NONE, NET_ALLOWLIST, NET_ANY };
static const char *const filesystem_names[] = {"none", "temp", "workspace", NULL};
enum { FS_NONE, FS_TEMP, FS_WORKSPACE };
static const char *const scope_names[] = {"system", "user", NULL};
static const char *const credential_type_names[] = {"secret", NULL};
static const char *const sharing_keys[] = {"mode", "max_concurrent", "idle_timeout_seconds", NULL};
static const char *const sharing_mode_names[] = {"exclusive", "shared", NULL};
enum { SHARING_EXCLUSIVE, SHARING_SHARED };
static const char *const cache_keys[] = {"enabled", NULL};

/* [a-z0-9-]+, not starting or ending with '-' */
static bool valid_id(const char *s, size_t n)
{
  if (n == 0 || s[0] == '-' || s[n - 1] == '-')
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
      return false;
  return true;
}

/* [A-Za-z_][A-Za-z0-9_]* */
static bool valid_env_name(const char *s, size_t n)
{
  if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
    return false;
  for (size_t i = 0; i < n; i++)
    if (!(isalnum((unsigned char)s[i]) || s[i] == '_') || (unsigned char)s[i] >= 0x80)
      return false;
  return true;
}

static bool all_digits(const char *s, size_t n)
{
  if (n == 0)
    return false;
  for (size_t i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9')
      return false;
  return true;
}

/* Dotted quad, each part 0..255 without leading zeros. */
static bool valid_ipv4(const char *s, size_t n)
{
  size_t parts = 0, i = 0;
  while (i <= n) {
    size_t start = i;
    while (i < n && s[i] != '.')
      i++;
    size_t len = i - start;
    if (!all_digits(s + start, len) || len > 3 || (len > 1 && s[start] == '0'))
      return false;
    if (atoi(s + start) > 255) /* stops at the '.' */
      return false;
    parts++;
    i++;
  }
  return parts == 4;
}

/* Why s is not a DNS name (labels of 1..63 [A-Za-z0-9-], not starting or
 * ending with '-', at most 253 characters) nor an IPv4 literal, or NULL when
 * it is one. A name whose last label is numeric must be an IPv4 literal: no
 * top-level domain is all digits. */
static const char *host_name_problem(const char *s, size_t n, bool *is_ipv4)
{
  *is_ipv4 = false;
  if (n == 0)
    return "the host name is missing";
  if (n > 253)
    return "a host name is at most 253 characters long";
  size_t start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && s[i] != '.') {
      unsigned char ch = (unsigned char)s[i];
      if (ch == '[' || ch == ']')
        return "IPv6 addresses are not supported; use a host name or an IPv4 address";
      if (ch == '*')
        return "a wildcard is written \"*.suffix\": \"*\" and a dot, at the start only";
      if (!(isalnum(ch) || ch == '-') || ch >= 0x80)
        return "a host name holds only ASCII letters, digits, hyphens and dots "
               "(write an internationalized name in its xn-- form)";
      continue;
    }
    size_t len = i - start;
    if (len == 0)
      return "it has an empty label (two dots in a row, or a dot at the start or end)";
    if (len > 63)
      return "a label (the part between dots) is at most 63 characters long";
    if (s[start] == '-' || s[i - 1] == '-')
      return "a label cannot start or end with a hyphen";
    if (i == n && all_digits(s + start, len)) {
      if (!valid_ipv4(s, n))
        return "it is not a valid IPv4 address (four numbers 0..255)";
      *is_ipv4 = true;
    }
    start = i + 1;
  }
  return NULL;
}

/* One network.hosts entry, lowered into the allowlist when `lower`. */
static void selu_host(struct mf_ctx *c, const struct cap_node *item, struct cap_spec *spec,
                      bool lower)
{
  const char *s = item->u.str.ptr;
  size_t n = item->u.str.len;
  static const char forms[] = "write \"host\", \"host:port\", \"*.suffix\" or \"*.suffix:port\"";
  if (n == 0) {
    mf_error(c, item, NULL, "must not be empty; %s", forms);
    return;
  }
  if (strlen(s) != n) {
    mf_error(c, item, NULL, "holds a NUL character; %s", forms);
    return;
  }
  const char *scheme = strstr(s, "://");
  if (scheme) {
    const char *h = scheme + 3;
    size_t hl = strcspn(h, "/?#");
    mf_error(c, item, NULL,
             "\"%s\" is a URL, not host:port; write the host only, such as \"%.*s%s\"", s, (int)hl,
             h, memchr(h, ':', hl) ? "" : ":443");
    return;
  }
  if (strcmp(s, "*") == 0) {
    mf_error(c, item, NULL, "\"*\" is not a host; to allow every host use mode: any");
    return;
  }
  const char *colon = strrchr(s, ':');
  size_t host_len = colon ? (size_t)(colon - s) : n;
  unsigned long port = 0;
  if (colon) {
    const char *p = colon + 1;
    size_t pl = n - host_len - 1;
    if (!all_digits(p, pl) || pl > 5 || (port = strtoul(p, NULL, 10)) < 1 || port > 65535) {
      mf_error(c, item, NULL, "\"%s\" is not host:port (port must be 1..65535)", s);
      return;
    }
  }
  bool wildcard = host_len >= 2 && s[0] == '*' && s[1] == '.';
  const char *name = wildcard ? s + 2 : s;
  size_t name_len = wildcard ? host_len - 2 : host_len;
  bool is_ipv4;
  const char *problem = memchr(s, ':', host_len)
                            ? "IPv6 addresses are not supported; use a host name or an IPv4 address"
                            : host_name_problem(name, name_len, &is_ipv4);
  if (!problem && wildcard && is_ipv4)
    problem = "a wildcard \"*.\" must be followed by a domain name, not an IPv4 address";
  if (problem) {
    mf_error(c, item, NULL, "\"%s\" is not a valid host: %s", s, problem);
    return;
  }
  if (!lower)
    return;
  if (colon) {
    /* the port as a number: "api:0443" and "api:443" are one endpoint */
    char *host = cap_xasprintf("%.*s:%lu", (int)host_len, s, port);
    bool seen = false;
    for (size_t i = 0; i < spec->network.n_endpoints && !seen; i++)
      seen = strcmp(spec->network.endpoints[i].host, host) == 0;
    if (!seen)
      cap_spec_add_endpoint(spec, host);
    free(host);
  } else {
    /* nono writes subdomain wildcards as ".suffix" */
    char *domain = wildcard ? cap_xasprintf(".%s", name) : cap_xstrdup(s);
    if (!cap_strv_contains(&spec->network.allow_domains, domain))
      cap_strv_push(&spec->network.allow_domains, domain);
    free(domain);
  }
}

static void selu_network(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  const struct cap_node *net = cap_node_get(root, "network");
  if (net && net->kind != CAP_NODE_OBJECT) {
    mf_error(c, net, "network",
             "must be an object such as {mode: allowlist, hosts: "
             "[\"api.example.com:443\"]}, not %s",
             mf_kind_article(c, net->kind));
    net = NULL;
  }
  int mode = NET_NONE;
  if (net) {
    size_t mark = mf_push_key(c, "network");
    mf_unknown_keys(c, net, network_keys, CAP_SEV_ERROR);
    mode = mf_enum(c, net, "mode", 0, net_mode_names, -1);
    bool mode_bad = mode < 0 && cap_node_get(net, "mode");
    if (mode < 0)
      mode = NET_NONE;
    const struct cap_node *hosts = mf_field(c, net, "hosts", CAP_NODE_ARRAY, 0);
    if (hosts) {
      size_t m2 = mf_push_key(c, "hosts");
      for (size_t i = 0; i < hosts->u.arr.len; i++) {
        const struct cap_node *item = hosts->u.arr.items[i];
        size_t m3 = mf_push_index(c, i);
        if (item->kind != CAP_NODE_STRING)
          mf_error(c, item, NULL, "must be a string such as \"api.example.com:443\", not %s",
                   mf_kind_article(c, item->kind));
        else
          selu_host(c, item, spec, mode == NET_ALLOWLIST);
        mf_pop(c, m3);
      }
      mf_pop(c, m2);
      if (mode != NET_ALLOWLIST && !mode_bad && hosts->u.arr.len > 0)
        mf_warning(c, hosts, "hosts",
                   "is ignored when mode is \"%s\"; remove it, or set "
                   "mode: allowlist to allow only these hosts",
                   net_mode_names[mode]);
    }
    if (mode == NET_ALLOWLIST && !hosts && !cap_node_get(net, "hosts"))
      mf_warning(c, cap_node_get(net, "mode"), "mode",
                 "allowlist without hosts allows no connections; list "
                 "hosts such as \"api.example.com:443\", or use mode: none");
    if (mode == NET_ALLOWLIST && hosts && hosts->u.arr.len == 0)
      mf_warning(c, hosts, "hosts",
                 "is empty, so mode: allowlist allows no connections; "
                 "list hosts such as \"api.example.com:443\", or use mode: none");
    mf_pop(c, mark);
  }
  switch (mode) {
  case NET_ALLOWLIST:
    spec->network.mode = CAP_NET_PROXY;
    spec->network.dns = false;
    break;
  case NET_ANY:
    /* every host, through the proxy: the server keeps its own network
     * namespace, so its port 50051 is reachable only through capsule (on
     * the host's network any local process could call its tools, and two
     * instances would collide); the proxy still refuses cloud metadata and
     * private addresses */
    spec->network.mode = CAP_NET_PROXY;
    cap_strv_push(&spec->network.allow_domains, "*");
    spec->network.dns = false;
    break;
  default:
    spec->network.mode = CAP_NET_BLOCKED;
    spec->network.dns = false;
    break;
  }
}

static void selu_tool(struct mf_ctx *c, const struct cap_node *tool, struct cap_spec *spec)
{
  if (tool->kind != CAP_NODE_OBJECT) {
    mf_error(c, tool, NULL, "must be an object with name, description and input_schema, not %s",
             mf_kind_article(c, tool->kind));
    return;
  }
  mf_unknown_keys(c, tool, tool_keys, CAP_SEV_WARNING);
  struct cap_tool *t = cap_spec_add_tool(spec);
  t->line = tool->line;
  t->col = tool->col;

  const struct cap_node *name =
      mf_field(c, tool, "name", CAP_NODE_STRING, MF_REQUIRED | MF_NONEMPTY);
  if (name)
    t->name = cap_xstrdup(name->u.str.ptr);
  const struct cap_node *desc = mf_field(c, tool, "description", CAP_NODE_STRING, MF_REQUIRED);
  t->description = cap_xstrdup(desc ? desc->u.str.ptr : "");
  if (desc && desc->u.str.len == 0)
    mf_warning(c, desc, "description",
               "is empty; agents choose tools by their description: "
               "say what the tool does");
  cap_tool_schema(c, tool, "input_schema", spec, t);

  const struct cap_node *confirm = mf_field(c, tool, "requires_confirmation", CAP_NODE_BOOL, 0);
  int policy = mf_enum(c, tool, "recommended_policy", 0, policy_names, -1);
  if (policy >= 0) {
    t->policy = (enum cap_policy)policy;
    t->policy_source = CAP_POLICY_SOURCE_RECOMMENDED_POLICY;
  } else if (confirm) {
    /* the seed's legacy field: confirmation means ask, none means allow */
    t->policy = confirm->u.boolean ? CAP_POLICY_ASK : CAP_POLICY_ALLOW;
    t->policy_source = CAP_POLICY_SOURCE_REQUIRES_CONFIRMATION;
  } else {
    t->policy = CAP_POLICY_BLOCK;
    t->policy_source = CAP_POLICY_SOURCE_DEFAULT;
  }
  t->terminal_on_success = mf_bool(c, tool, "terminal_on_success", 0, false);
}

static void selu_tools(struct mf_ctx *c, const struct cap_node *root, int source,
                       struct cap_spec *spec)
{
  const struct cap_node *tools = cap_node_get(root, "tools");
  if (tools && tools->kind != CAP_NODE_ARRAY) {
    mf_error(c, tools, "tools", "must be an array of tools, not %s",
             mf_kind_article(c, tools->kind));
    return;
  }
  if (source == SOURCE_INVALID && (!tools || tools->u.arr.len == 0))
    return;
  if (source == SOURCE_DYNAMIC) {
    if (tools && tools->u.arr.len > 0)
      mf_error(c, tools, "tools",
               "tool_source: dynamic requires tools: [] (the capability "
               "lists its tools at runtime); remove these tools, or set tool_source: manifest");
    return;
  }
  /* Selu accepts a manifest capability without tools (tools defaults to
   * []; its own manifest tests load `tools: []`): so does capsule, saying
   * that it offers nothing */
  if (!tools || tools->u.arr.len == 0) {
    mf_warning(c, tools ? tools : root, "tools",
               "%s, so the capability offers no tools; list them, or set tool_source: dynamic",
               tools ? "is empty" : "is missing");
    return;
  }
  size_t mark = mf_push_key(c, "tools");
  for (size_t i = 0; i < tools->u.arr.len; i++) {
    size_t m2 = mf_push_index(c, i);
    selu_tool(c, tools->u.arr.items[i], spec);
    mf_pop(c, m2);
  }
  mf_report_duplicates(c, tools, "name", "tool name", "give each tool its own name");
  mf_pop(c, mark);
}

static void selu_credential(struct mf_ctx *c, const struct cap_node *cred, struct cap_spec *spec)
{
  if (cred->kind != CAP_NODE_OBJECT) {
    mf_error(c, cred, NULL, "must be an object with name and scope, not %s",
             mf_kind_article(c, cred->kind));
    return;
  }
  mf_unknown_keys(c, cred, credential_keys, CAP_SEV_ERROR);
  struct cap_secret *s = cap_spec_add_secret(spec);
  const struct cap_node *name =
      mf_field(c, cred, "name", CAP_NODE_STRING, MF_REQUIRED | MF_NONEMPTY);
  if (name) {
    s->name = cap_xstrdup(name->u.str.ptr);
    if (!valid_env_name(name->u.str.ptr, name->u.str.len))
      mf_error(c, name, "name",
               "\"%s\" is not an environment variable name; use letters, "
               "digits and underscores, not starting with a digit (such as \"API_KEY\")",
               name->u.str.ptr);
  }
  s->scope =
      (enum cap_secret_scope)mf_enum(c, cred, "scope", MF_REQUIRED, scope_names, CAP_SCOPE_SYSTEM);
  int type = mf_enum(c, cred, "credential_type", 0, credential_type_names, 0);
  s->type = cap_xstrdup(credential_type_names[type]);
  s->required = mf_bool(c, cred, "required", 0, true);
  s->description = cap_xstrdup(mf_string(c, cred, "description", 0, ""));
  s->delivery = CAP_DELIVERY_ENV;
}

static void selu_credentials(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  const struct cap_node *creds = mf_field(c, root, "credentials", CAP_NODE_ARRAY, 0);
  if (!creds)
    return;
  size_t mark = mf_push_key(c, "credentials");
  for (size_t i = 0; i < creds->u.arr.len; i++) {
    size_t m2 = mf_push_index(c, i);
    selu_credential(c, creds->u.arr.items[i], spec);
    mf_pop(c, m2);
  }
  mf_report_duplicates(c, creds, "name", "credential", "declare each credential once");
  mf_pop(c, mark);
}

/* An integer >= 1 that still fits once multiplied by `scale`. */
static uint64_t scaled_int(struct mf_ctx *c, const struct cap_node *obj, const char *key,
                           int64_t def, uint64_t scale, const char *unit)
{
  int64_t v = mf_int(c, obj, key, 0, 1, INT64_MAX, def);
  if ((uint64_t)v > UINT64_MAX / scale) {
    mf_error(c, cap_node_get(obj, key), key, "%lld %s is too large; use a realistic limit",
             (long long)v, unit);
    return (uint64_t)def * scale;
  }
  return (uint64_t)v * scale;
}

static void selu_resources(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  const struct cap_node *res = mf_field(c, root, "resources", CAP_NODE_OBJECT, 0);
  size_t mark = mf_push_key(c, "resources");
  if (res)
    mf_unknown_keys(c, res, resource_keys, CAP_SEV_ERROR);
  spec->limits.memory_bytes = scaled_int(c, res, "max_memory_mb", 128, 1048576, "MiB");
  double cpu = 0.5;
  const struct cap_node *cpun = mf_field(c, res, "max_cpu_fraction", CAP_NODE_FLOAT, 0);
  if (cpun) {
    if (!isfinite(cpun->u.num.f) || cpun->u.num.f <= 0 || cpun->u.num.f > 1024)
      mf_error(c, cpun, "max_cpu_fraction",
               "%g is out of range; it must be greater than 0 "
               "and at most 1024 (cores; 0.5 is half a core)",
               cpun->u.num.f);
    else
      cpu = cpun->u.num.f;
  }
  spec->limits.cpu_fraction = cpu;
  spec->limits.cpu_ms_per_task = scaled_int(c, res, "max_cpu_seconds", 30, 1000, "seconds");
  spec->limits.pids = (uint64_t)mf_int(c, res, "pids_limit", 0, 1, INT64_MAX, 64);
  /* the wall clock must leave room for the whole CPU budget at the granted
   * CPU fraction, or the backstop would fire before the budget */
  double needed_ms = (double)spec->limits.cpu_ms_per_task / cpu;
  spec->limits.wall_ms = needed_ms > SELU_WALL_MS ? (uint64_t)needed_ms : SELU_WALL_MS;
  spec->limits.nofile = SELU_NOFILE;
  spec->limits.disk_bytes = SELU_DISK_BYTES;
  mf_pop(c, mark);
}

/* sharing (manifest.rs SharingPolicy): exclusive, the default, is an
 * instance per user and session; shared is one instance for every session,
 * serving max_concurrent calls at once and stopped after
 * idle_timeout_seconds without one. Returns the mode's node when shared. */
static const struct cap_node *selu_sharing(struct mf_ctx *c, const struct cap_node *root,
                                           struct cap_spec *spec)
{
  const struct cap_node *sh = cap_node_get(root, "sharing");
  if (!sh || sh->kind == CAP_NODE_NULL) /* Option<SharingPolicy>: null is none */
    return NULL;
  sh = mf_field(c, root, "sharing", CAP_NODE_OBJECT, 0);
  if (!sh)
    return NULL;
  size_t mark = mf_push_key(c, "sharing");
  mf_unknown_keys(c, sh, sharing_keys, CAP_SEV_WARNING);
  int mode = mf_enum(c, sh, "mode", 0, sharing_mode_names, -1);
  bool mode_bad = mode < 0 && cap_node_get(sh, "mode"); /* reported: say nothing more */
  if (mode < 0)
    mode = SHARING_EXCLUSIVE;
  int64_t max = mf_int(c, sh, "max_concurrent", 0, 0, UINT32_MAX, SELU_SHARED_MAX_CONCURRENT);
  int64_t idle = mf_int(c, sh, "idle_timeout_seconds", 0, 0, 86400 * 365, SELU_SHARED_IDLE_SECONDS);
  const struct cap_node *mode_node = cap_node_get(sh, "mode");
  if (mode == SHARING_SHARED) {
    if (max == 0)
      mf_warning(c, cap_node_get(sh, "max_concurrent"), "max_concurrent",
                 "0 is taken as 1, as Selu does: one call at a time");
    spec->runtime.shared = true;
    spec->runtime.max_concurrency = max > 256 ? 256 : (max ? (uint32_t)max : 1);
    if (max > 256)
      mf_warning(c, cap_node_get(sh, "max_concurrent"), "max_concurrent",
                 "capsule serves at most 256 calls at once on one instance; 256 it is");
    /* 0: stop as soon as idle (as with x-capsule.idle_timeout_ms, 100 ms at least) */
    spec->runtime.idle_timeout_ms = idle ? (uint64_t)idle * 1000 : 100;
  } else if (!mode_bad) {
    static const char *const shared_only[] = {"max_concurrent", "idle_timeout_seconds"};
    for (size_t i = 0; i < 2; i++)
      if (cap_node_get(sh, shared_only[i]))
        mf_warning(c, cap_node_get(sh, shared_only[i]), shared_only[i],
                   "is used only with mode: shared (an exclusive capability has an instance "
                   "per session); remove it, or set mode: shared");
  }
  mf_pop(c, mark);
  return mode == SHARING_SHARED ? (mode_node ? mode_node : sh) : NULL;
}

/* cache (manifest.rs CachePolicy): a persistent directory per user and
 * capability at /cache. Returns the enabled node when enabled. */
static const struct cap_node *selu_cache(struct mf_ctx *c, const struct cap_node *root)
{
  const struct cap_node *cache = mf_field(c, root, "cache", CAP_NODE_OBJECT, 0);
  if (!cache)
    return NULL;
  size_t mark = mf_push_key(c, "cache");
  mf_unknown_keys(c, cache, cache_keys, CAP_SEV_WARNING);
  bool enabled = mf_bool(c, cache, "enabled", 0, false);
  mf_pop(c, mark);
  return enabled ? cap_node_get(cache, "enabled") : NULL;
}

/* Selu's own rules (manifest.rs load_from_dir) on class, filesystem,
 * sharing and cache, with capsule's fixes. */
static void selu_class_rules(struct mf_ctx *c, const struct cap_node *root, int class_index, int fs,
                             const struct cap_node *shared, const struct cap_node *cache)
{
  if (fs == FS_WORKSPACE && class_index != CLASS_ENVIRONMENT)
    mf_error(c, cap_node_get(root, "filesystem"), "filesystem",
             "\"workspace\" is only allowed for class: environment; "
             "set class: environment, or use filesystem: temp");
  if (cache && class_index != CLASS_ENVIRONMENT)
    mf_error(c, cache, "cache.enabled",
             "true is only allowed for class: environment; set class: environment, or remove "
             "cache");
  if (shared && class_index == CLASS_ENVIRONMENT)
    mf_error(c, shared, "sharing.mode",
             "\"shared\" is not allowed for class: environment (an environment keeps one "
             "session's state); remove sharing, or set class: tool");
  if (shared && fs == FS_WORKSPACE)
    mf_error(c, shared, "sharing.mode",
             "\"shared\" is not allowed with filesystem: workspace (a workspace belongs to one "
             "session); use filesystem: temp or none, or remove sharing");
}

void cap_selu_lower(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  mf_unknown_keys(c, root, top_keys, CAP_SEV_WARNING);

  const struct cap_node *id = mf_field(c, root, "id", CAP_NODE_STRING, MF_REQUIRED | MF_NONEMPTY);
  if (id) {
    spec->id = cap_xstrdup(id->u.str.ptr);
    if (!valid_id(id->u.str.ptr, id->u.str.len))
      mf_error(c, id, "id",
               "\"%s\" is not a valid id; use lowercase letters, digits and "
               "hyphens, not starting or ending with a hyphen (such as \"web-search\")",
               id->u.str.ptr);
  }
  int class_index = mf_enum(c, root, "class", 0, class_names, CLASS_TOOL);
  spec->class_name = cap_xstrdup(class_names[class_index]);

  const char *image = mf_string(c, root, "image", MF_REQUIRED | MF_NONEMPTY, NULL);
  spec->runtime.kind = CAP_RUNTIME_GRPC;
  spec->runtime.image = image ? cap_xstrdup(image) : NULL;
  spec->runtime.port = SELU_GRPC_PORT;
  cap_ports_push(&spec->network.bind, SELU_GRPC_PORT); /* the server listens there (Landlock) */
  spec->runtime.max_concurrency = SELU_MAX_CONCURRENCY;
  spec->runtime.idle_timeout_ms = SELU_IDLE_TIMEOUT_MS;
  spec->runtime.startup_timeout_ms = SELU_STARTUP_TIMEOUT_MS;

  /* an invalid tool_source says nothing about tools: check them as neither mode */
  int source = mf_enum(c, root, "tool_source", 0, tool_source_names, -1);
  if (source < 0 && cap_node_get(root, "tool_source"))
    source = SOURCE_INVALID;
  else if (source < 0)
    source = SOURCE_MANIFEST;
  spec->tool_source = source == SOURCE_DYNAMIC ? CAP_TOOL_SOURCE_DYNAMIC : CAP_TOOL_SOURCE_MANIFEST;
  const struct cap_node *discovery =
      mf_field(c, root, "discovery_tool_name", CAP_NODE_STRING, MF_NONEMPTY);
  if (source == SOURCE_DYNAMIC)
    spec->discovery_tool_name = cap_xstrdup(discovery ? discovery->u.str.ptr : "list_tools");
  else if (discovery && source == SOURCE_MANIFEST)
    mf_warning(c, discovery, "discovery_tool_name",
               "is ignored unless tool_source is "
               "\"dynamic\"; remove it, or set tool_source: dynamic");
  selu_tools(c, root, source, spec);

  selu_network(c, root, spec);

  int fs = mf_enum(c, root, "filesystem", 0, filesystem_names, FS_NONE);
  const struct cap_node *shared = selu_sharing(c, root, spec);
  const struct cap_node *cache = selu_cache(c, root);
  selu_class_rules(c, root, class_index, fs, shared, cache);
  spec->sandbox.filesystem = cap_xstrdup(filesystem_names[fs]);
  spec->sandbox.private_tmp = fs != FS_NONE;
  spec->sandbox.cache = cache != NULL;
  if (fs == FS_WORKSPACE || cache)
    spec->limits.workspace_bytes = SELU_WORKSPACE_BYTES;

  selu_credentials(c, root, spec);
  selu_resources(c, root, spec);

  spec->sandbox.required = false;
  spec->sandbox.backend = CAP_BACKEND_CAPSULE;

  cap_xcapsule_lower(c, cap_node_get(root, "x-capsule"), spec);

  /* after x-capsule, which may name the workspace's host directory; both
   * appear where Selu's runner mounts its volumes */
  if (fs == FS_WORKSPACE) {
    if (!spec->sandbox.workspace)
      spec->sandbox.workspace = cap_xstrdup(CAP_SESSION_WORKSPACE);
    cap_spec_add_grant(spec, spec->sandbox.workspace, CAP_ACCESS_READWRITE, CAP_FS_DIRECTORY,
                       CAP_ORIGIN_WORKSPACE)
        ->at = cap_xstrdup(SELU_WORKSPACE_AT);
  }
  if (cache)
    cap_spec_add_grant(spec, CAP_CAPABILITY_CACHE, CAP_ACCESS_READWRITE, CAP_FS_DIRECTORY,
                       CAP_ORIGIN_CACHE)
        ->at = cap_xstrdup(SELU_CACHE_AT);
}
