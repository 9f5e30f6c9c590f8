/* A resolved nono profile lowered onto the canonical spec, as nono's
 * resolve_to_manifest() (crates/nono-cli/src/profile_cmd.rs) builds the
 * manifest `nono profile show NAME --format manifest` prints:
 *   - grants: filesystem.{allow,read,write}[_file] expanded, the Linux
 *     groups' allow paths that exist, the working directory per
 *     workdir.access; one grant per path, the widest access kept;
 *   - deny: filesystem.deny and the groups' deny paths, less what
 *     bypass_protection covers;
 *   - network: blocked when network.block; proxy when a network profile,
 *     allow_domain or credentials are set; else unrestricted;
 *   - process: the groups' and commands.deny's blocked commands less the
 *     allowed ones (nono: "allowed commands override any blocklist");
 *     exec_strategy supervised when rollback excludes are set, as nono.
 * Where capsule departs from nono it says so in docs/manifests.md. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/json.h"
#include "manifest/formats.h"
#include "manifest/nono_profile.h"

/* nono's data files, embedded at build time (src/manifest/nono-data/SOURCES) */
extern const char nono_policy_json[];
extern const size_t nono_policy_json_len;
extern const char nono_network_policy_json[];
extern const size_t nono_network_policy_json_len;

#define NONO_PIDS 4096u
#define NONO_NOFILE 1024u

int np_policy_open(struct np_policy *pol, struct cap_diags *diags)
{
  *pol = (struct np_policy){.doc = cap_doc_new(), .net_doc = cap_doc_new()};
  if (cap_json_parse(pol->doc, nono_policy_json, nono_policy_json_len, "nono:policy.json", 0,
                     diags) < 0 ||
      cap_json_parse(pol->net_doc, nono_network_policy_json, nono_network_policy_json_len,
                     "nono:network-policy.json", 0, diags) < 0) {
    np_policy_close(pol);
    return -EINVAL;
  }
  pol->groups = cap_node_get(pol->doc->root, "groups");
  pol->profiles = cap_node_get(pol->doc->root, "profiles");
  pol->net_groups = cap_node_get(pol->net_doc->root, "groups");
  pol->net_profiles = cap_node_get(pol->net_doc->root, "profiles");
  return 0;
}

void np_policy_close(struct np_policy *pol)
{
  cap_doc_free(pol->doc);
  cap_doc_free(pol->net_doc);
  *pol = (struct np_policy){0};
}

const struct cap_node *np_policy_group(const struct np_policy *pol, const char *name)
{
  const struct cap_node *g = cap_node_get(pol->groups, name);
  return g && g->kind == CAP_NODE_OBJECT ? g : NULL;
}

bool np_group_required(const struct cap_node *group)
{
  const struct cap_node *r = cap_node_get(group, "required");
  return r && r->kind == CAP_NODE_BOOL && r->u.boolean;
}

/* nono's group_matches_platform: no platform, or "linux" */
static bool group_on_linux(const struct cap_node *group)
{
  const struct cap_node *p = cap_node_get(group, "platform");
  return !p || (p->kind == CAP_NODE_STRING && strcmp(p->u.str.ptr, "linux") == 0);
}

/* ---- path variables (nono's expand_vars) ---------------------------------- */

struct np_env {
  const char *home, *workdir;
  char tmpdir[4096], uid[16];
};

static char *xdg_dir(const struct np_env *env, const char *var, const char *under_home)
{
  const char *v = getenv(var);
  if (v && v[0] == '/')
    return cap_xstrdup(v);
  return cap_xasprintf("%s/%s", env->home, under_home);
}

