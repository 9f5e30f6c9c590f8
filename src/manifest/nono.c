/* nono capability manifest (the published format, docs/manifests.md, and
 * nono's JSON Schema, which is the source of truth) checked and lowered. The
 * format is already close to the canonical model: a nono manifest sandboxes
 * an arbitrary command, so it has no tools and no package directory. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "manifest/formats.h"

#define NONO_VERSION "0.1.0"
#define NONO_PIDS 4096u
#define NONO_NOFILE 1024u

static const char *const top_keys[] = {
    "$schema",
    "version",
    "filesystem",
    "network",
    "credentials",
    "process",
    "rollback",
    "resources",
    "x-capsule",
    /* the keys capsule's own resolved output adds: re-derived, not read */
    "capability",
    "runtime",
    "tools",
    "tool_source",
    "secrets",
    "limits",
    "sandbox",
    "settings",
    "triggers",
    "actions",
    "budget",
    "hermes",
    NULL,
};
static const char *const filesystem_keys[] = {"grants", "deny", NULL};
static const char *const grant_keys[] = {"path", "access", "type", "origin", NULL};
static const char *const deny_keys[] = {"path", NULL};
static const char *const network_keys[] = {"mode",  "allow_domains", "endpoints",
                                           "ports", "dns",           NULL};
static const char *const endpoint_keys[] = {"host", "rules", NULL};
static const char *const rule_keys[] = {"method", "path", NULL};
static const char *const port_keys[] = {"connect", "bind", "localhost", NULL};
static const char *const credential_keys[] = {"name",    "upstream",       "source", "inject",
                                              "env_var", "endpoint_rules", NULL};
static const char *const inject_keys[] = {
    "mode", "header", "format", "path_pattern", "path_replacement", "query_param_name", NULL};
static const char *const process_keys[] = {
    "allowed_commands", "blocked_commands",       "signal_mode", "process_info_mode", "ipc_mode",
    "exec_strategy",    "declared_exec_strategy", NULL};
static const char *const rollback_keys[] = {"enabled", "exclude_patterns", "exclude_globs", NULL};
static const char *const resource_keys[] = {"memory_bytes", NULL};

static const char *const access_names[] = {"read", "write", "readwrite", NULL};
static const char *const type_names[] = {"directory", "file", NULL};
static const char *const net_mode_names[] = {"blocked", "proxy", "unrestricted", NULL};
static const char *const inject_names[] = {"header", "url_path", "query_param", "basic_auth", NULL};
static const char *const mode3_names[] = {"isolated", "allow_same_sandbox", "allow_all", NULL};
static const char *const ipc_names[] = {"shared_memory_only", "full", NULL};
static const char *const strategy_names[] = {"direct", "monitor", "supervised", NULL};

/* An object member `key` (absent: NULL); reports a wrong kind. */
static const struct cap_node *section(struct mf_ctx *c, const struct cap_node *obj, const char *key,
                                      const char *const *known, enum cap_severity unknown_sev)
{
  const struct cap_node *s = mf_field(c, obj, key, CAP_NODE_OBJECT, 0);
  if (s) {
    size_t mark = mf_push_key(c, key);
    mf_unknown_keys(c, s, known, unknown_sev);
    mf_pop(c, mark);
  }
  return s;
}

static void grant_fn(struct mf_ctx *c, const struct cap_node *o, void *arg)
{
  struct cap_spec *spec = arg;
  mf_unknown_keys(c, o, grant_keys, CAP_SEV_ERROR);
  const struct cap_node *pathn = mf_field(c, o, "path", CAP_NODE_STRING, MF_REQUIRED | MF_NONEMPTY);
  const char *path = pathn ? pathn->u.str.ptr : NULL;
  if (path && path[0] != '/' && path[0] != '~') {
    mf_error(c, pathn, "path", "\"%s\" is not an absolute path; write /path or ~/path", path);
    path = NULL;
  }
  int access = mf_enum(c, o, "access", MF_REQUIRED, access_names, -1);
  int type = mf_enum(c, o, "type", 0, type_names, 0);
  /* a resolved manifest lists the system and package grants capsule adds by
   * itself; they are re-derived, so it loads back unchanged */
  const struct cap_node *origin = cap_node_get(o, "origin");
  if (origin && origin->kind == CAP_NODE_STRING &&
      (strcmp(origin->u.str.ptr, "system") == 0 || strcmp(origin->u.str.ptr, "package") == 0))
    return;
  if (path && access >= 0)
    cap_spec_add_grant(spec, path, (enum cap_access)access,
                       type == 1 ? CAP_FS_FILE : CAP_FS_DIRECTORY, CAP_ORIGIN_MANIFEST);
}

