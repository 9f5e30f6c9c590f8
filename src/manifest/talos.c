/* Talos manifest.json (the published format; docs/manifests.md maps every field) checked and
 * lowered. Talos declares no sandbox needs, so a Talos tool gets capsule's
 * secure default: no network, its package read-only, a private /tmp, and
 * every function blocked until an operator allows it. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/json.h"
#include "jsonschema/jsonschema.h"
#include "manifest/formats.h"

#define TALOS_MEMORY_BYTES (512ull * 1024 * 1024)
#define TALOS_CPU_MS 30000u
#define TALOS_WALL_MS 120000u
#define TALOS_PIDS 64u
#define TALOS_NOFILE 1024u
#define TALOS_DISK_BYTES (100ull * 1024 * 1024)

/* Every field of Talos's PluginManifest (packages/shared/src/types.ts):
 * the documented ones and those its plugins use (category,
 * defaultEnabled, oauth, modules, sidecar, credentials[].secret,
 * settings[].options, triggers[].params). */
static const char *const top_keys[] = {
    "id",        "name",     "description", "version",        "logName", "category", "credentials",
    "settings",  "triggers", "functions",   "defaultEnabled", "oauth",   "modules",  "sidecar",
    "x-capsule", "$schema",  NULL,
};
static const char *const credential_keys[] = {"name",     "label",  "description",
                                              "required", "secret", NULL};
static const char *const setting_keys[] = {"name",        "label",   "type", "default",
                                           "description", "options", NULL};
static const char *const trigger_keys[] = {"id", "label", "description", "params", NULL};
static const char *const param_keys[] = {"key",     "label",  "type", "description",
                                         "default", "source", NULL};
static const char *const param_types[] = {"multi-select", "number", "text", NULL};
static const char *const function_keys[] = {"name", "description", "parameters", NULL};
static const char *const oauth_keys[] = {"provider", "scopes", "authorizeUrl", NULL};
static const char *const module_keys[] = {"id", "name", "description", "functions", NULL};
static const char *const setting_types[] = {"number", "string", "boolean", "select", NULL};
enum { SETTING_NUMBER, SETTING_STRING, SETTING_BOOLEAN, SETTING_SELECT };

static char *dup_or_null(const char *s) { return s ? cap_xstrdup(s) : NULL; }

/* MAJOR.MINOR.PATCH[-pre][+build], numbers without leading zeros */
static bool is_semver(const char *s)
{
  for (int part = 0; part < 3; part++) {
    if (!(*s >= '0' && *s <= '9'))
      return false;
    if (*s == '0' && s[1] >= '0' && s[1] <= '9')
      return false;
    while (*s >= '0' && *s <= '9')
      s++;
    if (part < 2 && *s++ != '.')
      return false;
  }
  if (*s == '-' || *s == '+') {
    s++;
    if (!*s)
      return false;
    for (; *s; s++)
      if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
            *s == '.' || *s == '-' || *s == '+'))
        return false;
  }
  return *s == '\0';
}

/* What the per-item checks need besides the item. */
struct talos_ctx {
  struct cap_spec *spec;
  const char *tool_id; /* NULL while the id is invalid */
};

static void talos_credential(struct mf_ctx *c, const struct cap_node *o, void *arg)
{
  struct cap_spec *spec = ((struct talos_ctx *)arg)->spec;
  mf_unknown_keys(c, o, credential_keys, CAP_SEV_ERROR);
  const char *name = mf_string(c, o, "name", MF_REQUIRED | MF_NONEMPTY, NULL);
  const char *label = mf_string(c, o, "label", MF_REQUIRED, NULL);
  const char *description = mf_string(c, o, "description", 0, "");
  const struct cap_node *required = mf_field(c, o, "required", CAP_NODE_BOOL, MF_REQUIRED);
  bool secret = mf_bool(c, o, "secret", 0, true);
  if (!name)
    return;
  struct cap_secret *s = cap_spec_add_secret(spec);
  s->name = cap_xstrdup(name);
  s->scope = CAP_SCOPE_USER;
  s->type = cap_xstrdup("secret");
  s->required = required ? required->u.boolean : true;
  s->label = dup_or_null(label);
  s->description = cap_xstrdup(description);
  s->delivery = CAP_DELIVERY_HANDLER;
  s->shown = !secret;
}

