/* The 2026-07-28 Streamable HTTP's standard headers against the body
 * (front/mcp.h): MCP-Protocol-Version must equal the body's
 * params._meta protocolVersion, Mcp-Method the method, Mcp-Name the
 * params.name (tools/call, prompts/get) or params.uri (resources/read),
 * decoded first when it is "=?base64?...?=". Values are visible ASCII,
 * space or tab. */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "front/mcp_internal.h"

#define SENTINEL_HEAD "=?base64?"
#define SENTINEL_TAIL "?="

static bool header_chars_ok(const char *v)
{
  for (const unsigned char *p = (const unsigned char *)v; *p; p++)
    if ((*p < 0x20 && *p != '\t') || *p > 0x7e)
      return false;
  return true;
}

/* The header's value, decoded from the Base64 sentinel form when it is
 * one (NULL: not valid Base64); *len its length */
static char *header_value(const char *v, size_t *len)
{
  size_t n = strlen(v), head = strlen(SENTINEL_HEAD), tail = strlen(SENTINEL_TAIL);
  if (n < head + tail || strncmp(v, SENTINEL_HEAD, head) != 0 ||
      strcmp(v + n - tail, SENTINEL_TAIL) != 0) {
    *len = n;
    return cap_xstrdup(v);
  }
  size_t enc = n - head - tail;
  char *out = cap_xcalloc(1, enc + 1);
  if (sodium_base642bin((unsigned char *)out, enc, v + head, enc, NULL, len, NULL,
                        sodium_base64_VARIANT_ORIGINAL) != 0) {
    free(out);
    return NULL;
  }
  return out;
}

static const char *const named_by[][2] = {
    {"tools/call", "name"}, {"prompts/get", "name"}, {"resources/read", "uri"}};

/* The body field Mcp-Name mirrors for method, or NULL */
static const char *name_field(const char *method)
{
  for (size_t i = 0; i < ARRAY_SIZE(named_by); i++)
    if (strcmp(method, named_by[i][0]) == 0)
      return named_by[i][1];
  return NULL;
}

static bool fail(char **why, char *message)
{
  *why = message;
  return false;
}

static bool name_matches(const struct cap_node *msg, const char *method, const char *header,
                         char **why)
{
  const char *field = name_field(method);
  const struct cap_node *body = field ? cap_node_get(cap_node_get(msg, "params"), field) : NULL;
  if (!body || body->kind != CAP_NODE_STRING) /* none to mirror (the dispatcher says why) */
    return true;
  if (!header)
    return fail(why, cap_xasprintf("Header mismatch: a %s request needs the Mcp-Name header "
                                   "(its params.%s)",
                                   method, field));
  size_t len;
  _cleanup_free_ char *value = header_value(header, &len);
  if (!value)
    return fail(why, cap_xstrdup("Header mismatch: Mcp-Name is not valid Base64 in its "
                                 "=?base64?...?= form"));
  if (len != body->u.str.len || memcmp(value, body->u.str.ptr, len) != 0)
    return fail(why, cap_xasprintf("Header mismatch: Mcp-Name does not match the body's "
                                   "params.%s",
                                   field));
  return true;
}

bool mcp_headers_match(const struct cap_node *msg, const struct mcp_http_headers *h, char **why)
{
  *why = NULL;
  const struct cap_node *pv =
      cap_node_get(cap_node_get(cap_node_get(msg, "params"), "_meta"), MCP_META_VERSION);
  bool modern = pv || (h->version && strcmp(h->version, MCP_MODERN) == 0);
  if (!modern || !msg || msg->kind != CAP_NODE_OBJECT)
    return true; /* the 2025 revisions: no such checks */
  const char *values[] = {h->version, h->method, h->name};
  for (size_t i = 0; i < ARRAY_SIZE(values); i++)
    if (values[i] && !header_chars_ok(values[i]))
      return fail(why, cap_xstrdup("Header mismatch: a header holds characters HTTP does not "
                                   "allow in a value (send it in the =?base64?...?= form)"));
  const struct cap_node *method = cap_node_get(msg, "method");
  const struct cap_node *id = cap_node_get(msg, "id");
  if (!method || method->kind != CAP_NODE_STRING)
    return true; /* not a request or a notification: the dispatcher answers */
  bool request = id != NULL;
  if (request && (!pv || pv->kind != CAP_NODE_STRING))
    return fail(why, cap_xstrdup("Header mismatch: MCP-Protocol-Version names 2026-07-28 and "
                                 "the body's params._meta names no protocolVersion"));
  if (pv && pv->kind == CAP_NODE_STRING && (!h->version || strcmp(h->version, pv->u.str.ptr) != 0))
    return fail(why, cap_xstrdup(h->version ? "Header mismatch: MCP-Protocol-Version does not "
                                              "match the body's params._meta protocolVersion"
                                            : "Header mismatch: the MCP-Protocol-Version header "
                                              "is required"));
  if (request && !h->method)
    return fail(why, cap_xstrdup("Header mismatch: the Mcp-Method header is required"));
  if (h->method && strcmp(h->method, method->u.str.ptr) != 0)
    return fail(why, cap_xstrdup("Header mismatch: Mcp-Method does not match the body's method"));
  return !request || name_matches(msg, method->u.str.ptr, h->name, why);
}
