/* The resolved capability manifest as JSON: a nono capability manifest
 * (valid against nono's published schema) plus capsule's own top-level keys
 * for what nono has no words for. Every default is written out; a limit of
 * 0 in the model ("none") is written as null. docs/resolved-manifest.md and
 * docs/capsule-manifest.schema.json describe the result. */
#include <string.h>

#include "core/json.h"
#include "manifest/load.h"

#define NONO_SCHEMA_URI "https://nono.sh/schemas/capability-manifest.schema.json"
#define NONO_VERSION "0.1.0"

static void strv(struct cap_jw *w, const char *key, const struct cap_strv *sv)
{
  cap_jw_key(w, key);
  cap_jw_begin_array(w);
  for (size_t i = 0; i < sv->len; i++)
    cap_jw_string(w, sv->v[i]);
  cap_jw_end_array(w);
}

static void ports(struct cap_jw *w, const char *key, const struct cap_ports *p)
{
  cap_jw_key(w, key);
  cap_jw_begin_array(w);
  for (size_t i = 0; i < p->len; i++)
    cap_jw_int(w, p->v[i]);
  cap_jw_end_array(w);
}

static void rules(struct cap_jw *w, const char *key, const struct cap_http_rule *r, size_t n)
{
  cap_jw_key(w, key);
  cap_jw_begin_array(w);
  for (size_t i = 0; i < n; i++) {
    cap_jw_begin_object(w);
    cap_jw_key(w, "method");
    cap_jw_string(w, r[i].method);
    cap_jw_key(w, "path");
    cap_jw_string(w, r[i].path);
    cap_jw_end_object(w);
  }
  cap_jw_end_array(w);
}

static void kv_string(struct cap_jw *w, const char *key, const char *value)
{
  cap_jw_key(w, key);
  cap_jw_string_or_null(w, value);
}

static void kv_limit(struct cap_jw *w, const char *key, uint64_t value)
{
  cap_jw_key(w, key);
  if (value)
    cap_jw_int(w, (int64_t)value);
  else
    cap_jw_null(w);
}

static void emit_filesystem(struct cap_jw *w, const struct cap_spec *spec)
{
  cap_jw_key(w, "filesystem");
  cap_jw_begin_object(w);
  cap_jw_key(w, "grants");
  cap_jw_begin_array(w);
  for (size_t i = 0; i < spec->n_grants; i++) {
    const struct cap_fs_grant *g = &spec->grants[i];
    cap_jw_begin_object(w);
    kv_string(w, "path", g->path);
    if (g->at)
      kv_string(w, "at", g->at);
    kv_string(w, "access", cap_access_name(g->access));
    kv_string(w, "type", g->type == CAP_FS_FILE ? "file" : "directory");
    kv_string(w, "origin", cap_origin_name(g->origin));
    cap_jw_end_object(w);
  }
  cap_jw_end_array(w);
  cap_jw_key(w, "deny");
  cap_jw_begin_array(w);
  for (size_t i = 0; i < spec->deny.len; i++) {
    cap_jw_begin_object(w);
    kv_string(w, "path", spec->deny.v[i]);
    cap_jw_end_object(w);
  }
  cap_jw_end_array(w);
  cap_jw_end_object(w);
}

static void emit_network(struct cap_jw *w, const struct cap_network *net)
{
  cap_jw_key(w, "network");
  cap_jw_begin_object(w);
  kv_string(w, "mode", cap_net_mode_name(net->mode));
  strv(w, "allow_domains", &net->allow_domains);
  cap_jw_key(w, "endpoints");
  cap_jw_begin_array(w);
  for (size_t i = 0; i < net->n_endpoints; i++) {
    cap_jw_begin_object(w);
    kv_string(w, "host", net->endpoints[i].host);
    rules(w, "rules", net->endpoints[i].rules, net->endpoints[i].n_rules);
    cap_jw_end_object(w);
  }
  cap_jw_end_array(w);
  cap_jw_key(w, "ports");
  cap_jw_begin_object(w);
  ports(w, "connect", &net->connect);
  ports(w, "bind", &net->bind);
  ports(w, "localhost", &net->localhost);
  cap_jw_end_object(w);
  cap_jw_key(w, "dns");
  cap_jw_bool(w, net->dns);
  cap_jw_end_object(w);
}