static void deny_fn(struct mf_ctx *c, const struct cap_node *o, void *arg)
{
  struct cap_spec *spec = arg;
  mf_unknown_keys(c, o, deny_keys, CAP_SEV_ERROR);
  const char *path = mf_string(c, o, "path", MF_REQUIRED | MF_NONEMPTY, NULL);
  if (path)
    cap_strv_push(&spec->deny, path);
}

static void nono_filesystem(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  const struct cap_node *fs = section(c, root, "filesystem", filesystem_keys, CAP_SEV_ERROR);
  if (!fs)
    return;
  size_t mark = mf_push_key(c, "filesystem");
  mf_each_object(c, fs, "grants", 0, grant_fn, spec);
  mf_each_object(c, fs, "deny", 0, deny_fn, spec);
  mf_pop(c, mark);
}

/* A DNS name: labels of [A-Za-z0-9-], 1..63 chars, not starting or ending
 * with '-', at most 253 in all. */
static bool valid_hostname(const char *s, size_t n)
{
  if (n == 0 || n > 253)
    return false;
  size_t label = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i == n || s[i] == '.') {
      if (label == 0 || label > 63 || s[i - 1] == '-' || s[i - label] == '-')
        return false;
      label = 0;
      continue;
    }
    if (!(isalnum((unsigned char)s[i]) || s[i] == '-') || (unsigned char)s[i] >= 0x80)
      return false;
    label++;
  }
  return true;
}

static void nono_domain(struct mf_ctx *c, const struct cap_node *item, size_t index,
                        struct cap_spec *spec)
{
  const char *d = item->u.str.ptr;
  size_t n = item->u.str.len;
  const char *host = d;
  if (n >= 2 && d[0] == '*' && d[1] == '.')
    host = d + 2;
  else if (n >= 1 && d[0] == '.')
    host = d + 1;
  size_t m = mf_push_index(c, index);
  if (n == 1 && d[0] == '*') /* any host: what capsule's own output writes for Covenant */
    cap_strv_push(&spec->network.allow_domains, d);
  else if (!valid_hostname(host, n - (size_t)(host - d)))
    mf_error(c, item, NULL,
             "\"%s\" is not a hostname; write example.com, .example.com for its subdomains, or * "
             "for any host",
             d);
  else if (host != d)
    cap_strv_push(&spec->network.allow_domains, host - 1); /* ".suffix" */
  else
    cap_strv_push(&spec->network.allow_domains, d);
  mf_pop(c, m);
}

/* method: "*" or an RFC 9110 token (stored upper-case); path: starts with '/' */
static void rule_fn(struct mf_ctx *c, const struct cap_node *o, void *arg)
{
  void **args = arg;
  struct cap_http_rule **rules = args[0];
  size_t *n = args[1];
  mf_unknown_keys(c, o, rule_keys, CAP_SEV_ERROR);
  const struct cap_node *method =
      mf_field(c, o, "method", CAP_NODE_STRING, MF_REQUIRED | MF_NONEMPTY);
  const struct cap_node *path = mf_field(c, o, "path", CAP_NODE_STRING, MF_REQUIRED | MF_NONEMPTY);
  bool ok = method && path;
  char upper[64] = "";
  if (method) {
    const char *s = method->u.str.ptr;
    bool token = method->u.str.len < sizeof upper && strcmp(s, "*") != 0;
    for (size_t i = 0; token && i < method->u.str.len; i++) {
      if (!isalpha((unsigned char)s[i]) && s[i] != '-' && s[i] != '_')
        token = false;
      upper[i] = (char)toupper((unsigned char)s[i]);
    }
    if (strcmp(s, "*") == 0)
      strcpy(upper, "*");
    else if (!token) {
      mf_error(c, method, "method", "\"%s\" is not an HTTP method; write GET, POST, ... or *", s);
      ok = false;
    }
  }
  if (path && path->u.str.ptr[0] != '/') {
    mf_error(c, path, "path",
             "\"%s\" must start with '/'; write a URL path glob such as /repos/*/issues/**",
             path->u.str.ptr);
    ok = false;
  }
  if (ok)
    cap_rules_push(rules, n, upper, path->u.str.ptr);
}

