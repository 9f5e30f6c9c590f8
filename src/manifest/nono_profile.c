/* One nono profile document read into a struct np_profile (nono's Profile,
 * crates/nono-cli/src/profile/mod.rs), the legacy keys drained into their
 * canonical lists as nono's deprecated_schema does, with one warning per
 * legacy key; keys nono knows that capsule does not enforce get a note.
 * `extends` is nono_profile_extends.c, the lowering nono_profile_lower.c. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/json.h"
#include "core/text.h"
#include "manifest/formats.h"
#include "manifest/load.h"
#include "manifest/nono_profile.h"

const char *const np_fs_keys[NP_FS_COUNT] = {
    "allow", "read", "write", "allow_file", "read_file", "write_file", "deny", "bypass_protection",
};

void np_profile_init(struct np_profile *p)
{
  *p = (struct np_profile){
      .signal_mode = -1, .process_info_mode = -1, .ipc_mode = -1, .capability_elevation = -1};
}

void np_credential_free(struct np_credential *k)
{
  char **fields[] = {&k->name,         &k->upstream,         &k->key,   &k->header, &k->format,
                     &k->path_pattern, &k->path_replacement, &k->query, &k->env_var};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    free(*fields[i]);
  cap_rules_free(k->rules, k->n_rules);
}

void np_profile_free(struct np_profile *p)
{
  free(p->name);
  free(p->network_profile);
  struct cap_strv *lists[] = {&p->extends,  &p->include,     &p->exclude,     &p->cmd_allow,
                              &p->cmd_deny, &p->credentials, &p->rb_patterns, &p->rb_globs};
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
    cap_strv_free(lists[i]);
  for (size_t i = 0; i < NP_FS_COUNT; i++)
    cap_strv_free(&p->fs[i]);
  for (size_t i = 0; i < p->n_domains; i++) {
    free(p->domains[i].domain);
    cap_rules_free(p->domains[i].rules, p->domains[i].n_rules);
  }
  free(p->domains);
  for (size_t i = 0; i < p->n_custom; i++)
    np_credential_free(&p->custom[i]);
  free(p->custom);
  free(p->open_port.v);
  free(p->listen_port.v);
  free(p->connect_port.v);
  np_profile_init(p);
}

/* ---- reading one document ------------------------------------------------ */

/* A key nono knows that capsule does not enforce: NULL note means handled. */
struct np_key {
  const char *key;
  const char *note;
};

#define NOTE_ENV                                                                                   \
  "secrets nono loads into the tool's environment are not delivered; route them "                  \
  "through network.custom_credentials (the proxy injects them) or capsule cred"

static const struct np_key top_keys[] = {
    {"$schema", NULL},
    {"version", NULL}, /* refused in np_read */
    {"extends", NULL},
    {"meta", NULL},
    {"security", NULL},
    {"groups", NULL},
    {"commands", NULL},
    {"filesystem", NULL},
    {"network", NULL},
    {"workdir", NULL},
    {"rollback", NULL},
    {"undo", NULL},
    {"policy", NULL},
    {"command_policies", NULL}, /* refused in np_read */
    {"hooks", "hooks install nono's integration into another program: command-line UX, not "
              "sandbox enforcement (nono's capability manifest has none)"},
    {"session_hooks", "scripts nono runs on the host before and after the sandbox; capsule runs "
                      "none"},
    {"diagnostics", "changes only nono's diagnostic output"},
    {"interactive", "deprecated, and ignored by nono too"},
    {"env_credentials", NOTE_ENV},
    {"secrets", NOTE_ENV},
    {"environment", "capsule gives the tool its own environment (docs/sandbox.md)"},
    {"open_urls", "opening URLs through the supervisor is not supported"},
    {"allow_launch_services", "macOS only"},
    {"allow_gpu", "capsule grants no GPU device"},
    {"packs", "nono's pack store is not consulted"},
    {"command_args", "give the command's arguments after --"},
    {"binary", "give the command after --"},
    {"credential_capture", "supervisor-side capture commands are not run"},
    {"unsafe_macos_seatbelt_rules", "macOS only"},
    {"linux", "nono's Linux knobs; capsule's sandbox applies its own layers (docs/sandbox.md)"},
    {NULL, NULL},
};