/* A setting's default written as a number: JSON's number grammar (no
 * leading '+', no bare '.5'), typed as an integer when it is one. */
static struct cap_node *number_from_text(struct cap_spec *spec, const struct cap_node *text)
{
  struct cap_doc *tmp = cap_doc_new();
  struct cap_diags ignored = {0};
  struct cap_node *out = NULL;
  if (cap_json_parse(tmp, text->u.str.ptr, text->u.str.len, "", 1, &ignored) == 0 &&
      cap_node_is_number(tmp->root)) {
    out = (struct cap_node *)cap_spec_adopt_node(spec, tmp->root);
    out->line = text->line;
    out->col = text->col;
  }
  cap_diags_free(&ignored);
  cap_doc_free(tmp);
  return out;
}

/* A select's options: a non-empty array of distinct strings. */
static void setting_options(struct mf_ctx *c, const struct cap_node *o, int type,
                            struct cap_strv *out)
{
  const struct cap_node *opts =
      mf_string_array(c, o, "options", type == SETTING_SELECT ? MF_REQUIRED | MF_NONEMPTY : 0);
  if (!opts)
    return;
  if (type != SETTING_SELECT && type >= 0) {
    mf_warning(c, opts, "options", "applies only to a setting of type \"select\"; remove it");
    return;
  }
  for (size_t i = 0; i < opts->u.arr.len; i++)
    if (opts->u.arr.items[i]->kind == CAP_NODE_STRING)
      cap_strv_push(out, opts->u.arr.items[i]->u.str.ptr);
}

static bool has_option(const struct cap_strv *options, const char *v)
{
  for (size_t i = 0; i < options->len; i++)
    if (strcmp(options->v[i], v) == 0)
      return true;
  return false;
}

/* The default (a string, as Talos writes every default) typed by the
 * setting's type; NULL (reported) when it does not fit. */
static struct cap_node *setting_default(struct mf_ctx *c, struct cap_spec *spec,
                                        const struct cap_node *def, int type,
                                        const struct cap_strv *options)
{
  const char *text = def->u.str.ptr;
  struct cap_node *value = NULL;
  switch (type) {
  case SETTING_NUMBER:
    value = number_from_text(spec, def);
    if (!value)
      mf_error(c, def, "default",
               "\"%s\" is not a number (type is \"number\"); write a number as a string "
               "such as \"5\"",
               text);
    break;
  case SETTING_BOOLEAN:
    if (strcmp(text, "true") == 0 || strcmp(text, "false") == 0) {
      value = cap_node_new(spec->doc, CAP_NODE_BOOL, def->line, def->col);
      value->u.boolean = text[0] == 't';
    } else {
      mf_error(c, def, "default",
               "\"%s\" is not a boolean (type is \"boolean\"); write \"true\" or \"false\"", text);
    }
    break;
  case SETTING_SELECT:
    if (options->len && !has_option(options, text)) {
      mf_error(c, def, "default", "\"%s\" is not one of the setting's options; write one of them",
               text);
      break;
    }
    /* fall through */
  default: value = cap_node_new_string(spec->doc, text, def->u.str.len, def->line, def->col); break;
  }
  return value;
}

static void talos_setting(struct mf_ctx *c, const struct cap_node *o, void *arg)
{
  struct cap_spec *spec = ((struct talos_ctx *)arg)->spec;
  mf_unknown_keys(c, o, setting_keys, CAP_SEV_WARNING);
  const char *name = mf_string(c, o, "name", MF_REQUIRED | MF_NONEMPTY, NULL);
  const char *label = mf_string(c, o, "label", MF_REQUIRED, NULL);
  int type = mf_enum(c, o, "type", MF_REQUIRED, setting_types, -1);
  const struct cap_node *def = mf_field(c, o, "default", CAP_NODE_STRING, 0);
  const char *description = mf_string(c, o, "description", 0, NULL);
  struct cap_strv options = {0};
  setting_options(c, o, type, &options);
  struct cap_node *value = def && type >= 0 ? setting_default(c, spec, def, type, &options) : NULL;
  if (!name || !label || type < 0) {
    cap_strv_free(&options);
    return;
  }
  struct cap_setting *s = cap_spec_add_setting(spec);
  s->name = cap_xstrdup(name);
  s->label = cap_xstrdup(label);
  s->type = cap_xstrdup(setting_types[type]);
  s->default_value = value;
  s->description = dup_or_null(description);
  s->options = options;
}

