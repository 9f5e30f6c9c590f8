/* The plugin verbs: `config` (a capability's settings, stored in the state
 * and validated against the manifest), `triggers` (poll, enable, disable,
 * on, run) and `events`. The poller daemon is in triggers.c. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/gateway.h"
#include "cli/listing.h"
#include "cli/plugin.h"
#include "core/cleanup.h"
#include "core/escape.h"
#include "gateway/plugin_state.h"
#include "gateway/registry.h"

/* The registry and the state, both open, and the capability named. */
int plugin_open(const char *verb, const struct common *o, const char *cap, struct gw_registry *reg,
                struct gw_state **st, const struct cap_spec **spec)
{
  bool bad = false;
  int r = load_registry(o, reg, &bad);
  if (r)
    return r;
  if ((r = open_state(o, st))) {
    gw_registry_free(reg);
    return r;
  }
  *spec = cap ? gw_registry_find(reg, cap) : NULL;
  if (cap && !*spec) {
    fprintf(stderr, "capsule %s: no capability '", verb);
    cap_escape_fput(stderr, cap, 200);
    fprintf(stderr, "' in %s; see `capsule list`\n", o->caps ? o->caps : "capabilities");
    gw_state_close(*st);
    gw_registry_free(reg);
    return CLI_EXIT_INVALID;
  }
  return 0;
}

/* ---- config ---- */

static const struct cap_setting *find_setting(const struct cap_spec *spec, const char *name)
{
  for (size_t i = 0; i < spec->n_settings; i++)
    if (strcmp(spec->settings[i].name, name) == 0)
      return &spec->settings[i];
  return NULL;
}

static void setting_names(const struct cap_spec *spec, struct cap_buf *b)
{
  for (size_t i = 0; i < spec->n_settings; i++)
    cap_buf_printf(b, "%s%s", i ? ", " : "", spec->settings[i].name);
  cap_buf_printf(b, "%s%s", spec->n_settings ? ", " : "", GW_SETTING_NODE_PATH);
  if (spec->talos.has_oauth)
    cap_buf_printf(b, ", %s", GW_SETTING_OAUTH_TOKEN_URL);
}

/* NULL when value fits the setting, else why not (allocated). */
static char *setting_check(const struct cap_spec *spec, const char *name, const char *value)
{
  if (strcmp(name, GW_SETTING_NODE_PATH) == 0) {
    struct stat sb;
    if (value[0] != '/' || stat(value, &sb) < 0 || !S_ISDIR(sb.st_mode))
      return cap_xasprintf("node_path must be the absolute path of a directory (one holding "
                           "node_modules), not '%s'",
                           value);
    return NULL;
  }
  if (spec->talos.has_oauth && strcmp(name, GW_SETTING_OAUTH_TOKEN_URL) == 0) {
    if (strncmp(value, "https://", 8) && strncmp(value, "http://", 7))
      return cap_xasprintf("oauth_token_url must be the provider's token endpoint, an http:// or "
                           "https:// URL, not '%s'",
                           value);
    return NULL;
  }
  const struct cap_setting *s = find_setting(spec, name);
  if (!s) {
    struct cap_buf b = {0};
    setting_names(spec, &b);
    char *m = cap_xasprintf("capability %s has no setting '%s'; its settings: %s (credentials "
                            "are set with `capsule cred set`)",
                            spec->id, name, b.data ? b.data : "");
    cap_buf_free(&b);
    return m;
  }
  if (strcmp(s->type, "number") == 0) {
    char *end;
    errno = 0;
    double d = strtod(value, &end);
    if (!*value || *end || errno || !isfinite(d))
      return cap_xasprintf("'%s' is not a number; setting %s of %s is a number (e.g. 5)", value,
                           name, spec->id);
  } else if (strcmp(s->type, "boolean") == 0) {
    if (strcmp(value, "true") && strcmp(value, "false"))
      return cap_xasprintf("'%s' is not a boolean; setting %s of %s takes true or false", value,
                           name, spec->id);
  } else if (strcmp(s->type, "select") == 0) {
    bool ok = false;
    struct cap_buf b = {0};
    for (size_t i = 0; i < s->options.len; i++) {
      ok = ok || strcmp(s->options.v[i], value) == 0;
      cap_buf_printf(&b, "%s%s", i ? ", " : "", s->options.v[i]);
    }
    char *m = ok ? NULL
                 : cap_xasprintf("'%s' is not one of the allowed values of setting %s of %s: %s",
                                 value, name, spec->id, b.data ? b.data : "");
    cap_buf_free(&b);
    return m;
  }
  return NULL;
}