static const struct np_key security_keys[] = {
    {"signal_mode", NULL},
    {"process_info_mode", NULL},
    {"ipc_mode", NULL},
    {"groups", NULL},
    {"allowed_commands", NULL},
    {"capability_elevation", NULL},
    {"wsl2_proxy_policy", "WSL2 only"},
    {NULL, NULL},
};

#define NOTE_UNIX                                                                                  \
  "AF_UNIX socket grants are not supported: sockets outside the grants stay "                      \
  "unreachable"

static const struct np_key filesystem_keys[] = {
    {"allow", NULL},
    {"read", NULL},
    {"write", NULL},
    {"allow_file", NULL},
    {"read_file", NULL},
    {"write_file", NULL},
    {"deny", NULL},
    {"bypass_protection", NULL},
    {"suppress_save_prompt", "changes only nono's save-profile prompt"},
    {"ignore", "changes only nono's save-profile prompt"},
    {"unix_socket", NOTE_UNIX},
    {"unix_socket_bind", NOTE_UNIX},
    {"unix_socket_dir", NOTE_UNIX},
    {"unix_socket_dir_bind", NOTE_UNIX},
    {"unix_socket_subtree", NOTE_UNIX},
    {"unix_socket_subtree_bind", NOTE_UNIX},
    {NULL, NULL},
};

static const struct np_key network_keys[] = {
    {"block", NULL},
    {"network_profile", NULL},
    {"allow_domain", NULL},
    {"proxy_allow", NULL},
    {"allow_proxy", NULL},
    {"credentials", NULL},
    {"proxy_credentials", NULL},
    {"open_port", NULL},
    {"port_allow", NULL},
    {"allow_port", NULL},
    {"listen_port", NULL},
    {"connect_port", NULL},
    {"custom_credentials", NULL},
    {"allow_http2", "capsule's proxy speaks HTTP/1.1 upstream"},
    {"tls_intercept", "capsule's proxy intercepts TLS only where L7 rules need it "
                      "(docs/egress.md)"},
    {"upstream_proxy", "capsule's proxy connects directly; an upstream proxy is not used"},
    {"external_proxy", "capsule's proxy connects directly; an upstream proxy is not used"},
    {"upstream_bypass", "capsule's proxy connects directly; an upstream proxy is not used"},
    {"external_proxy_bypass", "capsule's proxy connects directly; an upstream proxy is not used"},
    {NULL, NULL},
};

static const struct np_key credential_keys[] = {
    {"upstream", NULL},
    {"credential_key", NULL},
    {"auth", NULL},
    {"aws_auth", NULL},
    {"inject_mode", NULL},
    {"inject_header", NULL},
    {"credential_format", NULL},
    {"path_pattern", NULL},
    {"path_replacement", NULL},
    {"query_param_name", NULL},
    {"env_var", NULL},
    {"endpoint_rules", NULL},
    {"proxy", "a per-route upstream proxy is not used"},
    {"tls_ca", "a per-route CA is not used; the proxy verifies against the system store"},
    {"tls_client_cert", "client certificates are not presented upstream"},
    {"tls_client_key", "client certificates are not presented upstream"},
    {NULL, NULL},
};

/* Reports unknown keys (errors: nono's profile schema has
 * additionalProperties false) and notes for known ones capsule ignores. */
static void check_keys(struct mf_ctx *c, const struct cap_node *obj, const struct np_key *keys)
{
  const char *names[64];
  size_t n = 0;
  for (; keys[n].key && n < 63; n++)
    names[n] = keys[n].key;
  names[n] = NULL;
  mf_unknown_keys(c, obj, names, CAP_SEV_ERROR);
  for (size_t i = 0; i < n; i++) {
    const struct cap_node *v = keys[i].note ? cap_node_get(obj, keys[i].key) : NULL;
    bool empty =
        v && (v->kind == CAP_NODE_NULL || (v->kind == CAP_NODE_ARRAY && v->u.arr.len == 0) ||
              (v->kind == CAP_NODE_OBJECT && v->u.obj.len == 0) ||
              (v->kind == CAP_NODE_BOOL && !v->u.boolean));
    if (v && !empty)
      mf_warning(c, v, keys[i].key, "ignored: %s", keys[i].note);
  }
}

static const struct cap_node *object_member(struct mf_ctx *c, const struct cap_node *obj,
                                            const char *key, const struct np_key *keys)
{
  const struct cap_node *s = mf_field(c, obj, key, CAP_NODE_OBJECT, MF_NULL_OK);
  if (s && keys) {
    size_t mark = mf_push_key(c, key);
    check_keys(c, s, keys);
    mf_pop(c, mark);
  }
  return s;
}

