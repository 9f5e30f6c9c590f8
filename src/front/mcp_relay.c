/* The relay between the MCP client of a session and a third-party MCP
 * server run as a capability (x-capsule.mcp_server, runtime/mcp_client.c).
 * The server runs in the call's child process (mcp_call.c); the child
 * sends what the server says besides its answer as lines {"relay": MSG}
 * on the run's socket, and takes back the lines it must write to the
 * server. Here, in the session:
 * - notifications go to the client on the call's stream: logging as
 *   it is, progress only when the client asked for it and under its own
 *   token, cancelled only for this call's requests to the client (under
 *   the session's id); the others are dropped (notification_params);
 * - requests (sampling/createMessage, elicitation/create, roots/list,
 *   ping) go to the client under an id of the session's (ids are the
 *   session's to choose, and two servers' would collide), only when the
 *   client declared the capability they need, else the server is
 *   answered -32601; the client's answer goes back under the server's id;
 * - a cancelled call's server is sent notifications/cancelled;
 * - at most MCP_MAX_RELAYED bytes of a call's messages are relayed, so a
 *   server that floods costs bounded memory (the rest is dropped; its
 *   requests past the bound wait until the call's deadline);
 * - resources, prompts and completion requests (mcp_forward) run on the
 *   served capability's server like a call: one child, one sandbox, one
 *   audit record naming the method. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "front/mcp_internal.h"
#include "runtime/mcp_client.h"

#define TO_CHILD_WAIT_MS 5000 /* a child that reads nothing for this long is not waited for */

const struct cap_spec *mcp_served_server(const struct mcp_session *s)
{
  if (!s->cfg->only || !s->cfg->reg)
    return NULL;
  const struct cap_spec *spec = gw_registry_find(s->cfg->reg, s->cfg->only);
  return spec && spec->runtime.kind == CAP_RUNTIME_MCP ? spec : NULL;
}

void mcp_run_free_asked(struct mcp_run *r)
{
  for (size_t i = 0; i < MCP_MAX_ASKED; i++) {
    free(r->asked[i].theirs);
    free(r->asked[i].request);
    r->asked[i] = (struct mcp_asked){0};
  }
}

/* One line to the child (which writes it to the server); the socket is
 * non-blocking on this side. */
void mcp_relay_to_server(struct mcp_run *r, struct cap_buf *b)
{
  cap_buf_putc(b, '\n');
  size_t off = 0;
  while (r->fd >= 0 && off < b->len) {
    ssize_t n = write(r->fd, b->data + off, b->len - off);
    if (n > 0) {
      off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    struct pollfd p = {.fd = r->fd, .events = POLLOUT};
    if (n == 0 || errno != EAGAIN || poll(&p, 1, TO_CHILD_WAIT_MS) <= 0)
      break;
  }
  cap_buf_free(b);
}

void mcp_relay_put_request(struct cap_buf *b, const char *method, const struct cap_node *msg)
{
  cap_buf_puts(b, "\"method\":");
  cap_json_quote(b, method, strlen(method));
  const struct cap_node *params = cap_node_get(msg, "params");
  if (params && params->kind == CAP_NODE_OBJECT) {
    _cleanup_free_ char *p = cap_json_text(params);
    cap_buf_printf(b, ",\"params\":%s", p);
  }
  cap_buf_putc(b, '}');
}

struct mcp_asked *mcp_relay_slot(struct mcp_run *r)
{
  for (size_t i = 0; i < MCP_MAX_ASKED; i++)
    if (!r->asked[i].theirs)
      return &r->asked[i];
  return NULL;
}

void mcp_relay_refuse(struct mcp_run *r, const char *theirs, const char *message)
{
  struct cap_buf b = {0};
  cap_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":%d,\"message\":", theirs,
                 MCP_METHOD_NOT_FOUND);
  cap_json_quote(&b, message, strlen(message));
  cap_buf_puts(&b, "}}");
  mcp_relay_to_server(r, &b);
}

/* Whether the client declared what the server's request needs */
static bool client_offers(const struct mcp_session *s, const char *method)
{
  static const struct {
    const char *method;
    size_t offset;
  } needs[] = {
      {"sampling/createMessage", offsetof(struct mcp_session, client_samples)},
      {"elicitation/create", offsetof(struct mcp_session, client_elicits_any)},
      {"roots/list", offsetof(struct mcp_session, client_roots)},
  };
  if (strcmp(method, "ping") == 0)
    return true;
  for (size_t i = 0; i < ARRAY_SIZE(needs); i++)
    if (strcmp(method, needs[i].method) == 0)
      return *(const bool *)((const char *)s + needs[i].offset);
  return false;
}

