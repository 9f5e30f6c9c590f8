/* A tiny MCP server in C over stdio (newline-delimited JSON-RPC, as the
 * MCP spec's stdio transport says), for capsule to run as a sandboxed
 * capability: tools `test_simple_text` (the text the official
 * conformance fixture of that name answers) and `echo`; `touch`, which
 * bumps the resource test://counter (argv[1] names another URI) and, a
 * moment after its answer (so
 * between calls), tells a subscriber notifications/resources/updated;
 * `connect`, which asks the egress proxy ($HTTPS_PROXY) for a tunnel to
 * host:port and answers its status line; `wait`, a slow tool. It is the cheap trivial tool
 * bench/mcp/run.sh calls through `capsule serve`, beside the official
 * TypeScript SDK's own server serving the same tool. Debian:
 * libjansson-dev. */
#include <jansson.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *counter_uri = "test://counter";
#define UPDATE_AFTER_MS 200

static long counter;
static int counter_subscribed;
static long long update_at; /* CLOCK_MONOTONIC ms; 0: none due */

static long long now_ms(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

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
  return json_pack("{s:s, s:{s:{}, s:{s:b}}, s:{s:s, s:s}}", "protocolVersion", v, "capabilities",
                   "tools", "resources", "subscribe", 1, "serverInfo", "name",
                   "capsule-example-mcp-c", "version", "0.1.0");
}

static json_t *tool(const char *name, const char *description, json_t *schema)
{
  return json_pack("{s:s, s:s, s:o}", "name", name, "description", description, "inputSchema",
                   schema);
}

static json_t *tools_list(void)
{
  json_t *none = json_pack("{s:s, s:{}}", "type", "object", "properties");
  return json_pack(
      "{s:[o, o, o, o, o]}", "tools", tool("test_simple_text", "Returns simple text", none),
      tool("echo", "Returns the text it is given",
           json_pack("{s:s, s:{s:{s:s}}, s:[s]}", "type", "object", "properties", "text", "type",
                     "string", "required", "text")),
      tool("touch", "Bumps test://counter; a subscriber is told a moment later",
           json_deep_copy(none)),
      tool("connect", "Asks the egress proxy for a tunnel to host:port; answers its status line",
           json_pack("{s:s, s:{s:{s:s}, s:{s:s}}, s:[s, s]}", "type", "object", "properties",
                     "host", "type", "string", "port", "type", "integer", "required", "host",
                     "port")),
      tool("wait", "Answers after ms milliseconds (at most 60000)",
           json_pack("{s:s, s:{s:{s:s}}, s:[s]}", "type", "object", "properties", "ms", "type",
                     "integer", "required", "ms")));
}

/* The proxy's answer to CONNECT host:port, or why there is none */
static void tunnel(const char *host, long port, char *out, size_t len)
{
  const char *proxy = getenv("HTTPS_PROXY");
  char phost[256] = "", pport[16] = "";
  if (!proxy || sscanf(proxy, "http://%255[^:]:%15[0-9]", phost, pport) != 2) {
    snprintf(out, len, "no egress proxy ($HTTPS_PROXY)");
    return;
  }
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
  int fd = -1;
  if (getaddrinfo(phost, pport, &hints, &ai) == 0 && ai) {
    fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
      close(fd);
      fd = -1;
    }
  }
  if (ai)
    freeaddrinfo(ai);
  if (fd < 0) {
    snprintf(out, len, "cannot reach the egress proxy");
    return;
  }
  char req[600];
  int n = snprintf(req, sizeof req, "CONNECT %s:%ld HTTP/1.1\r\nHost: %s:%ld\r\n\r\n", host, port,
                   host, port);
  ssize_t got = write(fd, req, (size_t)n) == n ? read(fd, out, len - 1) : -1;
  out[got > 0 ? got : 0] = '\0';
  out[strcspn(out, "\r\n")] = '\0';
  if (got <= 0)
    snprintf(out, len, "the egress proxy closed the connection");
  close(fd);
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
  else if (name && strcmp(name, "touch") == 0) {
    char text[64];
    snprintf(text, sizeof text, "counter %ld", ++counter);
    send_result(id, text_result(text));
    if (counter_subscribed)
      update_at = now_ms() + UPDATE_AFTER_MS;
  } else if (name && strcmp(name, "wait") == 0) {
    long long ms = json_integer_value(json_object_get(args, "ms"));
    struct timespec t = {.tv_sec = (ms > 60000 ? 60000
                                    : ms < 0   ? 0
                                               : ms) /
                                   1000,
                         .tv_nsec = ((ms > 60000 ? 60000
                                      : ms < 0   ? 0
                                                 : ms) %
                                     1000) *
                                    1000000};
    nanosleep(&t, NULL); /* the server does nothing else meanwhile: a slow tool */
    send_result(id, text_result("waited"));
  } else if (name && strcmp(name, "connect") == 0 &&
             json_is_string(json_object_get(args, "host"))) {
    char status[512];
    tunnel(json_string_value(json_object_get(args, "host")),
           (long)json_integer_value(json_object_get(args, "port")), status, sizeof status);
    send_result(id, text_result(status));
  } else
    send_error(id, -32602, "unknown tool");
}

