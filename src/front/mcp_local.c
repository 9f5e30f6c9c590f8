/* capsule/approve (the unix socket's sessions only: `capsule approve` and
 * `capsule deny` through a running serve, docs/serve.md "The CLI and a
 * running serve"): the approval resolved on serve's state connection as
 * the CLI alone resolves it, the change audited as the socket's peer
 * (SO_PEERCRED), and what the CLI prints returned: {"was": N (enum
 * gw_approval_status), "approval": {...} when there was one, "audit_error":
 * ... when the change could not be audited}. The CLI has checked the
 * operator's rights as alone before it connects; serve checks them again
 * of the peer (gw_require_operator_peer: not a process in a sandbox),
 * since the socket (0600, in the state directory every sandbox masks,
 * unless --socket put it elsewhere) is the only other bound. */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"

#include "core/buf.h"
#include "core/json.h"
#include "core/text.h"
#include "front/mcp_internal.h"
#include "gateway/approval.h"
#include "gateway/listing.h"
#include "gateway/state.h"

static void approval_result(struct cap_jw *w, const struct gw_approval *a)
{
  cap_jw_key(w, "approval");
  cap_jw_begin_object(w);
  const char *keys[] = {"capability", "tool", "user", "asked_by", "arguments"};
  const char *values[] = {a->capability, a->tool, a->user, a->asked_by, a->args};
  for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
    cap_jw_key(w, keys[i]);
    cap_jw_string(w, values[i] ? values[i] : "");
  }
  cap_jw_key(w, "created_ms");
  cap_jw_int(w, a->created_ms);
  cap_jw_key(w, "expires_ms");
  cap_jw_int(w, a->expires_ms);
  cap_jw_end_object(w);
}

bool mcp_key_ok(const struct mcp_session *s, const struct cap_node *key)
{
  const char *want = s->cfg->operator_key;
  if (!want)
    return true;
  return key && key->kind == CAP_NODE_STRING && key->u.str.len == strlen(want) &&
         sodium_memcmp(key->u.str.ptr, want, strlen(want)) == 0;
}

void mcp_capsule_approve(struct mcp_session *s, const char *id, const struct cap_node *params)
{
  const struct cap_node *which = cap_node_get(params, "approval");
  const struct cap_node *approve = cap_node_get(params, "approve");
  if (!s->cfg->local_methods)
    return mcp_send_error(s, id, MCP_METHOD_NOT_FOUND,
                          "Method not found: capsule/approve (only on serve's unix socket)", NULL);
  if (!which || which->kind != CAP_NODE_STRING || !gw_approval_id_valid(which->u.str.ptr) ||
      !approve || approve->kind != CAP_NODE_BOOL)
    return mcp_send_error(s, id, MCP_INVALID_PARAMS,
                          "capsule/approve needs params.approval (an approval's id, 8 hex digits) "
                          "and params.approve (a boolean)",
                          NULL);
  if (!s->cfg->operator_key || !mcp_key_ok(s, cap_node_get(params, "key")))
    return mcp_send_error(s, id, MCP_INVALID_REQUEST,
                          "capsule/approve refused: params.key is not the one in the state "
                          "directory (serve.key), which only the operator can read",
                          NULL);
  struct cap_error err = {0};
  if (!s->cfg->peer_pid ||
      gw_require_operator_peer(s->cfg->peer_pid, "capsule/approve", &err) < 0) {
    mcp_send_error(s, id, MCP_INVALID_REQUEST,
                   err.message ? err.message : "capsule/approve: the peer is not known", NULL);
    cap_error_clear(&err);
    return;
  }
  enum gw_approval_status was = GW_APPROVAL_NONE;
  struct gw_approval a = {0};
  if (gw_approval_resolve(s->cfg->st, which->u.str.ptr, approve->u.boolean, &was, &a, &err) < 0) {
    mcp_send_error(s, id, MCP_INTERNAL_ERROR, err.message, NULL);
    cap_error_clear(&err);
    return;
  }
  struct cap_jw w;
  struct cap_buf b;
  mcp_result_begin(&w, &b, id);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "was");
  cap_jw_int(&w, was);
  if (was != GW_APPROVAL_NONE)
    approval_result(&w, &a);
  if (was == GW_APPROVAL_PENDING) { /* decided now: audited as the CLI alone audits it */
    const char *kind = approve->u.boolean ? "approve" : "deny";
    char *what = cap_xasprintf("approval %s for user %s", which->u.str.ptr, a.user);
    if (gw_audit_change(s->cfg->st, kind, s->cfg->base.user, a.capability, a.tool, what, &err) <
        0) {
      cap_jw_key(&w, "audit_error");
      cap_jw_string(&w, err.message);
      cap_error_clear(&err);
    }
    free(what);
  }
  cap_jw_end_object(&w);
  mcp_result_end(s, id, &w, &b);
  gw_approval_clear(&a);
}

/* capsule/list (the unix socket's sessions only: `capsule list` through
 * serve): the listing (gateway/listing.h) for the socket's peer, from
 * serve's registry, state and remembered readiness (a dry run per
 * capability at most every few seconds, not one per `list`):
 * {"capabilities": [...]} */
void mcp_capsule_list(struct mcp_session *s, const char *id, const struct cap_node *params)
{
  (void)params;
  if (!s->cfg->local_methods || !s->cfg->reg)
    return mcp_send_error(s, id, MCP_METHOD_NOT_FOUND,
                          "Method not found: capsule/list (only on serve's unix socket)", NULL);
  const struct gw_call *base = &s->cfg->base;
  struct gw_list_env env = {.st = s->cfg->st,
                            .user = base->user,
                            .cache = base->cache_dir,
                            .images = base->image_dir,
                            .hidden = base->hidden,
                            .n_hidden = base->n_hidden,
                            .memo = s->cfg->ready_memo};
  struct cap_jw w;
  struct cap_buf b;
  mcp_result_begin(&w, &b, id);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "capabilities");
  gw_list_write(s->cfg->reg, &env, &w);
  cap_jw_end_object(&w);
  mcp_result_end(s, id, &w, &b);
}