/* nono's `when` predicates ("linux", "macos:>=15", "!linux:nixos", or an
 * any-of array): capsule runs on Linux and evaluates the operating system
 * part; distribution and version qualifiers are not looked at. */
static bool when_one(const char *w)
{
  bool negate = w[0] == '!';
  const char *os = negate ? w + 1 : w;
  size_t n = strcspn(os, ":");
  bool linux_os = n == 5 && strncmp(os, "linux", 5) == 0;
  return negate ? !linux_os : linux_os;
}

static bool when_matches(struct mf_ctx *c, const struct cap_node *when)
{
  if (!when)
    return true;
  if (when->kind == CAP_NODE_STRING)
    return when_one(when->u.str.ptr);
  if (when->kind == CAP_NODE_ARRAY && when->u.arr.len > 0) {
    bool any = false;
    for (size_t i = 0; i < when->u.arr.len; i++)
      if (when->u.arr.items[i]->kind == CAP_NODE_STRING)
        any = any || when_one(when->u.arr.items[i]->u.str.ptr);
    return any;
  }
  mf_error(c, when, "when", "must be a platform predicate such as \"linux\" or an array of them");
  return false;
}

/* A list of strings, or of {value_key: string, when: predicate} entries
 * (nono's conditional entries), appended to out in order. */
static void read_list(struct mf_ctx *c, const struct cap_node *obj, const char *key,
                      const char *value_key, struct cap_strv *out)
{
  const struct cap_node *arr = mf_field(c, obj, key, CAP_NODE_ARRAY, MF_NULL_OK);
  if (!arr)
    return;
  size_t mark = mf_push_key(c, key);
  for (size_t i = 0; i < arr->u.arr.len; i++) {
    const struct cap_node *e = arr->u.arr.items[i];
    size_t m2 = mf_push_index(c, i);
    if (e->kind == CAP_NODE_STRING) {
      cap_strv_push(out, e->u.str.ptr);
    } else if (e->kind == CAP_NODE_OBJECT && value_key) {
      const char *const known[] = {value_key, "when", NULL};
      mf_unknown_keys(c, e, known, CAP_SEV_ERROR);
      const char *v = mf_string(c, e, value_key, MF_REQUIRED, NULL);
      if (v && when_matches(c, cap_node_get(e, "when")))
        cap_strv_push(out, v);
    } else {
      mf_error(c, e, NULL, "must be a string%s%s%s, not %s", value_key ? " or {\"" : "",
               value_key ? value_key : "", value_key ? "\": ..., \"when\": ...}" : "",
               mf_kind_article(c, e->kind));
    }
    mf_pop(c, m2);
  }
  mf_pop(c, mark);
}

/* A legacy key drained into its canonical list after the canonical values,
 * with nono's deprecation warning (one per key per file). */
static void read_legacy(struct mf_ctx *c, const struct cap_node *obj, const char *section,
                        const char *key, const char *canonical, const char *value_key,
                        struct cap_strv *out)
{
  const struct cap_node *v = cap_node_get(obj, key);
  if (!v)
    return;
  mf_warning(c, v, key,
             "deprecated key '%s.%s'; use '%s' instead (nono removes the legacy keys in v1.0.0, "
             "nono issue #594)",
             section, key, canonical);
  read_list(c, obj, key, value_key, out);
}

static void read_domains(struct mf_ctx *c, const struct cap_node *net, const char *key,
                         struct np_profile *p)
{
  const struct cap_node *arr = mf_field(c, net, key, CAP_NODE_ARRAY, MF_NULL_OK);
  if (!arr)
    return;
  size_t mark = mf_push_key(c, key);
  for (size_t i = 0; i < arr->u.arr.len; i++) {
    const struct cap_node *e = arr->u.arr.items[i];
    size_t m2 = mf_push_index(c, i);
    struct np_domain d = {0};
    if (e->kind == CAP_NODE_STRING) {
      d.domain = cap_xstrdup(e->u.str.ptr);
    } else if (e->kind == CAP_NODE_OBJECT) {
      static const char *const known[] = {"domain", "endpoints", NULL};
      mf_unknown_keys(c, e, known, CAP_SEV_ERROR);
      const char *domain = mf_string(c, e, "domain", MF_REQUIRED | MF_NONEMPTY, NULL);
      mf_field(c, e, "endpoints", CAP_NODE_ARRAY, MF_REQUIRED);
      cap_nono_rules(c, e, "endpoints", &d.rules, &d.n_rules);
      d.domain = domain ? cap_xstrdup(domain) : NULL;
    } else {
      mf_error(c, e, NULL, "must be a hostname or {\"domain\": ..., \"endpoints\": [...]}");
    }
    if (d.domain) {
      p->domains = cap_xrealloc(p->domains, (p->n_domains + 1) * sizeof *p->domains);
      p->domains[p->n_domains++] = d;
    } else {
      cap_rules_free(d.rules, d.n_rules);
    }
    mf_pop(c, m2);
  }
  mf_pop(c, mark);
}

