/* The Selu runtime of the gateway: a call becomes an Invoke on the
 * capability's warm instance (gateway/instance.h), over a connection made
 * inside its network namespace; `tool_source: dynamic` capabilities have
 * their tools discovered through the discovery tool and cached in the
 * state directory. */
#ifndef CAPSULE_GATEWAY_SELU_H
#define CAPSULE_GATEWAY_SELU_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "gateway/call.h"
#include "manifest/model.h"

/* Tools a dynamic capability reported; they own their schemas (doc). */
struct gw_tools {
  struct cap_doc *doc;
  struct cap_tool *tools;
  size_t n;
};
void gw_tools_free(struct gw_tools *t);
const struct cap_tool *gw_tools_find(const struct gw_tools *t, const char *name);

/* Reads a discovery answer (untrusted: the capability's own): a JSON array
 * of tools or {"tools": [...]}, each {name, description?, input_schema
 * (or inputSchema), recommended_policy?, terminal_on_success?}; every schema
 * compiled. what names it in errors. */
int gw_tools_parse(const char *text, size_t len, const char *what, struct gw_tools *out,
                   struct cap_error *err);

/* The cached tools of a dynamic capability (none when never discovered). */
/* Keeps a discovery answer (text) as the capability's cached tools in
 * cache_dir (NULL: nowhere); best effort. */
void gw_tools_cache_store(const char *cache_dir, const struct cap_spec *spec, const char *text);
int gw_selu_cached_tools(const char *cache_dir, const struct cap_spec *spec, struct gw_tools *out,
                         struct cap_error *err);
/* Asks the capability's discovery tool (starting an instance with env) and
 * caches the answer. */
/* An MCP server capability's tools (tools/list), cached like the Selu
 * servers' (gateway/mcp.c). */
enum gw_outcome gw_mcp_discover(const struct gw_call *call, const struct cap_spec *spec,
                                char *const *env, size_t n_env, struct gw_tools *out,
                                struct cap_error *err);
enum gw_outcome gw_selu_discover(const struct gw_call *call, const struct cap_spec *spec,
                                 char *const *env, size_t n_env, struct gw_tools *out,
                                 struct cap_error *err);

/* One Invoke; *result is the tool's JSON result. */
/* The stored image a capability names (its `image:`): -ENOENT with the
 * outcome "host" and a message naming `capsule image pull/import` when
 * the store lacks it. */
struct image_info;
int gw_selu_image_resolve(const char *image_dir, const struct cap_spec *spec,
                          struct image_info *info, struct cap_error *err);

enum gw_outcome gw_selu_invoke(const struct gw_call *call, const struct cap_spec *spec,
                               const char *tool, const char *args, char *const *env, size_t n_env,
                               char **result, struct cap_error *err);

#endif
