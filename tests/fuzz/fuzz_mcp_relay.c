/* libFuzzer target for the relay of a third-party MCP server's messages
 * (src/front/mcp_relay.c): the input, cut at newlines, is what a call's
 * child sends ({"relay": MSG} lines: a hostile server's notifications and
 * requests) and, on lines starting with 'C', the client's answers to the
 * relayed requests. The client declared sampling, elicitation and roots,
 * so requests are relayed. Every message the session sends must be one
 * JSON object with "jsonrpc": "2.0"; nothing reaches a process (the run
 * has no child). Lines starting with 'M' go to a second run, made in the
 * 2026-07-28 form (its server's requests held as input requests,
 * mcp_hold.c: input_required, the call held); 'R' lines are a retry of
 * it whose inputResponses is the rest of the line, with the requestState
 * the session last gave; 'S' lines a retry whose requestState is the
 * rest of the line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "front/mcp_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char last_state[256]; /* the last input_required's requestState */

static void check_message(void *ctx, const char *for_id, bool final, const char *json, size_t len)
{
  (void)ctx;
  (void)for_id;
  (void) final;
  if (!json)
    return; /* a request ended without an answer */
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  if (cap_json_parse(doc, json, len, "message", 0, &d) != 0 || doc->root->kind != CAP_NODE_OBJECT)
    abort();
  const struct cap_node *v = cap_node_get(doc->root, "jsonrpc");
  if (!v || v->kind != CAP_NODE_STRING || strcmp(v->u.str.ptr, "2.0") != 0)
    abort();
  const struct cap_node *st = cap_node_get(cap_node_get(doc->root, "result"), "requestState");
  if (st && st->kind == CAP_NODE_STRING && st->u.str.len < sizeof last_state)
    memcpy(last_state, st->u.str.ptr, st->u.str.len + 1);
  cap_diags_free(&d);
  cap_doc_free(doc);
}

static void client_answer(struct mcp_session *s, const char *p, size_t len)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  if (cap_json_parse(doc, p, len, "answer", 64, &d) == 0) {
    const struct cap_node *id = cap_node_get(doc->root, "id");
    if (id && id->kind == CAP_NODE_INT)
      mcp_relay_answer(s, id->u.num.i, doc->root);
  }
  cap_diags_free(&d);
  cap_doc_free(doc);
}

static struct mcp_run *modern_run(struct mcp_session *s)
{
  struct mcp_run *m = mcp_run_new(s, "2", "fuzz");
  m->relayed = true;
  m->modern = true;
  m->tool = strdup("tool");
  m->args = strdup("{}");
  m->offers_sampling = m->offers_elicitation = m->offers_roots = true;
  return m;
}

/* A retry of the modern run: a tools/call's params with state and the
 * responses (JSON text; anything else is taken as none) */
static void retry(struct mcp_session *s, const char *state, const char *responses, size_t len)
{
  struct cap_buf b = {0};
  cap_buf_puts(&b, "{\"requestState\":");
  cap_json_quote(&b, state, strlen(state));
  cap_buf_puts(&b, ",\"inputResponses\":");
  cap_buf_append(&b, responses, len);
  cap_buf_putc(&b, '}');
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  if (cap_json_parse(doc, b.data, b.len, "retry", 64, &d) != 0) {
    cap_diags_free(&d);
    cap_doc_free(doc);
    doc = cap_doc_new();
    d = (struct cap_diags){0};
    cap_buf_free(&b);
    cap_buf_puts(&b, "{\"requestState\":");
    cap_json_quote(&b, state, strlen(state));
    cap_buf_putc(&b, '}');
    cap_json_parse(doc, b.data, b.len, "retry", 64, &d);
  }
  struct mcp_run *run = mcp_run_new(s, "3", "fuzz");
  if (run) {
    run->tool = strdup("tool");
    run->args = strdup("{}");
    run->offers_sampling = true;
    if (mcp_hold_is_state(doc->root))
      mcp_hold_resume(s, run, doc->root);
    else
      mcp_run_drop(s, run);
  }
  cap_buf_free(&b);
  cap_diags_free(&d);
  cap_doc_free(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static const char init[] =
      "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
      "\"2025-11-25\",\"capabilities\":{\"sampling\":{},\"elicitation\":{},\"roots\":{}}}}";
  struct gw_registry reg = {.dir = "fuzz"};
  struct mcp_config cfg = {.reg = &reg, .skip_readiness = true};
  struct mcp_io io = {.send = check_message};
  struct mcp_session *s = mcp_session_new(&cfg, &io);
  mcp_session_receive(s, init, sizeof init - 1);
  struct mcp_run *r = mcp_run_new(s, "1", "fuzz");
  r->relayed = true;
  r->token_json = strdup("7");
  struct mcp_run *m = modern_run(s);
  last_state[0] = 0;
  const char *p = (const char *)data, *end = p + size;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    if (len && p[0] == 'C')
      client_answer(s, p + 1, len - 1);
    else if (len && p[0] == 'M') {
      mcp_relay_line(s, m, strndup(p + 1, len - 1));
      mcp_hold_flush(s, m);
    } else if (len && p[0] == 'R')
      retry(s, last_state[0] ? last_state : "h1.0.0.0", p + 1, len - 1);
    else if (len && p[0] == 'S') {
      char *state = strndup(p + 1, len - 1);
      retry(s, state, "{}", 2);
      free(state);
    } else
      mcp_relay_line(s, r, strndup(p, len));
    p += len + (nl ? 1 : 0);
  }
  mcp_session_free(s);
  return 0;
}
