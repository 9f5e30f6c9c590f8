/* subscriptions/listen (2026-07-28): a request that stays open and
 * carries the change notifications its client opted in to, each with the
 * request's id as io.modelcontextprotocol/subscriptionId in its _meta.
 * The first message is notifications/subscriptions/acknowledged naming
 * what capsule honours: toolsListChanged (the registry reloaded: the
 * tools' list is built anew); resourceSubscriptions, the URIs a
 * third-party MCP server took (each relayed to it as resources/subscribe,
 * one after the other, through mcp_subscribe.c's watcher: its
 * notifications/resources/updated between calls come here); and
 * promptsListChanged, resourcesListChanged when the session watches the
 * served third-party server (a resource taken on it, or a ping relayed to
 * open the watcher): that server's own list_changed. What is not honoured
 * is omitted from the acknowledgement, as the revision says. It ends when
 * the client closes its stream (HTTP) or cancels it
 * (notifications/cancelled), with no answer; or when the server stops,
 * answered with an empty result. */
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

static struct mcp_listen *listen_of(struct mcp_session *s, const char *id_json)
{
  for (size_t i = 0; i < MCP_MAX_LISTENS; i++)
    if (s->listens[i].id_json && strcmp(s->listens[i].id_json, id_json) == 0)
      return &s->listens[i];
  return NULL;
}

static void listen_clear(struct mcp_session *s, struct mcp_listen *l)
{
  mcp_watch_forget(s, l->id_json);
  for (size_t i = 0; i < l->n_uris; i++)
    free(l->uris[i]);
  free(l->id_json);
  *l = (struct mcp_listen){0};
}

/* Whether l took uri on cap's server ("": the server's lists) */
static bool listen_has(const struct mcp_session *s, const struct mcp_listen *l, const char *cap,
                       const char *uri)
{
  for (size_t i = 0; i < MCP_MAX_SUBSCRIPTIONS; i++) {
    const struct mcp_subscription *sub = &s->subs[i];
    if (sub->uri && sub->listen && strcmp(sub->listen, l->id_json) == 0 &&
        strcmp(sub->cap, cap) == 0 && (!uri || strcmp(sub->uri, uri) == 0))
      return true;
  }
  return false;
}

/* The lists' changes are honoured when l watches the served server */
static bool lists_honoured(const struct mcp_session *s, const struct mcp_listen *l)
{
  const struct cap_spec *served = mcp_served_server(s);
  return (l->prompts || l->resources) && served && mcp_watching(s, served->id) &&
         listen_has(s, l, served->id, NULL);
}

static void acknowledge(struct mcp_session *s, struct mcp_listen *l)
{
  struct cap_buf b = {0};
  cap_buf_printf(&b,
                 "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\","
                 "\"params\":{\"_meta\":{\"" META_SUBSCRIPTION "\":%s},\"notifications\":{",
                 l->id_json);
  const char *sep = "";
  if (l->tools) {
    cap_buf_puts(&b, "\"toolsListChanged\":true");
    sep = ",";
  }
  bool lists = lists_honoured(s, l);
  l->prompts = l->prompts && lists;
  l->resources = l->resources && lists;
  if (l->prompts) {
    cap_buf_printf(&b, "%s\"promptsListChanged\":true", sep);
    sep = ",";
  }
  if (l->resources) {
    cap_buf_printf(&b, "%s\"resourcesListChanged\":true", sep);
    sep = ",";
  }
  const char *cap = NULL;
  bool any = false;
  for (size_t i = 0; i < l->n_uris; i++) {
    if (!(cap = mcp_subscribe_cap(s, l->uris[i])) || !listen_has(s, l, cap, l->uris[i]))
      continue;
    cap_buf_printf(&b, "%s", any ? "," : sep);
    if (!any)
      cap_buf_puts(&b, "\"resourceSubscriptions\":[");
    cap_json_quote(&b, l->uris[i], strlen(l->uris[i]));
    any = true;
  }
  cap_buf_puts(&b, any ? "]}}}" : "}}}");
  l->acked = true;
  mcp_send_buf(s, l->id_json, false, &b);
}

/* The next relayed step of l: resources/subscribe for its next URI that
 * a server has, then a ping opening the served server's watcher for its
 * lists; the acknowledgement once none is left. */
static void step(struct mcp_session *s, struct mcp_listen *l)
{
  const struct cap_spec *served = mcp_served_server(s);
  for (;;) {
    const char *method = "resources/subscribe", *cap = NULL;
    struct cap_buf a = {0};
    if (l->next < l->n_uris) {
      const char *uri = l->uris[l->next++];
      if (!(cap = mcp_subscribe_cap(s, uri)))
        continue;
      cap_buf_puts(&a, "{\"uri\":");
      cap_json_quote(&a, uri, strlen(uri));
      cap_buf_putc(&a, '}');
    } else if ((l->prompts || l->resources) && served && !l->lists_tried &&
               !(mcp_watching(s, served->id) && listen_has(s, l, served->id, NULL))) {
      l->lists_tried = true;
      method = "ping";
      cap = served->id;
      cap_buf_puts(&a, "{}");
    } else
      return acknowledge(s, l);
    struct mcp_run *r = mcp_run_new(s, l->id_json, cap);
    if (!r) { /* no room for it: not honoured */
      cap_buf_free(&a);
      continue;
    }
    r->method = method;
    r->relayed = true;
    r->tool = cap_xstrdup(method);
    r->args = cap_buf_steal(&a);
    r->want_watch = true;
    r->for_listen = true;
    r->listen_token = l->token;
    r->modern = true;
    return mcp_run_start(s, r, GW_ANSWER_NONE);
  }
}

