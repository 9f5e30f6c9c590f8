/* The MCP dispatcher: a JSON-RPC message in, its answers out (front/mcp.h).
 * This file holds the envelope (parse, classify, errors), the lifecycle
 * (initialize, version negotiation, ping) and the method table; tools are
 * in mcp_tools.c and mcp_call.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "front/mcp_internal.h"

/* Newest first: what initialize answers with when the client asks for
 * something else (the lifecycle: the server names a version it supports,
 * and the client decides whether to go on). */
static const char *const versions[] = {"2025-11-25", "2025-06-18"};

/* ---- sending ---- */

/* 2026-07-28: every result says it is complete (not input_required) */
static void add_result_type(struct cap_buf *b)
{
  const char *p = b->data ? strstr(b->data, "\"result\":{") : NULL;
  if (!p || strncmp(p + 10, "\"resultType\":", 13) == 0) /* input_required (mcp_ask.c) */
    return;
  size_t at = (size_t)(p - b->data) + 10;
  struct cap_buf out = {0};
  cap_buf_append(&out, b->data, at);
  cap_buf_puts(&out,
               b->data[at] == '}' ? "\"resultType\":\"complete\"" : "\"resultType\":\"complete\",");
  cap_buf_append(&out, b->data + at, b->len - at);
  cap_buf_free(b);
  *b = out;
}

void mcp_send_buf(struct mcp_session *s, const char *for_id, bool final, struct cap_buf *b)
{
  if (s->modern && final)
    add_result_type(b);
  s->io.send(s->io.ctx, for_id, final, b->data, b->len);
  cap_buf_free(b);
}

void mcp_send_error(struct mcp_session *s, const char *id_json, int code, const char *message,
                    const char *data_json)
{
  struct cap_buf b = {0};
  cap_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":%d,\"message\":",
                 id_json ? id_json : "null", code);
  cap_json_quote(&b, message, strlen(message));
  if (data_json)
    cap_buf_printf(&b, ",\"data\":%s", data_json);
  cap_buf_puts(&b, "}}");
  mcp_send_buf(s, id_json, true, &b);
}

void mcp_result_begin(struct cap_jw *w, struct cap_buf *b, const char *id_json)
{
  *b = (struct cap_buf){0};
  cap_buf_printf(b, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":", id_json);
  cap_jw_init(w, b, false);
}

void mcp_result_end(struct mcp_session *s, const char *id_json, struct cap_jw *w, struct cap_buf *b)
{
  (void)w;
  cap_buf_putc(b, '}');
  mcp_send_buf(s, id_json, true, b);
}

/* ---- lifecycle ---- */

static bool is_revision(const char *v)
{
  /* YYYY-MM-DD: what every MCP revision is named */
  if (strlen(v) != 10 || v[4] != '-' || v[7] != '-')
    return false;
  for (size_t i = 0; i < 10; i++)
    if (i != 4 && i != 7 && (v[i] < '0' || v[i] > '9'))
      return false;
  return true;
}

/* The supported revisions as {"supported":[...],"requested":"..."} */
static char *unsupported_data(const char *requested)
{
  struct cap_buf b = {0};
  cap_buf_puts(&b, "{\"supported\":[");
  for (size_t i = 0; i < ARRAY_SIZE(versions); i++)
    cap_buf_printf(&b, "%s\"%s\"", i ? "," : "", versions[i]);
  cap_buf_puts(&b, "],\"requested\":");
  cap_json_quote(&b, requested, strlen(requested));
  cap_buf_putc(&b, '}');
  return cap_buf_steal(&b);
}

/* Form elicitation: 2025-06-18's `elicitation: {}`, 2025-11-25's
 * `elicitation: {}` or `{form: {}}` (a client declaring only `url` cannot
 * show a form). */
static bool declares_form_elicitation(const struct cap_node *caps)
{
  const struct cap_node *e = cap_node_get(caps, "elicitation");
  if (!e || e->kind != CAP_NODE_OBJECT)
    return false;
  return e->u.obj.len == 0 || cap_node_get(e, "form") || !cap_node_get(e, "url");
}