void cap_nono_rules(struct mf_ctx *c, const struct cap_node *o, const char *key,
                    struct cap_http_rule **rules, size_t *n)
{
  void *args[2] = {rules, n};
  mf_each_object(c, o, key, 0, rule_fn, args);
}

/* "host" or "host:port" with port 1..65535; *.suffix allowed */
static bool valid_host_port(const char *s)
{
  const char *colon = strrchr(s, ':');
  size_t hlen = colon ? (size_t)(colon - s) : strlen(s);
  if (colon) {
    const char *p = colon + 1;
    if (!*p || strlen(p) > 5)
      return false;
    long port = 0;
    for (; *p; p++) {
      if (*p < '0' || *p > '9')
        return false;
      port = port * 10 + (*p - '0');
    }
    if (port < 1 || port > 65535)
      return false;
  }
  if (hlen >= 2 && s[0] == '*' && s[1] == '.')
    return valid_hostname(s + 2, hlen - 2);
  return valid_hostname(s, hlen);
}

static void endpoint_fn(struct mf_ctx *c, const struct cap_node *o, void *arg)
{
  struct cap_spec *spec = arg;
  mf_unknown_keys(c, o, endpoint_keys, CAP_SEV_ERROR);
  const struct cap_node *host = mf_field(c, o, "host", CAP_NODE_STRING, MF_REQUIRED | MF_NONEMPTY);
  struct cap_http_rule *rules = NULL;
  size_t n = 0;
  cap_nono_rules(c, o, "rules", &rules, &n);
  if (host && !valid_host_port(host->u.str.ptr)) {
    mf_error(c, host, "host", "\"%s\" is not host or host:port (port 1..65535)", host->u.str.ptr);
    host = NULL;
  }
  if (!host) {
    cap_rules_free(rules, n);
    return;
  }
  struct cap_endpoint *e = cap_spec_add_endpoint(spec, host->u.str.ptr);
  e->rules = rules;
  e->n_rules = n;
}

void cap_nono_ports(struct mf_ctx *c, const struct cap_node *ports, const char *key,
                    struct cap_ports *out)
{
  const struct cap_node *arr = mf_field(c, ports, key, CAP_NODE_ARRAY, 0);
  if (!arr)
    return;
  size_t mark = mf_push_key(c, key);
  for (size_t i = 0; i < arr->u.arr.len; i++) {
    const struct cap_node *p = arr->u.arr.items[i];
    size_t m2 = mf_push_index(c, i);
    if (p->kind != CAP_NODE_INT)
      mf_error(c, p, NULL, "must be an integer port, not %s", mf_kind_article(c, p->kind));
    else if (p->u.num.i < 1 || p->u.num.i > 65535)
      mf_error(c, p, NULL, "%lld is not a TCP port; it must be 1..65535", (long long)p->u.num.i);
    else
      cap_ports_push(out, (uint16_t)p->u.num.i);
    mf_pop(c, m2);
  }
  mf_pop(c, mark);
}