/* The value of $name, or NULL to leave it as written. */
static char *var_value(const struct np_env *env, const char *name, size_t n)
{
  static const struct {
    const char *name, *under_home;
  } xdg[] = {{"XDG_CONFIG_HOME", ".config"},
             {"XDG_DATA_HOME", ".local/share"},
             {"XDG_STATE_HOME", ".local/state"},
             {"XDG_CACHE_HOME", ".cache"}};
#define IS(s) (n == strlen(s) && strncmp(name, s, n) == 0)
  if (IS("HOME"))
    return cap_xstrdup(env->home);
  if (IS("WORKDIR"))
    return cap_xstrdup(env->workdir);
  if (IS("TMPDIR"))
    return cap_xstrdup(env->tmpdir);
  if (IS("UID"))
    return cap_xstrdup(env->uid);
  if (IS("NONO_CONFIG")) {
    _cleanup_free_ char *config = xdg_dir(env, "XDG_CONFIG_HOME", ".config");
    return cap_xasprintf("%s/nono", config);
  }
  for (size_t i = 0; i < sizeof xdg / sizeof xdg[0]; i++)
    if (IS(xdg[i].name))
      return xdg_dir(env, xdg[i].name, xdg[i].under_home);
  if (IS("XDG_RUNTIME_DIR") && getenv("XDG_RUNTIME_DIR")) /* no default, as nono */
    return cap_xstrdup(getenv("XDG_RUNTIME_DIR"));
#undef IS
  return NULL;
}

static char *np_expand(const struct np_env *env, const char *path)
{
  struct cap_buf b = {0};
  if (path[0] == '~' && (path[1] == '/' || path[1] == '\0')) {
    cap_buf_printf(&b, "%s", env->home);
    path++;
  }
  for (const char *s = path; *s;) {
    size_t n = 0;
    if (*s == '$')
      while (s[1 + n] == '_' || (s[1 + n] >= 'A' && s[1 + n] <= 'Z') ||
             (s[1 + n] >= 'a' && s[1 + n] <= 'z') || (s[1 + n] >= '0' && s[1 + n] <= '9'))
        n++;
    _cleanup_free_ char *v = n ? var_value(env, s + 1, n) : NULL;
    if (v) {
      cap_buf_printf(&b, "%s", v);
      s += 1 + n;
    } else {
      cap_buf_printf(&b, "%c", *s);
      s++;
    }
  }
  return cap_buf_steal(&b);
}

/* ---- grants ---------------------------------------------------------------- */

struct np_grant {
  char *path;
  enum cap_access access;
  bool file;
};

struct np_grants {
  struct np_grant *v;
  size_t len;
};

static void grant_push(struct np_grants *g, char *path, enum cap_access access, bool file)
{
  g->v = cap_xrealloc(g->v, (g->len + 1) * sizeof *g->v);
  g->v[g->len++] = (struct np_grant){.path = path, .access = access, .file = file};
}

static int by_path(const void *a, const void *b)
{
  const struct np_grant *x = a, *y = b;
  int r = strcmp(x->path, y->path);
  return r ? r : (int)x->file - (int)y->file;
}

static bool path_within(const char *path, const char *dir)
{
  size_t n = strlen(dir);
  return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/' || dir[n - 1] == '/');
}

/* What capsule's sandbox provides privately and never binds from the host:
 * its own /dev, /proc and /tmp (and the host's TMPDIR, which the private
 * /tmp stands for). Groups' grants there are dropped. */
static bool sandbox_provides(const struct np_env *env, const char *path)
{
  return path_within(path, "/dev") || path_within(path, "/proc") || path_within(path, "/tmp") ||
         strcmp(path, env->tmpdir) == 0;
}

static void group_grants(struct mf_ctx *c, const struct np_env *env, const struct cap_node *group,
                         const struct cap_spec *spec, struct np_grants *out)
{
  (void)c;
  const struct cap_node *allow = cap_node_get(group, "allow");
  static const struct {
    const char *key;
    enum cap_access access;
  } modes[] = {
      {"read", CAP_ACCESS_READ}, {"write", CAP_ACCESS_WRITE}, {"readwrite", CAP_ACCESS_READWRITE}};
  for (size_t m = 0; allow && m < 3; m++) {
    const struct cap_node *arr = cap_node_get(allow, modes[m].key);
    for (size_t i = 0; arr && arr->kind == CAP_NODE_ARRAY && i < arr->u.arr.len; i++) {
      char *path = np_expand(env, arr->u.arr.items[i]->u.str.ptr);
      struct stat st;
      bool system = false; /* already in capsule's read-only system set */
      for (size_t k = 0; k < spec->n_grants && modes[m].access == CAP_ACCESS_READ; k++)
        system = system || (spec->grants[k].origin == CAP_ORIGIN_SYSTEM &&
                            strcmp(spec->grants[k].path, path) == 0);
      /* nono grants only group paths that exist on this host */
      if (path[0] != '/' || stat(path, &st) < 0 || sandbox_provides(env, path) || system) {
        free(path);
        continue;
      }
      grant_push(out, path, modes[m].access, !S_ISDIR(st.st_mode));
    }
  }
}