static void emit_credentials(struct cap_jw *w, const struct cap_spec *spec)
{
  cap_jw_key(w, "credentials");
  cap_jw_begin_array(w);
  for (size_t i = 0; i < spec->n_routes; i++) {
    const struct cap_credential_route *r = &spec->routes[i];
    cap_jw_begin_object(w);
    kv_string(w, "name", r->name);
    kv_string(w, "upstream", r->upstream);
    kv_string(w, "source", r->source);
    cap_jw_key(w, "inject");
    cap_jw_begin_object(w);
    kv_string(w, "mode", cap_inject_mode_name(r->mode));
    switch (r->mode) {
    case CAP_INJECT_HEADER:
      kv_string(w, "header", r->header ? r->header : "Authorization");
      kv_string(w, "format", r->format ? r->format : "Bearer {}");
      break;
    case CAP_INJECT_URL_PATH:
      kv_string(w, "path_pattern", r->path_pattern);
      kv_string(w, "path_replacement", r->path_replacement ? r->path_replacement : r->path_pattern);
      break;
    case CAP_INJECT_QUERY_PARAM: kv_string(w, "query_param_name", r->query_param_name); break;
    case CAP_INJECT_BASIC_AUTH: break;
    }
    cap_jw_end_object(w);
    if (r->env_var)
      kv_string(w, "env_var", r->env_var);
    rules(w, "endpoint_rules", r->rules, r->n_rules);
    cap_jw_end_object(w);
  }
  cap_jw_end_array(w);
}

static void emit_process(struct cap_jw *w, const struct cap_process *p)
{
  cap_jw_key(w, "process");
  cap_jw_begin_object(w);
  strv(w, "allowed_commands", &p->allowed_commands);
  strv(w, "blocked_commands", &p->blocked_commands);
  kv_string(w, "signal_mode", cap_mode3_name(p->signal_mode));
  kv_string(w, "process_info_mode", cap_mode3_name(p->process_info_mode));
  kv_string(w, "ipc_mode", p->ipc_full ? "full" : "shared_memory_only");
  /* capsule always keeps a supervisor (limits, reaping, wall clock) */
  kv_string(w, "exec_strategy", "supervised");
  kv_string(w, "declared_exec_strategy", p->declared_exec_strategy);
  cap_jw_end_object(w);
}

static void emit_rollback(struct cap_jw *w, const struct cap_rollback *r)
{
  cap_jw_key(w, "rollback");
  cap_jw_begin_object(w);
  cap_jw_key(w, "enabled");
  cap_jw_bool(w, r->enabled);
  strv(w, "exclude_patterns", &r->exclude_patterns);
  strv(w, "exclude_globs", &r->exclude_globs);
  cap_jw_end_object(w);
}

static void emit_identity(struct cap_jw *w, const struct cap_spec *spec)
{
  cap_jw_key(w, "capability");
  cap_jw_begin_object(w);
  kv_string(w, "id", spec->id);
  kv_string(w, "name", spec->name ? spec->name : spec->id);
  kv_string(w, "version", spec->version);
  kv_string(w, "description", spec->description);
  kv_string(w, "class", spec->class_name);
  kv_string(w, "log_name", spec->log_name);
  kv_string(w, "format", cap_format_name(spec->format));
  kv_string(w, "source", spec->source_path);
  kv_string(w, "package_dir", spec->package_dir);
  kv_string(w, "notes", spec->notes);
  cap_jw_end_object(w);
}