static void nono_network(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  spec->network.mode = CAP_NET_UNRESTRICTED;
  spec->network.dns = true;
  const struct cap_node *net = section(c, root, "network", network_keys, CAP_SEV_ERROR);
  if (!net)
    return;
  size_t mark = mf_push_key(c, "network");
  int mode = mf_enum(c, net, "mode", 0, net_mode_names, CAP_NET_UNRESTRICTED);
  spec->network.mode = (enum cap_net_mode)mode;
  spec->network.dns = mf_bool(c, net, "dns", 0, true);

  const struct cap_node *domains = mf_field(c, net, "allow_domains", CAP_NODE_ARRAY, 0);
  if (domains) {
    size_t m2 = mf_push_key(c, "allow_domains");
    for (size_t i = 0; i < domains->u.arr.len; i++) {
      const struct cap_node *d = domains->u.arr.items[i];
      if (d->kind == CAP_NODE_STRING) {
        nono_domain(c, d, i, spec);
      } else {
        size_t m3 = mf_push_index(c, i);
        mf_error(c, d, NULL, "must be a string, not %s", mf_kind_article(c, d->kind));
        mf_pop(c, m3);
      }
    }
    mf_pop(c, m2);
  }
  mf_each_object(c, net, "endpoints", 0, endpoint_fn, spec);
  const struct cap_node *ports = section(c, net, "ports", port_keys, CAP_SEV_ERROR);
  if (ports) {
    size_t m2 = mf_push_key(c, "ports");
    cap_nono_ports(c, ports, "connect", &spec->network.connect);
    cap_nono_ports(c, ports, "bind", &spec->network.bind);
    cap_nono_ports(c, ports, "localhost", &spec->network.localhost);
    mf_pop(c, m2);
  }
  if (mode != CAP_NET_PROXY) {
    static const char *const proxy_only[] = {"allow_domains", "endpoints", NULL};
    for (size_t i = 0; proxy_only[i]; i++) {
      const struct cap_node *n = cap_node_get(net, proxy_only[i]);
      if (n && n->kind == CAP_NODE_ARRAY && n->u.arr.len)
        mf_warning(c, n, proxy_only[i], "has no effect unless mode is \"proxy\" (mode is \"%s\")",
                   net_mode_names[mode]);
    }
  }
  if (mode == CAP_NET_BLOCKED)
    spec->network.dns = false;
  mf_pop(c, mark);
}

static bool is_loopback_http(const char *url)
{
  static const char *const hosts[] = {"http://127.0.0.1", "http://localhost", "http://[::1]", NULL};
  for (size_t i = 0; hosts[i]; i++) {
    size_t n = strlen(hosts[i]);
    if (strncmp(url, hosts[i], n) == 0 && (url[n] == '\0' || url[n] == ':' || url[n] == '/'))
      return true;
  }
  return false;
}

static bool valid_env_name(const char *s)
{
  if (!*s || isdigit((unsigned char)*s))
    return false;
  for (; *s; s++)
    if (!(isalnum((unsigned char)*s) || *s == '_') || (unsigned char)*s >= 0x80)
      return false;
  return true;
}

/* Checks the source URI; returns whether its scheme needs env_var: nono's
 * CapabilityManifest::validate() (crates/nono/src/manifest.rs) requires it
 * for the URI managers op://, apple-password:// and file://. */
static bool check_source(struct mf_ctx *c, const struct cap_node *src)
{
  const char *s = src->u.str.ptr;
  const char *sep = strstr(s, "://");
  if (!sep) /* a bare keystore account name */
    return false;
  if (strncmp(s, "env://", 6) == 0) {
    if (!valid_env_name(s + 6))
      mf_error(c, src, "source",
               "\"%s\": env:// needs an environment variable name such as env://GITHUB_TOKEN", s);
    return false;
  }
  if (strncmp(s, "file://", 7) == 0) {
    if (s[7] != '/')
      mf_error(c, src, "source",
               "\"%s\": file:// needs an absolute path, as in file:///run/secrets/token", s);
    return true;
  }
  static const struct {
    const char *scheme;
    bool needs_env_var;
  } schemes[] = {{"op://", true}, {"bw://", false}, {"apple-password://", true}};
  for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
    size_t n = strlen(schemes[i].scheme);
    if (strncmp(s, schemes[i].scheme, n) == 0) {
      if (!s[n])
        mf_error(c, src, "source", "\"%s\" names no item after %s", s, schemes[i].scheme);
      return schemes[i].needs_env_var;
    }
  }
  mf_error(c, src, "source",
           "\"%s\" has an unsupported scheme; use env://, file://, op://, bw://, "
           "apple-password://, or a bare keystore account name",
           s);
  return false;
}