static char *opt_string(struct mf_ctx *c, const struct cap_node *o, const char *key)
{
  const char *s = mf_string(c, o, key, MF_NULL_OK, NULL);
  return s ? cap_xstrdup(s) : NULL;
}

/* What nono checks of a route (validate_custom_credential, and validate()
 * on the manifest it becomes). */
static void check_credential(struct mf_ctx *c, const struct cap_node *o,
                             const struct np_credential *k)
{
  const char *u = k->upstream;
  bool loopback =
      u && (strncmp(u, "http://127.0.0.1", 16) == 0 || strncmp(u, "http://localhost", 16) == 0 ||
            strncmp(u, "http://[::1]", 12) == 0);
  if (u && strncmp(u, "https://", 8) != 0 && !loopback)
    mf_error(c, cap_node_get(o, "upstream"), "upstream",
             "\"%s\" must be an https:// URL (http:// only for a loopback host)", u);
  const char *key = k->key;
  if (key && !k->env_var &&
      (strncmp(key, "op://", 5) == 0 || strncmp(key, "apple-password://", 17) == 0 ||
       strncmp(key, "file://", 7) == 0))
    mf_error(c, cap_node_get(o, "credential_key"), "env_var",
             "is required when credential_key is a URI manager reference (op://, "
             "apple-password://, or file://); set it to the variable the tool's SDK reads, e.g. "
             "\"OPENAI_API_KEY\"");
  if (k->format && !strstr(k->format, "{}"))
    mf_error(c, cap_node_get(o, "credential_format"), "credential_format",
             "\"%s\" has no {} placeholder for the secret; write e.g. \"Bearer {}\"", k->format);
  if (k->mode == CAP_INJECT_URL_PATH && !k->path_pattern)
    mf_error(c, o, "path_pattern", "is required for inject_mode \"url_path\"");
  if (k->mode == CAP_INJECT_QUERY_PARAM && !k->query)
    mf_error(c, o, "query_param_name", "is required for inject_mode \"query_param\"");
}

static void read_custom_credentials(struct mf_ctx *c, const struct cap_node *net,
                                    struct np_profile *p)
{
  const struct cap_node *map = mf_field(c, net, "custom_credentials", CAP_NODE_OBJECT, MF_NULL_OK);
  if (!map)
    return;
  size_t mark = mf_push_key(c, "custom_credentials");
  static const char *const modes[] = {"header", "url_path", "query_param", "basic_auth", NULL};
  for (size_t i = 0; i < map->u.obj.len; i++) {
    const struct cap_member *m = &map->u.obj.items[i];
    size_t m2 = mf_push_key(c, m->key);
    if (m->value->kind != CAP_NODE_OBJECT) {
      mf_error(c, m->value, NULL,
               "must be a credential route object with upstream and "
               "credential_key");
      mf_pop(c, m2);
      continue;
    }
    const struct cap_node *o = m->value;
    check_keys(c, o, credential_keys);
    struct np_credential k = {.name = cap_xstrdup(m->key)};
    k.upstream = opt_string(c, o, "upstream");
    if (!k.upstream)
      mf_string(c, o, "upstream", MF_REQUIRED, NULL);
    k.key = opt_string(c, o, "credential_key");
    k.mode = (enum cap_inject_mode)mf_enum(c, o, "inject_mode", 0, modes, CAP_INJECT_HEADER);
    k.header = opt_string(c, o, "inject_header");
    k.format = opt_string(c, o, "credential_format");
    k.path_pattern = opt_string(c, o, "path_pattern");
    k.path_replacement = opt_string(c, o, "path_replacement");
    k.query = opt_string(c, o, "query_param_name");
    k.env_var = opt_string(c, o, "env_var");
    cap_nono_rules(c, o, "endpoint_rules", &k.rules, &k.n_rules);
    check_credential(c, o, &k);
    /* later definitions of a name replace earlier ones (a map merge) */
    for (size_t j = 0; j < p->n_custom; j++)
      if (strcmp(p->custom[j].name, k.name) == 0) {
        np_credential_free(&p->custom[j]);
        p->custom[j] = p->custom[--p->n_custom];
        break;
      }
    p->custom = cap_xrealloc(p->custom, (p->n_custom + 1) * sizeof *p->custom);
    p->custom[p->n_custom++] = k;
    mf_pop(c, m2);
  }
  mf_pop(c, mark);
}

