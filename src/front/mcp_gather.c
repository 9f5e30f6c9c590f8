/* Prompts and resources of every third-party MCP server a session serves
 * (without --capability, front/mcp.h): prompts/list, resources/list and
 * resources/templates/list run on each MCP-server capability in turn in
 * one child (each request its own audit record, a capability that fails
 * or lacks the method left out), merged into one answer: prompts named
 * CAPABILITY__NAME (with the served Talos plugins' prompt.md prompts),
 * resources and templates as the servers name them, every item's _meta
 * naming its capability ("io.capsule/capability"). The session keeps a
 * table from the last lists (prompt name, resource URI -> capability),
 * which prompts/get, resources/read (a URI no list named: the first
 * template it fits, mcp_template.c) and completion/complete are routed
 * through: a name is never split at the separator. A server's list is
 * followed page by page (nextCursor) into the one answer, up to
 * MCP_GATHER_PAGES pages a server and MCP_MAX_RELAYED bytes in all. */
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

/* One page of cap's list after cursor (NULL: the first) into w; the
 * next page's cursor (NULL: none), its bytes added to *bytes */
static char *gather_page(const struct gw_call *base, const struct gw_registry *reg,
                         struct gw_state *st, const char *cap, const char *method,
                         const char *cursor, struct gw_mcp_relay *relay, struct cap_jw *w,
                         size_t *bytes)
{
  const char *key = list_key(method);
  struct cap_buf a = {0};
  struct cap_jw aw;
  cap_jw_init(&aw, &a, false);
  cap_jw_begin_object(&aw);
  if (cursor) {
    cap_jw_key(&aw, "cursor");
    cap_jw_string(&aw, cursor);
  }
  cap_jw_end_object(&aw);
  _cleanup_free_ char *args = cap_buf_steal(&a);
  struct gw_call call = *base;
  call.capability = cap;
  call.tool = method;
  call.mcp_method = method;
  call.args = args;
  call.args_len = strlen(args);
  relay->raw_result = relay->raw_error = NULL;
  struct gw_result res = {0};
  struct cap_error err = {0};
  enum gw_outcome o = gw_call(&call, reg, st, &res, &err);
  cap_error_clear(&err);
  free(res.json);
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  const char *raw = relay->raw_result;
  bool parsed =
      o == GW_OUTCOME_OK && raw && cap_json_parse(doc, raw, strlen(raw), "list", 64, &d) == 0;
  const struct cap_node *items = parsed ? cap_node_get(doc->root, key) : NULL;
  const struct cap_node *next = parsed ? cap_node_get(doc->root, "nextCursor") : NULL;
  char *more = next && next->kind == CAP_NODE_STRING && (!cursor || strcmp(cursor, next->u.str.ptr))
                   ? cap_xstrdup(next->u.str.ptr)
                   : NULL;
  *bytes += raw ? strlen(raw) : 0;
  for (size_t k = 0; items && items->kind == CAP_NODE_ARRAY && k < items->u.arr.len; k++)
    if (items->u.arr.items[k]->kind == CAP_NODE_OBJECT)
      write_item(w, items->u.arr.items[k], cap, strcmp(key, "prompts") == 0);
  cap_diags_free(&d);
  cap_doc_free(doc);
  free(relay->raw_result);
  free(relay->raw_error);
  relay->raw_result = relay->raw_error = NULL;
  return more;
}

void mcp_gather_run(const struct mcp_session *s, struct gw_state *st, const struct gw_call *base,
                    const char *method, struct gw_mcp_relay *relay)
{
  const char *key = list_key(method);
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, key);
  cap_jw_begin_array(&w);
  if (strcmp(key, "prompts") == 0)
    mcp_talos_prompts_write(s, &w);
  size_t bytes = 0;
  for (size_t i = 0; i < s->cfg->reg->n && bytes < MCP_MAX_RELAYED; i++) {
    const struct cap_spec *spec = s->cfg->reg->caps[i];
    if (spec->runtime.kind != CAP_RUNTIME_MCP)
      continue;
    char *cursor = NULL;
    for (unsigned page = 0; page < MCP_GATHER_PAGES && bytes < MCP_MAX_RELAYED; page++) {
      char *next = gather_page(base, s->cfg->reg, st, spec->id, method, cursor, relay, &w, &bytes);
      free(cursor);
      cursor = next;
      if (!cursor)
        break;
    }
    free(cursor);
  }
  cap_jw_end_array(&w);
  cap_jw_end_object(&w);
  relay->raw_result = cap_buf_steal(&b);
}

