/* A nono profile's `extends` resolved and merged as nono's resolve_extends()
 * and merge_profiles() (crates/nono-cli/src/profile/mod.rs) do: bases are
 * looked up beside the child (NAME.json), in $XDG_CONFIG_HOME/nono/profiles
 * (NAME.jsonc, then NAME.json; never for a built-in's name, and only files
 * no one else can change), then among nono's built-in profiles; they
 * are merged left to right, then the child on top; a cycle, an unknown
 * base or a chain deeper than 10 is an error at the child's `extends`. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/json.h"
#include "core/text.h"
#include "manifest/formats.h"
#include "manifest/load.h"
#include "manifest/nono_profile.h"

/* nono's MAX_INHERITANCE_DEPTH */
#define NP_MAX_DEPTH 10

/* ---- merging (nono's merge_profiles) -------------------------------------- */

/* base = dedup(base ++ child), order kept */
static void merge_list(struct cap_strv *base, const struct cap_strv *child)
{
  struct cap_strv out = {0};
  for (size_t pass = 0; pass < 2; pass++) {
    const struct cap_strv *from = pass ? child : base;
    for (size_t i = 0; i < from->len; i++)
      if (!cap_strv_contains(&out, from->v[i]))
        cap_strv_push(&out, from->v[i]);
  }
  cap_strv_free(base);
  *base = out;
}

static void merge_ports(struct cap_ports *base, const struct cap_ports *child)
{
  for (size_t i = 0; i < child->len; i++) {
    bool seen = false;
    for (size_t j = 0; j < base->len && !seen; j++)
      seen = base->v[j] == child->v[i];
    if (!seen)
      cap_ports_push(base, child->v[i]);
  }
}

/* nono's merge_allow_domain: base domains first, a domain's rules appended */
static void merge_domains(struct np_profile *base, struct np_profile *child)
{
  for (size_t i = 0; i < child->n_domains; i++) {
    struct np_domain *d = &child->domains[i];
    struct np_domain *into = NULL;
    for (size_t j = 0; j < base->n_domains && !into; j++)
      if (strcmp(base->domains[j].domain, d->domain) == 0)
        into = &base->domains[j];
    if (!into) {
      base->domains = cap_xrealloc(base->domains, (base->n_domains + 1) * sizeof *base->domains);
      base->domains[base->n_domains++] = *d;
      *d = (struct np_domain){0};
      continue;
    }
    for (size_t k = 0; k < d->n_rules; k++)
      cap_rules_push(&into->rules, &into->n_rules, d->rules[k].method, d->rules[k].path);
  }
}

static void merge_custom(struct np_profile *base, struct np_profile *child)
{
  for (size_t i = 0; i < child->n_custom; i++) {
    for (size_t j = 0; j < base->n_custom; j++)
      if (strcmp(base->custom[j].name, child->custom[i].name) == 0) {
        np_credential_free(&base->custom[j]);
        base->custom[j] = base->custom[--base->n_custom];
        break;
      }
    base->custom = cap_xrealloc(base->custom, (base->n_custom + 1) * sizeof *base->custom);
    base->custom[base->n_custom++] = child->custom[i];
  }
  child->n_custom = 0;
}

/* base becomes base merged with child (child's values win); child is left
 * to be freed by the caller. */