void mcp_listen_stepped(struct mcp_session *s, struct mcp_run *r, bool ok)
{
  struct mcp_listen *l = listen_of(s, r->id_json);
  if (!l || l->acked || l->token != r->listen_token) /* cancelled meanwhile (maybe opened anew) */
    return;
  if (ok && strcmp(r->method, "ping") == 0)
    mcp_watch_keep(s, r, "", l->id_json);
  else if (ok)
    mcp_watch_subscribed(s, r, l->id_json);
  step(s, l);
}

void mcp_listen_watched(struct mcp_session *s, const char *cap, const char *method, const char *uri)
{
  bool updated = strcmp(method, "notifications/resources/updated") == 0;
  bool prompts = strcmp(method, "notifications/prompts/list_changed") == 0;
  bool resources = strcmp(method, "notifications/resources/list_changed") == 0;
  if ((updated && !uri) || !(updated || prompts || resources))
    return;
  for (size_t i = 0; i < MCP_MAX_LISTENS; i++) {
    const struct mcp_listen *l = &s->listens[i];
    if (!l->id_json || !l->acked || !listen_has(s, l, cap, updated ? uri : NULL) ||
        (prompts && !l->prompts) || (resources && !l->resources))
      continue;
    struct cap_buf b = {0};
    cap_buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"method\":");
    cap_json_quote(&b, method, strlen(method));
    cap_buf_printf(&b, ",\"params\":{\"_meta\":{\"" META_SUBSCRIPTION "\":%s}", l->id_json);
    if (updated) {
      cap_buf_puts(&b, ",\"uri\":");
      cap_json_quote(&b, uri, strlen(uri));
    }
    cap_buf_puts(&b, "}}");
    mcp_send_buf(s, l->id_json, false, &b);
  }
}

/* params.notifications.resourceSubscriptions: strings, at most
 * MCP_MAX_LISTEN_URIS (the rest not honoured); false when not an array
 * of strings */
static bool take_uris(struct mcp_listen *l, const struct cap_node *uris)
{
  if (!uris)
    return true;
  if (uris->kind != CAP_NODE_ARRAY)
    return false;
  for (size_t i = 0; i < uris->u.arr.len; i++)
    if (uris->u.arr.items[i]->kind != CAP_NODE_STRING)
      return false;
  for (size_t i = 0; i < uris->u.arr.len && l->n_uris < MCP_MAX_LISTEN_URIS; i++) {
    const struct cap_node *u = uris->u.arr.items[i];
    bool dup = false;
    for (size_t k = 0; k < l->n_uris && !dup; k++)
      dup = strcmp(l->uris[k], u->u.str.ptr) == 0;
    if (!dup)
      l->uris[l->n_uris++] = cap_xstrdup(u->u.str.ptr);
  }
  return true;
}

static bool flag(const struct cap_node *want, const char *name)
{
  const struct cap_node *f = cap_node_get(want, name);
  return f && f->kind == CAP_NODE_BOOL && f->u.boolean;
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
  if (listen_of(s, id))
    return mcp_send_error(s, id, MCP_INVALID_REQUEST,
                          "a subscriptions/listen with this id is open on this connection; "
                          "give each its own id",
                          NULL);
  struct mcp_listen *l = free_listen(s);
  if (!l)
    return mcp_send_error(s, id, MCP_INVALID_REQUEST,
                          "too many subscriptions/listen streams open on this connection; "
                          "close one first",
                          NULL);
  struct mcp_listen n = {.tools = flag(want, "toolsListChanged"),
                         .prompts = flag(want, "promptsListChanged"),
                         .resources = flag(want, "resourcesListChanged")};
  if (!take_uris(&n, cap_node_get(want, "resourceSubscriptions"))) {
    for (size_t i = 0; i < n.n_uris; i++)
      free(n.uris[i]);
    return mcp_send_error(s, id, MCP_INVALID_PARAMS,
                          "params.notifications.resourceSubscriptions must be an array of "
                          "resource URIs (strings)",
                          NULL);
  }
  *l = n;
  l->id_json = cap_xstrdup(id);
  l->token = s->next_id++;
  step(s, l);
}

void mcp_listen_changed(struct mcp_session *s)
{
  for (size_t i = 0; i < MCP_MAX_LISTENS; i++) {
    const struct mcp_listen *l = &s->listens[i];
    if (!l->id_json || !l->tools || !l->acked)
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
    listen_clear(s, l);
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
    listen_clear(s, l);
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
  for (size_t i = 0; i < MCP_MAX_LISTENS; i++)
    if (s->listens[i].id_json)
      listen_clear(s, &s->listens[i]);
}
