/* subscriptions/listen (2026-07-28): a request that stays open and
 * carries the change notifications its client opted in to, each with the
 * request's id as io.modelcontextprotocol/subscriptionId in its _meta.
 * The first message is notifications/subscriptions/acknowledged naming
 * what capsule honours: toolsListChanged (the registry reloaded: the
 * tools' list is built anew); prompts', resources' lists and resources'
 * updates are not offered there (omitted from the acknowledgement, as the
 * revision says of what a server does not support). It ends when the
 * client closes its stream (HTTP) or cancels it (notifications/cancelled),
 * with no answer; or when the server stops, answered with an empty
 * result. */
#include <stdlib.h>
#include <string.h>

#include "front/mcp_internal.h"

#define META_SUBSCRIPTION "io.modelcontextprotocol/subscriptionId"

static struct mcp_listen *free_listen(struct mcp_session *s)
{
  for (size_t i = 0; i < MCP_MAX_LISTENS; i++)
    if (!s->listens[i].id_json)
      return &s->listens[i];
  return NULL;
}

void mcp_listen(struct mcp_session *s, const char *id, const struct cap_node *params)
{
  if (!s->modern)
    return mcp_send_error(s, id, MCP_METHOD_NOT_FOUND,
                          "Method not found: subscriptions/listen is 2026-07-28's (name that "
                          "revision in the request's _meta); a 2025 session has its GET stream",
                          NULL);
  const struct cap_node *want = cap_node_get(params, "notifications");
  if (!want || want->kind != CAP_NODE_OBJECT)
    return mcp_send_error(s, id, MCP_INVALID_PARAMS,
                          "subscriptions/listen needs params.notifications, an object such as "
                          "{\"toolsListChanged\": true}",
                          NULL);
  struct mcp_listen *l = free_listen(s);
  if (!l)
    return mcp_send_error(s, id, MCP_INVALID_REQUEST,
                          "too many subscriptions/listen streams open on this connection; "
                          "close one first",
                          NULL);
  const struct cap_node *tools = cap_node_get(want, "toolsListChanged");
  l->id_json = cap_xstrdup(id);
  l->tools = tools && tools->kind == CAP_NODE_BOOL && tools->u.boolean;
  struct cap_buf b = {0};
  cap_buf_printf(&b,
                 "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\","
                 "\"params\":{\"_meta\":{\"" META_SUBSCRIPTION "\":%s},\"notifications\":{%s}}}",
                 id, l->tools ? "\"toolsListChanged\":true" : "");
  mcp_send_buf(s, id, false, &b);
}

void mcp_listen_changed(struct mcp_session *s)
{
  for (size_t i = 0; i < MCP_MAX_LISTENS; i++) {
    const struct mcp_listen *l = &s->listens[i];
    if (!l->id_json || !l->tools)
      continue;
    struct cap_buf b = {0};
    cap_buf_printf(&b,
                   "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\","
                   "\"params\":{\"_meta\":{\"" META_SUBSCRIPTION "\":%s}}}",
                   l->id_json);
    mcp_send_buf(s, l->id_json, false, &b);
  }
}

bool mcp_listen_cancel(struct mcp_session *s, const char *id_json)
{
  for (size_t i = 0; i < MCP_MAX_LISTENS; i++) {
    struct mcp_listen *l = &s->listens[i];
    if (!l->id_json || strcmp(l->id_json, id_json) != 0)
      continue;
    s->io.send(s->io.ctx, l->id_json, true, NULL, 0); /* its stream ends, unanswered */
    free(l->id_json);
    *l = (struct mcp_listen){0};
    return true;
  }
  return false;
}

void mcp_session_listens_end(struct mcp_session *s)
{
  for (size_t i = 0; i < MCP_MAX_LISTENS; i++) {
    struct mcp_listen *l = &s->listens[i];
    if (!l->id_json)
      continue;
    struct cap_buf b = {0};
    cap_buf_printf(&b,
                   "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"resultType\":\"complete\","
                   "\"_meta\":{\"" META_SUBSCRIPTION "\":%s}}}",
                   l->id_json, l->id_json);
    mcp_send_buf(s, l->id_json, true, &b);
    free(l->id_json);
    *l = (struct mcp_listen){0};
  }
}

size_t mcp_session_listening(const struct mcp_session *s)
{
  size_t k = 0;
  for (size_t i = 0; i < MCP_MAX_LISTENS; i++)
    k += s->listens[i].id_json != NULL;
  return k;
}

void mcp_listens_free(struct mcp_session *s)
{
  for (size_t i = 0; i < MCP_MAX_LISTENS; i++) {
    free(s->listens[i].id_json);
    s->listens[i] = (struct mcp_listen){0};
  }
}