static void np_merge(struct np_profile *base, struct np_profile *child)
{
  free(base->name);
  base->name = child->name;
  child->name = NULL;
  cap_strv_free(&base->extends);
  int *modes[][2] = {{&base->signal_mode, &child->signal_mode},
                     {&base->process_info_mode, &child->process_info_mode},
                     {&base->ipc_mode, &child->ipc_mode},
                     {&base->capability_elevation, &child->capability_elevation}};
  for (size_t i = 0; i < ARRAY_SIZE(modes); i++)
    if (*modes[i][1] >= 0)
      *modes[i][0] = *modes[i][1];
  merge_list(&base->include, &child->include);
  merge_list(&base->exclude, &child->exclude);
  merge_list(&base->cmd_allow, &child->cmd_allow);
  merge_list(&base->cmd_deny, &child->cmd_deny);
  for (size_t i = 0; i < NP_FS_COUNT; i++)
    merge_list(&base->fs[i], &child->fs[i]);
  base->block = base->block || child->block; /* sticks once set */
  if (child->netprof_set != NP_INHERIT) {
    free(base->network_profile);
    base->network_profile = child->network_profile;
    child->network_profile = NULL;
    base->netprof_set = child->netprof_set;
  }
  merge_domains(base, child);
  merge_ports(&base->open_port, &child->open_port);
  merge_ports(&base->listen_port, &child->listen_port);
  merge_ports(&base->connect_port, &child->connect_port);
  if (child->creds_set == NP_SET && child->credentials.len == 0) {
    cap_strv_free(&base->credentials); /* [] turns inherited credentials off */
    base->creds_set = NP_SET;
  } else if (child->creds_set == NP_SET) {
    merge_list(&base->credentials, &child->credentials);
    base->creds_set = NP_SET;
  }
  merge_custom(base, child);
  if (child->workdir != NP_WORKDIR_NONE)
    base->workdir = child->workdir;
  merge_list(&base->rb_patterns, &child->rb_patterns);
  merge_list(&base->rb_globs, &child->rb_globs);
}

/* ---- extends (nono's resolve_extends) ------------------------------------- */

struct np_resolver {
  struct mf_ctx *top;
  const struct np_policy *pol;
  struct cap_strv visited; /* the chain of base names being resolved */
  struct cap_strv files;   /* names of every file read (diagnostics point at them) */
};