static char *dup_or_null(const char *s) { return s ? cap_xstrdup(s) : NULL; }

/* A credential's "inject" object (how the proxy adds the secret). */
struct inject_fields {
  enum cap_inject_mode mode;
  const char *header, *format, *path_pattern, *path_replacement, *query;
};

/* Reads o's "inject" (absent: header mode, the defaults); false when a
 * mode's required field is missing or a placeholder is absent. */
static bool read_inject(struct mf_ctx *c, const struct cap_node *o, struct inject_fields *f)
{
  const struct cap_node *inject = section(c, o, "inject", inject_keys, CAP_SEV_ERROR);
  if (!inject)
    return true;
  bool ok = true;
  size_t mark = mf_push_key(c, "inject");
  f->mode = (enum cap_inject_mode)mf_enum(c, inject, "mode", 0, inject_names, CAP_INJECT_HEADER);
  f->header = mf_string(c, inject, "header", MF_NONEMPTY, NULL);
  const struct cap_node *fmt = mf_field(c, inject, "format", CAP_NODE_STRING, 0);
  if (fmt && !strstr(fmt->u.str.ptr, "{}")) {
    mf_error(c, fmt, "format",
             "\"%s\" has no {} placeholder for the secret; write e.g. \"Bearer {}\"",
             fmt->u.str.ptr);
    ok = false;
  }
  f->format = fmt ? fmt->u.str.ptr : NULL;
  const struct cap_node *pp = mf_field(c, inject, "path_pattern", CAP_NODE_STRING,
                                       f->mode == CAP_INJECT_URL_PATH ? MF_REQUIRED : 0);
  if (pp && !strstr(pp->u.str.ptr, "{}")) {
    mf_error(c, pp, "path_pattern", "\"%s\" has no {} placeholder; write e.g. \"/bot{}/\"",
             pp->u.str.ptr);
    ok = false;
  }
  f->path_pattern = pp ? pp->u.str.ptr : NULL;
  f->path_replacement = mf_string(c, inject, "path_replacement", 0, NULL);
  f->query = mf_string(c, inject, "query_param_name",
                       (f->mode == CAP_INJECT_QUERY_PARAM ? MF_REQUIRED : 0) | MF_NONEMPTY, NULL);
  if ((f->mode == CAP_INJECT_URL_PATH && !f->path_pattern) ||
      (f->mode == CAP_INJECT_QUERY_PARAM && !f->query))
    ok = false;
  mf_pop(c, mark);
  return ok;
}

static void credential_fn(struct mf_ctx *c, const struct cap_node *o, void *arg)
{
  struct cap_spec *spec = arg;
  mf_unknown_keys(c, o, credential_keys, CAP_SEV_ERROR);
  const char *name = mf_string(c, o, "name", MF_REQUIRED | MF_NONEMPTY, NULL);
  const struct cap_node *upstream =
      mf_field(c, o, "upstream", CAP_NODE_STRING, MF_REQUIRED | MF_NONEMPTY);
  const struct cap_node *source =
      mf_field(c, o, "source", CAP_NODE_STRING, MF_REQUIRED | MF_NONEMPTY);
  const struct cap_node *env_var = mf_field(c, o, "env_var", CAP_NODE_STRING, MF_NONEMPTY);
  bool ok = name && upstream && source;
  if (upstream && strncmp(upstream->u.str.ptr, "https://", 8) != 0 &&
      !is_loopback_http(upstream->u.str.ptr)) {
    mf_error(c, upstream, "upstream",
             "\"%s\" must be an https:// URL (http:// only for 127.0.0.1, localhost or [::1]): "
             "the proxy adds the secret to these requests",
             upstream->u.str.ptr);
    ok = false;
  }
  /* nono's validate() refuses these sources without env_var: the variable
   * the tool's SDK reads cannot be derived from the URI */
  if (source && check_source(c, source) && !env_var) {
    mf_error(c, o, "env_var",
             "is required when source is a URI manager reference (op://, apple-password://, or "
             "file://); set it to the variable the tool's SDK reads its key from, e.g. "
             "\"OPENAI_API_KEY\"");
    ok = false;
  }
  if (env_var && !valid_env_name(env_var->u.str.ptr))
    mf_error(c, env_var, "env_var", "\"%s\" is not an environment variable name",
             env_var->u.str.ptr);

  struct inject_fields in = {.mode = CAP_INJECT_HEADER};
  ok = read_inject(c, o, &in) && ok;
  struct cap_http_rule *rules = NULL;
  size_t n_rules = 0;
  cap_nono_rules(c, o, "endpoint_rules", &rules, &n_rules);
  if (!ok) {
    cap_rules_free(rules, n_rules);
    return;
  }
  struct cap_credential_route *r = cap_spec_add_route(spec);
  r->name = cap_xstrdup(name);
  r->upstream = cap_xstrdup(upstream->u.str.ptr);
  r->source = cap_xstrdup(source->u.str.ptr);
  r->mode = in.mode;
  r->header = dup_or_null(in.header);
  r->format = dup_or_null(in.format);
  r->path_pattern = dup_or_null(in.path_pattern);
  r->path_replacement = dup_or_null(in.path_replacement);
  r->query_param_name = dup_or_null(in.query);
  r->env_var = dup_or_null(env_var ? env_var->u.str.ptr : NULL);
  r->rules = rules;
  r->n_rules = n_rules;
}