static void read_network(struct mf_ctx *c, const struct cap_node *root, struct np_profile *p)
{
  const struct cap_node *net = object_member(c, root, "network", network_keys);
  if (!net)
    return;
  size_t mark = mf_push_key(c, "network");
  p->block = mf_bool(c, net, "block", MF_NULL_OK, false);
  const struct cap_node *np = cap_node_get(net, "network_profile");
  if (np && np->kind == CAP_NODE_NULL) {
    p->netprof_set = NP_CLEARED;
  } else if (np) {
    const char *name = mf_string(c, net, "network_profile", MF_NONEMPTY, NULL);
    if (name) {
      p->netprof_set = NP_SET;
      p->network_profile = cap_xstrdup(name);
    }
  }
  read_domains(c, net, "allow_domain", p);
  static const char *const domain_aliases[] = {"proxy_allow", "allow_proxy"};
  for (size_t i = 0; i < 2; i++)
    if (cap_node_get(net, domain_aliases[i])) {
      mf_warning(c, cap_node_get(net, domain_aliases[i]), domain_aliases[i],
                 "deprecated key 'network.%s'; use 'network.allow_domain' instead",
                 domain_aliases[i]);
      read_domains(c, net, domain_aliases[i], p);
    }
  const struct cap_node *creds = cap_node_get(net, "credentials");
  if (creds && creds->kind != CAP_NODE_NULL) {
    p->creds_set = NP_SET;
    read_list(c, net, "credentials", NULL, &p->credentials);
  }
  if (cap_node_get(net, "proxy_credentials")) {
    p->creds_set = NP_SET;
    read_legacy(c, net, "network", "proxy_credentials", "network.credentials", NULL,
                &p->credentials);
  }
  cap_nono_ports(c, net, "open_port", &p->open_port);
  static const char *const port_aliases[] = {"port_allow", "allow_port"};
  for (size_t i = 0; i < 2; i++)
    if (cap_node_get(net, port_aliases[i])) {
      mf_warning(c, cap_node_get(net, port_aliases[i]), port_aliases[i],
                 "deprecated key 'network.%s'; use 'network.open_port' instead", port_aliases[i]);
      cap_nono_ports(c, net, port_aliases[i], &p->open_port);
    }
  cap_nono_ports(c, net, "listen_port", &p->listen_port);
  cap_nono_ports(c, net, "connect_port", &p->connect_port);
  read_custom_credentials(c, net, p);
  mf_pop(c, mark);
}

static int read_mode(struct mf_ctx *c, const struct cap_node *sec, const char *key,
                     const char *const *names)
{
  const struct cap_node *v = cap_node_get(sec, key);
  if (!v || v->kind == CAP_NODE_NULL)
    return -1;
  return mf_enum(c, sec, key, 0, names, -1);
}

static void read_security(struct mf_ctx *c, const struct cap_node *root, struct np_profile *p)
{
  const struct cap_node *sec = object_member(c, root, "security", security_keys);
  if (!sec)
    return;
  static const char *const mode3[] = {"isolated", "allow_same_sandbox", "allow_all", NULL};
  static const char *const ipc[] = {"shared_memory_only", "full", NULL};
  size_t mark = mf_push_key(c, "security");
  p->signal_mode = read_mode(c, sec, "signal_mode", mode3);
  p->process_info_mode = read_mode(c, sec, "process_info_mode", mode3);
  p->ipc_mode = read_mode(c, sec, "ipc_mode", ipc);
  const struct cap_node *elevation = cap_node_get(sec, "capability_elevation");
  if (elevation && elevation->kind != CAP_NODE_NULL)
    p->capability_elevation = mf_bool(c, sec, "capability_elevation", 0, false);
  mf_pop(c, mark);
}

