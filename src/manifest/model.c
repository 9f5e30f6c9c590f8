#include "model.h"

#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "jsonschema/jsonschema.h"

struct cap_spec *cap_spec_new(enum cap_format format)
{
  struct cap_spec *spec = cap_xcalloc(1, sizeof(*spec));
  spec->format = format;
  spec->doc = cap_doc_new();
  return spec;
}

void cap_strv_push(struct cap_strv *sv, const char *s)
{
  sv->v = cap_xrealloc(sv->v, (sv->len + 1) * sizeof(char *));
  sv->v[sv->len++] = cap_xstrdup(s);
}

void cap_strv_free(struct cap_strv *sv)
{
  for (size_t i = 0; i < sv->len; i++)
    free(sv->v[i]);
  free(sv->v);
  sv->v = NULL;
  sv->len = 0;
}

bool cap_strv_contains(const struct cap_strv *sv, const char *s)
{
  for (size_t i = 0; i < sv->len; i++)
    if (strcmp(sv->v[i], s) == 0)
      return true;
  return false;
}

void cap_ports_push(struct cap_ports *p, uint16_t port)
{
  p->v = cap_xrealloc(p->v, (p->len + 1) * sizeof(uint16_t));
  p->v[p->len++] = port;
}

/* Appends one zeroed element to a spec array. */
#define SPEC_APPEND(arr, n)                                                                        \
  ({                                                                                               \
    (arr) = cap_xrealloc((arr), ((n) + 1) * sizeof(*(arr)));                                       \
    memset(&(arr)[(n)], 0, sizeof(*(arr)));                                                        \
    &(arr)[(n)++];                                                                                 \
  })

struct cap_fs_grant *cap_spec_add_grant(struct cap_spec *spec, const char *path,
                                        enum cap_access access, enum cap_fs_type type,
                                        enum cap_grant_origin origin)
{
  struct cap_fs_grant *g = SPEC_APPEND(spec->grants, spec->n_grants);
  g->path = cap_xstrdup(path);
  g->access = access;
  g->type = type;
  g->origin = origin;
  return g;
}

struct cap_tool *cap_spec_add_tool(struct cap_spec *spec)
{
  return SPEC_APPEND(spec->tools, spec->n_tools);
}

struct cap_secret *cap_spec_add_secret(struct cap_spec *spec)
{
  return SPEC_APPEND(spec->secrets, spec->n_secrets);
}

struct cap_endpoint *cap_spec_add_endpoint(struct cap_spec *spec, const char *host)
{
  struct cap_endpoint *e = SPEC_APPEND(spec->network.endpoints, spec->network.n_endpoints);
  e->host = cap_xstrdup(host);
  return e;
}

struct cap_credential_route *cap_spec_add_route(struct cap_spec *spec)
{
  return SPEC_APPEND(spec->routes, spec->n_routes);
}

struct cap_setting *cap_spec_add_setting(struct cap_spec *spec)
{
  return SPEC_APPEND(spec->settings, spec->n_settings);
}

struct cap_trigger *cap_spec_add_trigger(struct cap_spec *spec)
{
  return SPEC_APPEND(spec->triggers, spec->n_triggers);
}

void cap_rules_push(struct cap_http_rule **rules, size_t *n, const char *method, const char *path)
{
  struct cap_http_rule *r = SPEC_APPEND(*rules, *n);
  r->method = cap_xstrdup(method);
  r->path = cap_xstrdup(path);
}

static struct cap_node *adopt(struct cap_doc *doc, const struct cap_node *n)
{
  struct cap_node *copy = cap_node_new(doc, (enum cap_node_kind)n->kind, n->line, n->col);
  copy->subkind = n->subkind;
  switch ((enum cap_node_kind)n->kind) {
  case CAP_NODE_NULL:
  case CAP_NODE_BOOL: copy->u = n->u; break;
  case CAP_NODE_INT:
  case CAP_NODE_FLOAT:
    copy->u.num = n->u.num;
    if (n->u.num.raw)
      copy->u.num.raw = cap_doc_strndup(doc, n->u.num.raw, strlen(n->u.num.raw));
    break;
  case CAP_NODE_STRING:
  case CAP_NODE_DATETIME:
    copy->u.str.ptr = cap_doc_strndup(doc, n->u.str.ptr, n->u.str.len);
    copy->u.str.len = n->u.str.len;
    break;
  case CAP_NODE_ARRAY:
    for (size_t i = 0; i < n->u.arr.len; i++)
      cap_node_array_push(doc, copy, adopt(doc, n->u.arr.items[i]));
    break;
  case CAP_NODE_OBJECT:
    for (size_t i = 0; i < n->u.obj.len; i++) {
      const struct cap_member *m = &n->u.obj.items[i];
      cap_node_object_add(doc, copy, m->key, m->keylen, m->line, m->col, adopt(doc, m->value));
    }
    break;
  }
  return copy;
}

