/* Covenant agents/<id>/agent.toml (the published format; docs/manifests.md maps every field)
 * checked and lowered into the canonical spec. An agent is one tool,
 * `dispatch`: capsule writes one JSON line to its stdin and reads one back.
 *
 * Where the seed leaves room, capsule reads it strictly: entries must stay
 * inside the package directory, the CPU budget doubles as the wall-clock
 * backstop, "outbound-https-only" means any host on port 443 through the
 * proxy. Unknown top-level tables are tolerated (the seed's forward-
 * compatibility rule); unknown keys inside the known tables are warned
 * about, since they are usually typos. */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "manifest/formats.h"

#define MIB 1048576u
#define COVENANT_PIDS 64u
#define COVENANT_NOFILE 1024u
#define COVENANT_MEMORY_MB 512 /* the seed's default */
/* largest MiB count whose byte size still fits an int64 */
#define MAX_MIB ((int64_t)(INT64_MAX / MIB))

static const char *const agent_keys[] = {"id", "name", "version", "runtime", "entry", NULL};
static const char *const capabilities_keys[] = {"required", "optional", NULL};
static const char *const resources_keys[] = {"cpu_ms_per_task", "memory_mb", "disk_mb", "network",
                                             NULL};
static const char *const sandbox_keys[] = {"required", "backend", "filesystem", NULL};
static const char *const settlement_keys[] = {"budget_credits_per_hour", "priority", NULL};
static const char *const hermes_keys[] = {"tools_allowed", "approval_policy", NULL};

static const char *const runtime_names[] = {"rust-bin", "python3", "node", "hermes", NULL};
enum { RT_RUST_BIN, RT_PYTHON3, RT_NODE, RT_HERMES };
static const char *const network_names[] = {"off", "outbound-https-only", "full", NULL};
enum { NET_OFF, NET_HTTPS_ONLY, NET_FULL };
static const char *const backend_names[] = {"trusted-local", "linux-gvisor", NULL};
enum { BACKEND_TRUSTED_LOCAL, BACKEND_GVISOR };
static const char *const filesystem_names[] = {"read-only-package", "ephemeral", "host", NULL};
enum { FS_READ_ONLY_PACKAGE, FS_EPHEMERAL, FS_HOST };
static const char *const priority_names[] = {"low", "normal", "high", NULL};
static const char *const approval_names[] = {"operator-prompt", "auto-deny", "auto-once", NULL};

static const char *const action_namespaces[] = {"intent.", "memory.", "identity.",
                                                "tool.",   "agent.",  NULL};

static const char dispatch_schema[] = "{\"type\":\"object\","
                                      "\"properties\":{\"text\":{\"type\":\"string\"},"
                                      "\"priority\":{\"enum\":[\"low\",\"normal\",\"high\"]},"
                                      "\"parent\":{\"type\":\"string\"}},"
                                      "\"required\":[\"text\"],\"additionalProperties\":false}";

/* The [key] table of root, or NULL when absent or not a table. */
static const struct cap_node *table(struct mf_ctx *c, const struct cap_node *root, const char *key,
                                    bool required)
{
  const struct cap_node *t = cap_node_get(root, key);
  if (!t) {
    if (required)
      mf_error(c, root, key,
               "required table [%s] is missing; add it with id, name, version, runtime and "
               "entry",
               key);
    return NULL;
  }
  if (t->kind != CAP_NODE_OBJECT) {
    mf_error(c, t, key, "must be a table ([%s] or %s = { ... }), not %s", key, key,
             mf_kind_article(c, t->kind));
    return NULL;
  }
  return t;
}

static bool id_char_ok(unsigned char ch)
{
  return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch == '.' || ch == '-';
}

/* ASCII [A-Za-z0-9_.-]+: the id round-trips through the daemon's AgentId
 * charset filter on every JSONL replay. */
static void check_id(struct mf_ctx *c, const struct cap_node *agent)
{
  const struct cap_node *n = cap_node_get(agent, "id");
  if (!n || n->kind != CAP_NODE_STRING || n->u.str.len == 0)
    return; /* reported by mf_string */
  const char *s = n->u.str.ptr;
  if (memchr(s, '@', n->u.str.len)) {
    mf_error(c, n, "id",
             "\"%s\" contains '@', which is reserved for the daemon's <id>@agent display; "
             "remove it",
             s);
    return;
  }
  for (size_t i = 0; i < n->u.str.len; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (id_char_ok(ch))
      continue;
    if (ch >= 0x20 && ch < 0x7f)
      mf_error(c, n, "id",
               "\"%s\" contains '%c'; an agent id uses only ASCII letters, digits, '_', '.' "
               "and '-'",
               s, ch);
    else
      mf_error(c, n, "id",
               "\"%s\" contains a character outside ASCII [A-Za-z0-9_.-]; an agent id uses "
               "only ASCII letters, digits, '_', '.' and '-'",
               s);
    return;
  }
}