static int config_set(const struct common *o, struct gw_state *st, const struct cap_spec *spec,
                      const char *name, const char *value)
{
  _cleanup_free_ char *why = setting_check(spec, name, value);
  if (why) {
    cli_error("config set", why);
    return CLI_EXIT_INVALID;
  }
  struct cap_error err = {0};
  const char *user = o->user_given ? o->user : "";
  if (gw_setting_set(st, spec->id, user, name, value, &err) < 0) {
    cli_error("config set", err.message);
    cap_error_clear(&err);
    return CLI_EXIT_INVALID;
  }
  _cleanup_free_ char *line = cap_xasprintf("config set: %s.%s = %s (%s%s)", spec->id, name, value,
                                            *user ? "user " : "operator", user);
  cap_escape_fput(stdout, line, 8192);
  putchar('\n');
  return audit_change(st, o, "config-set", spec->id, name, *user ? "user setting" : "setting");
}

static int config_rm(const struct common *o, struct gw_state *st, const struct cap_spec *spec,
                     const char *name)
{
  struct cap_error err = {0};
  bool found = false;
  const char *user = o->user_given ? o->user : "";
  if (gw_setting_rm(st, spec->id, user, name, &found, &err) < 0) {
    cli_error("config rm", err.message);
    cap_error_clear(&err);
    return CLI_EXIT_INVALID;
  }
  if (!found) {
    _cleanup_free_ char *m = cap_xasprintf("%s has no stored %s%s%s; nothing removed", spec->id,
                                           name, *user ? " for user " : "", user);
    cli_error("config rm", m);
    return CLI_EXIT_INVALID;
  }
  _cleanup_free_ char *line = cap_xasprintf("config rm: %s.%s", spec->id, name);
  cap_escape_fput(stdout, line, 8192);
  putchar('\n');
  return audit_change(st, o, "config-rm", spec->id, name, "setting removed");
}

/* A default as Talos gives it to the handler: text. */
static char *default_text(const struct cap_node *n)
{
  if (n->kind == CAP_NODE_STRING)
    return cap_xstrdup(n->u.str.ptr);
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_node(&w, n);
  return cap_buf_steal(&b);
}

static const struct cli_column config_cols[] = {
    {"name", 24, NULL}, {"kind", 11, NULL},  {"type", 8, NULL},
    {"value", 24, "-"}, {"source", 0, NULL},
};

static void config_row(struct cli_listing *l, const char *name, const char *kind, const char *type,
                       const char *value, const char *source)
{
  const char *v[] = {name, kind, type, value, source};
  cli_listing_row(l, config_cols, v, ARRAY_SIZE(v));
}

/* Settings (stored for the user, the operator's, else the default), then
 * credentials: a `secret: false` one's value, a secret one only set or not. */
