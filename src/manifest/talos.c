/* Talos manifest.json (the published format; docs/manifests.md maps every field) checked and
 * lowered. Talos declares no sandbox needs, so a Talos tool gets capsule's
 * secure default: no network, its package read-only, a private /tmp, and
 * every function blocked until an operator allows it. */
#include <stdlib.h>
#include <string.h>

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

static const char *const top_keys[] = {
    "id",       "name",     "description", "version",   "logName", "credentials",
    "settings", "triggers", "functions",   "x-capsule", "$schema", NULL,
};
static const char *const credential_keys[] = {"name", "label", "description", "required", NULL};
static const char *const setting_keys[] = {"name", "label", "type", "default", "description", NULL};
static const char *const trigger_keys[] = {"id", "label", "description", NULL};
static const char *const function_keys[] = {"name", "description", "parameters", NULL};
static const char *const setting_types[] = {"number", "string", "boolean", NULL};
enum { SETTING_NUMBER, SETTING_STRING, SETTING_BOOLEAN };

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

static void talos_setting(struct mf_ctx *c, const struct cap_node *o, void *arg)
{
  struct cap_spec *spec = ((struct talos_ctx *)arg)->spec;
  mf_unknown_keys(c, o, setting_keys, CAP_SEV_WARNING);
  const char *name = mf_string(c, o, "name", MF_REQUIRED | MF_NONEMPTY, NULL);
  const char *label = mf_string(c, o, "label", MF_REQUIRED, NULL);
  int type = mf_enum(c, o, "type", MF_REQUIRED, setting_types, -1);
  const struct cap_node *def = mf_field(c, o, "default", CAP_NODE_STRING, 0);
  const char *description = mf_string(c, o, "description", 0, NULL);

  struct cap_node *value = NULL;
  if (def && type >= 0) {
    const char *text = def->u.str.ptr;
    switch (type) {
    case SETTING_NUMBER:
      value = number_from_text(spec, def);
      if (!value) {
        mf_error(c, def, "default",
                 "\"%s\" is not a number (type is \"number\"); write a number as a string "
                 "such as \"5\"",
                 text);
      }
      break;
    case SETTING_BOOLEAN:
      if (strcmp(text, "true") == 0 || strcmp(text, "false") == 0) {
        value = cap_node_new(spec->doc, CAP_NODE_BOOL, def->line, def->col);
        value->u.boolean = text[0] == 't';
      } else {
        mf_error(c, def, "default",
                 "\"%s\" is not a boolean (type is \"boolean\"); write \"true\" or \"false\"",
                 text);
      }
      break;
    default:
      value = cap_node_new_string(spec->doc, text, def->u.str.len, def->line, def->col);
      break;
    }
  }
  if (!name || !label || type < 0)
    return;
  struct cap_setting *s = cap_spec_add_setting(spec);
  s->name = cap_xstrdup(name);
  s->label = cap_xstrdup(label);
  s->type = cap_xstrdup(setting_types[type]);
  s->default_value = value;
  s->description = dup_or_null(description);
}

static void talos_trigger(struct mf_ctx *c, const struct cap_node *o, void *arg)
{
  struct cap_spec *spec = ((struct talos_ctx *)arg)->spec;
  const char *tool_id = ((struct talos_ctx *)arg)->tool_id;
  mf_unknown_keys(c, o, trigger_keys, CAP_SEV_WARNING);
  const struct cap_node *id = mf_field(c, o, "id", CAP_NODE_STRING, MF_REQUIRED | MF_NONEMPTY);
  const char *label = mf_string(c, o, "label", MF_REQUIRED, NULL);
  const char *description = mf_string(c, o, "description", 0, NULL);
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

  spec->tool_source = CAP_TOOL_SOURCE_MANIFEST;
  spec->runtime.kind = CAP_RUNTIME_TALOS_NODE;
  spec->runtime.interpreter = cap_xstrdup("node");
  spec->runtime.entry = cap_xstrdup("index.js");
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