static void handle(const char *line)
{
  json_error_t jerr;
  json_t *msg = json_loads(line, 0, &jerr);
  json_t *id = json_object_get(msg, "id");
  const char *method = json_string_value(json_object_get(msg, "method"));
  json_t *params = json_object_get(msg, "params");
  const char *uri = json_string_value(json_object_get(params, "uri"));
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
  else if (strcmp(method, "resources/list") == 0)
    send_result(id, json_pack("{s:[{s:s, s:s, s:s}]}", "resources", "uri", counter_uri, "name",
                              "counter", "mimeType", "text/plain"));
  else if (strcmp(method, "resources/read") == 0 && uri && strcmp(uri, counter_uri) == 0) {
    char text[32];
    snprintf(text, sizeof text, "%ld", counter);
    send_result(id, json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", counter_uri, "mimeType",
                              "text/plain", "text", text));
  } else if ((strcmp(method, "resources/subscribe") == 0 ||
              strcmp(method, "resources/unsubscribe") == 0) &&
             uri && strcmp(uri, counter_uri) == 0) {
    counter_subscribed = strcmp(method, "resources/subscribe") == 0;
    send_result(id, json_object());
  } else if (strncmp(method, "resources/", 10) == 0)
    send_error(id, -32002, "resource not found");
  else
    send_error(id, -32601, "method not found");
  json_decref(msg);
}

/* A due update: told now, between calls */
static void update_due(void)
{
  if (!update_at || now_ms() < update_at)
    return;
  update_at = 0;
  send_msg(json_pack("{s:s, s:s, s:{s:s}}", "jsonrpc", "2.0", "method",
                     "notifications/resources/updated", "params", "uri", counter_uri));
}

int main(int argc, char **argv)
{
  if (argc > 1)
    counter_uri = argv[1];
  size_t cap = 65536, len = 0;
  char *buf = malloc(cap);
  for (;;) {
    long long wait = update_at ? update_at - now_ms() : -1;
    struct pollfd p = {.fd = 0, .events = POLLIN};
    if (poll(&p, 1, update_at ? (wait < 0 ? 0 : (int)wait) : -1) == 0) {
      update_due();
      continue;
    }
    if (len + 65536 > cap)
      buf = realloc(buf, cap *= 2);
    ssize_t n = read(0, buf + len, cap - len - 1);
    if (n <= 0)
      break;
    len += (size_t)n;
    char *start = buf, *nl;
    while ((nl = memchr(start, '\n', len - (size_t)(start - buf)))) {
      *nl = '\0';
      if (nl > start)
        handle(start);
      start = nl + 1;
    }
    len -= (size_t)(start - buf);
    memmove(buf, start, len);
    update_due();
  }
  free(buf);
  return 0;
}