static void string_list(struct mf_ctx *c, const struct cap_node *obj, const char *key,
                        struct cap_strv *out)
{
  const struct cap_node *arr = mf_string_array(c, obj, key, 0);
  for (size_t i = 0; arr && i < arr->u.arr.len; i++)
    cap_strv_push(out, arr->u.arr.items[i]->u.str.ptr);
}

static void nono_process(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  const struct cap_node *p = section(c, root, "process", process_keys, CAP_SEV_ERROR);
  if (!p)
    return;
  size_t mark = mf_push_key(c, "process");
  string_list(c, p, "allowed_commands", &spec->process.allowed_commands);
  string_list(c, p, "blocked_commands", &spec->process.blocked_commands);
  const struct cap_node *blocked = cap_node_get(p, "blocked_commands");
  for (size_t i = 0; i < spec->process.allowed_commands.len; i++) {
    const char *cmd = spec->process.allowed_commands.v[i];
    if (cap_strv_contains(&spec->process.blocked_commands, cmd))
      mf_error(c, blocked, "blocked_commands",
               "\"%s\" is both allowed and blocked; remove it from one list", cmd);
  }
  spec->process.signal_mode =
      (enum cap_mode3)mf_enum(c, p, "signal_mode", 0, mode3_names, CAP_MODE_ISOLATED);
  spec->process.process_info_mode =
      (enum cap_mode3)mf_enum(c, p, "process_info_mode", 0, mode3_names, CAP_MODE_ISOLATED);
  spec->process.ipc_full = mf_enum(c, p, "ipc_mode", 0, ipc_names, 0) == 1;
  int strategy = mf_enum(c, p, "exec_strategy", 0, strategy_names, -1);
  /* capsule's own resolved output writes the strategy it applies
   * (supervised) and keeps the declared one beside it: that is the record */
  int declared = mf_enum(c, p, "declared_exec_strategy", 0, strategy_names, -1);
  if (declared >= 0 || strategy >= 0)
    spec->process.declared_exec_strategy =
        cap_xstrdup(strategy_names[declared >= 0 ? declared : strategy]);
  spec->process.expand_opens = (declared >= 0 ? declared : strategy) == 2; /* "supervised" */
  mf_pop(c, mark);
}

static void nono_rollback(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  const struct cap_node *r = section(c, root, "rollback", rollback_keys, CAP_SEV_ERROR);
  if (!r)
    return;
  size_t mark = mf_push_key(c, "rollback");
  spec->rollback.enabled = mf_bool(c, r, "enabled", 0, false);
  string_list(c, r, "exclude_patterns", &spec->rollback.exclude_patterns);
  string_list(c, r, "exclude_globs", &spec->rollback.exclude_globs);
  mf_pop(c, mark);
}