bool cap_nono_profile_name_valid(const char *s)
{
  size_t n = strlen(s);
  if (n == 0 || s[0] == '-' || s[n - 1] == '-')
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
          (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
      return false;
  return true;
}

static bool regular_file(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Whether path (a user profile, or a directory it is found through) is
 * one only its owner can change, and that owner the caller or root; why
 * (when not) names the problem. */
static bool owner_only(const char *path, char *why, size_t size)
{
  struct stat st;
  if (stat(path, &st) < 0) {
    snprintf(why, size, "%s: %s", path, strerror(errno));
    return false;
  }
  if (st.st_uid != geteuid() && st.st_uid != 0) {
    snprintf(why, size, "%s belongs to uid %u, not to you or root", path, (unsigned)st.st_uid);
    return false;
  }
  if (st.st_mode & 022) {
    snprintf(why, size, "%s is writable by %s (mode %04o): run chmod go-w on it", path,
             st.st_mode & 002 ? "everyone" : "its group", (unsigned)(st.st_mode & 07777));
    return false;
  }
  return true;
}

/* $XDG_CONFIG_HOME/nono/profiles/NAME.jsonc, then .json (nono's
 * resolve_user_profile_path). Unlike nono, a built-in profile's name is
 * never taken from there: a file of that name is left (a warning says
 * so), since whatever can write the user's config directory (a tool
 * granted ~/.config) would otherwise choose the rights of the next run of
 * the built-in. A file, or its profiles, nono or config directory, that
 * another user owns or others can write is refused. */
int cap_nono_user_profile(const char *name, struct cap_diags *diags, char **ret_path)
{
  *ret_path = NULL;
  const char *xdg = getenv("XDG_CONFIG_HOME");
  const char *home = getenv("HOME");
  _cleanup_free_ char *config = xdg && xdg[0] == '/' ? cap_xstrdup(xdg)
                                : home               ? cap_xasprintf("%s/.config", home)
                                                     : NULL;
  if (!config)
    return 0;
  static const char *const exts[] = {"jsonc", "json"};
  _cleanup_free_ char *path = NULL;
  for (size_t i = 0; i < 2 && !path; i++) {
    path = cap_xasprintf("%s/nono/profiles/%s.%s", config, name, exts[i]);
    if (!regular_file(path))
      path = (free(path), NULL);
  }
  if (!path)
    return 0;
  if (cap_nono_builtin_profile(name, NULL)) {
    cap_diags_add(diags, CAP_SEV_WARNING, path, 0, 0, "",
                  "ignored: %s is one of nono's built-in profiles, and the built-in is used "
                  "(nono would load this file instead); to run with this file, rename it or "
                  "pass its path to --profile",
                  name);
    return 0;
  }
  _cleanup_free_ char *profiles = cap_xasprintf("%s/nono/profiles", config);
  _cleanup_free_ char *nono = cap_xasprintf("%s/nono", config);
  char why[PATH_MAX + 128];
  if (!owner_only(path, why, sizeof why) || !owner_only(profiles, why, sizeof why) ||
      !owner_only(nono, why, sizeof why) || !owner_only(config, why, sizeof why)) {
    cap_diags_add(diags, CAP_SEV_ERROR, path, 0, 0, "",
                  "refused as the user profile %s: %s (someone else could choose the rights "
                  "it grants)",
                  name, why);
    return -EPERM;
  }
  *ret_path = steal_pointer(&path);
  return 1;
}

/* Reads a profile file into p; false (diagnostics added) when unusable. */
static bool read_profile_file(struct np_resolver *r, const char *path, struct np_profile *p)
{
  cap_strv_push(&r->files, path);
  const char *file = r->files.v[r->files.len - 1];
  _cleanup_free_ char *data = NULL;
  size_t len = 0;
  struct cap_error err = {0};
  if (cap_read_file(file, CAP_MANIFEST_MAX_BYTES, &data, &len, &err) < 0) {
    cap_diags_add(r->top->diags, CAP_SEV_ERROR, file, 0, 0, "", "%s", err.message);
    cap_error_clear(&err);
    return false;
  }
  cap_jsonc_blank(data, len);
  struct cap_doc *doc = cap_doc_new();
  bool ok = cap_json_parse(doc, data, len, file, 0, r->top->diags) >= 0;
  if (ok && doc->root->kind != CAP_NODE_OBJECT) {
    cap_diags_add(r->top->diags, CAP_SEV_ERROR, file, doc->root->line, doc->root->col, "",
                  "a nono profile must be a JSON object at the top level");
    ok = false;
  }
  if (ok) {
    struct mf_ctx c;
    mf_init(&c, file, r->top->diags);
    np_read(&c, r->pol, doc->root, p);
    mf_free(&c);
  }
  cap_doc_free(doc);
  return ok;
}

enum np_found { NP_NOT_FOUND, NP_REFUSED, NP_SIBLING, NP_GLOBAL };

/* nono's load_base_profile_raw: a sibling NAME.json beside the child (not
 * the child itself), the user's profile directory, nono's built-ins. */
static enum np_found load_base(struct np_resolver *r, const char *name, const char *dir,
                               const char *self, struct np_profile *base, char **ret_path)
{
  /* a built-in's name is always the built-in, unlike nono: a file beside
   * the profile (a project directory a tool may write) or in the user's
   * profile directory would choose the rights of every profile extending
   * it (cap_nono_user_profile; `--profile NAME` warned about that one) */
  bool is_builtin = cap_node_get(r->pol->profiles, name) != NULL;
  if (dir) {
    char *sibling = strcmp(dir, ".") == 0 ? cap_xasprintf("%s.json", name)
                                          : cap_xasprintf("%s/%s.json", dir, name);
    bool found = regular_file(sibling) && !(self && strcmp(sibling, self) == 0);
    if (found && !is_builtin) {
      read_profile_file(r, sibling, base);
      *ret_path = sibling;
      return NP_SIBLING;
    }
    if (found)
      cap_diags_add(r->top->diags, CAP_SEV_WARNING, sibling, 0, 0, "",
                    "ignored: %s is one of nono's built-in profiles, and `extends` takes the "
                    "built-in (nono would take this file); rename the file and the extends",
                    name);
    free(sibling);
  }
  _cleanup_free_ char *user = NULL;
  int found = is_builtin ? 0 : cap_nono_user_profile(name, r->top->diags, &user);
  if (found < 0)
    return NP_REFUSED;
  if (found > 0) {
    read_profile_file(r, user, base);
    return NP_GLOBAL;
  }
  const struct cap_node *builtin = cap_node_get(r->pol->profiles, name);
  if (builtin && builtin->kind == CAP_NODE_OBJECT) {
    cap_strv_push(&r->files, "nono:policy.json");
    /* nono's own data: its legacy keys (openclaw's "undo") are nono's
     * business, not the user's; an error would still be shown */
    struct cap_diags own = {0};
    struct mf_ctx c;
    mf_init(&c, r->files.v[r->files.len - 1], &own);
    mf_push_key(&c, "profiles");
    mf_push_key(&c, name);
    np_read(&c, r->pol, builtin, base);
    mf_free(&c);
    for (size_t i = 0; i < own.len; i++)
      if (own.items[i].severity == CAP_SEV_ERROR)
        cap_diags_add(r->top->diags, CAP_SEV_ERROR, own.items[i].file, own.items[i].line,
                      own.items[i].col, own.items[i].path, "%s", own.items[i].message);
    cap_diags_free(&own);
    return NP_GLOBAL;
  }
  return NP_NOT_FOUND;
}

static char *chain_text(const struct cap_strv *visited, const char *last)
{
  struct cap_buf b = {0};
  for (size_t i = 0; i < visited->len; i++)
    cap_buf_printf(&b, "%s%s", i ? " -> " : "", visited->v[i]);
  if (last)
    cap_buf_printf(&b, "%s%s", visited->len ? " -> " : "", last);
  return cap_buf_steal(&b);
}

static void extends_error(struct np_resolver *r, const struct np_profile *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void extends_error(struct np_resolver *r, const struct np_profile *p, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  cap_diags_vadd(r->top->diags, CAP_SEV_ERROR, p->extends_file, p->extends_line, p->extends_col,
                 "extends", fmt, ap);
  va_end(ap);
}

static bool resolve(struct np_resolver *r, struct np_profile *p, const char *dir, const char *self,
                    size_t depth)
{
  if (p->extends.len == 0)
    return true;
  if (depth >= NP_MAX_DEPTH) {
    _cleanup_free_ char *chain = chain_text(&r->visited, NULL);
    extends_error(r, p,
                  "inheritance chain too deep (max %d, as nono): %s; flatten the profiles into "
                  "fewer levels",
                  NP_MAX_DEPTH, chain);
    return false;
  }
  struct np_profile acc;
  np_profile_init(&acc);
  bool have = false, ok = true;
  for (size_t i = 0; i < p->extends.len && ok; i++) {
    const char *name = p->extends.v[i];
    if (cap_strv_contains(&r->visited, name)) {
      _cleanup_free_ char *chain = chain_text(&r->visited, name);
      extends_error(r, p, "circular dependency detected: %s; remove one of the extends", chain);
      ok = false;
      break;
    }
    if (!cap_nono_profile_name_valid(name)) {
      extends_error(r, p,
                    "invalid base profile name '%s': letters, digits and hyphens only (nono "
                    "registry references such as ns/name are not resolved by capsule)",
                    name);
      ok = false;
      break;
    }
    struct np_profile base;
    np_profile_init(&base);
    _cleanup_free_ char *path = NULL;
    enum np_found found = load_base(r, name, dir, self, &base, &path);
    if (found == NP_REFUSED) { /* the error is at the file */
      np_profile_free(&base);
      ok = false;
      break;
    }
    if (found == NP_NOT_FOUND) {
      extends_error(r, p,
                    "base profile '%s' not found: looked for %s.json beside this profile, in "
                    "$XDG_CONFIG_HOME/nono/profiles, and among nono's built-in profiles",
                    name, name);
      np_profile_free(&base);
      ok = false;
      break;
    }
    cap_strv_push(&r->visited, name);
    _cleanup_free_ char *base_dir = NULL;
    if (found == NP_SIBLING)
      base_dir = cap_xstrdup(dir);
    ok = resolve(r, &base, base_dir, path, depth + 1);
    free(r->visited.v[--r->visited.len]);
    if (have)
      np_merge(&acc, &base);
    else
      acc = base, np_profile_init(&base), have = true;
    np_profile_free(&base);
  }
  if (ok && have) {
    np_merge(&acc, p);
    np_profile_free(p);
    *p = acc;
  } else {
    np_profile_free(&acc);
  }
  return ok;
}

void np_resolve_extends(struct mf_ctx *c, const struct np_policy *pol, struct np_profile *p,
                        const char *dir, const char *self)
{
  struct np_resolver r = {.top = c, .pol = pol};
  resolve(&r, p, dir, self, 0);
  cap_strv_free(&r.visited);
  /* the diagnostics copied the file names; extends_file pointed here */
  p->extends_file = NULL;
  cap_strv_free(&r.files);
}
