/* A third-party MCP server's tools (x-capsule.mcp_server): discovered
 * with tools/list through runtime/mcp_client.c, kept in the discovery
 * cache beside the Selu servers' (gw_tools_cache_store). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "gateway/selu.h"
#include "runtime/mcp_client.h"

enum gw_outcome gw_mcp_discover(const struct gw_call *call, const struct cap_spec *spec,
                                char *const *env, size_t n_env, struct gw_tools *out,
                                struct cap_error *err)
{
  *out = (struct gw_tools){0};
  _cleanup_free_ char *result = NULL;
  enum gw_outcome o = mcp_client_request(call, spec, "tools/list", "{}", env, n_env, &result, err);
  if (o != GW_OUTCOME_OK)
    return cap_error_prefix(err, "discovering %s's tools (tools/list)", spec->id), o;
  _cleanup_free_ char *what = cap_xasprintf("%s's tools/list answer", spec->id);
  if (gw_tools_parse(result, strlen(result), what, out, err) < 0)
    return GW_OUTCOME_FAILED;
  gw_tools_cache_store(call->cache_dir, spec, result);
  return GW_OUTCOME_OK;
}