static enum cap_access wider(enum cap_access a, enum cap_access b)
{
  if (a == b)
    return a;
  return CAP_ACCESS_READWRITE; /* read + write, or either with readwrite */
}

static void add_grants(struct mf_ctx *c, const struct cap_node *root, struct np_grants *g,
                       struct cap_spec *spec)
{
  if (g->len)
    qsort(g->v, g->len, sizeof *g->v, by_path);
  for (size_t i = 0; i < g->len; i++) {
    struct np_grant *x = &g->v[i];
    if (x->path[0] != '/') {
      mf_error(c, root, "filesystem",
               "the path \"%s\" does not expand to an absolute path (the variables nono knows are "
               "~, $HOME, $WORKDIR, $TMPDIR, $UID, $NONO_CONFIG and the XDG directories)",
               x->path);
    } else if (i + 1 < g->len && strcmp(x->path, g->v[i + 1].path) == 0 &&
               x->file == g->v[i + 1].file) {
      g->v[i + 1].access = wider(x->access, g->v[i + 1].access);
    } else {
      cap_spec_add_grant(spec, x->path, x->access, x->file ? CAP_FS_FILE : CAP_FS_DIRECTORY,
                         CAP_ORIGIN_MANIFEST);
    }
    free(x->path);
  }
  free(g->v);
}

static int by_string(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* sorted, duplicates dropped (nono sorts and dedups deny and blocked lists) */
static void sorted_into(struct cap_strv *from, struct cap_strv *to, const struct cap_strv *except)
{
  if (from->len)
    qsort(from->v, from->len, sizeof *from->v, by_string);
  for (size_t i = 0; i < from->len; i++)
    if ((i == 0 || strcmp(from->v[i], from->v[i - 1]) != 0) &&
        !(except && cap_strv_contains(except, from->v[i])))
      cap_strv_push(to, from->v[i]);
  cap_strv_free(from);
}

static void lower_filesystem(struct mf_ctx *c, const struct np_policy *pol,
                             const struct np_env *env, struct np_profile *p,
                             const struct cap_node *root, struct cap_spec *spec)
{
  static const struct {
    enum np_fs list;
    enum cap_access access;
    bool file;
  } lists[] = {
      {NP_FS_ALLOW, CAP_ACCESS_READWRITE, false}, {NP_FS_READ, CAP_ACCESS_READ, false},
      {NP_FS_WRITE, CAP_ACCESS_WRITE, false},     {NP_FS_ALLOW_FILE, CAP_ACCESS_READWRITE, true},
      {NP_FS_READ_FILE, CAP_ACCESS_READ, true},   {NP_FS_WRITE_FILE, CAP_ACCESS_WRITE, true}};
  struct np_grants grants = {0};
  for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++)
    for (size_t i = 0; i < p->fs[lists[l].list].len; i++) {
      char *path = np_expand(env, p->fs[lists[l].list].v[i]);
      struct stat st;
      if (path[0] == '/' && lstat(path, &st) < 0) {
        /* nono skips a profile path this host lacks at run time ("Skipping
         * non-existent path", at debug level); a manifest's grant of one
         * would stop capsule run */
        free(path);
        continue;
      }
      grant_push(&grants, path, lists[l].access, lists[l].file);
    }
  struct cap_strv deny = {0}, blocked = {0}, bypass = {0};
  for (size_t i = 0; i < p->fs[NP_FS_DENY].len; i++) {
    _cleanup_free_ char *d = np_expand(env, p->fs[NP_FS_DENY].v[i]);
    cap_strv_push(&deny, d);
  }
  for (size_t i = 0; i < p->fs[NP_FS_BYPASS].len; i++) {
    _cleanup_free_ char *b = np_expand(env, p->fs[NP_FS_BYPASS].v[i]);
    cap_strv_push(&bypass, b);
  }
  for (size_t i = 0; i < p->include.len; i++) {
    const struct cap_node *g = np_policy_group(pol, p->include.v[i]);
    if (!g || !group_on_linux(g))
      continue;
    group_grants(c, env, g, spec, &grants);
    const struct cap_node *d = cap_node_get(g, "deny");
    const struct cap_node *access = cap_node_get(d, "access");
    for (size_t k = 0; access && access->kind == CAP_NODE_ARRAY && k < access->u.arr.len; k++) {
      _cleanup_free_ char *path = np_expand(env, access->u.arr.items[k]->u.str.ptr);
      bool bypassed = false; /* a group deny under bypass_protection is dropped */
      for (size_t b = 0; b < bypass.len && !bypassed; b++)
        bypassed = path_within(path, bypass.v[b]);
      if (!bypassed)
        cap_strv_push(&deny, path);
    }
    const struct cap_node *cmds = cap_node_get(d, "commands");
    for (size_t k = 0; cmds && cmds->kind == CAP_NODE_ARRAY && k < cmds->u.arr.len; k++)
      cap_strv_push(&blocked, cmds->u.arr.items[k]->u.str.ptr);
  }
  if (p->workdir != NP_WORKDIR_NONE) {
    static const enum cap_access wd[] = {CAP_ACCESS_READ, CAP_ACCESS_READ, CAP_ACCESS_WRITE,
                                         CAP_ACCESS_READWRITE};
    grant_push(&grants, cap_xstrdup(env->workdir), wd[p->workdir], false);
  }
  add_grants(c, root, &grants, spec);
  sorted_into(&deny, &spec->deny, NULL);
  for (size_t i = 0; i < p->cmd_deny.len; i++)
    cap_strv_push(&blocked, p->cmd_deny.v[i]);
  sorted_into(&blocked, &spec->process.blocked_commands, &p->cmd_allow);
  for (size_t i = 0; i < p->cmd_allow.len; i++)
    cap_strv_push(&spec->process.allowed_commands, p->cmd_allow.v[i]);
  cap_strv_free(&bypass);
}