char *mcp_caps_offered(const struct cap_node *caps, bool *samples, bool *elicits, bool *roots)
{
  static const char *const offered[] = {"sampling", "elicitation", "roots"};
  bool *flags[] = {samples, elicits, roots};
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_begin_object(&w);
  for (size_t i = 0; i < ARRAY_SIZE(offered); i++) {
    const struct cap_node *c =
        caps && caps->kind == CAP_NODE_OBJECT ? cap_node_get(caps, offered[i]) : NULL;
    *flags[i] = c != NULL;
    if (!c || c->kind != CAP_NODE_OBJECT)
      continue;
    cap_jw_key(&w, offered[i]);
    cap_jw_node(&w, c);
  }
  cap_jw_end_object(&w);
  return cap_buf_steal(&b);
}

/* What a relayed server may ask of this client: its sampling, elicitation
 * and roots capabilities, as declared (mcp_relay.c) */
static void record_client_caps(struct mcp_session *s, const struct cap_node *caps)
{
  free(s->client_caps);
  s->client_caps =
      mcp_caps_offered(caps, &s->client_samples, &s->client_elicits_any, &s->client_roots);
}

/* One capability offered: resources with subscriptions and their list's
 * changes (mcp_subscribe.c: the server's own answer says whether it
 * takes them) */
static void write_offer(struct mcp_session *s, struct cap_jw *w, const char *name)
{
  cap_jw_key(w, name);
  cap_jw_begin_object(w);
  if (strcmp(name, "resources") == 0) {
    cap_jw_key(w, "subscribe");
    cap_jw_bool(w, true);
    cap_jw_key(w, "listChanged");
    cap_jw_bool(w, true);
    s->offers_resources = true;
  }
  if (strcmp(name, "prompts") == 0) { /* a reload may change them (registry_changed) */
    cap_jw_key(w, "listChanged");
    cap_jw_bool(w, s->cfg->list_changed);
    s->offers_prompts = true;
  }
  cap_jw_end_object(w);
}

/* With --capability naming a third-party MCP server, what it may offer
 * is relayed: declared here, answered by the server (its -32601 for what
 * it lacks). */
static void write_relayed_caps(struct mcp_session *s, struct cap_jw *w)
{
  /* the served server's, or every server's (mcp_gather.c) */
  if (!mcp_served_server(s) && !mcp_gather_wanted(s)) {
    if (mcp_has_prompts(s)) /* Talos prompt.md (mcp_prompts.c) */
      write_offer(s, w, "prompts");
    return;
  }
  static const char *const relayed[] = {"logging", "prompts", "resources", "completions"};
  for (size_t i = 0; i < ARRAY_SIZE(relayed); i++)
    write_offer(s, w, relayed[i]);
}

static void write_server_info(struct mcp_session *s, struct cap_jw *w)
{
  cap_jw_key(w, "serverInfo");
  cap_jw_begin_object(w);
  cap_jw_key(w, "name");
  cap_jw_string(w, "capsule");
  cap_jw_key(w, "version");
  cap_jw_string(w, s->cfg->server_version ? s->cfg->server_version : "0");
  cap_jw_end_object(w);
}

static void on_initialize(struct mcp_session *s, const char *id, const struct cap_node *params)
{
  const struct cap_node *pv = cap_node_get(params, "protocolVersion");
  if (!pv || pv->kind != CAP_NODE_STRING)
    return mcp_send_error(
        s, id, MCP_INVALID_PARAMS,
        "initialize needs params.protocolVersion, a string such as \"2025-11-25\"", NULL);
  if (!is_revision(pv->u.str.ptr)) {
    _cleanup_free_ char *data = unsupported_data(pv->u.str.ptr);
    return mcp_send_error(s, id, MCP_INVALID_PARAMS, "Unsupported protocol version", data);
  }
  if (s->initialized)
    return mcp_send_error(s, id, MCP_INVALID_REQUEST,
                          "this session is already initialized; start a new one to renegotiate",
                          NULL);
  s->version = versions[0];
  for (size_t i = 0; i < ARRAY_SIZE(versions); i++)
    if (strcmp(pv->u.str.ptr, versions[i]) == 0)
      s->version = versions[i];
  /* on serve's unix socket, a peer that cannot read the state (a sandboxed
   * tool granted the socket) must not answer its own call's question */
  s->client_elicits = declares_form_elicitation(cap_node_get(params, "capabilities")) &&
                      mcp_key_ok(s, cap_node_get(cap_node_get(params, "_meta"), MCP_META_KEY));
  record_client_caps(s, cap_node_get(params, "capabilities"));
  s->initialized = true;
  struct cap_jw w;
  struct cap_buf b;
  mcp_result_begin(&w, &b, id);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "protocolVersion");
  cap_jw_string(&w, s->version);
  cap_jw_key(&w, "capabilities");
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "tools");
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "listChanged");
  cap_jw_bool(&w, s->cfg->list_changed);
  cap_jw_end_object(&w);
  write_relayed_caps(s, &w);
  cap_jw_end_object(&w);
  write_server_info(s, &w);
  cap_jw_key(&w, "instructions");
  cap_jw_string(&w, "Tools run in capsule's sandbox; each call passes its policy, argument "
                    "validation and audit. A refused call is a result with isError and the "
                    "reason.");
  cap_jw_end_object(&w);
  mcp_result_end(s, id, &w, &b);
}

