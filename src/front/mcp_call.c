/* tools/call (front/mcp.h): the name found in the table, policy `ask`
 * put to the human through the client's elicitation when it declared it,
 * then gw_call (the one pipeline: policy, validation, credentials,
 * sandbox, audit) where mcp_run.c says (a child process, or in serve a
 * thread), so that the session keeps serving while the tool runs,
 * reports progress, and a notifications/cancelled can stop the run:
 * SIGTERM to the child (or to a thread's run step's child), which its
 * sandbox supervisor forwards to the tool (a child killed before the
 * pipeline's own record leaves the in-flight marker that gateway/state.h
 * turns into an interrupted record), SIGKILL 5 s later; a warm server's
 * exchange ends when its relay is closed. Then the report becomes the
 * answer: the result as structuredContent and text, or the error. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/io.h"
#include "core/clock.h"
#include "front/mcp_internal.h"

static uint64_t now_ms(void) { return cap_now_ms(CLOCK_MONOTONIC); }

/* A child or a thread runs it (else it waits for the client's answer) */
static bool running(const struct mcp_run *r) { return r->pid || r->threaded; }

static void run_free(struct mcp_run *r)
{
  if (!r)
    return;
  mcp_hold_forget(r);
  if (r->fd >= 0)
    close(r->fd);
  if (r->watch_fd >= 0)
    close(r->watch_fd);
  free(r->id_json);
  free(r->token_json);
  free(r->cap);
  free(r->tool);
  free(r->args);
  free(r->report);
  free(r->client_caps);
  cap_buf_free(&r->line);
  mcp_run_free_asked(r);
  mcp_job_free(r->job);
  free(r);
}

void mcp_run_drop(struct mcp_session *s, struct mcp_run *r)
{
  for (size_t i = 0; i < MCP_MAX_RUNNING; i++)
    if (s->runs[i] == r)
      s->runs[i] = NULL;
  if (r->run_give)
    r->run_give(r->run_ctx, r->run_user);
  free(r->run_user);
  run_free(r);
}

/* ---- results ---- */

void mcp_send_tool_error(struct mcp_session *s, const char *id, const char *message)
{
  struct cap_buf b = {0};
  cap_buf_printf(&b,
                 "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\","
                 "\"text\":",
                 id);
  cap_json_quote(&b, message, strlen(message));
  cap_buf_puts(&b, "}],\"isError\":true}}");
  mcp_send_buf(s, id, true, &b);
}

/* The tool's JSON as text, and as structuredContent when it is an object. */
static void send_tool_result(struct mcp_session *s, const char *id, const char *json)
{
  _cleanup_free_ char *canon = cap_json_canonical(json, strlen(json));
  if (!canon)
    return mcp_send_tool_error(s, id, "the tool's result is not JSON");
  struct cap_buf b = {0};
  cap_buf_printf(&b,
                 "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\","
                 "\"text\":",
                 id);
  cap_json_quote(&b, canon, strlen(canon));
  cap_buf_puts(&b, "}]");
  if (canon[0] == '{')
    cap_buf_printf(&b, ",\"structuredContent\":%s", canon);
  cap_buf_puts(&b, ",\"isError\":false}}");
  mcp_send_buf(s, id, true, &b);
}

/* The server's own answer, as it sent it: the result object or the
 * error; false when there is none (or it is not an object). */
static bool send_raw(struct mcp_session *s, const char *id, const char *raw, bool error)
{
  if (!raw || raw[0] != '{')
    return false;
  size_t len = strlen(raw);
  struct cap_buf b = {0}; /* put, not printed: the server's answer, of any size */
  cap_buf_reserve(&b, 32 + strlen(id) + len);
  cap_buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"id\":");
  cap_buf_puts(&b, id);
  cap_buf_puts(&b, error ? ",\"error\":" : ",\"result\":");
  cap_buf_append(&b, raw, len);
  cap_buf_putc(&b, '}');
  mcp_send_buf(s, id, true, &b);
  return true;
}