/* ---- network and credentials ---------------------------------------------- */

static void push_domain(struct cap_spec *spec, const char *d)
{
  const char *host = strncmp(d, "*.", 2) == 0 ? d + 1 : d; /* *.x -> .x */
  if (!cap_strv_contains(&spec->network.allow_domains, host))
    cap_strv_push(&spec->network.allow_domains, host);
}

/* capsule: the hosts of nono's network profile are written out (nono's
 * export leaves them to its proxy at run time; a resolved manifest shows
 * every right). */
static void network_profile_hosts(struct mf_ctx *c, const struct np_policy *pol,
                                  const struct np_profile *p, const struct cap_node *root,
                                  struct cap_spec *spec)
{
  const struct cap_node *prof = cap_node_get(pol->net_profiles, p->network_profile);
  const struct cap_node *groups = cap_node_get(prof, "groups");
  if (!groups || groups->kind != CAP_NODE_ARRAY) {
    mf_error(c, root, "network.network_profile",
             "unknown network profile \"%s\"; nono's are developer, minimal, enterprise, "
             "claude-code, codex and opencode",
             p->network_profile);
    return;
  }
  for (size_t i = 0; i < groups->u.arr.len; i++) {
    const struct cap_node *g = cap_node_get(pol->net_groups, groups->u.arr.items[i]->u.str.ptr);
    const struct cap_node *hosts = cap_node_get(g, "hosts");
    for (size_t k = 0; hosts && hosts->kind == CAP_NODE_ARRAY && k < hosts->u.arr.len; k++)
      push_domain(spec, hosts->u.arr.items[k]->u.str.ptr);
  }
}

