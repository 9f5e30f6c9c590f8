/* A tiny MCP server in C over stdio (newline-delimited JSON-RPC, as the
 * MCP spec's stdio transport says), for capsule to run as a sandboxed
 * capability: two tools, `test_simple_text` (the text the official
 * conformance fixture of that name answers) and `echo`. It is the cheap
 * trivial tool bench/mcp/run.sh calls through `capsule serve`, beside the
 * official TypeScript SDK's own server serving the same tool. Debian:
 * libjansson-dev. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};
static const char simple_text[] = "This is a simple text response for testing.";

static void send_msg(json_t *msg)
{
  char *s = json_dumps(msg, JSON_COMPACT);
  if (s) {
    fputs(s, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    free(s);
  }
  json_decref(msg);
}

static void send_result(json_t *id, json_t *result)
{
  send_msg(json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

static void send_error(json_t *id, int code, const char *message)
{
  send_msg(json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                     "error", "code", code, "message", message));
}

static json_t *initialize(json_t *params)
{
  const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
  const char *v = versions[0];
  for (size_t i = 0; asked && i < sizeof versions / sizeof versions[0]; i++)
    if (strcmp(asked, versions[i]) == 0)
      v = versions[i];
  return json_pack("{s:s, s:{s:{}}, s:{s:s, s:s}}", "protocolVersion", v, "capabilities", "tools",
                   "serverInfo", "name", "capsule-example-mcp-c", "version", "0.1.0");
}

static json_t *tools_list(void)
{
  return json_pack("{s:[{s:s, s:s, s:{s:s, s:{}}}, {s:s, s:s, s:{s:s, s:{s:{s:s}}, s:[s]}}]}",
                   "tools", "name", "test_simple_text", "description", "Returns simple text",
                   "inputSchema", "type", "object", "properties", "name", "echo", "description",
                   "Returns the text it is given", "inputSchema", "type", "object", "properties",
                   "text", "type", "string", "required", "text");
}

static json_t *text_result(const char *text)
{
  return json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text);
}

static void tools_call(json_t *id, json_t *params)
{
  const char *name = json_string_value(json_object_get(params, "name"));
  json_t *args = json_object_get(params, "arguments");
  if (name && strcmp(name, "test_simple_text") == 0)
    send_result(id, text_result(simple_text));
  else if (name && strcmp(name, "echo") == 0 && json_is_string(json_object_get(args, "text")))
    send_result(id, text_result(json_string_value(json_object_get(args, "text"))));
  else if (name && strcmp(name, "echo") == 0)
    send_error(id, -32602, "echo: arguments.text (a string) is required");
  else
    send_error(id, -32602, "unknown tool");
}

static void handle(const char *line)
{
  json_error_t jerr;
  json_t *msg = json_loads(line, 0, &jerr);
  json_t *id = json_object_get(msg, "id");
  const char *method = json_string_value(json_object_get(msg, "method"));
  json_t *params = json_object_get(msg, "params");
  if (!msg)
    send_error(NULL, -32700, "parse error: one JSON-RPC message a line");
  else if (!json_is_object(msg))
    send_error(NULL, -32600, "invalid request: a JSON-RPC message is an object");
  else if (!method || !id)
    ; /* a notification, or an answer to a request this server never sends */
  else if (strcmp(method, "initialize") == 0)
    send_result(id, initialize(params));
  else if (strcmp(method, "ping") == 0)
    send_result(id, json_object());
  else if (strcmp(method, "tools/list") == 0)
    send_result(id, tools_list());
  else if (strcmp(method, "tools/call") == 0)
    tools_call(id, params);
  else
    send_error(id, -32601, "method not found");
  json_decref(msg);
}

int main(void)
{
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  while ((n = getline(&line, &cap, stdin)) > 0)
    if (n > 1)
      handle(line);
  free(line);
  return 0;
}