/* 2026-07-28: what initialize told, without a session */
static void on_discover(struct mcp_session *s, const char *id, const struct cap_node *params)
{
  (void)params;
  struct cap_jw w;
  struct cap_buf b;
  mcp_result_begin(&w, &b, id);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "supportedVersions");
  cap_jw_begin_array(&w);
  cap_jw_string(&w, MCP_MODERN);
  cap_jw_end_array(&w);
  cap_jw_key(&w, "capabilities");
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "tools");
  cap_jw_begin_object(&w);
  cap_jw_end_object(&w);
  cap_jw_end_object(&w);
  write_server_info(s, &w);
  cap_jw_end_object(&w);
  mcp_result_end(s, id, &w, &b);
}

static void on_ping(struct mcp_session *s, const char *id, const struct cap_node *params)
{
  (void)params;
  struct cap_buf b = {0};
  cap_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}", id);
  mcp_send_buf(s, id, true, &b);
}

/* logging/setLevel: the level relayed servers are set to (RFC 5424's names) */
static void on_set_level(struct mcp_session *s, const char *id, const struct cap_node *params)
{
  static const char *const levels[] = {"debug", "info",     "notice", "warning",
                                       "error", "critical", "alert",  "emergency"};
  const struct cap_node *l = cap_node_get(params, "level");
  size_t i = 0;
  while (l && l->kind == CAP_NODE_STRING && i < ARRAY_SIZE(levels) &&
         strcmp(l->u.str.ptr, levels[i]) != 0)
    i++;
  if (!l || l->kind != CAP_NODE_STRING || i == ARRAY_SIZE(levels))
    return mcp_send_error(s, id, MCP_INVALID_PARAMS,
                          "logging/setLevel needs params.level: debug, info, notice, warning, "
                          "error, critical, alert or emergency",
                          NULL);
  free(s->log_level);
  s->log_level = cap_xasprintf("\"%s\"", levels[i]);
  on_ping(s, id, params); /* {} */
}

/* Resources: the served server's, or every server's (mcp_gather.c) */
#define GATHER(fn, name)                                                                           \
  static void fn(struct mcp_session *s, const char *id, const struct cap_node *params)             \
  {                                                                                                \
    if (!mcp_served_server(s) && mcp_gather_wanted(s))                                             \
      return mcp_gather_start(s, id, name);                                                        \
    mcp_forward(s, id, params, name);                                                              \
  }
GATHER(on_resources_list, "resources/list")
GATHER(on_resource_templates, "resources/templates/list")

static void on_resources_read(struct mcp_session *s, const char *id, const struct cap_node *params)
{
  if (mcp_served_server(s) || !mcp_gather_wanted(s))
    return mcp_forward(s, id, params, "resources/read");
  if (!mcp_gather_route(s, id, params, "resources/read"))
    mcp_send_error(s, id, -32002,
                   "Resource not found: resources/list and resources/templates/list name the "
                   "resources capsule can read (one that two servers' lists or templates name "
                   "is read from neither)",
                   NULL);
}
static void on_complete(struct mcp_session *s, const char *id, const struct cap_node *params)
{
  if (mcp_served_server(s) || !mcp_gather_wanted(s))
    return mcp_forward(s, id, params, "completion/complete");
  if (!mcp_gather_complete(s, id, params))
    mcp_send_error(s, id, MCP_INVALID_PARAMS,
                   "completion/complete: params.ref names no prompt (prompts/list), resource "
                   "template (resources/templates/list) or resource (resources/list) this "
                   "session listed",
                   NULL);
}

/* ---- dispatch ---- */

struct method {
  const char *name;
  void (*request)(struct mcp_session *s, const char *id, const struct cap_node *params);
  void (*notification)(struct mcp_session *s, const struct cap_node *params);
  bool before_init; /* allowed before initialize */
};