static void lower_credentials(struct mf_ctx *c, const struct np_profile *p,
                              const struct cap_node *root, struct cap_spec *spec)
{
  for (size_t i = 0; i < p->n_custom; i++) {
    const struct np_credential *k = &p->custom[i];
    if (!k->key || !k->upstream) { /* OAuth2 and AWS routes: nono does not export them either */
      mf_warning(c, root, "network.custom_credentials",
                 "\"%s\" has no credential_key (OAuth2 or AWS signing): not representable in a "
                 "capability manifest, so not routed, as nono's own export",
                 k->name);
      continue;
    }
    struct cap_credential_route *r = cap_spec_add_route(spec);
    const char *header = k->header ? k->header : "Authorization";
    r->name = cap_xstrdup(k->name);
    r->upstream = cap_xstrdup(k->upstream);
    r->source = cap_xstrdup(k->key);
    r->mode = k->mode;
    r->header = cap_xstrdup(header);
    r->format = cap_xstrdup(k->format                                  ? k->format
                            : strcasecmp(header, "Authorization") == 0 ? "Bearer {}"
                                                                       : "{}");
    r->path_pattern = k->path_pattern ? cap_xstrdup(k->path_pattern) : NULL;
    r->path_replacement = k->path_replacement ? cap_xstrdup(k->path_replacement) : NULL;
    r->query_param_name = k->query ? cap_xstrdup(k->query) : NULL;
    r->env_var = k->env_var ? cap_xstrdup(k->env_var) : NULL;
    for (size_t j = 0; j < k->n_rules; j++)
      cap_rules_push(&r->rules, &r->n_rules, k->rules[j].method, k->rules[j].path);
  }
}

static void lower_network(struct mf_ctx *c, const struct np_policy *pol, struct np_profile *p,
                          const struct cap_node *root, struct cap_spec *spec)
{
  bool netprof = p->netprof_set == NP_SET && p->network_profile;
  bool creds = p->creds_set == NP_SET && p->credentials.len > 0;
  spec->network.dns = true;
  if (p->block)
    spec->network.mode = CAP_NET_BLOCKED;
  else if (netprof || p->n_domains || creds || p->n_custom)
    spec->network.mode = CAP_NET_PROXY;
  else
    spec->network.mode = CAP_NET_UNRESTRICTED;
  for (size_t i = 0; i < p->n_domains; i++) {
    push_domain(spec, p->domains[i].domain);
    if (!p->domains[i].n_rules)
      continue;
    struct cap_endpoint *e = cap_spec_add_endpoint(spec, p->domains[i].domain);
    for (size_t k = 0; k < p->domains[i].n_rules; k++)
      cap_rules_push(&e->rules, &e->n_rules, p->domains[i].rules[k].method,
                     p->domains[i].rules[k].path);
  }
  if (netprof)
    network_profile_hosts(c, pol, p, root, spec);
  if (creds)
    mf_warning(c, root, "network.credentials",
               "nono's built-in credential services are not written to the manifest (nono's own "
               "export leaves them out too): define them under network.custom_credentials to have "
               "capsule's proxy inject them");
  for (size_t i = 0; i < p->listen_port.len; i++)
    cap_ports_push(&spec->network.bind, p->listen_port.v[i]);
  for (size_t i = 0; i < p->open_port.len; i++)
    cap_ports_push(&spec->network.localhost, p->open_port.v[i]);
  for (size_t i = 0; i < p->connect_port.len; i++)
    cap_ports_push(&spec->network.connect, p->connect_port.v[i]);
  if (spec->network.mode == CAP_NET_BLOCKED)
    spec->network.dns = false; /* capsule: as for a blocked manifest */
  lower_credentials(c, p, root, spec);
}

/* nono's merge_implicit_default_groups: default's groups, then the
 * profile's, less the excluded ones (exclusion wins). */
static void implicit_groups(const struct np_policy *pol, struct np_profile *p)
{
  if (p->name && strcmp(p->name, "default") == 0)
    return;
  const struct cap_node *def = cap_node_get(cap_node_get(pol->profiles, "default"), "groups");
  const struct cap_node *inc = cap_node_get(def, "include");
  struct cap_strv merged = {0};
  for (size_t i = 0; inc && inc->kind == CAP_NODE_ARRAY && i < inc->u.arr.len; i++)
    cap_strv_push(&merged, inc->u.arr.items[i]->u.str.ptr);
  for (size_t i = 0; i < p->include.len; i++)
    if (!cap_strv_contains(&merged, p->include.v[i]))
      cap_strv_push(&merged, p->include.v[i]);
  cap_strv_free(&p->include);
  for (size_t i = 0; i < merged.len; i++)
    if (!cap_strv_contains(&p->exclude, merged.v[i]))
      cap_strv_push(&p->include, merged.v[i]);
  cap_strv_free(&merged);
}