/* groups.include / groups.exclude entries: known to nono's policy; a
 * required group cannot be excluded (nono's validate_group_exclusions). */
static void check_groups(struct mf_ctx *c, const struct np_policy *pol, const struct cap_node *obj,
                         const char *key, bool exclude)
{
  const struct cap_node *arr = obj ? cap_node_get(obj, key) : NULL;
  if (!arr || arr->kind != CAP_NODE_ARRAY)
    return;
  size_t mark = mf_push_key(c, key);
  for (size_t i = 0; i < arr->u.arr.len; i++) {
    const struct cap_node *e = arr->u.arr.items[i];
    const struct cap_node *name = e->kind == CAP_NODE_OBJECT ? cap_node_get(e, "name") : e;
    if (!name || name->kind != CAP_NODE_STRING)
      continue;
    size_t m2 = mf_push_index(c, i);
    const struct cap_node *g = np_policy_group(pol, name->u.str.ptr);
    if (!g)
      mf_error(c, name, NULL,
               "unknown policy group '%s'; nono's groups are listed by `nono profile groups` "
               "(docs/manifests.md lists them too)",
               name->u.str.ptr);
    else if (exclude && np_group_required(g))
      mf_error(c, name, NULL, "cannot exclude required group '%s'; remove it from %s",
               name->u.str.ptr, key);
    mf_pop(c, m2);
  }
  mf_pop(c, mark);
}

static void read_groups_and_commands(struct mf_ctx *c, const struct np_policy *pol,
                                     const struct cap_node *root, struct np_profile *p)
{
  static const struct np_key group_keys[] = {{"include", NULL}, {"exclude", NULL}, {NULL, NULL}};
  static const struct np_key command_keys[] = {{"allow", NULL}, {"deny", NULL}, {NULL, NULL}};
  static const struct np_key policy_keys[] = {
      {"exclude_groups", NULL},  {"add_allow_read", NULL},
      {"add_allow_write", NULL}, {"add_allow_readwrite", NULL},
      {"add_deny_access", NULL}, {"add_deny_commands", NULL},
      {"override_deny", NULL},   {NULL, NULL}};
  const struct cap_node *groups = object_member(c, root, "groups", group_keys);
  const struct cap_node *commands = object_member(c, root, "commands", command_keys);
  const struct cap_node *sec = cap_node_get(root, "security");
  const struct cap_node *policy = object_member(c, root, "policy", policy_keys);
  size_t mark = mf_push_key(c, "groups");
  if (groups) {
    read_list(c, groups, "include", "name", &p->include);
    read_list(c, groups, "exclude", "name", &p->exclude);
  }
  check_groups(c, pol, groups, "include", false);
  check_groups(c, pol, groups, "exclude", true);
  mf_pop(c, mark);
  if (commands) {
    mark = mf_push_key(c, "commands");
    read_list(c, commands, "allow", NULL, &p->cmd_allow);
    read_list(c, commands, "deny", NULL, &p->cmd_deny);
    mf_pop(c, mark);
  }
  if (sec && sec->kind == CAP_NODE_OBJECT) {
    mark = mf_push_key(c, "security");
    read_legacy(c, sec, "security", "groups", "groups.include", "name", &p->include);
    check_groups(c, pol, sec, "groups", false);
    read_legacy(c, sec, "security", "allowed_commands", "commands.allow", NULL, &p->cmd_allow);
    mf_pop(c, mark);
  }
  if (!policy)
    return;
  mark = mf_push_key(c, "policy");
  static const struct {
    const char *key, *canonical;
    int fs; /* NP_FS_*, or -1..-3: exclude, deny commands */
  } legacy[] = {
      {"exclude_groups", "groups.exclude", -1},
      {"add_allow_read", "filesystem.read", NP_FS_READ},
      {"add_allow_write", "filesystem.write", NP_FS_WRITE},
      {"add_allow_readwrite", "filesystem.allow", NP_FS_ALLOW},
      {"add_deny_access", "filesystem.deny", NP_FS_DENY},
      {"add_deny_commands", "commands.deny", -2},
      {"override_deny", "filesystem.bypass_protection", NP_FS_BYPASS},
  };
  for (size_t i = 0; i < sizeof legacy / sizeof legacy[0]; i++) {
    struct cap_strv *out = legacy[i].fs == -1   ? &p->exclude
                           : legacy[i].fs == -2 ? &p->cmd_deny
                                                : &p->fs[legacy[i].fs];
    read_legacy(c, policy, "policy", legacy[i].key, legacy[i].canonical,
                legacy[i].fs == -1 ? "name" : "path", out);
  }
  check_groups(c, pol, policy, "exclude_groups", true);
  mf_pop(c, mark);
}

