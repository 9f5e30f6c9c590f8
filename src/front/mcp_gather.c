/* Prompts and resources of every third-party MCP server a session serves
 * (without --capability, front/mcp.h): prompts/list, resources/list and
 * resources/templates/list run on each MCP-server capability in turn in
 * one child (each request its own audit record, a capability that fails
 * or lacks the method left out), merged into one answer: prompts named
 * CAPABILITY__NAME (with the served Talos plugins' prompt.md prompts),
 * resources and templates as the servers name them, every item's _meta
 * naming its capability ("io.capsule/capability"). The session keeps a
 * table from the last lists (prompt name, resource URI -> capability),
 * which prompts/get and resources/read are routed through: a name is
 * never split at the separator. Only each server's first page is listed. */
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "front/mcp_internal.h"

#define META_CAP "io.capsule/capability"

static const char *list_key(const char *method)
{
  return strcmp(method, "prompts/list") == 0     ? "prompts"
         : strcmp(method, "resources/list") == 0 ? "resources"
                                                 : "resourceTemplates";
}

bool mcp_gather_wanted(const struct mcp_session *s)
{
  if (s->cfg->only || !s->cfg->reg)
    return false;
  for (size_t i = 0; i < s->cfg->reg->n; i++)
    if (s->cfg->reg->caps[i]->runtime.kind == CAP_RUNTIME_MCP)
      return true;
  return false;
}

/* One item of cap's list, renamed for prompts, its _meta naming cap */
static void write_item(struct cap_jw *w, const struct cap_node *item, const char *cap, bool prompt)
{
  cap_jw_begin_object(w);
  const struct cap_node *meta = NULL;
  for (size_t i = 0; i < item->u.obj.len; i++) {
    const struct cap_member *m = &item->u.obj.items[i];
    if (strcmp(m->key, "_meta") == 0) {
      meta = m->value;
      continue;
    }
    cap_jw_key(w, m->key);
    if (prompt && strcmp(m->key, "name") == 0 && m->value->kind == CAP_NODE_STRING) {
      _cleanup_free_ char *n = cap_xasprintf("%s__%s", cap, m->value->u.str.ptr);
      cap_jw_string(w, n);
    } else
      cap_jw_node(w, m->value);
  }
  cap_jw_key(w, "_meta");
  cap_jw_begin_object(w);
  for (size_t i = 0; meta && meta->kind == CAP_NODE_OBJECT && i < meta->u.obj.len; i++)
    if (strcmp(meta->u.obj.items[i].key, META_CAP) != 0) {
      cap_jw_key(w, meta->u.obj.items[i].key);
      cap_jw_node(w, meta->u.obj.items[i].value);
    }
  cap_jw_key(w, META_CAP);
  cap_jw_string(w, cap);
  cap_jw_end_object(w);
  cap_jw_end_object(w);
}

void mcp_gather_run(const struct mcp_session *s, struct gw_state *st, const struct gw_call *base,
                    const char *method, struct gw_mcp_relay *relay)
{
  const char *key = list_key(method);
  bool prompts = strcmp(key, "prompts") == 0;
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, key);
  cap_jw_begin_array(&w);
  if (prompts)
    mcp_talos_prompts_write(s, &w);
  for (size_t i = 0; i < s->cfg->reg->n; i++) {
    const struct cap_spec *spec = s->cfg->reg->caps[i];
    if (spec->runtime.kind != CAP_RUNTIME_MCP)
      continue;
    struct gw_call call = *base;
    call.capability = spec->id;
    call.tool = method;
    call.mcp_method = method;
    call.args = "{}";
    call.args_len = 2;
    relay->raw_result = relay->raw_error = NULL;
    struct gw_result res = {0};
    struct cap_error err = {0};
    enum gw_outcome o = gw_call(&call, s->cfg->reg, st, &res, &err);
    cap_error_clear(&err);
    free(res.json);
    struct cap_doc *doc = cap_doc_new();
    struct cap_diags d = {0};
    const struct cap_node *items =
        o == GW_OUTCOME_OK && relay->raw_result &&
                cap_json_parse(doc, relay->raw_result, strlen(relay->raw_result), "list", 64, &d) ==
                    0
            ? cap_node_get(doc->root, key)
            : NULL;
    for (size_t k = 0; items && items->kind == CAP_NODE_ARRAY && k < items->u.arr.len; k++)
      if (items->u.arr.items[k]->kind == CAP_NODE_OBJECT)
        write_item(&w, items->u.arr.items[k], spec->id, prompts);
    cap_diags_free(&d);
    cap_doc_free(doc);
    free(relay->raw_result);
    free(relay->raw_error);
    relay->raw_result = relay->raw_error = NULL;
  }
  cap_jw_end_array(&w);
  cap_jw_end_object(&w);
  relay->raw_result = cap_buf_steal(&b);
}