const struct cap_node *cap_spec_adopt_node(struct cap_spec *spec, const struct cap_node *n)
{
  return n ? adopt(spec->doc, n) : NULL;
}

void cap_spec_add_system_grants(struct cap_spec *spec)
{
  /* What a dynamically linked program needs to start and to verify TLS:
   * the same set bubblewrap users bind for a minimal sandbox. Read-only. */
  static const struct {
    const char *path;
    enum cap_fs_type type;
  } system[] = {
      {"/usr", CAP_FS_DIRECTORY},          {"/bin", CAP_FS_DIRECTORY},
      {"/sbin", CAP_FS_DIRECTORY},         {"/lib", CAP_FS_DIRECTORY},
      {"/lib64", CAP_FS_DIRECTORY},        {"/etc/alternatives", CAP_FS_DIRECTORY},
      {"/etc/ssl", CAP_FS_DIRECTORY},      {"/etc/ca-certificates", CAP_FS_DIRECTORY},
      {"/etc/ld.so.cache", CAP_FS_FILE},   {"/etc/localtime", CAP_FS_FILE},
      {"/etc/nsswitch.conf", CAP_FS_FILE},
  };
  for (size_t i = 0; i < sizeof(system) / sizeof(system[0]); i++)
    cap_spec_add_grant(spec, system[i].path, CAP_ACCESS_READ, system[i].type, CAP_ORIGIN_SYSTEM);
}

void cap_rules_free(struct cap_http_rule *rules, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    free(rules[i].method);
    free(rules[i].path);
  }
  free(rules);
}

void cap_tools_free(struct cap_tool *tools, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    free(tools[i].name);
    free(tools[i].description);
    cap_js_validator_free(tools[i].validator);
  }
  free(tools);
}

static void routes_free(struct cap_credential_route *routes, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    struct cap_credential_route *r = &routes[i];
    free(r->name);
    free(r->upstream);
    free(r->source);
    free(r->header);
    free(r->format);
    free(r->path_pattern);
    free(r->path_replacement);
    free(r->query_param_name);
    free(r->env_var);
    cap_rules_free(r->rules, r->n_rules);
  }
  free(routes);
}

static void settings_free(struct cap_setting *settings, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    free(settings[i].name);
    free(settings[i].label);
    free(settings[i].type);
    free(settings[i].description);
  }
  free(settings);
}

static void triggers_free(struct cap_trigger *triggers, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    free(triggers[i].id);
    free(triggers[i].local_id);
    free(triggers[i].label);
    free(triggers[i].description);
  }
  free(triggers);
}