static void read_rollback(struct mf_ctx *c, const struct cap_node *root, const char *key,
                          struct np_profile *p)
{
  static const struct np_key keys[] = {
      {"exclude_patterns", NULL}, {"exclude_globs", NULL}, {NULL, NULL}};
  const struct cap_node *rb = object_member(c, root, key, keys);
  if (!rb)
    return;
  if (strcmp(key, "undo") == 0)
    mf_warning(c, rb, key, "deprecated key 'undo'; use 'rollback' instead");
  size_t mark = mf_push_key(c, key);
  read_list(c, rb, "exclude_patterns", NULL, &p->rb_patterns);
  read_list(c, rb, "exclude_globs", NULL, &p->rb_globs);
  mf_pop(c, mark);
}

static void read_extends(struct mf_ctx *c, const struct cap_node *root, struct np_profile *p)
{
  const struct cap_node *ext = cap_node_get(root, "extends");
  if (!ext)
    return;
  p->extends_file = c->file;
  p->extends_line = ext->line;
  p->extends_col = ext->col;
  if (ext->kind == CAP_NODE_STRING) {
    cap_strv_push(&p->extends, ext->u.str.ptr);
    return;
  }
  if (ext->kind != CAP_NODE_ARRAY || ext->u.arr.len == 0) {
    mf_error(c, ext, "extends", "must be a profile name or a non-empty array of them");
    return;
  }
  read_list(c, root, "extends", NULL, &p->extends);
}

void np_read(struct mf_ctx *c, const struct np_policy *pol, const struct cap_node *root,
             struct np_profile *p)
{
  check_keys(c, root, top_keys);
  const struct cap_node *cp = cap_node_get(root, "command_policies");
  if (cp && cp->kind != CAP_NODE_NULL)
    mf_error(c, cp, "command_policies",
             "nono's tool-sandbox command policies are not enforced by capsule; a profile that "
             "relies on them would run without them: remove them, or run it under nono");
  const struct cap_node *version = cap_node_get(root, "version");
  if (version)
    mf_error(c, version, "version",
             "a nono profile has no top-level version (its own version is meta.version); remove "
             "it. A capability manifest, which has one, writes filesystem.grants and "
             "network.mode instead of this profile's sections");
  mf_string(c, root, "$schema", 0, NULL);
  read_extends(c, root, p);
  const struct cap_node *meta = mf_field(c, root, "meta", CAP_NODE_OBJECT, 0);
  if (meta) {
    size_t mark = mf_push_key(c, "meta");
    const char *name = mf_string(c, meta, "name", 0, NULL);
    p->name = name ? cap_xstrdup(name) : NULL;
    mf_pop(c, mark);
  }
  read_security(c, root, p);
  read_groups_and_commands(c, pol, root, p);
  const struct cap_node *fs = object_member(c, root, "filesystem", filesystem_keys);
  if (fs) {
    size_t mark = mf_push_key(c, "filesystem");
    for (size_t i = 0; i < NP_FS_COUNT; i++) {
      struct cap_strv canonical = {0};
      read_list(c, fs, np_fs_keys[i], "path", &canonical);
      /* canonical values first, then what legacy keys drained */
      for (size_t j = 0; j < p->fs[i].len; j++)
        cap_strv_push(&canonical, p->fs[i].v[j]);
      cap_strv_free(&p->fs[i]);
      p->fs[i] = canonical;
    }
    mf_pop(c, mark);
  }
  read_network(c, root, p);
  static const struct np_key workdir_keys[] = {{"access", NULL}, {NULL, NULL}};
  const struct cap_node *wd = object_member(c, root, "workdir", workdir_keys);
  if (wd) {
    static const char *const access[] = {"none", "read", "write", "readwrite", NULL};
    size_t mark = mf_push_key(c, "workdir");
    p->workdir = (enum np_workdir)mf_enum(c, wd, "access", 0, access, NP_WORKDIR_NONE);
    mf_pop(c, mark);
  }
  read_rollback(c, root, "rollback", p);
  read_rollback(c, root, "undo", p);
}