static void finish(struct mcp_session *s, struct mcp_run *r, int status,
                   const struct mcp_report *rep);

/* A string field of the report, or NULL (absent, null, not a string) */
static const char *report_string(const struct cap_node *root, const char *key)
{
  const struct cap_node *n = cap_node_get(root, key);
  return n && n->kind == CAP_NODE_STRING ? n->u.str.ptr : NULL;
}

/* What the child reported, once it is gone. */
void mcp_run_finish(struct mcp_session *s, struct mcp_run *r, int status)
{
  if (r->cancelled)
    return finish(s, r, status, NULL);
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  struct mcp_report rep;
  const struct mcp_report *have = NULL; /* no report, or not one: the run ended without */
  if (r->report && cap_json_parse(doc, r->report, strlen(r->report), "report", 0, &diags) == 0) {
    const struct cap_node *outcome = cap_node_get(doc->root, "outcome");
    rep = (struct mcp_report){
        .has_outcome = outcome != NULL,
        /* an outcome that is not a number: not ok (GW_OUTCOME_FAILED is not) */
        .outcome = outcome && outcome->kind == CAP_NODE_INT ? (enum gw_outcome)outcome->u.num.i
                                                            : GW_OUTCOME_FAILED,
        .error = report_string(doc->root, "error"),
        .result = report_string(doc->root, "result"),
        .mcp_result = report_string(doc->root, "mcp_result"),
        .mcp_error = report_string(doc->root, "mcp_error")};
    have = &rep;
  }
  finish(s, r, status, have);
  cap_diags_free(&diags);
  cap_doc_free(doc);
}

void mcp_run_finish_fields(struct mcp_session *s, struct mcp_run *r, int status,
                           const struct mcp_report *rep)
{
  finish(s, r, status, rep);
}

/* The answer from the report's fields (rep NULL: the run gave none, or
 * it was cancelled), the run freed */