void np_lower(struct mf_ctx *c, const struct np_policy *pol, struct np_profile *p,
              const struct cap_node *root, struct cap_spec *spec)
{
  struct np_env env = {.home = getenv("HOME")};
  char cwd[4096];
  if (!env.home || env.home[0] != '/') {
    mf_error(c, root, NULL,
             "HOME is not set to an absolute path; nono profiles expand ~ and "
             "$HOME from it");
    return;
  }
  env.workdir = getcwd(cwd, sizeof cwd) ? cwd : "/";
  const char *t = getenv("TMPDIR");
  snprintf(env.tmpdir, sizeof env.tmpdir, "%s", t && t[0] == '/' ? t : "/tmp");
  for (size_t n = strlen(env.tmpdir); n > 1 && env.tmpdir[n - 1] == '/'; n--)
    env.tmpdir[n - 1] = '\0';
  snprintf(env.uid, sizeof env.uid, "%u", (unsigned)getuid());

  implicit_groups(pol, p);
  lower_filesystem(c, pol, &env, p, root, spec);
  lower_network(c, pol, p, root, spec);
  spec->process.signal_mode =
      p->signal_mode >= 0 ? (enum cap_mode3)p->signal_mode : CAP_MODE_ISOLATED;
  spec->process.process_info_mode =
      p->process_info_mode >= 0 ? (enum cap_mode3)p->process_info_mode : CAP_MODE_ISOLATED;
  spec->process.ipc_full = p->ipc_mode == 1;
  bool rollback = p->rb_patterns.len || p->rb_globs.len;
  /* nono gates expansion on capability_elevation, not on the strategy */
  spec->process.expand_opens = p->capability_elevation == 1;
  spec->process.declared_exec_strategy =
      cap_xstrdup(rollback || spec->process.expand_opens ? "supervised" : "monitor");
  for (size_t i = 0; i < p->rb_patterns.len; i++)
    cap_strv_push(&spec->rollback.exclude_patterns, p->rb_patterns.v[i]);
  for (size_t i = 0; i < p->rb_globs.len; i++)
    cap_strv_push(&spec->rollback.exclude_globs, p->rb_globs.v[i]);
  spec->limits = (struct cap_limits){.pids = NONO_PIDS, .nofile = NONO_NOFILE};
}

void cap_nono_profile_lower(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  struct np_policy pol;
  if (np_policy_open(&pol, c->diags) < 0)
    return;
  struct np_profile p;
  np_profile_init(&p);
  np_read(c, &pol, root, &p);
  /* siblings are named as the file was (relative stays relative), so
   * diagnostics in a base read as the user wrote the path */
  const char *slash = strrchr(c->file, '/');
  _cleanup_free_ char *dir = slash ? cap_xstrndup(c->file, (size_t)(slash - c->file)) : NULL;
  bool builtin = strcmp(spec->package_dir, "/") == 0 && !slash; /* --profile NAME */
  np_resolve_extends(c, &pol, &p, builtin ? NULL : dir ? dir : ".", c->file);
  np_lower(c, &pol, &p, root, spec);

  const char *folder = strrchr(spec->package_dir, '/');
  spec->id = cap_xstrdup(p.name && p.name[0]   ? p.name
                         : folder && folder[1] ? folder + 1
                                               : spec->package_dir);
  spec->tool_source = CAP_TOOL_SOURCE_MANIFEST;
  spec->runtime.kind = CAP_RUNTIME_EXEC;
  spec->sandbox.private_tmp = true;
  np_profile_free(&p);
  np_policy_close(&pol);
}

bool cap_nono_builtin_profile(const char *name, char **ret_names)
{
  struct np_policy pol;
  struct cap_diags diags = {0};
  bool found = false;
  if (np_policy_open(&pol, &diags) == 0) {
    found = cap_node_get(pol.profiles, name) != NULL;
    struct cap_buf b = {0};
    for (size_t i = 0; ret_names && pol.profiles && i < pol.profiles->u.obj.len; i++)
      cap_buf_printf(&b, "%s%s", i ? ", " : "", pol.profiles->u.obj.items[i].key);
    if (ret_names)
      *ret_names = cap_buf_steal(&b);
    np_policy_close(&pol);
  }
  cap_diags_free(&diags);
  return found;
}