/* nono's validate(): a rollback or a memory ceiling needs a supervising
 * parent, so both require exec_strategy "supervised" (nono's default is
 * "monitor"). capsule always supervises, but a manifest nono itself
 * refuses is refused here too, with nono's reason. */
static void nono_require_supervised(struct mf_ctx *c, const struct cap_node *root,
                                    const struct cap_spec *spec)
{
  const struct cap_node *p = cap_node_get(root, "process");
  const struct cap_node *es =
      p && p->kind == CAP_NODE_OBJECT ? cap_node_get(p, "exec_strategy") : NULL;
  const char *declared = es && es->kind == CAP_NODE_STRING ? es->u.str.ptr : NULL;
  if (declared && strcmp(declared, "supervised") == 0)
    return;
  const char *now = declared ? declared : "\"monitor\", the default";
  const struct cap_node *rb = cap_node_get(root, "rollback");
  if (spec->rollback.enabled)
    mf_error(c, cap_node_get(rb, "enabled"), "rollback.enabled",
             "true requires process.exec_strategy \"supervised\" (it is %s%s%s): rollback needs "
             "a parent process for snapshots; set exec_strategy to \"supervised\"",
             declared ? "\"" : "", now, declared ? "\"" : "");
  const struct cap_node *res = cap_node_get(root, "resources");
  const struct cap_node *mem =
      res && res->kind == CAP_NODE_OBJECT ? cap_node_get(res, "memory_bytes") : NULL;
  if (mem && spec->limits.memory_bytes)
    mf_error(c, mem, "resources.memory_bytes",
             "requires process.exec_strategy \"supervised\" (it is %s%s%s): limits are enforced "
             "by the supervising parent process; set exec_strategy to \"supervised\"",
             declared ? "\"" : "", now, declared ? "\"" : "");
}

void cap_nono_lower(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  mf_unknown_keys(c, root, top_keys, CAP_SEV_WARNING);
  mf_string(c, root, "$schema", 0, NULL);
  if (!cap_node_get(root, "version"))
    mf_error(c, root, "version",
             "required field is missing; a nono capability manifest starts with \"version\": "
             "\"" NONO_VERSION "\". (A nono profile has no version: capsule knows one by its "
             "sections, such as extends, meta, groups, workdir or filesystem.allow)");
  const struct cap_node *version = mf_field(c, root, "version", CAP_NODE_STRING, 0);
  if (version && strcmp(version->u.str.ptr, NONO_VERSION) != 0)
    mf_error(c, version, "version",
             "\"%s\" is not a supported manifest version; capsule reads version \"" NONO_VERSION
             "\"",
             version->u.str.ptr);

  nono_filesystem(c, root, spec);
  nono_network(c, root, spec);
  mf_each_object(c, root, "credentials", 0, credential_fn, spec);
  const struct cap_node *creds = cap_node_get(root, "credentials");
  if (creds && creds->kind == CAP_NODE_ARRAY) {
    size_t mark = mf_push_key(c, "credentials");
    mf_report_duplicates(c, creds, "name", "credential", "give each credential route its own name");
    mf_pop(c, mark);
  }
  nono_process(c, root, spec);
  nono_rollback(c, root, spec);

  spec->limits = (struct cap_limits){.pids = NONO_PIDS, .nofile = NONO_NOFILE};
  const struct cap_node *res = section(c, root, "resources", resource_keys, CAP_SEV_ERROR);
  if (res) {
    size_t mark = mf_push_key(c, "resources");
    spec->limits.memory_bytes = (uint64_t)mf_int(c, res, "memory_bytes", 0, 1, INT64_MAX, 0);
    mf_pop(c, mark);
  }
  nono_require_supervised(c, root, spec);

  /* nono manifests carry no identity; a capability is named by its folder */
  const char *folder = strrchr(spec->package_dir, '/');
  spec->id = cap_xstrdup(folder && folder[1] ? folder + 1 : spec->package_dir);
  spec->tool_source = CAP_TOOL_SOURCE_MANIFEST;
  spec->runtime.kind = CAP_RUNTIME_EXEC;
  spec->sandbox.private_tmp = true;
  cap_xcapsule_lower(c, cap_node_get(root, "x-capsule"), spec);
}