static void finish(struct mcp_session *s, struct mcp_run *r, int status,
                   const struct mcp_report *rep)
{
  s->modern = r->modern; /* the answer in the form it was asked in */
  if (r->cancelled) {    /* a cancelled request gets no answer */
    s->io.send(s->io.ctx, r->id_json, true, NULL, 0);
    s->modern = false;
    return mcp_run_drop(s, r);
  }
  const char *error = rep ? rep->error : NULL, *result = rep ? rep->result : NULL;
  const char *raw = rep ? rep->mcp_result : NULL, *raw_e = rep ? rep->mcp_error : NULL;
  bool ok = rep && rep->has_outcome && rep->outcome == GW_OUTCOME_OK;
  if (r->cli && rep && rep->has_outcome) { /* capsule/call: the pipeline's own report */
    struct cap_buf b = {0};
    cap_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}", r->id_json, r->report);
    mcp_send_buf(s, r->id_json, true, &b);
  } else if (r->cli) {
    _cleanup_free_ char *m = cap_xasprintf(
        "the call's process ended without a result (%s %d); `capsule audit` shows the call",
        WIFSIGNALED(status) ? "signal" : "status",
        WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    mcp_send_error(s, r->id_json, MCP_INTERNAL_ERROR, m, NULL);
  } else if (r->gather && ok && raw) {
    mcp_gather_learn(s, r->method, raw); /* where prompts/get and resources/read go */
    send_raw(s, r->id_json, raw, false);
  } else if (r->for_listen) {
    mcp_listen_stepped(s, r, ok); /* a subscriptions/listen's step: no answer of its own */
  } else if (r->method && ok && r->want_watch) {
    mcp_watch_subscribed(s, r, NULL); /* resources/subscribe: the session watches the server */
    send_raw(s, r->id_json, raw, false);
  } else if (r->method && (send_raw(s, r->id_json, ok ? raw : NULL, false) ||
                           send_raw(s, r->id_json, raw_e, true))) {
    /* a relayed request: the server's answer as it is */
  } else if (r->method) {
    mcp_send_error(s, r->id_json, MCP_INTERNAL_ERROR, error ? error : "the request failed", NULL);
  } else if (ok && send_raw(s, r->id_json, raw, false)) {
    /* the server's content as it made it (images, audio, resources) */
  } else if (ok && result) {
    send_tool_result(s, r->id_json, result);
  } else if (error) {
    mcp_send_tool_error(s, r->id_json, error);
  } else {
    _cleanup_free_ char *m = cap_xasprintf(
        "the call's process ended without a result (%s %d); `capsule audit` shows the call",
        WIFSIGNALED(status) ? "signal" : "status",
        WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    mcp_send_tool_error(s, r->id_json, m);
  }
  mcp_run_drop(s, r);
  s->modern = false;
}

/* ---- ask through the client ---- */

static bool asks(const struct mcp_session *s, const struct cap_spec *spec,
                 const struct cap_tool *tool)
{
  enum cap_policy policy = tool->policy;
  const char *source;
  struct cap_error err = {0};
  if (s->cfg->st && gw_effective_policy(s->cfg->st, spec->id, tool, s->cfg->base.user, &policy,
                                        &source, &err) < 0)
    cap_error_clear(&err);
  return policy == CAP_POLICY_ASK;
}

char *mcp_ask_text(const struct mcp_session *s, const struct mcp_run *r)
{
  struct cap_buf msg = {0};
  cap_buf_printf(&msg, "capsule: %s wants to call the tool %s of the capability %s with ",
                 s->cfg->base.user ? s->cfg->base.user : "you", r->tool, r->cap);
  size_t n = strlen(r->args);
  cap_buf_append(&msg, r->args, n > 4000 ? 4000 : n);
  cap_buf_puts(&msg, n > 4000 ? "...\nAllow this call?" : "\nAllow this call?");
  return cap_buf_steal(&msg);
}

static void elicit(struct mcp_session *s, struct mcp_run *r)
{
  r->elicit_id = s->next_id++;
  _cleanup_free_ char *text = mcp_ask_text(s, r);
  struct cap_buf b = {0};
  cap_buf_printf(&b,
                 "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"method\":\"elicitation/create\","
                 "\"params\":{%s\"message\":",
                 (long long)r->elicit_id,
                 strcmp(s->version, "2025-06-18") == 0 ? "" : "\"mode\":\"form\",");
  cap_json_quote(&b, text, strlen(text));
  cap_buf_puts(&b, ",\"requestedSchema\":{\"type\":\"object\",\"properties\":{}}}}");
  mcp_send_buf(s, r->id_json, false, &b); /* on the call's own stream */
}

void mcp_call_answer(struct mcp_session *s, int64_t id, const struct cap_node *msg)
{
  if (mcp_relay_answer(s, id, msg))
    return;
  struct mcp_run *r = NULL;
  for (size_t i = 0; i < MCP_MAX_RUNNING && !r; i++)
    if (s->runs[i] && !running(s->runs[i]) && s->runs[i]->elicit_id == id)
      r = s->runs[i];
  if (!r)
    return; /* an answer to nothing we asked (or to a cancelled call) */
  const struct cap_node *result = cap_node_get(msg, "result");
  const struct cap_node *action = cap_node_get(result, "action");
  enum gw_answer answer = GW_ANSWER_NONE; /* the client could not ask: the approval queue */
  if (action && action->kind == CAP_NODE_STRING)
    answer = strcmp(action->u.str.ptr, "accept") == 0 ? GW_ANSWER_YES : GW_ANSWER_NO;
  r->elicit_id = 0;
  mcp_run_start(s, r, answer);
}

/* ---- tools/call ---- */

static char *progress_token(const struct cap_node *params)
{
  const struct cap_node *t = cap_node_get(cap_node_get(params, "_meta"), "progressToken");
  if (!t || (t->kind != CAP_NODE_STRING && t->kind != CAP_NODE_INT))
    return NULL;
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_node(&w, t);
  return cap_buf_steal(&b);
}

static struct mcp_run **free_slot(struct mcp_session *s)
{
  for (size_t i = 0; i < MCP_MAX_RUNNING; i++)
    if (!s->runs[i])
      return &s->runs[i];
  return NULL;
}

/* A new run in a free slot (NULL: none is free) */
struct mcp_run *mcp_run_new(struct mcp_session *s, const char *id_json, const char *cap)
{
  struct mcp_run **slot = free_slot(s);
  if (!slot || (s->cfg->run_take && !s->cfg->run_take(s->cfg->run_ctx, s->cfg->base.user)))
    return NULL;
  struct mcp_run *r = cap_xcalloc(1, sizeof *r);
  r->fd = -1;
  r->watch_fd = -1;
  r->id_json = cap_xstrdup(id_json);
  r->cap = cap_xstrdup(cap);
  r->modern = s->modern;
  if (s->cfg->run_take) { /* taken above: given back at its drop */
    r->run_give = s->cfg->run_give;
    r->run_ctx = s->cfg->run_ctx;
    r->run_user = cap_xstrdup(s->cfg->base.user ? s->cfg->base.user : "");
  }
  *slot = r;
  return r;
}

void mcp_tools_call(struct mcp_session *s, const char *id, const struct cap_node *params)
{
  const struct cap_node *name = cap_node_get(params, "name");
  const struct cap_node *args = cap_node_get(params, "arguments");
  if (!name || name->kind != CAP_NODE_STRING)
    return mcp_send_error(s, id, MCP_INVALID_PARAMS, "tools/call needs params.name, a string",
                          NULL);
  if (args && args->kind != CAP_NODE_OBJECT)
    return mcp_send_error(s, id, MCP_INVALID_PARAMS, "params.arguments must be an object", NULL);
  mcp_table_build(s);
  const struct mcp_tool *m = mcp_table_find(&s->table, name->u.str.ptr);
  if (!m) {
    struct cap_buf msg = {0};
    cap_buf_puts(&msg, "Unknown tool: ");
    cap_buf_append(&msg, name->u.str.ptr, strnlen(name->u.str.ptr, 200));
    cap_buf_puts(&msg, " (tools/list names the tools)");
    mcp_send_error(s, id, MCP_INVALID_PARAMS, msg.data, NULL);
    return cap_buf_free(&msg);
  }
  struct mcp_run *r = mcp_run_new(s, id, m->spec->id);
  if (!r)
    return mcp_send_tool_error(s, id,
                               "too many calls in flight in this session, or of this user in "
                               "all its sessions; wait for one to end");
  r->token_json = progress_token(params);
  r->tool = cap_xstrdup(m->tool->name);
  r->relayed = m->spec->runtime.kind == CAP_RUNTIME_MCP;
  r->tool_known = true;
  struct cap_buf a = {0};
  struct cap_jw w;
  cap_jw_init(&w, &a, false);
  if (args)
    cap_jw_node(&w, args);
  else
    cap_buf_puts(&a, "{}");
  r->args = cap_buf_steal(&a);
  if (s->modern) { /* what a relayed server may ask of it: the request's own (mcp_hold.c) */
    const struct cap_node *meta = cap_node_get(params, "_meta");
    r->client_caps = mcp_caps_offered(cap_node_get(meta, MCP_META_CLIENT_CAPS), &r->offers_sampling,
                                      &r->offers_elicitation, &r->offers_roots);
  }
  if (s->modern && mcp_hold_is_state(params)) /* the retry of a call held for input */
    return mcp_hold_resume(s, r, params);
  if (s->modern && asks(s, m->spec, m->tool)) /* input_required (mcp_ask.c), or the queue */
    return mcp_ask_modern(s, r, params);
  if (s->client_elicits && asks(s, m->spec, m->tool))
    return elicit(s, r);
  mcp_run_start(s, r, GW_ANSWER_NONE);
}

/* capsule/call (the unix socket's sessions only: `capsule call` through a
 * running serve): the capability and the tool by their own names, the
 * pipeline's outcome as the answer, {"outcome": N, "error": ..., "result":
 * ..., "terminal_on_success": ...}, so the CLI prints and exits as it
 * does alone. Policy ask goes through the client's elicitation (the CLI
 * declares it when it has a terminal to ask on). */
void mcp_capsule_call(struct mcp_session *s, const char *id, const struct cap_node *params)
{
  const struct cap_node *cap = cap_node_get(params, "capability");
  const struct cap_node *tool = cap_node_get(params, "tool");
  const struct cap_node *args = cap_node_get(params, "arguments");
  const struct cap_node *timeout = cap_node_get(params, "timeout_ms");
  if (!s->cfg->local_methods)
    return mcp_send_error(s, id, MCP_METHOD_NOT_FOUND,
                          "Method not found: capsule/call (only on serve's unix socket)", NULL);
  if (!cap || cap->kind != CAP_NODE_STRING || !tool || tool->kind != CAP_NODE_STRING ||
      (args && args->kind != CAP_NODE_OBJECT) ||
      (timeout && (timeout->kind != CAP_NODE_INT || timeout->u.num.i <= 0)))
    return mcp_send_error(s, id, MCP_INVALID_PARAMS,
                          "capsule/call needs params.capability and params.tool (strings), "
                          "params.arguments (an object) and params.timeout_ms (a positive integer) "
                          "when given",
                          NULL);
  struct mcp_run *r = mcp_run_new(s, id, cap->u.str.ptr);
  if (!r)
    return mcp_send_error(s, id, MCP_INTERNAL_ERROR,
                          "too many calls in flight in this session, or of this user in all its "
                          "sessions; wait for one to end",
                          NULL);
  r->cli = true;
  r->tool = cap_xstrdup(tool->u.str.ptr);
  r->deadline_ms = timeout ? (uint64_t)timeout->u.num.i : 0;
  struct cap_buf a = {0};
  struct cap_jw w;
  cap_jw_init(&w, &a, false);
  if (args)
    cap_jw_node(&w, args);
  else
    cap_buf_puts(&a, "{}");
  r->args = cap_buf_steal(&a);
  const struct cap_spec *spec = gw_registry_find(s->cfg->reg, r->cap);
  const struct cap_tool *t = spec ? gw_spec_tool(spec, r->tool) : NULL;
  void *cached = NULL; /* a dynamic capability's tools, as last discovered */
  const struct gw_tools *found = spec && !t && spec->tool_source == CAP_TOOL_SOURCE_DYNAMIC
                                     ? gw_tools_cached_hold(s->cfg->base.cache_dir, spec, &cached)
                                     : NULL;
  if (found)
    t = gw_tools_find(found, r->tool);
  r->relayed = spec && spec->runtime.kind == CAP_RUNTIME_MCP;
  r->tool_known = t != NULL;
  bool ask = t && s->client_elicits && asks(s, spec, t);
  gw_tools_unhold(cached);
  if (ask)
    return elicit(s, r);
  mcp_run_start(s, r, GW_ANSWER_NONE);
}

void mcp_session_cancel(struct mcp_session *s, const char *id_json, bool only_waiting)
{
  if (mcp_listen_cancel(s, id_json)) /* a subscriptions/listen stream: no call */
    return;
  for (size_t i = 0; i < MCP_MAX_RUNNING; i++) {
    struct mcp_run *r = s->runs[i];
    if (!r || r->cancelled || strcmp(r->id_json, id_json) != 0 || (only_waiting && running(r)))
      continue;
    if (!running(r)) { /* still waiting for the client's answer: nothing ran */
      s->io.send(s->io.ctx, r->id_json, true, NULL, 0);
      mcp_run_drop(s, r);
      continue;
    }
    mcp_run_cancel(s, r);
  }
}

void mcp_run_cancel(struct mcp_session *s, struct mcp_run *r)
{
  (void)s;
  mcp_hold_forget(r); /* a held call's retry finds it no more */
  if (!running(r))
    return;
  r->cancelled = true;
  if (r->relayed) /* the server is told first, as MCP says */
    mcp_relay_cancel(r);
  if (r->threaded && r->relayed) /* its exchange ends when the relay does; the report comes */
    return (void)shutdown(r->fd, SHUT_WR);
  if (r->threaded) /* its run step's child, once it has one */
    return mcp_run_signal_apart(r, now_ms());
  kill(r->pid, SIGTERM);
  r->kill_at_ms = now_ms() + MCP_KILL_GRACE_MS;
}

void mcp_call_cancel(struct mcp_session *s, const struct cap_node *params)
{
  const struct cap_node *rid = cap_node_get(params, "requestId");
  if (!rid || (rid->kind != CAP_NODE_STRING && rid->kind != CAP_NODE_INT))
    return;
  struct cap_buf b = {0};
  if (rid->kind == CAP_NODE_INT)
    cap_buf_printf(&b, "%lld", (long long)rid->u.num.i);
  else
    cap_json_quote(&b, rid->u.str.ptr, rid->u.str.len);
  mcp_session_cancel(s, b.data, false);
  cap_buf_free(&b);
}

/* ---- the transport's loop ---- */

size_t mcp_session_poll(struct mcp_session *s, struct pollfd *fds, size_t max, int *timeout_ms)
{
  size_t n = 0;
  uint64_t now = now_ms(), next = 0;
  for (size_t i = 0; i < MCP_MAX_RUNNING; i++) {
    struct mcp_run *r = s->runs[i];
    if (r && r->held && (!next || r->hold_until < next))
      next = r->hold_until; /* held for the client's input until then (mcp_hold.c) */
    if (!r || r->fd < 0)
      continue;
    if (n < max)
      fds[n++] = (struct pollfd){.fd = r->fd, .events = POLLIN};
    uint64_t due = r->token_json && !r->cancelled && !r->relayed ? r->next_progress_ms : 0;
    if (r->kill_at_ms && (!due || r->kill_at_ms < due))
      due = r->kill_at_ms;
    if (r->threaded && r->cancelled && !r->relayed && !r->term_sent)
      due = now + 100; /* its run step's child may be about to start */
    if (due && (!next || due < next))
      next = due;
  }
  *timeout_ms = !next ? -1 : next <= now ? 0 : (int)(next - now);
  return n + mcp_watch_poll(s, fds + n, n < max ? max - n : 0);
}

static void progress(struct mcp_session *s, struct mcp_run *r, uint64_t now)
{
  struct cap_buf b = {0};
  cap_buf_printf(&b,
                 "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{"
                 "\"progressToken\":%s,\"progress\":%lld,\"message\":\"running for %llu s\"}}",
                 r->token_json, (long long)++r->progress,
                 (unsigned long long)((now - r->started_ms) / 1000));
  mcp_send_buf(s, r->id_json, false, &b);
  r->next_progress_ms = now + MCP_PROGRESS_EVERY_MS;
}

/* Each full line the child sent: a relayed message, or its report. */
static void lines(struct mcp_session *s, struct mcp_run *r)
{
  char *nl;
  while (r->line.len && (nl = memchr(r->line.data, '\n', r->line.len))) {
    size_t k = (size_t)(nl - r->line.data);
    char *line = cap_xstrndup(r->line.data, k);
    memmove(r->line.data, nl + 1, r->line.len - k - 1);
    r->line.len -= k + 1;
    if (strncmp(line, "{\"relay\":", 9) == 0) /* a server's message, wrapped by the child */
      mcp_relay_line(s, r, line);
    else { /* the child's report, its last line */
      free(r->report);
      r->report = line;
    }
  }
}

/* read(2) of the run's socket, taking a watcher's connection that rides
 * with the report (mcp_run.c) into r->watch_fd */
static ssize_t read_report(struct mcp_run *r, char *buf, size_t len)
{
  return cap_recv_fd(r->fd, buf, len, &r->watch_fd);
}

/* Reads what the child wrote; true at its end. */
static bool drain(struct mcp_session *s, struct mcp_run *r)
{
  char buf[65536];
  for (;;) {
    ssize_t n = read_report(r, buf, sizeof buf);
    if (n > 0) {
      cap_buf_append(&r->line, buf, (size_t)n);
      if (s)
        lines(s, r);
      if (r->line.len > MCP_MAX_MESSAGE + 65536) /* a line the child cannot have meant */
        r->line.len = 0;
      continue;
    }
    return n == 0 || (errno != EAGAIN && errno != EINTR);
  }
}

void mcp_session_events(struct mcp_session *s, const struct pollfd *fds, size_t n)
{
  mcp_watch_events(s, fds, n);
  uint64_t now = now_ms();
  for (size_t i = 0; i < MCP_MAX_RUNNING; i++) {
    struct mcp_run *r = s->runs[i];
    if (r && r->held && now >= r->hold_until) { /* the client did not come back */
      mcp_hold_expire(s, r);
      continue;
    }
    if (!r || r->fd < 0)
      continue;
    /* a thread's report is its last word: a child forked meanwhile (by
     * another call) may hold a copy of its end, so its EOF can come late */
    if (drain(s, r) || (r->threaded && r->report)) {
      int status = 0;
      if (r->threaded) /* it closes its end and returns once the report is sent */
        pthread_join(r->thread, NULL);
      else
        while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR)
          ;
      r->pid = 0;
      r->threaded = false;
      if (r->held) { /* its report waits for the retry (mcp_hold.c) */
        r->ended = true;
        r->end_status = status;
        close(r->fd);
        r->fd = -1;
        continue;
      }
      mcp_run_finish(s, r, status);
      continue;
    }
    if (r->modern)
      mcp_hold_flush(s, r); /* its server's requests: input_required, the call held */
    if (r->threaded && r->cancelled && !r->relayed)
      mcp_run_signal_apart(r, now);
    else if (r->pid && r->kill_at_ms && now >= r->kill_at_ms) {
      kill(r->pid, SIGKILL);
      r->kill_at_ms = 0;
    }
    if (r->token_json && !r->cancelled && !r->relayed && now >= r->next_progress_ms)
      progress(s, r, now); /* a relayed server reports its own progress */
  }
}