static void emit_runtime(struct cap_jw *w, const struct cap_runtime *rt)
{
  cap_jw_key(w, "runtime");
  cap_jw_begin_object(w);
  kv_string(w, "kind", cap_runtime_kind_name(rt->kind));
  kv_string(w, "image", rt->image);
  kv_string(w, "entry", rt->entry);
  kv_string(w, "interpreter", rt->interpreter);
  strv(w, "command", &rt->command);
  cap_jw_key(w, "port");
  if (rt->port)
    cap_jw_int(w, rt->port);
  else
    cap_jw_null(w);
  cap_jw_key(w, "instances");
  if (rt->kind == CAP_RUNTIME_GRPC) {
    cap_jw_begin_object(w);
    cap_jw_key(w, "max_concurrency");
    cap_jw_int(w, rt->max_concurrency);
    cap_jw_key(w, "idle_timeout_ms");
    cap_jw_int(w, (int64_t)rt->idle_timeout_ms);
    cap_jw_key(w, "startup_timeout_ms");
    cap_jw_int(w, (int64_t)rt->startup_timeout_ms);
    kv_string(w, "sharing", rt->shared ? "shared" : "exclusive");
    kv_string(w, "invoke", rt->stream_invoke ? "stream" : "unary");
    cap_jw_end_object(w);
  } else {
    cap_jw_null(w);
  }
  cap_jw_end_object(w);
}

static void emit_tools(struct cap_jw *w, const struct cap_spec *spec)
{
  cap_jw_key(w, "tool_source");
  cap_jw_begin_object(w);
  kv_string(w, "mode", cap_tool_source_name(spec->tool_source));
  kv_string(w, "discovery_tool_name", spec->discovery_tool_name);
  cap_jw_end_object(w);
  cap_jw_key(w, "tools");
  cap_jw_begin_array(w);
  for (size_t i = 0; i < spec->n_tools; i++) {
    const struct cap_tool *t = &spec->tools[i];
    cap_jw_begin_object(w);
    kv_string(w, "name", t->name);
    kv_string(w, "description", t->description);
    cap_jw_key(w, "input_schema");
    if (t->input_schema)
      cap_jw_node(w, t->input_schema);
    else
      cap_jw_null(w);
    kv_string(w, "policy", cap_policy_name(t->policy));
    kv_string(w, "policy_source", cap_policy_source_name(t->policy_source));
    cap_jw_key(w, "terminal_on_success");
    cap_jw_bool(w, t->terminal_on_success);
    cap_jw_end_object(w);
  }
  cap_jw_end_array(w);
}

static void emit_secrets(struct cap_jw *w, const struct cap_spec *spec)
{
  cap_jw_key(w, "secrets");
  cap_jw_begin_array(w);
  for (size_t i = 0; i < spec->n_secrets; i++) {
    const struct cap_secret *s = &spec->secrets[i];
    cap_jw_begin_object(w);
    kv_string(w, "name", s->name);
    kv_string(w, "scope", s->scope == CAP_SCOPE_USER ? "user" : "system");
    kv_string(w, "type", s->type ? s->type : "secret");
    cap_jw_key(w, "required");
    cap_jw_bool(w, s->required);
    kv_string(w, "label", s->label);
    kv_string(w, "description", s->description ? s->description : "");
    kv_string(w, "delivery", cap_delivery_name(s->delivery));
    cap_jw_end_object(w);
  }
  cap_jw_end_array(w);
}

static void emit_settings_triggers(struct cap_jw *w, const struct cap_spec *spec)
{
  cap_jw_key(w, "settings");
  cap_jw_begin_array(w);
  for (size_t i = 0; i < spec->n_settings; i++) {
    const struct cap_setting *s = &spec->settings[i];
    cap_jw_begin_object(w);
    kv_string(w, "name", s->name);
    kv_string(w, "label", s->label);
    kv_string(w, "type", s->type);
    cap_jw_key(w, "default");
    if (s->default_value)
      cap_jw_node(w, s->default_value);
    else
      cap_jw_null(w);
    kv_string(w, "description", s->description);
    cap_jw_end_object(w);
  }
  cap_jw_end_array(w);
  cap_jw_key(w, "triggers");
  cap_jw_begin_array(w);
  for (size_t i = 0; i < spec->n_triggers; i++) {
    const struct cap_trigger *t = &spec->triggers[i];
    cap_jw_begin_object(w);
    kv_string(w, "id", t->id);
    kv_string(w, "local_id", t->local_id);
    kv_string(w, "label", t->label);
    kv_string(w, "description", t->description);
    cap_jw_end_object(w);
  }
  cap_jw_end_array(w);
}