/* A task parameter of a trigger (TriggerParamSpec): key, label, type. */
static void talos_param(struct mf_ctx *c, const struct cap_node *o, void *arg)
{
  (void)arg;
  mf_unknown_keys(c, o, param_keys, CAP_SEV_WARNING);
  mf_string(c, o, "key", MF_REQUIRED | MF_NONEMPTY, NULL);
  mf_string(c, o, "label", MF_REQUIRED, NULL);
  int type = mf_enum(c, o, "type", MF_REQUIRED, param_types, -1);
  mf_string(c, o, "description", 0, NULL);
  const struct cap_node *source = mf_field(c, o, "source", CAP_NODE_OBJECT, 0);
  if (type == 0 && !source)
    mf_warning(c, o, "source",
               "a multi-select parameter names where its choices come from; add a source");
}

static void talos_trigger(struct mf_ctx *c, const struct cap_node *o, void *arg)
{
  struct cap_spec *spec = ((struct talos_ctx *)arg)->spec;
  const char *tool_id = ((struct talos_ctx *)arg)->tool_id;
  mf_unknown_keys(c, o, trigger_keys, CAP_SEV_WARNING);
  const struct cap_node *id = mf_field(c, o, "id", CAP_NODE_STRING, MF_REQUIRED | MF_NONEMPTY);
  const char *label = mf_string(c, o, "label", MF_REQUIRED, NULL);
  const char *description = mf_string(c, o, "description", 0, NULL);
  const struct cap_node *params = mf_each_object(c, o, "params", 0, talos_param, NULL);
  if (params) {
    size_t mark = mf_push_key(c, "params");
    mf_report_duplicates(c, params, "key", "parameter", "give each parameter its own key");
    mf_pop(c, mark);
  }
  if (id && memchr(id->u.str.ptr, ':', id->u.str.len)) {
    mf_error(c, id, "id",
             "\"%s\" contains ':'; trigger ids are scoped as toolId:triggerId by capsule, so "
             "write only the local part",
             id->u.str.ptr);
    return;
  }
  if (!id || !label)
    return;
  struct cap_trigger *t = cap_spec_add_trigger(spec);
  t->id = cap_xasprintf("%s:%s", tool_id ? tool_id : "", id->u.str.ptr);
  t->local_id = cap_xstrdup(id->u.str.ptr);
  t->label = cap_xstrdup(label);
  t->description = dup_or_null(description);
  t->params = params ? cap_spec_adopt_node(spec, params) : NULL;
}

static void talos_function(struct mf_ctx *c, const struct cap_node *o, void *arg)
{
  struct cap_spec *spec = ((struct talos_ctx *)arg)->spec;
  mf_unknown_keys(c, o, function_keys, CAP_SEV_WARNING);
  const char *name = mf_string(c, o, "name", MF_REQUIRED | MF_NONEMPTY, NULL);
  const char *description = mf_string(c, o, "description", MF_REQUIRED, NULL);
  struct cap_tool tool = {0};
  bool schema_ok = cap_tool_schema(c, o, "parameters", spec, &tool);
  if (!name || !description || !schema_ok) {
    cap_js_validator_free(tool.validator);
    return;
  }
  struct cap_tool *t = cap_spec_add_tool(spec);
  *t = tool;
  t->name = cap_xstrdup(name);
  t->description = cap_xstrdup(description);
  t->policy = CAP_POLICY_BLOCK;
  t->policy_source = CAP_POLICY_SOURCE_DEFAULT;
  t->line = o->line;
  t->col = o->col;
}

/* oauth: the provider and scopes the plugin will hold. Talos names no
 * token endpoint here; the token is a credential the operator provides. */
