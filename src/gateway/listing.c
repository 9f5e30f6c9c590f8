/* `capsule list`'s listing as JSON (gateway/listing.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "gateway/call.h"
#include "gateway/listing.h"
#include "gateway/plugin_state.h"
#include "gateway/ready.h"
#include "gateway/selu.h"

/* "ready", or why not: what gw_ready checks (up to exec, in a dry run of
 * the sandbox, remembered with a memo), then the required credentials. */
static const char *readiness(const struct gw_registry *reg, size_t i, const struct gw_list_env *e,
                             char *buf, size_t size)
{
  const struct cap_spec *spec = reg->caps[i];
  if (spec->runtime.kind == CAP_RUNTIME_EXEC)
    return "no tools: a command sandbox for `capsule run`";
  struct cap_error why = {0};
  if (gw_ready_memo_get(e->memo, i, spec, e->images, e->hidden, e->n_hidden, &why) !=
          GW_OUTCOME_OK ||
      gw_ready_module(spec, e->st, e->user, e->hidden, e->n_hidden, e->cache, &why) !=
          GW_OUTCOME_OK) {
    snprintf(buf, size, "not ready: %s", why.message ? why.message : "unknown");
    cap_error_clear(&why);
    return buf;
  }
  if (spec->runtime.kind == CAP_RUNTIME_HERMES) { /* what the run may use, for the operator */
    struct cap_buf tools = {0};
    for (size_t t = 0; t < spec->hermes_tools_allowed.len; t++)
      cap_buf_printf(&tools, "%s%s", t ? ", " : "", spec->hermes_tools_allowed.v[t]);
    const char *base = getenv("HERMES_API_BASE_URL");
    snprintf(buf, size, "ready (Hermes at %s; tools_allowed: %s; approval_policy: %s)",
             base ? base : "(null)", tools.data ? tools.data : "any", spec->hermes_approval_policy);
    cap_buf_free(&tools);
    return buf;
  }
  for (size_t k = 0; e->st && k < spec->n_secrets; k++) {
    const struct cap_secret *s = &spec->secrets[k];
    char *v = NULL;
    bool found = false;
    struct cap_error err = {0};
    gw_cred_lookup(e->st, spec->id, s->name, e->user, &v, &found, &err);
    cap_error_clear(&err);
    gw_secret_free(v);
    if (!found && s->required) {
      snprintf(buf, size, "not ready: credential %s is not set", s->name);
      return buf;
    }
  }
  return "ready";
}

static void write_tool(const struct gw_list_env *e, const struct cap_spec *spec,
                       const struct cap_tool *tool, struct cap_jw *w)
{
  enum cap_policy policy = tool->policy;
  const char *source = cap_policy_source_name(tool->policy_source);
  struct cap_error err = {0};
  if (e->st && gw_effective_policy(e->st, spec->id, tool, e->user, &policy, &source, &err) < 0)
    cap_error_clear(&err);
  cap_jw_begin_object(w);
  cap_jw_key(w, "name");
  cap_jw_string(w, tool->name);
  cap_jw_key(w, "policy");
  cap_jw_string(w, cap_policy_name(policy));
  cap_jw_key(w, "policy_source");
  cap_jw_string(w, source);
  cap_jw_end_object(w);
}

/* The operator's grants of cap, "KIND VALUE" strings, into w */
struct grants_ctx {
  struct cap_jw *w;
};

static void grant_item(void *arg, const char *cap, enum gw_grant_kind kind, const char *value,
                       const char *created)
{
  (void)cap;
  (void)created;
  struct grants_ctx *g = arg;
  _cleanup_free_ char *t = cap_xasprintf("%s %s", gw_grant_kind_names[kind], value);
  cap_jw_string(g->w, t);
}

static void write_capability(const struct gw_registry *reg, size_t i, const struct gw_list_env *e,
                             struct cap_jw *w)
{
  const struct cap_spec *spec = reg->caps[i];
  char buf[1024];
  const char *keys[] = {"id", "format", "runtime", "source", "readiness"};
  const char *values[] = {spec->id, cap_format_name(spec->format),
                          cap_runtime_kind_name(spec->runtime.kind), spec->source_path,
                          readiness(reg, i, e, buf, sizeof buf)};
  cap_jw_begin_object(w);
  for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
    cap_jw_key(w, keys[k]);
    cap_jw_string(w, values[k]);
  }
  /* a dynamic capability's tools: as last discovered */
  struct gw_tools discovered = {0};
  const struct cap_tool *tools = spec->tools;
  size_t n_tools = spec->n_tools;
  if (spec->tool_source == CAP_TOOL_SOURCE_DYNAMIC) {
    struct cap_error err = {0};
    gw_selu_cached_tools(e->cache, spec, &discovered, &err);
    cap_error_clear(&err);
    tools = discovered.tools;
    n_tools = discovered.n;
    cap_jw_key(w, "discovery_tool");
    cap_jw_string(w, spec->discovery_tool_name ? spec->discovery_tool_name : "");
  }
  cap_jw_key(w, "tools");
  cap_jw_begin_array(w);
  for (size_t t = 0; t < n_tools; t++)
    write_tool(e, spec, &tools[t], w);
  cap_jw_end_array(w);
  gw_tools_free(&discovered);
  cap_jw_key(w, "grants");
  cap_jw_begin_array(w);
  struct grants_ctx g = {.w = w};
  struct cap_error err = {0};
  if (e->st)
    gw_grant_list(e->st, spec->id, grant_item, &g, &err);
  cap_error_clear(&err);
  cap_jw_end_array(w);
  cap_jw_end_object(w);
}

void gw_list_write(const struct gw_registry *reg, const struct gw_list_env *env, struct cap_jw *w)
{
  cap_jw_begin_array(w);
  for (size_t i = 0; i < reg->n; i++)
    write_capability(reg, i, env, w);
  cap_jw_end_array(w);
}