static void relay_request(struct mcp_session *s, struct mcp_run *r, const struct cap_node *msg,
                          const char *method)
{
  _cleanup_free_ char *theirs = cap_json_text(cap_node_get(msg, "id"));
  if ((r->modern || r->for_listen) && strcmp(method, "ping") == 0) { /* answered here */
    struct cap_buf b = {0};
    cap_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}", theirs);
    return mcp_relay_to_server(r, &b);
  }
  if (mcp_hold_allowed(r)) /* an input request (mcp_hold.c) */
    return mcp_hold_request(s, r, msg, method);
  if (r->modern || r->for_listen) {
    /* a listen's stream carries only notifications, and a list gathered
     * or a subscribe relayed is not held for input */
    _cleanup_free_ char *m = cap_xasprintf(
        "the client did not declare what %s needs (a 2026-07-28 request: capsule relays a "
        "server's requests as input requests during tools/call, resources/read, prompts/get "
        "and completion/complete only)",
        method);
    return mcp_relay_refuse(r, theirs, m);
  }
  if (!client_offers(s, method)) {
    _cleanup_free_ char *m = cap_xasprintf(
        "the client did not declare what %s needs (capsule relays only that)", method);
    return mcp_relay_refuse(r, theirs, m);
  }
  struct mcp_asked *slot = mcp_relay_slot(r);
  if (!slot)
    return mcp_relay_refuse(r, theirs, "too many requests to the client in flight for this call");
  slot->ours = s->next_id++;
  slot->theirs = steal_pointer(&theirs);
  struct cap_buf b = {0};
  cap_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%lld,", (long long)slot->ours);
  mcp_relay_put_request(&b, method, msg);
  mcp_send_buf(s, r->id_json, false, &b); /* on the call's own stream */
}

/* A notification of the server's, as the client may see it: only those a
 * server sends about its own work, with what names another's rewritten
 * (the progress token is the call's own; a cancelled request is one of
 * this call's, under the id the session gave it); NULL to drop it. The
 * rest (list_changed, resources/updated, ...) would speak for capsule or
 * for another call of the session. */
static char *notification_params(const struct mcp_run *r, const char *method,
                                 const struct cap_node *params)
{
  enum { AS_IS, PROGRESS, CANCELLED } kind;
  if (strcmp(method, "notifications/message") == 0)
    kind = AS_IS;
  else if (strcmp(method, "notifications/progress") == 0 && r->token_json)
    kind = PROGRESS;
  else if (strcmp(method, "notifications/cancelled") == 0)
    kind = CANCELLED;
  else
    return NULL;
  int64_t ours = 0;
  if (kind == CANCELLED) {
    _cleanup_free_ char *theirs = cap_json_text(cap_node_get(params, "requestId"));
    for (size_t i = 0; i < MCP_MAX_ASKED && !ours; i++)
      if (r->asked[i].theirs && strcmp(r->asked[i].theirs, theirs) == 0)
        ours = r->asked[i].ours;
    if (!ours)
      return NULL;
  }
  struct cap_buf b = {0};
  cap_buf_putc(&b, '{');
  bool first = true;
  for (size_t i = 0; params && params->kind == CAP_NODE_OBJECT && i < params->u.obj.len; i++) {
    const struct cap_member *mb = &params->u.obj.items[i];
    if ((kind == PROGRESS && strcmp(mb->key, "progressToken") == 0) ||
        (kind == CANCELLED && strcmp(mb->key, "requestId") == 0))
      continue;
    _cleanup_free_ char *v = cap_json_text(mb->value);
    if (!first)
      cap_buf_putc(&b, ',');
    first = false;
    cap_json_quote(&b, mb->key, mb->keylen);
    cap_buf_printf(&b, ":%s", v);
  }
  if (kind == PROGRESS)
    cap_buf_printf(&b, "%s\"progressToken\":%s", first ? "" : ",", r->token_json);
  if (kind == CANCELLED)
    cap_buf_printf(&b, "%s\"requestId\":%lld", first ? "" : ",", (long long)ours);
  cap_buf_putc(&b, '}');
  return cap_buf_steal(&b);
}