static void talos_oauth(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  const struct cap_node *o = mf_field(c, root, "oauth", CAP_NODE_OBJECT, 0);
  if (!o)
    return;
  size_t mark = mf_push_key(c, "oauth");
  mf_unknown_keys(c, o, oauth_keys, CAP_SEV_WARNING);
  const char *provider = mf_string(c, o, "provider", MF_REQUIRED | MF_NONEMPTY, NULL);
  const struct cap_node *scopes = mf_string_array(c, o, "scopes", MF_REQUIRED);
  const char *url = mf_string(c, o, "authorizeUrl", 0, NULL);
  spec->talos.has_oauth = true;
  spec->talos.oauth_provider = dup_or_null(provider);
  for (size_t i = 0; scopes && i < scopes->u.arr.len; i++)
    if (scopes->u.arr.items[i]->kind == CAP_NODE_STRING)
      cap_strv_push(&spec->talos.oauth_scopes, scopes->u.arr.items[i]->u.str.ptr);
  spec->talos.oauth_authorize_url = dup_or_null(url);
  mf_pop(c, mark);
}

static void talos_module(struct mf_ctx *c, const struct cap_node *o, void *arg)
{
  const struct cap_node *functions = arg;
  mf_unknown_keys(c, o, module_keys, CAP_SEV_WARNING);
  mf_string(c, o, "id", MF_REQUIRED | MF_NONEMPTY, NULL);
  mf_string(c, o, "name", MF_REQUIRED, NULL);
  mf_string(c, o, "description", 0, NULL);
  const struct cap_node *names = mf_string_array(c, o, "functions", MF_REQUIRED);
  for (size_t i = 0; names && functions && i < names->u.arr.len; i++) {
    const struct cap_node *n = names->u.arr.items[i];
    bool found = n->kind != CAP_NODE_STRING;
    for (size_t k = 0; !found && k < functions->u.arr.len; k++) {
      const struct cap_node *fn = cap_node_get(functions->u.arr.items[k], "name");
      found = fn && fn->kind == CAP_NODE_STRING && strcmp(fn->u.str.ptr, n->u.str.ptr) == 0;
    }
    if (!found)
      mf_warning(c, n, "functions",
                 "\"%s\" is not a declared function; name one of the manifest's functions",
                 n->u.str.ptr);
  }
}

/* What Talos's host reads besides the functions: kept and shown. */
static void talos_meta(struct mf_ctx *c, const struct cap_node *root, const struct cap_node *fns,
                       struct cap_spec *spec)
{
  spec->talos.category = dup_or_null(mf_string(c, root, "category", 0, NULL));
  spec->talos.default_enabled = mf_bool(c, root, "defaultEnabled", 0, false);
  talos_oauth(c, root, spec);
  const struct cap_node *modules =
      mf_each_object(c, root, "modules", 0, talos_module,
                     (void *)(fns && fns->kind == CAP_NODE_ARRAY ? fns : NULL));
  if (modules) {
    size_t mark = mf_push_key(c, "modules");
    mf_report_duplicates(c, modules, "id", "module", "give each module its own id");
    mf_pop(c, mark);
    spec->talos.modules = cap_spec_adopt_node(spec, modules);
  }
  const struct cap_node *sidecar = mf_field(c, root, "sidecar", CAP_NODE_OBJECT, 0);
  if (sidecar) {
    mf_warning(c, sidecar, "sidecar",
               "capsule does not start Talos sidecar containers; functions that need it fail "
               "until the service runs elsewhere and is granted (`capsule grant`)");
    spec->talos.sidecar = cap_spec_adopt_node(spec, sidecar);
  }
}

/* The module Talos imports (index.ts), else the JavaScript a plugin may
 * ship instead; index.ts when none is there (list says it is missing). */
static char *talos_entry(const char *package_dir)
{
  static const char *const names[] = {"index.ts", "index.mts", "index.mjs", "index.js"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char *p = cap_xasprintf("%s/%s", package_dir, names[i]);
    bool there = access(p, F_OK) == 0;
    free(p);
    if (there)
      return cap_xstrdup(names[i]);
  }
  return cap_xstrdup(names[0]);
}