/* Package-relative: no leading '/', no backslash root or drive, no '..'. */
static void check_entry(struct mf_ctx *c, const struct cap_node *n)
{
  const char *s = n->u.str.ptr;
  size_t len = n->u.str.len;
  if (s[0] == '/') {
    mf_error(c, n, "entry",
             "\"%s\" is an absolute path; write it relative to the agent's directory "
             "(e.g. \"bin/agent\")",
             s);
    return;
  }
  if (s[0] == '\\' ||
      (len >= 2 && s[1] == ':' && ((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))) {
    mf_error(c, n, "entry",
             "\"%s\" names a drive or root; write a path relative to the agent's directory "
             "(e.g. \"bin/agent\")",
             s);
    return;
  }
  for (size_t i = 0; i < len;) {
    size_t j = i;
    while (j < len && s[j] != '/' && s[j] != '\\')
      j++;
    if (j - i == 2 && s[i] == '.' && s[i + 1] == '.') {
      mf_error(c, n, "entry",
               "\"%s\" leaves the agent's directory through '..'; the entry must be a file "
               "inside it",
               s);
      return;
    }
    i = j + 1;
  }
}

static void lower_agent(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  const struct cap_node *agent = table(c, root, "agent", true);
  if (!agent)
    return;
  size_t mark = mf_push_key(c, "agent");
  mf_unknown_keys(c, agent, agent_keys, CAP_SEV_WARNING);
  const char *id = mf_string(c, agent, "id", MF_REQUIRED | MF_NONEMPTY, NULL);
  check_id(c, agent);
  const char *name = mf_string(c, agent, "name", MF_REQUIRED | MF_NONEMPTY, NULL);
  const char *version = mf_string(c, agent, "version", MF_REQUIRED | MF_NONEMPTY, NULL);
  if (id)
    spec->id = cap_xstrdup(id);
  if (name)
    spec->name = cap_xstrdup(name);
  if (version)
    spec->version = cap_xstrdup(version);

  int runtime = mf_enum(c, agent, "runtime", MF_REQUIRED, runtime_names, -1);
  spec->runtime.kind = runtime == RT_HERMES ? CAP_RUNTIME_HERMES : CAP_RUNTIME_JSONL;
  if (runtime == RT_PYTHON3)
    spec->runtime.interpreter = cap_xstrdup("python3");
  else if (runtime == RT_NODE)
    spec->runtime.interpreter = cap_xstrdup("node");
  if (runtime != RT_HERMES) {
    /* hermes ignores entry entirely, as the seed says */
    unsigned flags = runtime < 0 ? 0 : MF_REQUIRED | MF_NONEMPTY;
    const struct cap_node *entry = mf_field(c, agent, "entry", CAP_NODE_STRING, flags);
    if (entry && entry->u.str.len) {
      check_entry(c, entry);
      spec->runtime.entry = cap_xstrdup(entry->u.str.ptr);
    }
  }
  mf_pop(c, mark);

  struct cap_tool *tool = cap_spec_add_tool(spec);
  tool->name = cap_xstrdup("dispatch");
  tool->description = cap_xasprintf("Dispatch an intent to the %s agent.", name ? name
                                                                           : id ? id
                                                                                : "");
  tool->policy = CAP_POLICY_BLOCK;
  tool->policy_source = CAP_POLICY_SOURCE_DEFAULT;
  tool->line = agent->line;
  tool->col = agent->col;
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  if (cap_json_parse(doc, dispatch_schema, sizeof(dispatch_schema) - 1, "<dispatch>", 0, &diags) ==
      0)
    tool->input_schema = cap_spec_adopt_node(spec, doc->root);
  cap_diags_free(&diags);
  cap_doc_free(doc);
}

/* Actions live in the reserved namespaces, with a name after the dot. */
static void lower_actions(struct mf_ctx *c, const struct cap_node *caps, const char *key,
                          struct cap_strv *out)
{
  const struct cap_node *arr = mf_string_array(c, caps, key, 0);
  if (!arr)
    return;
  size_t mark = mf_push_key(c, key);
  for (size_t i = 0; i < arr->u.arr.len; i++) {
    const struct cap_node *item = arr->u.arr.items[i];
    const char *s = item->u.str.ptr;
    const char *ns = NULL;
    for (size_t k = 0; action_namespaces[k] && !ns; k++)
      if (strncmp(s, action_namespaces[k], strlen(action_namespaces[k])) == 0)
        ns = action_namespaces[k];
    size_t m2 = mf_push_index(c, i);
    if (!ns)
      mf_error(c, item, NULL,
               "\"%s\" is outside the reserved namespaces; an action starts with intent., "
               "memory., identity., tool. or agent. (e.g. \"tool.web_search\")",
               s);
    else if (strlen(s) == strlen(ns))
      mf_error(c, item, NULL, "\"%s\" names no action after the namespace; write e.g. \"%sread\"",
               s, ns);
    else
      cap_strv_push(out, s);
    mf_pop(c, m2);
  }
  mf_pop(c, mark);
}

static void lower_capabilities(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  const struct cap_node *caps = table(c, root, "capabilities", false);
  if (!caps)
    return;
  size_t mark = mf_push_key(c, "capabilities");
  mf_unknown_keys(c, caps, capabilities_keys, CAP_SEV_WARNING);
  lower_actions(c, caps, "required", &spec->actions_required);
  lower_actions(c, caps, "optional", &spec->actions_optional);
  mf_pop(c, mark);
}

/* A MiB count whose byte size still fits the limits. */
static int64_t mebibytes(struct mf_ctx *c, const struct cap_node *res, const char *key, int64_t min,
                         int64_t def)
{
  int64_t v = mf_int(c, res, key, 0, min, INT64_MAX, def);
  if (v > MAX_MIB) {
    mf_error(c, cap_node_get(res, key), key,
             "%" PRId64 " MiB is too large; it must be at most %" PRId64, v, MAX_MIB);
    return def;
  }
  return v;
}

static void lower_resources(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  const struct cap_node *res = table(c, root, "resources", false);
  size_t mark = mf_push_key(c, "resources");
  mf_unknown_keys(c, res, resources_keys, CAP_SEV_ERROR);
  int64_t cpu_ms = mf_int(c, res, "cpu_ms_per_task", 0, 1, INT64_MAX, 30000);
  /* Covenant's u64 has no minimum; its Hermes examples write 0 ("not
   * capped here: the remote sandbox caps it"). capsule reads 0 as not
   * declared: a local process still gets the default cap. */
  int64_t memory_mb = mebibytes(c, res, "memory_mb", 0, COVENANT_MEMORY_MB);
  if (memory_mb == 0) {
    if (spec->runtime.kind != CAP_RUNTIME_HERMES)
      mf_warning(c, cap_node_get(res, "memory_mb"), "memory_mb",
                 "0 declares no memory cap (Covenant's meaning); capsule enforces its default "
                 "of %d MiB for the agent's process; write the MiB it needs to change that",
                 COVENANT_MEMORY_MB);
    memory_mb = COVENANT_MEMORY_MB;
  }
  int64_t disk_mb = mebibytes(c, res, "disk_mb", 0, 100);
  int network = mf_enum(c, res, "network", 0, network_names, NET_HTTPS_ONLY);
  mf_pop(c, mark);

  spec->limits.cpu_ms_per_task = (uint64_t)cpu_ms;
  /* the seed kills at the elapsed cap when the projection tick did not */
  spec->limits.wall_ms = (uint64_t)cpu_ms;
  spec->limits.memory_bytes = (uint64_t)memory_mb * MIB;
  spec->limits.disk_bytes = (uint64_t)disk_mb * MIB;
  spec->limits.cpu_fraction = 1.0;
  spec->limits.pids = COVENANT_PIDS;
  spec->limits.nofile = COVENANT_NOFILE;

  switch (network) {
  case NET_OFF:
    spec->network.mode = CAP_NET_BLOCKED;
    spec->network.dns = false;
    break;
  case NET_FULL:
    spec->network.mode = CAP_NET_UNRESTRICTED;
    spec->network.dns = true;
    break;
  default:
    /* any host, HTTPS port only, through the proxy (which resolves names) */
    spec->network.mode = CAP_NET_PROXY;
    cap_strv_push(&spec->network.allow_domains, "*");
    cap_ports_push(&spec->network.connect, 443);
    spec->network.dns = false;
    break;
  }
}

static void lower_sandbox(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  const struct cap_node *sb = table(c, root, "sandbox", false);
  size_t mark = mf_push_key(c, "sandbox");
  mf_unknown_keys(c, sb, sandbox_keys, CAP_SEV_ERROR);
  bool required = mf_bool(c, sb, "required", 0, false);
  int backend = mf_enum(c, sb, "backend", 0, backend_names, -1);
  int filesystem = mf_enum(c, sb, "filesystem", 0, filesystem_names, -1);
  const struct cap_node *backend_node = cap_node_get(sb, "backend");
  if (!backend_node)
    backend = BACKEND_TRUSTED_LOCAL;
  if (required && backend == BACKEND_TRUSTED_LOCAL) {
    if (backend_node)
      mf_error(c, backend_node, "backend",
               "\"trusted-local\" is not a sandbox, but sandbox.required = true; set backend = "
               "\"linux-gvisor\" or required = false");
    else
      mf_error(c, cap_node_get(sb, "required"), "required",
               "true needs a sandbox-grade backend, but backend defaults to \"trusted-local\"; "
               "add backend = \"linux-gvisor\"");
  }
  if (filesystem == FS_HOST)
    mf_warning(c, cap_node_get(sb, "filesystem"), "filesystem",
               "\"host\" grants the agent the whole host filesystem read-write; use "
               "\"ephemeral\" for a private scratch directory unless it truly needs the host");
  mf_pop(c, mark);

  if (backend < 0)
    backend = BACKEND_TRUSTED_LOCAL;
  if (filesystem < 0)
    filesystem = FS_READ_ONLY_PACKAGE;
  spec->sandbox.required = required;
  spec->sandbox.declared_backend = cap_xstrdup(backend_names[backend]);
  spec->sandbox.backend = backend == BACKEND_GVISOR ? CAP_BACKEND_GVISOR : CAP_BACKEND_CAPSULE;
  spec->sandbox.filesystem = cap_xstrdup(filesystem_names[filesystem]);
  if (filesystem == FS_EPHEMERAL)
    spec->sandbox.private_tmp = true;
  else if (filesystem == FS_HOST)
    cap_spec_add_grant(spec, "/", CAP_ACCESS_READWRITE, CAP_FS_DIRECTORY, CAP_ORIGIN_MANIFEST);
}

static void lower_settlement(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  const struct cap_node *st = table(c, root, "settlement", false);
  size_t mark = mf_push_key(c, "settlement");
  mf_unknown_keys(c, st, settlement_keys, CAP_SEV_WARNING);
  spec->budget_credits_per_hour =
      (uint64_t)mf_int(c, st, "budget_credits_per_hour", 0, 0, INT64_MAX, 0);
  int priority = mf_enum(c, st, "priority", 0, priority_names, 1);
  spec->priority = (enum cap_priority)(CAP_PRIORITY_LOW + priority); /* priority_names' order */
  mf_pop(c, mark);
}

/* Documentary today (Hermes enforces server-side); recorded whatever the
 * runtime so operators see what the agent expects. */
static void lower_hermes(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  const struct cap_node *h = table(c, root, "hermes", false);
  size_t mark = mf_push_key(c, "hermes");
  mf_unknown_keys(c, h, hermes_keys, CAP_SEV_WARNING);
  const struct cap_node *tools = mf_string_array(c, h, "tools_allowed", 0);
  for (size_t i = 0; tools && i < tools->u.arr.len; i++)
    cap_strv_push(&spec->hermes_tools_allowed, tools->u.arr.items[i]->u.str.ptr);
  int policy = mf_enum(c, h, "approval_policy", 0, approval_names, 0);
  spec->hermes_approval_policy = cap_xstrdup(approval_names[policy]);
  mf_pop(c, mark);
}

void cap_covenant_lower(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  lower_agent(c, root, spec);
  lower_capabilities(c, root, spec);
  lower_resources(c, root, spec);
  lower_sandbox(c, root, spec);
  lower_settlement(c, root, spec);
  lower_hermes(c, root, spec);
  cap_xcapsule_lower(c, cap_node_get(root, "x-capsule"), spec);
  spec->tool_source = CAP_TOOL_SOURCE_MANIFEST;
}
