/* libFuzzer target for the relay of a third-party MCP server's messages
 * (src/front/mcp_relay.c): the input, cut at newlines, is what a call's
 * child sends ({"relay": MSG} lines: a hostile server's notifications and
 * requests) and, on lines starting with 'C', the client's answers to the
 * relayed requests. The client declared sampling, elicitation and roots,
 * so requests are relayed. Every message the session sends must be one
 * JSON object with "jsonrpc": "2.0"; nothing reaches a process (the run
 * has no child). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "front/mcp_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_message(void *ctx, const char *for_id, bool final, const char *json, size_t len)
{
  (void)ctx;
  (void)for_id;
  (void) final;
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  if (cap_json_parse(doc, json, len, "message", 0, &d) != 0 || doc->root->kind != CAP_NODE_OBJECT)
    abort();
  const struct cap_node *v = cap_node_get(doc->root, "jsonrpc");
  if (!v || v->kind != CAP_NODE_STRING || strcmp(v->u.str.ptr, "2.0") != 0)
    abort();
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
  const char *p = (const char *)data, *end = p + size;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    if (len && p[0] == 'C')
      client_answer(s, p + 1, len - 1);
    else
      mcp_relay_line(s, r, strndup(p, len));
    p += len + (nl ? 1 : 0);
  }
  mcp_session_free(s);
  return 0;
}