static void on_initialized(struct mcp_session *s, const struct cap_node *params)
{
  (void)s;
  (void)params;
}

static const struct method methods[] = {
    {"initialize", on_initialize, NULL, true},
    {"ping", on_ping, NULL, true},
    {"server/discover", on_discover, NULL, true},
    {"tools/list", mcp_tools_list, NULL, false},
    {"tools/call", mcp_tools_call, NULL, false},
    {"logging/setLevel", on_set_level, NULL, false},
    {"capsule/call", mcp_capsule_call, NULL, false},
    {"capsule/approve", mcp_capsule_approve, NULL, false},
    {"capsule/list", mcp_capsule_list, NULL, false},
    {"resources/list", on_resources_list, NULL, false},
    {"resources/templates/list", on_resource_templates, NULL, false},
    {"resources/read", on_resources_read, NULL, false},
    {"resources/subscribe", mcp_resources_subscribe, NULL, false},
    {"resources/unsubscribe", mcp_resources_unsubscribe, NULL, false},
    {"prompts/list", mcp_prompts_list, NULL, false},
    {"prompts/get", mcp_prompts_get, NULL, false},
    {"completion/complete", on_complete, NULL, false},
    {"subscriptions/listen", mcp_listen, NULL, false},
    {"notifications/initialized", NULL, on_initialized, true},
    {"notifications/cancelled", NULL, mcp_call_cancel, true},
};

static const struct method *find_method(const char *name)
{
  for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
    if (strcmp(methods[i].name, name) == 0)
      return &methods[i];
  return NULL;
}

bool mcp_method_known(const char *name)
{
  const struct method *m = find_method(name);
  return m && m->request;
}

/* A request id as JSON text: a string or an integer (MCP: never null). */
static char *id_text(const struct cap_node *id)
{
  if (!id || (id->kind != CAP_NODE_STRING && id->kind != CAP_NODE_INT))
    return NULL;
  struct cap_buf b = {0};
  if (id->kind == CAP_NODE_INT)
    cap_buf_printf(&b, "%lld", (long long)id->u.num.i);
  else
    cap_json_quote(&b, id->u.str.ptr, id->u.str.len);
  return cap_buf_steal(&b);
}

static void on_request(struct mcp_session *s, const char *id, const char *name,
                       const struct cap_node *params)
{
  const struct method *m = find_method(name);
  if (!m || !m->request) {
    struct cap_buf msg = {0};
    cap_buf_puts(&msg, "Method not found: ");
    cap_buf_append(&msg, name, strnlen(name, 200));
    mcp_send_error(s, id, MCP_METHOD_NOT_FOUND, msg.data, NULL);
    return cap_buf_free(&msg);
  }
  if (params && params->kind != CAP_NODE_OBJECT)
    return mcp_send_error(s, id, MCP_INVALID_PARAMS, "params must be an object", NULL);
  /* 2026-07-28: the request names its revision; no initialize */
  const struct cap_node *pv = cap_node_get(cap_node_get(params, "_meta"), MCP_META_VERSION);
  if (pv && (pv->kind != CAP_NODE_STRING || strcmp(pv->u.str.ptr, MCP_MODERN) != 0)) {
    struct cap_buf data = {0};
    cap_buf_puts(&data, "{\"supported\":[\"" MCP_MODERN "\"],\"requested\":");
    if (pv->kind == CAP_NODE_STRING)
      cap_json_quote(&data, pv->u.str.ptr, pv->u.str.len);
    else
      cap_buf_puts(&data, "null");
    cap_buf_putc(&data, '}');
    mcp_send_error(s, id, MCP_UNSUPPORTED_VERSION, "Unsupported protocol version", data.data);
    return cap_buf_free(&data);
  }
  if (!pv && !s->initialized && !m->before_init)
    return mcp_send_error(s, id, MCP_INVALID_REQUEST,
                          "the session is not initialized: send initialize first (or name "
                          "the revision " MCP_MODERN " in each request's _meta)",
                          NULL);
  s->modern = pv != NULL;
  /* 2026-07-28: the client's capabilities are the request's own */
  const struct cap_node *meta = cap_node_get(params, "_meta");
  s->req_elicits = pv && declares_form_elicitation(cap_node_get(meta, MCP_META_CLIENT_CAPS)) &&
                   mcp_key_ok(s, cap_node_get(meta, MCP_META_KEY));
  m->request(s, id, params);
  s->modern = false;
  s->req_elicits = false;
}