void cap_spec_free(struct cap_spec *spec)
{
  if (!spec)
    return;
  free(spec->id);
  free(spec->name);
  free(spec->version);
  free(spec->description);
  free(spec->class_name);
  free(spec->log_name);
  free(spec->source_path);
  free(spec->package_dir);
  free(spec->runtime.image);
  free(spec->runtime.entry);
  free(spec->runtime.interpreter);
  cap_strv_free(&spec->runtime.command);
  free(spec->discovery_tool_name);
  cap_tools_free(spec->tools, spec->n_tools);
  for (size_t i = 0; i < spec->n_grants; i++) {
    free(spec->grants[i].path);
    free(spec->grants[i].at);
  }
  free(spec->grants);
  cap_strv_free(&spec->deny);
  cap_strv_free(&spec->network.allow_domains);
  for (size_t i = 0; i < spec->network.n_endpoints; i++) {
    free(spec->network.endpoints[i].host);
    cap_rules_free(spec->network.endpoints[i].rules, spec->network.endpoints[i].n_rules);
  }
  free(spec->network.endpoints);
  free(spec->network.connect.v);
  free(spec->network.bind.v);
  free(spec->network.localhost.v);
  routes_free(spec->routes, spec->n_routes);
  for (size_t i = 0; i < spec->n_secrets; i++) {
    free(spec->secrets[i].name);
    free(spec->secrets[i].type);
    free(spec->secrets[i].label);
    free(spec->secrets[i].description);
  }
  free(spec->secrets);
  cap_strv_free(&spec->process.allowed_commands);
  cap_strv_free(&spec->process.blocked_commands);
  free(spec->process.declared_exec_strategy);
  cap_strv_free(&spec->rollback.exclude_patterns);
  cap_strv_free(&spec->rollback.exclude_globs);
  free(spec->sandbox.declared_backend);
  free(spec->sandbox.filesystem);
  free(spec->sandbox.workspace);
  settings_free(spec->settings, spec->n_settings);
  triggers_free(spec->triggers, spec->n_triggers);
  cap_strv_free(&spec->actions_required);
  cap_strv_free(&spec->actions_optional);
  cap_strv_free(&spec->hermes_tools_allowed);
  free(spec->hermes_approval_policy);
  free(spec->notes);
  cap_doc_free(spec->doc);
  free(spec);
}

void cap_spec_freep(struct cap_spec **spec) { cap_spec_free(*spec); }

const char *cap_format_name(enum cap_format f)
{
  static const char *const names[] = {"selu", "covenant", "talos", "nono", "nono-profile"};
  return f <= CAP_FORMAT_NONO_PROFILE ? names[f] : "unknown";
}

const char *cap_access_name(enum cap_access a)
{
  static const char *const names[] = {"read", "write", "readwrite"};
  return a <= CAP_ACCESS_READWRITE ? names[a] : "read";
}

const char *cap_policy_name(enum cap_policy p)
{
  static const char *const names[] = {"allow", "ask", "block"};
  return p <= CAP_POLICY_BLOCK ? names[p] : "block";
}

const char *cap_net_mode_name(enum cap_net_mode m)
{
  static const char *const names[] = {"blocked", "proxy", "unrestricted"};
  return m <= CAP_NET_UNRESTRICTED ? names[m] : "blocked";
}

const char *cap_inject_mode_name(enum cap_inject_mode m)
{
  static const char *const names[] = {"header", "url_path", "query_param", "basic_auth"};
  return m <= CAP_INJECT_BASIC_AUTH ? names[m] : "header";
}

const char *cap_mode3_name(enum cap_mode3 m)
{
  static const char *const names[] = {"isolated", "allow_same_sandbox", "allow_all"};
  return m <= CAP_MODE_ALL ? names[m] : "isolated";
}

const char *cap_runtime_kind_name(enum cap_runtime_kind k)
{
  static const char *const names[] = {"grpc",       "stdio-jsonl", "hermes-http",
                                      "talos-node", "exec",        "mcp-stdio"};
  return k <= CAP_RUNTIME_MCP ? names[k] : "exec";
}

const char *cap_origin_name(enum cap_grant_origin o)
{
  static const char *const names[] = {"manifest", "system", "package", "workspace", "cache"};
  return o <= CAP_ORIGIN_CACHE ? names[o] : "manifest";
}

const char *cap_delivery_name(enum cap_delivery d)
{
  return d == CAP_DELIVERY_HANDLER ? "handler" : "env";
}

const char *cap_policy_source_name(enum cap_policy_source s)
{
  static const char *const names[] = {"default", "recommended_policy", "requires_confirmation"};
  return s <= CAP_POLICY_SOURCE_REQUIRES_CONFIRMATION ? names[s] : "default";
}

const char *cap_backend_name(enum cap_backend b)
{
  return b == CAP_BACKEND_GVISOR ? "gvisor" : "capsule";
}

const char *cap_tool_source_name(enum cap_tool_source s)
{
  return s == CAP_TOOL_SOURCE_DYNAMIC ? "dynamic" : "manifest";
}

const char *cap_priority_name(enum cap_priority p)
{
  static const char *const names[] = {NULL, "low", "normal", "high"};
  return p <= CAP_PRIORITY_HIGH ? names[p] : NULL;
}