void mcp_relay_line(struct mcp_session *s, struct mcp_run *r, char *line)
{
  size_t len = strlen(line);
  if (r->relayed_bytes + len > MCP_MAX_RELAYED) { /* a flood: the rest of this call's dropped */
    r->relayed_bytes = MCP_MAX_RELAYED + 1;
    return free(line);
  }
  r->relayed_bytes += len;
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  const struct cap_node *msg = NULL, *method = NULL;
  if (cap_json_parse(doc, line, strlen(line), "relayed", 64, &d) == 0)
    msg = cap_node_get(doc->root, "relay");
  if (msg && msg->kind == CAP_NODE_OBJECT)
    method = cap_node_get(msg, "method");
  if (method && method->kind == CAP_NODE_STRING && !r->cancelled) {
    const char *m = method->u.str.ptr;
    if (cap_node_get(msg, "id"))
      relay_request(s, r, msg, m);
    else if (!r->for_listen && !r->held) { /* a listen's step, a held call: no stream */
      _cleanup_free_ char *p = notification_params(r, m, cap_node_get(msg, "params"));
      struct cap_buf b = {0};
      if (p) {
        cap_buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"method\":");
        cap_json_quote(&b, m, strlen(m));
        cap_buf_printf(&b, ",\"params\":%s}", p);
        mcp_send_buf(s, r->id_json, false, &b);
      }
    }
  }
  cap_diags_free(&d);
  cap_doc_free(doc);
  free(line);
}

bool mcp_relay_answer(struct mcp_session *s, int64_t id, const struct cap_node *msg)
{
  for (size_t i = 0; i < MCP_MAX_RUNNING; i++) {
    struct mcp_run *r = s->runs[i];
    for (size_t k = 0; r && k < MCP_MAX_ASKED; k++) {
      if (!r->asked[k].theirs || r->asked[k].request || r->asked[k].ours != id)
        continue; /* (an input request is answered by the retry: mcp_hold.c) */
      const struct cap_node *result = cap_node_get(msg, "result");
      const struct cap_node *error = cap_node_get(msg, "error");
      _cleanup_free_ char *body = result || error ? cap_json_text(result ? result : error) : NULL;
      struct cap_buf b = {0};
      if ((result && result->kind == CAP_NODE_OBJECT) || (error && error->kind == CAP_NODE_OBJECT))
        cap_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"%s\":%s}", r->asked[k].theirs,
                       result ? "result" : "error", body);
      else
        cap_buf_printf(&b,
                       "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":%d,\"message\":\"the "
                       "client's answer has neither a result nor an error object\"}}",
                       r->asked[k].theirs, MCP_INTERNAL_ERROR);
      free(r->asked[k].theirs);
      r->asked[k] = (struct mcp_asked){0};
      mcp_relay_to_server(r, &b);
      return true;
    }
  }
  return false;
}

void mcp_relay_cancel(struct mcp_run *r)
{
  struct cap_buf b = {0};
  cap_buf_printf(&b,
                 "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
                 "\"requestId\":%d,\"reason\":\"cancelled by the client\"}}",
                 MCP_CLIENT_REQUEST_ID);
  mcp_relay_to_server(r, &b);
}

void mcp_forward(struct mcp_session *s, const char *id, const struct cap_node *params,
                 const char *method)
{
  const struct cap_spec *spec = mcp_served_server(s);
  if (!spec) {
    _cleanup_free_ char *m = cap_xasprintf(
        "Method not found: %s (capsule relays it to a third-party MCP server's capability "
        "served with --capability; this session serves none)",
        method);
    return mcp_send_error(s, id, MCP_METHOD_NOT_FOUND, m, NULL);
  }
  struct cap_buf a = {0};
  if (params) {
    struct cap_jw w;
    cap_jw_init(&w, &a, false);
    cap_jw_node(&w, params);
  } else
    cap_buf_puts(&a, "{}");
  mcp_forward_to(s, id, cap_buf_steal(&a), method, spec->id);
}

struct mcp_run *mcp_relayed_run(struct mcp_session *s, const char *id, char *args,
                                const char *method, const char *cap)
{
  struct mcp_run *r = mcp_run_new(s, id, cap);
  if (!r) {
    free(args);
    mcp_send_error(s, id, MCP_INTERNAL_ERROR,
                   "too many requests in flight in this session, or of this user in all its "
                   "sessions; wait for one to end",
                   NULL);
    return NULL;
  }
  r->method = method;
  r->relayed = true;
  r->tool = cap_xstrdup(method);
  r->args = args;
  return r;
}

void mcp_forward_to(struct mcp_session *s, const char *id, char *args, const char *method,
                    const char *cap)
{
  struct mcp_run *r = mcp_relayed_run(s, id, args, method, cap);
  if (r && !mcp_hold_relayed(s, r)) /* (the retry of one held for input goes on as it) */
    mcp_run_start(s, r, GW_ANSWER_NONE);
}

void mcp_gather_start(struct mcp_session *s, const char *id, const char *method)
{
  struct mcp_run *r = mcp_relayed_run(s, id, cap_xstrdup("{}"), method, "");
  if (!r)
    return;
  r->gather = true;
  mcp_run_start(s, r, GW_ANSWER_NONE);
}