static int config_list(const struct common *o, struct gw_state *st, const struct cap_spec *spec)
{
  struct cli_listing l;
  cli_listing_begin(&l, o->json);
  struct cap_error err = {0};
  int r = 0;
  const char *user = o->user_given ? o->user : "";
  /* the declared settings, then capsule's own: node_path, oauth_token_url */
  size_t n = spec->n_settings + 1 + (spec->talos.has_oauth ? 1 : 0);
  for (size_t i = 0; r == 0 && i < n; i++) {
    const struct cap_setting *s = i < spec->n_settings ? &spec->settings[i] : NULL;
    const char *name = s                       ? s->name
                       : i == spec->n_settings ? GW_SETTING_NODE_PATH
                                               : GW_SETTING_OAUTH_TOKEN_URL;
    _cleanup_free_ char *v = NULL, *own = NULL, *dflt = NULL;
    r = gw_setting_get(st, spec->id, user, name, &v, &err);
    if (r == 0 && v && *user)
      r = gw_setting_get(st, spec->id, "", name, &own, &err);
    const char *source = v ? (*user && (!own || strcmp(own, v)) ? "user" : "operator") : "unset";
    if (!v && s && s->default_value) {
      dflt = default_text(s->default_value);
      source = "default";
    }
    if (r == 0 && (s || v))
      config_row(&l, name, s ? "setting" : "capsule",
                 s                       ? s->type
                 : i == spec->n_settings ? "path"
                                         : "url",
                 v ? v : dflt, source);
  }
  for (size_t i = 0; r == 0 && i < spec->n_secrets; i++) {
    const struct cap_secret *c = &spec->secrets[i];
    char *v = NULL;
    bool found = false;
    r = gw_cred_lookup(st, spec->id, c->name, o->user, &v, &found, &err);
    config_row(&l, c->name, "credential", c->shown ? "text" : "secret",
               found ? (c->shown ? v : "(set)") : NULL, found ? "cred" : "unset");
    gw_secret_free(v);
  }
  cli_listing_end(&l, r == 0);
  if (r < 0) {
    cli_error("config list", err.message);
    cap_error_clear(&err);
    return CLI_EXIT_INVALID;
  }
  return 0;
}

int cmd_config(int argc, char **argv)
{
  struct common o = {0};
  int r = parse_common("config", argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  int rest = argc - optind;
  const char *sub = rest ? argv[optind] : "";
  bool set = strcmp(sub, "set") == 0, list = strcmp(sub, "list") == 0, rm = strcmp(sub, "rm") == 0;
  if ((!set && !list && !rm) || (set && rest != 4) || (list && rest != 2) || (rm && rest != 3))
    return cli_usage_error("config", "give set CAPABILITY NAME VALUE, list CAPABILITY, or rm "
                                     "CAPABILITY NAME");
  if (!list && (r = require_operator("config", "changing settings")))
    return r;
  struct gw_registry reg;
  struct gw_state *st = NULL;
  const struct cap_spec *spec = NULL;
  if ((r = plugin_open("config", &o, argv[optind + 1], &reg, &st, &spec)))
    return r;
  if (set)
    r = config_set(&o, st, spec, argv[optind + 2], argv[optind + 3]);
  else if (rm)
    r = config_rm(&o, st, spec, argv[optind + 2]);
  else
    r = config_list(&o, st, spec);
  gw_state_close(st);
  gw_registry_free(&reg);
  return r;
}

/* ---- plugin install ---- */

/* `npm ci` in a plugin that has a package.json and a lock file, install
 * scripts off (they would run unsandboxed, as the operator). */
static int plugin_install(const char *dir)
{
  _cleanup_free_ char *pkg = cap_xasprintf("%s/package.json", dir);
  _cleanup_free_ char *lock = cap_xasprintf("%s/package-lock.json", dir);
  if (access(pkg, F_OK) < 0) {
    fprintf(stderr, "capsule plugin install: %s has no package.json; nothing to install\n", dir);
    return CLI_EXIT_INVALID;
  }
  if (access(lock, F_OK) < 0) {
    fprintf(stderr,
            "capsule plugin install: %s has no package-lock.json; `npm ci` installs exactly "
            "what a lock file names: add one (npm install --package-lock-only)\n",
            dir);
    return CLI_EXIT_INVALID;
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir) < 0)
      _exit(127);
    execlp("npm", "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", (char *)NULL);
    fprintf(stderr, "capsule plugin install: cannot run npm: %s\n", strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "capsule plugin install: npm ci failed in %s\n", dir);
    return CLI_EXIT_INVALID;
  }
  printf("plugin install: %s/node_modules installed (npm ci, install scripts not run)\n", dir);
  return CLI_EXIT_OK;
}

int cmd_plugin(int argc, char **argv)
{
  struct common o = {0};
  int r = parse_common("plugin", argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  if (argc - optind != 2 || strcmp(argv[optind], "install") != 0)
    return cli_usage_error("plugin", "give install DIR");
  if ((r = require_operator("plugin", "installing a plugin's modules")))
    return r;
  return plugin_install(argv[optind + 1]);
}