/* ---- the session's table ---- */

void mcp_routes_free(struct mcp_session *s)
{
  for (size_t i = 0; i < s->n_routes; i++) {
    free(s->routes[i].key);
    free(s->routes[i].cap);
    free(s->routes[i].orig);
  }
  free(s->routes);
  s->routes = NULL;
  s->n_routes = 0;
}

static void add_route(struct mcp_session *s, bool prompt, const char *key, const char *cap,
                      const char *orig)
{
  if (s->n_routes >= MCP_MAX_ROUTES)
    return;
  s->routes = cap_xrealloc(s->routes, (s->n_routes + 1) * sizeof *s->routes);
  s->routes[s->n_routes++] = (struct mcp_route){.prompt = prompt,
                                                .key = cap_xstrdup(key),
                                                .cap = cap_xstrdup(cap),
                                                .orig = orig ? cap_xstrdup(orig) : NULL};
}

void mcp_gather_learn(struct mcp_session *s, const char *method, const char *result)
{
  const char *key = list_key(method);
  bool prompts = strcmp(key, "prompts") == 0;
  if (strcmp(key, "resourceTemplates") == 0)
    return; /* a template's URIs are not known until read: not routed */
  for (size_t i = 0; i < s->n_routes;) { /* this list's routes are replaced */
    if (s->routes[i].prompt == prompts) {
      free(s->routes[i].key);
      free(s->routes[i].cap);
      free(s->routes[i].orig);
      s->routes[i] = s->routes[--s->n_routes];
    } else
      i++;
  }
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  const struct cap_node *items = cap_json_parse(doc, result, strlen(result), "list", 64, &d) == 0
                                     ? cap_node_get(doc->root, key)
                                     : NULL;
  for (size_t k = 0; items && items->kind == CAP_NODE_ARRAY && k < items->u.arr.len; k++) {
    const struct cap_node *it = items->u.arr.items[k];
    const struct cap_node *cap = cap_node_get(cap_node_get(it, "_meta"), META_CAP);
    const struct cap_node *name = cap_node_get(it, prompts ? "name" : "uri");
    if (!cap || cap->kind != CAP_NODE_STRING || !name || name->kind != CAP_NODE_STRING)
      continue;                               /* a Talos prompt: served by mcp_prompts.c */
    size_t skip = strlen(cap->u.str.ptr) + 2; /* CAPABILITY__ */
    const char *orig = prompts && name->u.str.len >= skip ? name->u.str.ptr + skip : NULL;
    add_route(s, prompts, name->u.str.ptr, cap->u.str.ptr, orig);
  }
  cap_diags_free(&d);
  cap_doc_free(doc);
}

bool mcp_gather_route(struct mcp_session *s, const char *id, const struct cap_node *params,
                      const char *method)
{
  bool prompt = strcmp(method, "prompts/get") == 0;
  const struct cap_node *key = cap_node_get(params, prompt ? "name" : "uri");
  if (!key || key->kind != CAP_NODE_STRING)
    return false;
  const struct mcp_route *r = NULL;
  for (size_t i = 0; i < s->n_routes && !r; i++)
    if (s->routes[i].prompt == prompt && strcmp(s->routes[i].key, key->u.str.ptr) == 0)
      r = &s->routes[i];
  if (!r)
    return false;
  struct cap_buf a = {0};
  struct cap_jw w;
  cap_jw_init(&w, &a, false);
  cap_jw_begin_object(&w);
  for (size_t i = 0; i < params->u.obj.len; i++) {
    const struct cap_member *m = &params->u.obj.items[i];
    cap_jw_key(&w, m->key);
    if (prompt && strcmp(m->key, "name") == 0)
      cap_jw_string(&w, r->orig ? r->orig : "");
    else
      cap_jw_node(&w, m->value);
  }
  cap_jw_end_object(&w);
  mcp_forward_to(s, id, cap_buf_steal(&a), method, r->cap);
  return true;
}