static void emit_limits(struct cap_jw *w, const struct cap_limits *l)
{
  cap_jw_key(w, "limits");
  cap_jw_begin_object(w);
  kv_limit(w, "memory_bytes", l->memory_bytes);
  cap_jw_key(w, "cpu_fraction");
  if (l->cpu_fraction > 0)
    cap_jw_double(w, l->cpu_fraction);
  else
    cap_jw_null(w);
  kv_limit(w, "cpu_ms_per_task", l->cpu_ms_per_task);
  kv_limit(w, "wall_ms", l->wall_ms);
  kv_limit(w, "pids", l->pids);
  kv_limit(w, "nofile", l->nofile);
  kv_limit(w, "disk_bytes", l->disk_bytes);
  kv_limit(w, "workspace_bytes", l->workspace_bytes);
  cap_jw_end_object(w);
}

static void emit_sandbox(struct cap_jw *w, const struct cap_sandbox *s)
{
  cap_jw_key(w, "sandbox");
  cap_jw_begin_object(w);
  cap_jw_key(w, "required");
  cap_jw_bool(w, s->required);
  kv_string(w, "backend", cap_backend_name(s->backend));
  kv_string(w, "declared_backend", s->declared_backend);
  kv_string(w, "filesystem", s->filesystem);
  cap_jw_key(w, "private_tmp");
  cap_jw_bool(w, s->private_tmp);
  kv_string(w, "workspace", s->workspace);
  cap_jw_key(w, "cache");
  cap_jw_bool(w, s->cache);
  cap_jw_end_object(w);
}

static void emit_covenant(struct cap_jw *w, const struct cap_spec *spec)
{
  cap_jw_key(w, "actions");
  cap_jw_begin_object(w);
  strv(w, "required", &spec->actions_required);
  strv(w, "optional", &spec->actions_optional);
  cap_jw_end_object(w);
  cap_jw_key(w, "budget");
  cap_jw_begin_object(w);
  cap_jw_key(w, "credits_per_hour");
  cap_jw_int(w, (int64_t)spec->budget_credits_per_hour);
  kv_string(w, "priority", cap_priority_name(spec->priority));
  cap_jw_end_object(w);
  cap_jw_key(w, "hermes");
  if (spec->format == CAP_FORMAT_COVENANT) {
    cap_jw_begin_object(w);
    strv(w, "tools_allowed", &spec->hermes_tools_allowed);
    kv_string(w, "approval_policy", spec->hermes_approval_policy);
    cap_jw_end_object(w);
  } else {
    cap_jw_null(w);
  }
}

char *cap_spec_to_json(const struct cap_spec *spec, bool pretty)
{
  struct cap_buf out = {0};
  struct cap_jw w;
  cap_jw_init(&w, &out, pretty);
  cap_jw_begin_object(&w);
  kv_string(&w, "$schema", NONO_SCHEMA_URI);
  kv_string(&w, "version", NONO_VERSION);
  emit_filesystem(&w, spec);
  emit_network(&w, &spec->network);
  emit_credentials(&w, spec);
  emit_process(&w, &spec->process);
  emit_rollback(&w, &spec->rollback);
  cap_jw_key(&w, "resources");
  cap_jw_begin_object(&w);
  if (spec->limits.memory_bytes) {
    cap_jw_key(&w, "memory_bytes");
    cap_jw_int(&w, (int64_t)spec->limits.memory_bytes);
  }
  cap_jw_end_object(&w);
  emit_identity(&w, spec);
  emit_runtime(&w, &spec->runtime);
  emit_tools(&w, spec);
  emit_secrets(&w, spec);
  emit_settings_triggers(&w, spec);
  emit_limits(&w, &spec->limits);
  emit_sandbox(&w, &spec->sandbox);
  emit_covenant(&w, spec);
  cap_jw_end_object(&w);
  if (pretty)
    cap_buf_putc(&out, '\n');
  return cap_buf_steal(&out);
}