size_t mcp_session_busy(const struct mcp_session *s)
{
  size_t k = 0;
  for (size_t i = 0; i < MCP_MAX_RUNNING; i++)
    k += s->runs[i] != NULL;
  return k;
}

/* Stops what still runs: SIGTERM, up to MCP_KILL_GRACE_MS for it to end (its
 * pipeline then audits it), SIGKILL; a thread's run as stop_threads says. */
void mcp_runs_free(struct mcp_session *s)
{
  mcp_runs_stop_threads(s);
  for (size_t i = 0; i < MCP_MAX_RUNNING; i++) /* once: a second one could end the child */
    if (s->runs[i] && s->runs[i]->pid && !s->runs[i]->cancelled) /* between its record and */
      kill(s->runs[i]->pid, SIGTERM); /* its marker's removal: a second, "interrupted" record */
  uint64_t until = now_ms() + MCP_KILL_GRACE_MS;
  for (size_t i = 0; i < MCP_MAX_RUNNING; i++) {
    struct mcp_run *r = s->runs[i];
    if (!r)
      continue;
    while (r->pid && r->fd >= 0 && now_ms() < until && !drain(NULL, r)) {
      struct pollfd p = {.fd = r->fd, .events = POLLIN};
      poll(&p, 1, 100);
    }
    if (r->pid) {
      kill(r->pid, SIGKILL);
      while (waitpid(r->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    }
    mcp_run_drop(s, r);
  }
}
