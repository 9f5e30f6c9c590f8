/* libFuzzer target for the MCP dispatcher (src/front/mcp.c): the input,
 * cut at newlines, is a session's messages (the first one, when it does
 * not say otherwise, after an initialize); every answer it sends must be
 * one JSON object with "jsonrpc": "2.0". The registry is empty, so no
 * call reaches a sandbox. A line "H:VERSION\tMETHOD\tNAME" (a field left
 * empty: that header absent) sets the HTTP headers the messages after it
 * are checked against (mcp_headers_match, 2026-07-28's header checks):
 * a mismatch must say why. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "front/mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_answer(void *ctx, const char *for_id, bool final, const char *json, size_t len)
{
  (void)ctx;
  (void) final;
  if (!json) { /* a request ended unanswered (cancelled): only as its last word */
    if (!final || !for_id)
      abort();
    return;
  }
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  if (cap_json_parse(doc, json, len, "answer", 0, &d) != 0 || doc->root->kind != CAP_NODE_OBJECT)
    abort();
  const struct cap_node *v = cap_node_get(doc->root, "jsonrpc");
  if (!v || v->kind != CAP_NODE_STRING || strcmp(v->u.str.ptr, "2.0") != 0)
    abort();
  cap_diags_free(&d);
  cap_doc_free(doc);
}

/* Sets h's fields from "VERSION\tMETHOD\tNAME" in line (edited in place) */
static void set_headers(char *line, struct mcp_http_headers *h)
{
  const char **field[] = {&h->version, &h->method, &h->name};
  for (size_t i = 0; i < 3; i++) {
    char *tab = line ? strchr(line, '\t') : NULL;
    if (tab)
      *tab = '\0';
    *field[i] = line && *line ? line : NULL;
    line = tab ? tab + 1 : NULL;
  }
}

static void check_headers(const char *msg, size_t len, const struct mcp_http_headers *h)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  if (cap_json_parse(doc, msg, len, "body", 64, &d) == 0) {
    char *why = NULL;
    if (!mcp_headers_match(doc->root, h, &why) && !why)
      abort();
    free(why);
  }
  cap_diags_free(&d);
  cap_doc_free(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
                             "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}";
  struct gw_registry reg = {.dir = "fuzz"};
  struct mcp_config cfg = {.reg = &reg, .skip_readiness = true, .page_size = 2};
  struct mcp_io io = {.send = check_answer};
  struct mcp_session *s = mcp_session_new(&cfg, &io);
  if (size && data[0] != '!')
    mcp_session_receive(s, init, sizeof init - 1);
  const char *p = (const char *)data, *end = p + size;
  struct mcp_http_headers h = {0};
  char *hline = NULL;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    if (len >= 2 && p[0] == 'H' && p[1] == ':') {
      free(hline);
      hline = strndup(p + 2, len - 2); /* a NUL inside ends the headers there */
      set_headers(hline, &h);
      p += len + (nl ? 1 : 0);
      continue;
    }
    check_headers(p, len, &h);
    mcp_session_receive(s, p, len);
    struct mcp_fast_msg *fm = mcp_fast_parse(p, len); /* serve's fast path reads it first */
    mcp_fast_free(mcp_fast_take(s, fm));
    mcp_fast_msg_free(fm);
    p += len + (nl ? 1 : 0);
  }
  free(hline);
  mcp_session_free(s);
  return 0;
}