/* ---- the session's table ---- */

static void route_free(struct mcp_route *r)
{
  free(r->key);
  free(r->cap);
  free(r->orig);
  mcp_template_free(r->rx);
}

void mcp_routes_free(struct mcp_session *s)
{
  for (size_t i = 0; i < s->n_routes; i++)
    route_free(&s->routes[i]);
  free(s->routes);
  s->routes = NULL;
  s->n_routes = 0;
}

/* A route; a template's compiled when compile, else kept uncompiled:
 * routed by its text (completion/complete), fitting no URI */
static void add_route(struct mcp_session *s, enum mcp_route_kind kind, const char *key,
                      const char *cap, const char *orig, bool compile)
{
  if (s->n_routes >= MCP_MAX_ROUTES)
    return;
  if ((s->n_routes & (s->n_routes - 1)) == 0) /* 0, 1, 2, 4...: room doubled */
    s->routes = cap_xrealloc(s->routes, (s->n_routes ? 2 * s->n_routes : 1) * sizeof *s->routes);
  s->routes[s->n_routes++] = (struct mcp_route){
      .kind = kind,
      .key = cap_xstrdup(key),
      .cap = cap_xstrdup(cap),
      .orig = orig ? cap_xstrdup(orig) : NULL,
      .rx = kind == MCP_ROUTE_TEMPLATE && compile ? mcp_template_compile(key) : NULL};
}

/* A template is compiled while fewer than MCP_MAX_TEMPLATES of its
 * server's are (each may cost tens of KiB, mcp_template.c; a server's
 * count alone, so that one listing many cannot leave another's
 * uncompiled): the servers' counts, one entry a server (few: the
 * registry's MCP servers), so a list of n templates costs O(n) */
struct tmpl_count {
  const char *cap;
  size_t n;
};

static bool count_template(struct tmpl_count **counts, size_t *n_counts, const char *cap)
{
  size_t i = 0;
  while (i < *n_counts && strcmp((*counts)[i].cap, cap) != 0)
    i++;
  if (i == *n_counts) {
    *counts = cap_xrealloc(*counts, (*n_counts + 1) * sizeof **counts);
    (*counts)[(*n_counts)++] = (struct tmpl_count){.cap = cap};
  }
  return (*counts)[i].n++ < MCP_MAX_TEMPLATES;
}

static enum mcp_route_kind route_kind(const char *method)
{
  const char *key = list_key(method);
  return strcmp(key, "prompts") == 0     ? MCP_ROUTE_PROMPT
         : strcmp(key, "resources") == 0 ? MCP_ROUTE_RESOURCE
                                         : MCP_ROUTE_TEMPLATE;
}

void mcp_gather_learn(struct mcp_session *s, const char *method, const char *result)
{
  const char *key = list_key(method);
  enum mcp_route_kind kind = route_kind(method);
  size_t kept = 0; /* this list's routes are replaced; the others keep their order */
  for (size_t i = 0; i < s->n_routes; i++) {
    if (s->routes[i].kind != kind) {
      s->routes[kept++] = s->routes[i];
      continue;
    }
    route_free(&s->routes[i]);
  }
  s->n_routes = kept;
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  const struct cap_node *items = cap_json_parse(doc, result, strlen(result), "list", 64, &d) == 0
                                     ? cap_node_get(doc->root, key)
                                     : NULL;
  const char *name_key = kind == MCP_ROUTE_PROMPT     ? "name"
                         : kind == MCP_ROUTE_RESOURCE ? "uri"
                                                      : "uriTemplate";
  struct tmpl_count *counts = NULL;
  size_t n_counts = 0;
  for (size_t k = 0; items && items->kind == CAP_NODE_ARRAY && k < items->u.arr.len; k++) {
    const struct cap_node *it = items->u.arr.items[k];
    const struct cap_node *cap = cap_node_get(cap_node_get(it, "_meta"), META_CAP);
    const struct cap_node *name = cap_node_get(it, name_key);
    if (!cap || cap->kind != CAP_NODE_STRING || !name || name->kind != CAP_NODE_STRING)
      continue;                               /* a Talos prompt: served by mcp_prompts.c */
    size_t skip = strlen(cap->u.str.ptr) + 2; /* CAPABILITY__ */
    bool prompt = kind == MCP_ROUTE_PROMPT;
    const char *orig = prompt && name->u.str.len >= skip ? name->u.str.ptr + skip : NULL;
    bool compile = kind == MCP_ROUTE_TEMPLATE && count_template(&counts, &n_counts, cap->u.str.ptr);
    add_route(s, kind, name->u.str.ptr, cap->u.str.ptr, orig, compile);
  }
  free(counts);
  cap_diags_free(&d);
  cap_doc_free(doc);
}

