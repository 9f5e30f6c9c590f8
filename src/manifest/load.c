#include "load.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/json.h"
#include "core/text.h"
#include "core/yaml.h"
#include "jsonschema/jsonschema.h"
#include "manifest/fields.h"
#include "manifest/formats.h"
#include "toml/toml.h"

/* Manifest file names a capability directory may hold, in the order tried. */
static const char *const manifest_names[] = {
    "manifest.yaml",   "manifest.yml", "agent.toml", "manifest.json",
    "capability.json", "nono.json",    NULL,
};

static bool has_suffix(const char *s, const char *suffix)
{
  size_t ls = strlen(s), lx = strlen(suffix);
  return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

static const char *base_name(const char *path)
{
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

static char *path_join(const char *dir, const char *name)
{
  if (strcmp(dir, ".") == 0)
    return cap_xstrdup(name);
  size_t n = strlen(dir);
  return cap_xasprintf("%.*s/%s", (int)(n && dir[n - 1] == '/' ? n - 1 : n), dir, name);
}

static bool is_dir(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int compare_strings(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* agents/<id>/agent.toml for every subdirectory that has one; flat *.toml
 * files and subdirectories without agent.toml are skipped, as Covenant's
 * daemon does. */
static size_t discover_agents(const char *agents_dir, struct cap_strv *files)
{
  DIR *d = opendir(agents_dir);
  if (!d)
    return 0;
  struct cap_strv found = {0};
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.')
      continue;
    _cleanup_free_ char *sub = path_join(agents_dir, e->d_name);
    if (!is_dir(sub))
      continue;
    _cleanup_free_ char *manifest = path_join(sub, "agent.toml");
    if (is_file(manifest))
      cap_strv_push(&found, manifest);
  }
  closedir(d);
  if (found.len)
    qsort(found.v, found.len, sizeof(char *), compare_strings);
  for (size_t i = 0; i < found.len; i++)
    cap_strv_push(files, found.v[i]);
  size_t n = found.len;
  cap_strv_free(&found);
  return n;
}

int cap_manifest_discover(const char *path, struct cap_strv *files, struct cap_diags *diags)
{
  struct stat st;
  if (stat(path, &st) < 0) {
    int e = errno;
    cap_diags_add(diags, CAP_SEV_ERROR, path, 0, 0, "", "%s; check the path", strerror(e));
    return -e;
  }
  if (!S_ISDIR(st.st_mode)) {
    cap_strv_push(files, path);
    return 0;
  }
  _cleanup_free_ char *agents = path_join(path, "agents");
  if (is_dir(agents)) {
    if (discover_agents(agents, files) == 0) {
      cap_diags_add(diags, CAP_SEV_ERROR, agents, 0, 0, "",
                    "no agent found; each agent lives in agents/<id>/agent.toml");
      return -ENOENT;
    }
    return 0;
  }
  const char *found = NULL;
  for (size_t i = 0; manifest_names[i]; i++) {
    _cleanup_free_ char *candidate = path_join(path, manifest_names[i]);
    if (!is_file(candidate))
      continue;
    if (found) {
      cap_diags_add(diags, CAP_SEV_ERROR, path, 0, 0, "",
                    "holds both %s and %s; a capability directory has one manifest", found,
                    manifest_names[i]);
      return -EINVAL;
    }
    found = manifest_names[i];
  }
  if (found) {
    _cleanup_free_ char *file = path_join(path, found);
    cap_strv_push(files, file);
    return 0;
  }
  if (discover_agents(path, files) > 0)
    return 0;
  cap_diags_add(diags, CAP_SEV_ERROR, path, 0, 0, "",
                "no manifest found; expected manifest.yaml (Selu), agent.toml or "
                "agents/<id>/agent.toml (Covenant), manifest.json (Talos) or a nono "
                "capability manifest (capability.json, nono.json)");
  return -ENOENT;
}

static int by_dirent_name(const struct dirent **a, const struct dirent **b)
{
  return strcmp((*a)->d_name, (*b)->d_name);
}

/* A Talos checkout's root (a plugins/ folder that is not itself a
 * capability): only plugins/ is read, as Talos's loader does; its apps/,
 * packages/ and node_modules/ are not capabilities.
 * Its plugins/: each folder holding a manifest.json is a
 * plugin (Talos's loader skips the others, and so does this). */
static void discover_plugins(const char *dir, struct cap_strv *files, struct cap_diags *diags)
{
  struct dirent **names = NULL;
  int n = scandir(dir, &names, NULL, by_dirent_name);
  for (int i = 0; i < n; i++) {
    const char *name = names[i]->d_name;
    _cleanup_free_ char *sub = path_join(dir, name);
    if (name[0] != '.' && is_dir(sub) && cap_is_capability_dir(sub))
      cap_manifest_discover(sub, files, diags);
    free(names[i]);
  }
  free(names);
}

int cap_caps_discover(const char *dir, struct cap_strv *files, struct cap_diags *diags)
{
  struct dirent **names = NULL;
  int n = scandir(dir, &names, NULL, by_dirent_name);
  if (n < 0) {
    int e = errno;
    cap_diags_add(diags, CAP_SEV_ERROR, dir, 0, 0, "",
                  "cannot read the capabilities directory: %s; name one with --caps DIR",
                  strerror(e));
    return -e;
  }
  _cleanup_free_ char *agents = path_join(dir, "agents");
  if (is_dir(agents)) /* a Covenant home */
    cap_manifest_discover(dir, files, diags);
  _cleanup_free_ char *plugins = path_join(dir, "plugins");
  bool talos_root = is_dir(plugins) && !cap_is_capability_dir(plugins);
  for (int i = 0; i < n; i++) {
    const char *name = names[i]->d_name;
    _cleanup_free_ char *sub = path_join(dir, name);
    if (talos_root && strcmp(name, "plugins") == 0)
      discover_plugins(sub, files, diags);
    else if (!talos_root && name[0] != '.' && strcmp(name, "agents") != 0 && is_dir(sub))
      cap_manifest_discover(sub, files, diags);
    free(names[i]);
  }
  free(names);
  return 0;
}

bool cap_is_capability_dir(const char *path)
{
  for (size_t i = 0; manifest_names[i]; i++) {
    _cleanup_free_ char *candidate = path_join(path, manifest_names[i]);
    if (is_file(candidate))
      return true;
  }
  return false;
}

/* A nono profile, told from a capability manifest by its shape: a key only
 * profiles have (nono's profile schema), filesystem or network written the
 * profile's way, or a $schema naming the profile schema. A profile has no
 * version, but one that gained a version (following an old hint) is still
 * a profile: read as a manifest it would lose its deny list and network
 * block. */
static bool nono_profile_shaped(const struct cap_node *root)
{
  static const char *const profile_keys[] = {"extends",
                                             "meta",
                                             "security",
                                             "groups",
                                             "commands",
                                             "workdir",
                                             "hooks",
                                             "session_hooks",
                                             "undo",
                                             "policy",
                                             "env_credentials",
                                             "environment",
                                             "command_policies",
                                             "open_urls",
                                             "allow_launch_services",
                                             "allow_gpu",
                                             "interactive",
                                             "packs",
                                             "command_args",
                                             "credential_capture",
                                             "unsafe_macos_seatbelt_rules",
                                             "linux",
                                             "diagnostics",
                                             "binary",
                                             NULL};
  for (size_t i = 0; profile_keys[i]; i++)
    if (cap_node_get(root, profile_keys[i]))
      return true;
  const struct cap_node *secrets = cap_node_get(root, "secrets"); /* capsule's own is an array */
  if (secrets && secrets->kind == CAP_NODE_OBJECT)
    return true;
  const struct cap_node *schema = cap_node_get(root, "$schema");
  if (schema && schema->kind == CAP_NODE_STRING && strstr(schema->u.str.ptr, "nono-profile"))
    return true;
  static const struct {
    const char *section, *const keys[8];
  } shaped[] = {
      {"filesystem",
       {"allow", "read", "write", "allow_file", "read_file", "write_file", "bypass_protection",
        NULL}},
      {"network",
       {"block", "allow_domain", "network_profile", "open_port", "listen_port",
        "custom_credentials", "proxy_allow", NULL}},
  };
  for (size_t i = 0; i < 2; i++) {
    const struct cap_node *sec = cap_node_get(root, shaped[i].section);
    for (size_t k = 0; sec && sec->kind == CAP_NODE_OBJECT && shaped[i].keys[k]; k++)
      if (cap_node_get(sec, shaped[i].keys[k]))
        return true;
  }
  const struct cap_node *fs = cap_node_get(root, "filesystem");
  const struct cap_node *deny = fs && fs->kind == CAP_NODE_OBJECT ? cap_node_get(fs, "deny") : NULL;
  if (deny && deny->kind == CAP_NODE_ARRAY && deny->u.arr.len &&
      deny->u.arr.items[0]->kind == CAP_NODE_STRING) /* a profile's deny is a list of paths */
    return true;
  return false;
}

/* JSON holds Talos or nono manifests or nono profiles; tell them apart by
 * their keys. */
static int detect_json(const struct cap_node *root, const char *name)
{
  if (root && root->kind == CAP_NODE_OBJECT) {
    if (cap_node_get(root, "functions"))
      return CAP_FORMAT_TALOS;
    if (nono_profile_shaped(root))
      return CAP_FORMAT_NONO_PROFILE;
    static const char *const nono_keys[] = {"filesystem", "network",   "process",
                                            "rollback",   "resources", NULL};
    for (size_t i = 0; nono_keys[i]; i++)
      if (cap_node_get(root, nono_keys[i]))
        return CAP_FORMAT_NONO;
    const struct cap_node *v = cap_node_get(root, "version");
    if (v && !cap_node_get(root, "id"))
      return CAP_FORMAT_NONO;
  }
  if (has_suffix(base_name(name), ".jsonc"))
    return CAP_FORMAT_NONO_PROFILE;
  return strcmp(base_name(name), "manifest.json") == 0 ? CAP_FORMAT_TALOS : CAP_FORMAT_NONO;
}

static int detect_by_name(const char *name)
{
  const char *base = base_name(name);
  if (has_suffix(base, ".yaml") || has_suffix(base, ".yml"))
    return CAP_FORMAT_SELU;
  if (has_suffix(base, ".toml"))
    return CAP_FORMAT_COVENANT;
  if (has_suffix(base, ".json") || has_suffix(base, ".jsonc"))
    return CAP_FORMAT_TALOS; /* refined by content */
  return CAP_HINT_AUTO;
}

/* Without a telling name, look at the first significant character. */
static int detect_by_content(const char *data, size_t len)
{
  size_t i = 0;
  if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0)
    i = 3;
  while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r'))
    i++;
  if (i < len && data[i] == '{')
    return CAP_FORMAT_TALOS;
  if (i < len && data[i] == '[')
    return CAP_FORMAT_COVENANT;
  return CAP_FORMAT_SELU;
}

static void diags_append(struct cap_diags *to, const struct cap_diags *from)
{
  for (size_t i = 0; i < from->len; i++) {
    const struct cap_diag *d = &from->items[i];
    cap_diags_add(to, d->severity, d->file, d->line, d->col, d->path, "%s", d->message);
  }
}

/* JSON, or JSONC for a nono profile: comments and trailing commas are
 * blanked (positions kept) only when the plain parse fails and what then
 * parses is a profile; anything else keeps the plain parser's error. */
static int parse_json(struct cap_doc *doc, const char *data, size_t len, const char *name,
                      int format, struct cap_diags *diags)
{
  struct cap_diags plain = {0}, blanked = {0};
  int r = -EINVAL;
  if (format != CAP_FORMAT_NONO_PROFILE)
    r = cap_json_parse(doc, data, len, name, 0, &plain);
  if (r < 0) {
    _cleanup_free_ char *copy = cap_xmalloc(len + 1);
    memcpy(copy, data, len);
    copy[len] = '\0';
    cap_jsonc_blank(copy, len);
    struct cap_doc *again = cap_doc_new();
    int r2 = cap_json_parse(again, copy, len, name, 0, &blanked);
    if (r2 >= 0 && (format == CAP_FORMAT_NONO_PROFILE ||
                    detect_json(again->root, name) == CAP_FORMAT_NONO_PROFILE)) {
      struct cap_doc tmp = *doc;
      *doc = *again;
      *again = tmp;
      r = 0;
    } else if (format == CAP_FORMAT_NONO_PROFILE) {
      diags_append(diags, &blanked);
    }
    cap_doc_free(again);
  }
  if (r < 0 && format != CAP_FORMAT_NONO_PROFILE)
    diags_append(diags, &plain);
  cap_diags_free(&plain);
  cap_diags_free(&blanked);
  return r;
}

static char *absolute_dir_of(const char *name)
{
  _cleanup_free_ char *dir = NULL;
  const char *slash = strrchr(name, '/');
  if (!slash)
    dir = cap_xstrdup(".");
  else if (slash == name)
    dir = cap_xstrdup("/");
  else
    dir = cap_xstrndup(name, (size_t)(slash - name));
  char resolved[PATH_MAX];
  if (realpath(dir, resolved))
    return cap_xstrdup(resolved);
  return steal_pointer(&dir);
}

static const char *top_level_noun(int format)
{
  switch (format) {
  case CAP_FORMAT_SELU: return "a YAML mapping";
  case CAP_FORMAT_COVENANT: return "a TOML table";
  default: return "a JSON object";
  }
}

/* x-capsule's KEY as a command (a non-empty array of non-empty strings)
 * into spec->runtime.command: the node, or NULL when absent or wrong. */
static const struct cap_node *xcapsule_argv(struct mf_ctx *c, const struct cap_node *x,
                                            const char *key, struct cap_spec *spec)
{
  const struct cap_node *cmd = mf_string_array(c, x, key, MF_NONEMPTY);
  if (!cmd)
    return NULL;
  bool ok = true;
  for (size_t i = 0; i < cmd->u.arr.len; i++) {
    if (cmd->u.arr.items[i]->u.str.len == 0) {
      size_t m2 = mf_push_key(c, key);
      mf_push_index(c, i);
      mf_error(c, cmd->u.arr.items[i], NULL, "must not be empty");
      mf_pop(c, m2);
      ok = false;
    }
  }
  if (!ok)
    return NULL;
  cap_strv_free(&spec->runtime.command);
  for (size_t i = 0; i < cmd->u.arr.len; i++)
    cap_strv_push(&spec->runtime.command, cmd->u.arr.items[i]->u.str.ptr);
  return cmd;
}

/* x-capsule.mcp_server: the capability is that MCP server (over stdio),
 * its tools the ones the server lists (runtime/mcp_client.h). */
static void xcapsule_mcp(struct mf_ctx *c, const struct cap_node *mcp, struct cap_spec *spec)
{
  spec->runtime.kind = CAP_RUNTIME_MCP;
  spec->runtime.port = 0;
  if (spec->format == CAP_FORMAT_NONO) /* the others grant their package already */
    cap_spec_add_grant(spec, spec->package_dir, CAP_ACCESS_READ, CAP_FS_DIRECTORY,
                       CAP_ORIGIN_PACKAGE);
  if (spec->n_tools)
    mf_warning(c, mcp, "mcp_server",
               "the capability's tools are the ones the MCP server lists (tools/list); the %zu "
               "the manifest names are not used",
               spec->n_tools);
  cap_tools_free(spec->tools, spec->n_tools);
  spec->tools = NULL;
  spec->n_tools = 0;
  spec->tool_source = CAP_TOOL_SOURCE_DYNAMIC;
  free(spec->discovery_tool_name);
  spec->discovery_tool_name = cap_xstrdup("tools/list");
}

void cap_xcapsule_lower(struct mf_ctx *c, const struct cap_node *x, struct cap_spec *spec)
{
  if (!x)
    return;
  size_t mark = mf_push_key(c, "x-capsule");
  if (x->kind != CAP_NODE_OBJECT) {
    mf_error(c, x, NULL, "must be %s of capsule settings, not %s",
             spec->format == CAP_FORMAT_COVENANT ? "a table" : "an object",
             mf_kind_article(c, x->kind));
    mf_pop(c, mark);
    return;
  }
  static const char *const known[] = {"command",
                                      "workspace",
                                      "notes",
                                      "max_concurrency",
                                      "idle_timeout_ms",
                                      "startup_timeout_ms",
                                      "workspace_max_mb",
                                      "invoke",
                                      "mcp_server",
                                      NULL};
  mf_unknown_keys(c, x, known, CAP_SEV_ERROR);
  const struct cap_node *cmd = xcapsule_argv(c, x, "command", spec);
  const struct cap_node *mcp = cmd ? NULL : xcapsule_argv(c, x, "mcp_server", spec);
  if (cmd && cap_node_get(x, "mcp_server"))
    mf_error(c, cap_node_get(x, "mcp_server"), "mcp_server",
             "a capability runs either its command or an MCP server; remove one of "
             "x-capsule.command and x-capsule.mcp_server");
  if (mcp)
    xcapsule_mcp(c, mcp, spec);
  const struct cap_node *ws = mf_field(c, x, "workspace", CAP_NODE_STRING, MF_NONEMPTY);
  if (ws) {
    if (ws->u.str.ptr[0] != '/' && ws->u.str.ptr[0] != '~')
      mf_error(c, ws, "workspace", "\"%s\" is not an absolute path; write it as /path or ~/path",
               ws->u.str.ptr);
    else {
      free(spec->sandbox.workspace);
      spec->sandbox.workspace = cap_xstrdup(ws->u.str.ptr);
    }
  }
  /* warm-instance settings mean something only for a server */
  static const char *const instance_keys[] = {"max_concurrency", "idle_timeout_ms",
                                              "startup_timeout_ms"};
  for (size_t i = 0; i < 3; i++) {
    const struct cap_node *n = cap_node_get(x, instance_keys[i]);
    if (n && spec->runtime.kind != CAP_RUNTIME_GRPC)
      mf_error(c, n, instance_keys[i],
               "applies only to a Selu capability (a gRPC server kept warm); remove it");
  }
  if (spec->runtime.kind == CAP_RUNTIME_GRPC) {
    spec->runtime.max_concurrency =
        (uint32_t)mf_int(c, x, "max_concurrency", 0, 1, 256, spec->runtime.max_concurrency);
    spec->runtime.idle_timeout_ms = (uint64_t)mf_int(c, x, "idle_timeout_ms", 0, 100, 86400000,
                                                     (int64_t)spec->runtime.idle_timeout_ms);
    spec->runtime.startup_timeout_ms = (uint64_t)mf_int(c, x, "startup_timeout_ms", 0, 100, 600000,
                                                        (int64_t)spec->runtime.startup_timeout_ms);
    static const char *const invoke_names[] = {"unary", "stream", NULL};
    spec->runtime.stream_invoke =
        mf_enum(c, x, "invoke", 0, invoke_names, spec->runtime.stream_invoke) == 1;
  } else if (cap_node_get(x, "invoke")) {
    mf_error(c, cap_node_get(x, "invoke"), "invoke",
             "applies only to a Selu capability (a gRPC server kept warm); remove it");
  }
  const struct cap_node *wsmax = cap_node_get(x, "workspace_max_mb");
  if (wsmax && !spec->limits.workspace_bytes)
    mf_error(c, wsmax, "workspace_max_mb",
             "applies only to a Selu capability with filesystem: workspace or cache.enabled; "
             "remove it");
  else if (wsmax)
    spec->limits.workspace_bytes = (uint64_t)mf_int(c, x, "workspace_max_mb", 0, 1, 16 << 20,
                                                    (int64_t)(spec->limits.workspace_bytes >> 20))
                                   << 20;
  const char *notes = mf_string(c, x, "notes", 0, NULL);
  if (notes) {
    free(spec->notes);
    spec->notes = cap_xstrdup(notes);
  }
  mf_pop(c, mark);
}

bool cap_tool_schema(struct mf_ctx *c, const struct cap_node *tool_node, const char *key,
                     struct cap_spec *spec, struct cap_tool *tool)
{
  const struct cap_node *schema = cap_node_get(tool_node, key);
  if (!schema) {
    mf_error(c, tool_node, key,
             "required field is missing; add a JSON Schema object such as "
             "{\"type\": \"object\", \"properties\": {}}");
    return false;
  }
  if (schema->kind != CAP_NODE_OBJECT) {
    mf_error(c, schema, key,
             "must be a JSON Schema object, not %s; describe the parameters as "
             "{\"type\": \"object\", \"properties\": {...}}",
             mf_kind_article(c, schema->kind));
    return false;
  }
  tool->input_schema = cap_spec_adopt_node(spec, schema);
  size_t mark = mf_push_key(c, key);
  tool->validator = cap_js_compile(tool->input_schema, NULL, NULL, c->file, c->path.data, c->diags);
  mf_pop(c, mark);
  return tool->validator != NULL;
}

/* Schemas a format supplies itself (Covenant's dispatch) are compiled here. */
static void compile_builtin_schemas(struct cap_spec *spec, struct cap_diags *diags)
{
  for (size_t i = 0; i < spec->n_tools; i++) {
    struct cap_tool *t = &spec->tools[i];
    if (t->input_schema && !t->validator)
      t->validator = cap_js_compile(t->input_schema, NULL, NULL, spec->source_path, "", diags);
  }
}

static bool has_workspace_grant(const struct cap_spec *spec)
{
  for (size_t i = 0; i < spec->n_grants; i++)
    if (spec->grants[i].origin == CAP_ORIGIN_WORKSPACE)
      return true;
  return false;
}

int cap_manifest_load_buffer(const char *data, size_t len, const char *name, int format,
                             const char *package_dir, struct cap_spec **ret,
                             struct cap_diags *diags)
{
  size_t errors_before = diags->errors;
  if (format == CAP_HINT_AUTO)
    format = detect_by_name(name);
  if (format == CAP_HINT_AUTO)
    format = detect_by_content(data, len);

  struct cap_doc *doc = cap_doc_new();
  int r;
  switch (format) {
  case CAP_FORMAT_SELU: r = cap_yaml_parse(doc, data, len, name, diags); break;
  case CAP_FORMAT_COVENANT: r = cap_toml_parse(doc, data, len, name, diags); break;
  default: r = parse_json(doc, data, len, name, format, diags); break;
  }
  /* TOML always yields a table; a file with nothing in it is still empty */
  bool empty =
      r >= 0 && (!doc->root || (format == CAP_FORMAT_COVENANT && doc->root->u.obj.len == 0));
  if (r < 0 || empty) {
    if (r >= 0)
      cap_diags_add(diags, CAP_SEV_ERROR, name, 1, 1, "", "the file is empty; write %s",
                    format == CAP_FORMAT_COVENANT
                        ? "an [agent] table with id, name, version, runtime and entry"
                        : "a YAML mapping with at least id and image");
    cap_doc_free(doc);
    return -EINVAL;
  }
  if (format == CAP_FORMAT_TALOS || format == CAP_FORMAT_NONO)
    format = detect_json(doc->root, name);
  if (doc->root->kind != CAP_NODE_OBJECT) {
    cap_diags_add(diags, CAP_SEV_ERROR, name, doc->root->line, doc->root->col, "",
                  "the manifest must be %s at the top level, not %s", top_level_noun(format),
                  mf_kind_article(NULL, doc->root->kind));
    cap_doc_free(doc);
    return -EINVAL;
  }

  struct cap_spec *spec = cap_spec_new((enum cap_format)format);
  spec->source_path = cap_xstrdup(name);
  spec->package_dir = package_dir ? cap_xstrdup(package_dir) : absolute_dir_of(name);
  cap_spec_add_system_grants(spec);
  if (format != CAP_FORMAT_NONO && format != CAP_FORMAT_NONO_PROFILE)
    cap_spec_add_grant(spec, spec->package_dir, CAP_ACCESS_READ, CAP_FS_DIRECTORY,
                       CAP_ORIGIN_PACKAGE);

  struct mf_ctx c;
  mf_init(&c, name, diags);
  c.toml = format == CAP_FORMAT_COVENANT;
  switch (format) {
  case CAP_FORMAT_SELU: cap_selu_lower(&c, doc->root, spec); break;
  case CAP_FORMAT_COVENANT: cap_covenant_lower(&c, doc->root, spec); break;
  case CAP_FORMAT_TALOS: cap_talos_lower(&c, doc->root, spec); break;
  case CAP_FORMAT_NONO_PROFILE: cap_nono_profile_lower(&c, doc->root, spec); break;
  default: cap_nono_lower(&c, doc->root, spec); break;
  }
  mf_free(&c);
  cap_doc_free(doc);

  compile_builtin_schemas(spec, diags);
  if (spec->sandbox.workspace && !has_workspace_grant(spec))
    cap_spec_add_grant(spec, spec->sandbox.workspace, CAP_ACCESS_READWRITE, CAP_FS_DIRECTORY,
                       CAP_ORIGIN_WORKSPACE);

  if (diags->errors > errors_before) {
    cap_spec_free(spec);
    return -EINVAL;
  }
  *ret = spec;
  return 0;
}

int cap_manifest_load(const char *path, struct cap_spec **ret, struct cap_diags *diags)
{
  _cleanup_free_ char *data = NULL;
  size_t len = 0;
  struct cap_error err = {0};
  int r = cap_read_file(path, CAP_MANIFEST_MAX_BYTES, &data, &len, &err);
  if (r < 0) {
    /* cap_read_file's message already starts with the path */
    const char *msg = err.message;
    size_t plen = strlen(path);
    if (strncmp(msg, path, plen) == 0 && msg[plen] == ':')
      msg += plen + 2;
    cap_diags_add(diags, CAP_SEV_ERROR, path, 0, 0, "", "%s", msg);
    cap_error_clear(&err);
    return r;
  }
  return cap_manifest_load_buffer(data, len, path, CAP_HINT_AUTO, NULL, ret, diags);
}

int cap_manifest_load_profile(const char *name, struct cap_spec **ret, struct cap_diags *diags)
{
  bool is_path = strchr(name, '/') || has_suffix(name, ".json") || has_suffix(name, ".jsonc");
  _cleanup_free_ char *user = NULL;
  if (!is_path && cap_nono_profile_name_valid(name) &&
      cap_nono_user_profile(name, diags, &user) < 0)
    return -EPERM;
  const char *file = is_path ? name : user;
  if (file) {
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    struct cap_error err = {0};
    int r = cap_read_file(file, CAP_MANIFEST_MAX_BYTES, &data, &len, &err);
    if (r < 0) {
      cap_diags_add(diags, CAP_SEV_ERROR, file, 0, 0, "", "%s", err.message);
      cap_error_clear(&err);
      return r;
    }
    return cap_manifest_load_buffer(data, len, file, CAP_FORMAT_NONO_PROFILE, NULL, ret, diags);
  }
  _cleanup_free_ char *names = NULL;
  if (!cap_nono_profile_name_valid(name) || !cap_nono_builtin_profile(name, &names)) {
    cap_diags_add(diags, CAP_SEV_ERROR, name, 0, 0, "",
                  "no such nono profile: not a file (write ./%s.json for one here), not in "
                  "$XDG_CONFIG_HOME/nono/profiles, and not one of nono's built-in profiles "
                  "(%s)",
                  name, names ? names : "");
    return -ENOENT;
  }
  /* a built-in profile is the profile that extends it and adds nothing;
   * its package directory is "/" so that no file beside anything is taken
   * for a sibling base */
  _cleanup_free_ char *doc =
      cap_xasprintf("{\"extends\": \"%s\", \"meta\": {\"name\": \"%s\"}}", name, name);
  _cleanup_free_ char *label = cap_xasprintf("nono built-in profile %s", name);
  return cap_manifest_load_buffer(doc, strlen(doc), label, CAP_FORMAT_NONO_PROFILE, "/", ret,
                                  diags);
}