/* Checks every item of root[key], then that unique_key is unique among them. */
static const struct cap_node *
each_unique(struct mf_ctx *c, const struct cap_node *root, const char *key, unsigned flags,
            void (*fn)(struct mf_ctx *, const struct cap_node *, void *), struct talos_ctx *t,
            const char *unique_key, const char *what, const char *fix)
{
  const struct cap_node *arr = mf_each_object(c, root, key, flags, fn, t);
  if (arr) {
    size_t mark = mf_push_key(c, key);
    mf_report_duplicates(c, arr, unique_key, what, fix);
    mf_pop(c, mark);
  }
  return arr;
}

void cap_talos_lower(struct mf_ctx *c, const struct cap_node *root, struct cap_spec *spec)
{
  mf_unknown_keys(c, root, top_keys, CAP_SEV_WARNING);
  const struct cap_node *id = mf_field(c, root, "id", CAP_NODE_STRING, MF_REQUIRED | MF_NONEMPTY);
  const char *name = mf_string(c, root, "name", MF_REQUIRED | MF_NONEMPTY, NULL);
  const char *description = mf_string(c, root, "description", MF_REQUIRED | MF_NONEMPTY, NULL);
  const struct cap_node *version =
      mf_field(c, root, "version", CAP_NODE_STRING, MF_REQUIRED | MF_NONEMPTY);
  const char *log_name = mf_string(c, root, "logName", 0, NULL);

  const char *tool_id = NULL;
  if (id) {
    const char *folder = strrchr(spec->package_dir, '/');
    folder = folder ? folder + 1 : spec->package_dir;
    if (memchr(id->u.str.ptr, ':', id->u.str.len))
      mf_error(c, id, "id", "\"%s\" contains ':', which separates tool and trigger ids; remove it",
               id->u.str.ptr);
    else if (strcmp(folder, id->u.str.ptr) != 0)
      mf_error(c, id, "id",
               "\"%s\" does not match the folder name \"%s\"; Talos finds a tool by its "
               "folder: rename the folder or the id",
               id->u.str.ptr, folder);
    else
      tool_id = id->u.str.ptr;
  }
  if (version && !is_semver(version->u.str.ptr))
    mf_warning(c, version, "version",
               "\"%s\" is not a semantic version; write MAJOR.MINOR.PATCH such as \"1.0.0\"",
               version->u.str.ptr);

  spec->id = dup_or_null(id ? id->u.str.ptr : NULL);
  spec->name = dup_or_null(name);
  spec->description = dup_or_null(description);
  spec->version = dup_or_null(version ? version->u.str.ptr : NULL);
  spec->log_name = dup_or_null(log_name);

  struct talos_ctx t = {.spec = spec, .tool_id = tool_id};
  each_unique(c, root, "credentials", 0, talos_credential, &t, "name", "credential",
              "declare each credential once");
  each_unique(c, root, "settings", 0, talos_setting, &t, "name", "setting",
              "declare each setting once");
  each_unique(c, root, "triggers", 0, talos_trigger, &t, "id", "trigger",
              "give each trigger its own id");
  const struct cap_node *functions =
      each_unique(c, root, "functions", MF_REQUIRED, talos_function, &t, "name", "function",
                  "give each function its own name");
  if (functions && functions->u.arr.len == 0)
    mf_warning(c, functions, "functions",
               "is empty; the tool offers the agent nothing: declare at least one function");
  talos_meta(c, root, functions, spec);

  spec->tool_source = CAP_TOOL_SOURCE_MANIFEST;
  spec->runtime.kind = CAP_RUNTIME_TALOS_NODE;
  spec->runtime.interpreter = cap_xstrdup("node");
  spec->runtime.entry = talos_entry(spec->package_dir);
  spec->network.mode = CAP_NET_BLOCKED;
  spec->network.dns = false;
  spec->sandbox.private_tmp = true;
  spec->limits = (struct cap_limits){
      .memory_bytes = TALOS_MEMORY_BYTES,
      .cpu_fraction = 1.0,
      .cpu_ms_per_task = TALOS_CPU_MS,
      .wall_ms = TALOS_WALL_MS,
      .pids = TALOS_PIDS,
      .nofile = TALOS_NOFILE,
      .disk_bytes = TALOS_DISK_BYTES,
  };
  cap_xcapsule_lower(c, cap_node_get(root, "x-capsule"), spec);
}