static void on_message(struct mcp_session *s, const struct cap_node *msg)
{
  if (msg->kind == CAP_NODE_ARRAY)
    return mcp_send_error(s, NULL, MCP_INVALID_REQUEST,
                          "JSON-RPC batches are not part of MCP since 2025-06-18: send one "
                          "message at a time",
                          NULL);
  const struct cap_node *v = cap_node_get(msg, "jsonrpc");
  const struct cap_node *idn = cap_node_get(msg, "id");
  const struct cap_node *method = cap_node_get(msg, "method");
  _cleanup_free_ char *id = id_text(idn);
  if (msg->kind != CAP_NODE_OBJECT || !v || v->kind != CAP_NODE_STRING ||
      strcmp(v->u.str.ptr, "2.0") != 0)
    return mcp_send_error(s, id, MCP_INVALID_REQUEST,
                          "not a JSON-RPC 2.0 message: an object with \"jsonrpc\": \"2.0\"", NULL);
  if (idn && !id)
    return mcp_send_error(s, NULL, MCP_INVALID_REQUEST, "\"id\" must be a string or an integer",
                          NULL);
  if (!method) {
    if (idn && idn->kind == CAP_NODE_INT &&
        (cap_node_get(msg, "result") || cap_node_get(msg, "error")))
      return mcp_call_answer(s, idn->u.num.i, msg);
    if (id)
      mcp_send_error(s, id, MCP_INVALID_REQUEST, "a request needs a \"method\"", NULL);
    return; /* an answer to nothing we asked: dropped */
  }
  if (method->kind != CAP_NODE_STRING)
    return mcp_send_error(s, id, MCP_INVALID_REQUEST, "\"method\" must be a string", NULL);
  const struct cap_node *params = cap_node_get(msg, "params");
  if (id)
    return on_request(s, id, method->u.str.ptr, params);
  const struct method *m = find_method(method->u.str.ptr);
  if (m && m->notification && (!params || params->kind == CAP_NODE_OBJECT))
    m->notification(s, params); /* unknown notifications are ignored, as JSON-RPC says */
}

void mcp_session_receive(struct mcp_session *s, const char *data, size_t len)
{
  if (len > MCP_MAX_MESSAGE) {
    _cleanup_free_ char *m =
        cap_xasprintf("the message is %zu bytes; at most %u are read", len, MCP_MAX_MESSAGE);
    return mcp_send_error(s, NULL, MCP_INVALID_REQUEST, m, NULL);
  }
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  if (cap_json_parse(doc, data, len, "message", 64, &diags) < 0) {
    struct cap_buf m = {0};
    cap_buf_printf(&m, "Parse error: %s",
                   diags.len && diags.items[0].message ? diags.items[0].message : "not JSON");
    mcp_send_error(s, NULL, MCP_PARSE_ERROR, m.data, NULL);
    cap_buf_free(&m);
  } else {
    on_message(s, doc->root);
  }
  cap_diags_free(&diags);
  cap_doc_free(doc);
}

bool mcp_session_initialized(const struct mcp_session *s) { return s->initialized; }

void mcp_session_registry_changed(struct mcp_session *s)
{
  mcp_table_free(&s->table);
  mcp_listen_changed(s);
  if (!s->initialized || !s->cfg->list_changed)
    return;
  /* the tools, and the prompts and resources it offers: a capability
   * added or removed changes its Talos prompts and its servers' lists */
  const char *lists[] = {"tools", s->offers_prompts ? "prompts" : NULL,
                         s->offers_resources ? "resources" : NULL};
  for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
    if (!lists[i])
      continue;
    struct cap_buf b = {0};
    cap_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/%s/list_changed\"}",
                   lists[i]);
    mcp_send_buf(s, NULL, false, &b);
  }
}

struct mcp_session *mcp_session_new(const struct mcp_config *cfg, const struct mcp_io *io)
{
  struct mcp_session *s = cap_xcalloc(1, sizeof *s);
  s->cfg = cfg;
  s->io = *io;
  s->next_id = 1;
  return s;
}

void mcp_session_free(struct mcp_session *s)
{
  if (!s)
    return;
  mcp_runs_free(s);
  mcp_table_free(&s->table);
  mcp_routes_free(s);
  mcp_watch_free(s);
  mcp_listens_free(s);
  free(s->client_caps);
  free(s->log_level);
  free(s);
}