/* The one route of kind whose key is key; for a resource no list named,
 * the template the URI fits. Where the key (or the URI's templates) leads
 * to two capabilities, none: each server names its own resources and
 * templates, so one server's list naming another's URI, or a template as
 * wide as {+any}, would otherwise take the reads meant for the other
 * server (its URIs, and an answer of its choosing) by coming first. */
static const struct mcp_route *route_find(const struct mcp_session *s, enum mcp_route_kind kind,
                                          const char *key)
{
  const struct mcp_route *r = NULL;
  for (size_t i = 0; i < s->n_routes; i++)
    if (s->routes[i].kind == kind && strcmp(s->routes[i].key, key) == 0) {
      if (r && strcmp(r->cap, s->routes[i].cap) != 0)
        return NULL; /* two servers name it */
      r = r ? r : &s->routes[i];
    }
  for (size_t i = 0; !r && kind == MCP_ROUTE_RESOURCE && i < s->n_routes; i++)
    if (s->routes[i].kind == MCP_ROUTE_TEMPLATE && mcp_template_fits(s->routes[i].rx, key)) {
      for (size_t k = i + 1; k < s->n_routes; k++)
        if (s->routes[k].kind == MCP_ROUTE_TEMPLATE &&
            strcmp(s->routes[k].cap, s->routes[i].cap) != 0 &&
            mcp_template_fits(s->routes[k].rx, key))
          return NULL; /* two servers' templates fit it */
      return &s->routes[i];
    }
  return r;
}

const char *mcp_gather_listed(const struct mcp_session *s, const char *uri)
{
  const struct mcp_route *r = route_find(s, MCP_ROUTE_RESOURCE, uri);
  return r && r->kind == MCP_ROUTE_RESOURCE ? r->cap : NULL;
}

/* params to its server: as they are, or with the string at path (depth
 * keys) renamed to the server's own name orig */
static char *params_for(const struct cap_node *params, const char *const *path, size_t depth,
                        const char *orig)
{
  if (!depth)
    return cap_json_text(params);
  struct cap_buf q = {0};
  cap_json_quote(&q, orig, strlen(orig));
  _cleanup_free_ char *quoted = cap_buf_steal(&q);
  return cap_json_rewritten(params, path, depth, quoted);
}

bool mcp_gather_route(struct mcp_session *s, const char *id, const struct cap_node *params,
                      const char *method)
{
  bool prompt = strcmp(method, "prompts/get") == 0;
  const struct cap_node *key = cap_node_get(params, prompt ? "name" : "uri");
  if (!key || key->kind != CAP_NODE_STRING)
    return false;
  const struct mcp_route *r =
      route_find(s, prompt ? MCP_ROUTE_PROMPT : MCP_ROUTE_RESOURCE, key->u.str.ptr);
  if (!r)
    return false;
  static const char *const name[] = {"name"};
  char *args = params_for(params, name, prompt ? 1 : 0, r->orig ? r->orig : "");
  mcp_forward_to(s, id, args, method, r->cap);
  return true;
}

bool mcp_gather_complete(struct mcp_session *s, const char *id, const struct cap_node *params)
{
  const struct cap_node *ref = cap_node_get(params, "ref");
  const struct cap_node *type = cap_node_get(ref, "type");
  if (!type || type->kind != CAP_NODE_STRING)
    return false;
  bool prompt = strcmp(type->u.str.ptr, "ref/prompt") == 0;
  if (!prompt && strcmp(type->u.str.ptr, "ref/resource") != 0)
    return false;
  const struct cap_node *key = cap_node_get(ref, prompt ? "name" : "uri");
  if (!key || key->kind != CAP_NODE_STRING)
    return false;
  const struct mcp_route *r = NULL; /* a template by its text, or a resource by its URI */
  if (prompt)
    r = route_find(s, MCP_ROUTE_PROMPT, key->u.str.ptr);
  else if (!(r = route_find(s, MCP_ROUTE_TEMPLATE, key->u.str.ptr)))
    r = route_find(s, MCP_ROUTE_RESOURCE, key->u.str.ptr);
  if (!r)
    return false;
  static const char *const ref_name[] = {"ref", "name"};
  char *args = params_for(params, ref_name, prompt ? 2 : 0, r->orig ? r->orig : "");
  mcp_forward_to(s, id, args, "completion/complete", r->cap);
  return true;
}
