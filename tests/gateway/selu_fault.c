/* A Selu capability that misbehaves on request, for tests/gateway/selu.sh.
 * Start-up by --mode: normal, unhealthy (HealthCheck answers false),
 * nolisten (never listens), exit-after-call (exits after each answer: dead
 * between calls), slow-start (listens after 2 s), bad-discovery (list_tools
 * answers a tool without a schema); --protocol service|capability|both
 * (which of Selu's two contracts it serves; both by default). Tools: ok,
 * echo (tool, parameters, context, protocol, config), env {name}, pid,
 * crash (exits mid-call), hang,
 * garbage (not JSON), big {bytes}, fail, sleep {ms}, spin {ms} (burns CPU),
 * done, guarded,
 * list_tools (for tool_source: dynamic) and dyn_upper {text};
 * write {path, text} and read {path} (a file, for workspaces and caches);
 * inflight {ms}: sleeps, and answers the most calls this server has had
 * in progress at once (max_concurrent is enforced); instance: a random id
 * drawn at start (the pid is the same in every sandbox's pid namespace).
 * Usage: selu_fault [--mode MODE] [--protocol P] [ADDRESS] */
#include <ctype.h>
#include <stdatomic.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "selu_server.h"

static bool exit_after_call, bad_discovery;
static atomic_int inflight, inflight_max;
static unsigned long long instance_id;

static long param_int(json_t *params, const char *key, long def)
{
  json_t *v = json_object_get(params, key);
  return json_is_integer(v) ? (long)json_integer_value(v) : def;
}

/* write {path, text} (appends), read {path}: {"text": ...} or the error. */
static void file_tool(const char *tool, json_t *params, struct selu_reply *reply)
{
  json_t *p = json_object_get(params, "path"), *t = json_object_get(params, "text");
  const char *path = json_is_string(p) ? json_string_value(p) : "";
  FILE *f = fopen(path, strcmp(tool, "write") == 0 ? "a" : "r");
  if (!f) {
    selu_reply_error(reply, "%s %s: %m", tool, path);
    return;
  }
  if (strcmp(tool, "write") == 0) {
    int bad = fputs(json_is_string(t) ? json_string_value(t) : "", f) < 0;
    if (fclose(f) != 0 || bad)
      selu_reply_error(reply, "write %s: %m", path);
    else
      selu_reply_ok(reply, "{\"written\":true}");
    return;
  }
  char buf[4096];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  json_t *out = json_pack("{s:s}", "text", buf);
  selu_reply_ok_owned(reply, json_dumps(out, JSON_COMPACT));
  json_decref(out);
}

static void handle(void *ctx, const struct selu_call *call, struct selu_reply *reply)
{
  (void)ctx;
  reply->exit_after = exit_after_call;
  json_t *params = json_loads(call->parameters[0] ? call->parameters : "{}", 0, NULL);
  const char *tool = call->tool_name;
  if (strcmp(tool, "ok") == 0 || strcmp(tool, "done") == 0 || strcmp(tool, "guarded") == 0) {
    selu_reply_ok(reply, "{\"ok\":true}");
  } else if (strcmp(tool, "echo") == 0) {
    json_t *context = json_object();
    for (size_t i = 0; i < call->n_context; i++)
      json_object_set_new(context, call->context[i].key, json_string(call->context[i].value));
    json_t *config = call->config_json[0] ? json_loads(call->config_json, 0, NULL) : NULL;
    json_t *out = json_pack("{s:s, s:O?, s:o, s:s, s:o?, s:b}", "tool", tool, "parameters", params,
                            "context", context, "protocol",
                            call->protocol == SELU_SERVE_CAPABILITY ? "capability" : "service",
                            "config", config, "streamed", call->streamed);
    selu_reply_ok_owned(reply, json_dumps(out, JSON_COMPACT));
    json_decref(out);
  } else if (strcmp(tool, "env") == 0) {
    json_t *name = json_object_get(params, "name");
    const char *v = json_is_string(name) ? getenv(json_string_value(name)) : NULL;
    json_t *out = json_pack("{s:s?}", "value", v);
    selu_reply_ok_owned(reply, json_dumps(out, JSON_COMPACT));
    json_decref(out);
  } else if (strcmp(tool, "write") == 0 || strcmp(tool, "read") == 0) {
    file_tool(tool, params, reply);
  } else if (strcmp(tool, "inflight") == 0) {
    int now = atomic_fetch_add(&inflight, 1) + 1;
    for (int seen = atomic_load(&inflight_max);
         now > seen && !atomic_compare_exchange_weak(&inflight_max, &seen, now);)
      ;
    long ms = param_int(params, "ms", 100);
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    atomic_fetch_sub(&inflight, 1);
    char buf[64];
    snprintf(buf, sizeof buf, "{\"max_inflight\":%d}", atomic_load(&inflight_max));
    selu_reply_ok(reply, buf);
  } else if (strcmp(tool, "instance") == 0) {
    char buf[64];
    snprintf(buf, sizeof buf, "{\"instance\":\"%016llx\"}", instance_id);
    selu_reply_ok(reply, buf);
  } else if (strcmp(tool, "pid") == 0) {
    char buf[64];
    snprintf(buf, sizeof buf, "{\"pid\":%d}", (int)getpid());
    selu_reply_ok(reply, buf);
  } else if (strcmp(tool, "crash") == 0) {
    fprintf(stderr, "selu_fault: crashing on purpose\n");
    _exit(3);
  } else if (strcmp(tool, "hang") == 0) {
    for (;;)
      pause();
  } else if (strcmp(tool, "garbage") == 0) {
    selu_reply_ok(reply, "not json{");
  } else if (strcmp(tool, "big") == 0) {
    long n = param_int(params, "bytes", 1024);
    char *s = malloc((size_t)n + 3);
    if (!s) {
      selu_reply_error(reply, "cannot allocate %ld bytes", n);
    } else {
      s[0] = '"';
      memset(s + 1, 'a', (size_t)n);
      s[n + 1] = '"';
      s[n + 2] = '\0';
      selu_reply_ok_owned(reply, s);
    }
  } else if (strcmp(tool, "fail") == 0) {
    selu_reply_error(reply, "the tool failed on purpose");
  } else if (strcmp(tool, "sleep") == 0) {
    long ms = param_int(params, "ms", 100);
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    char buf[64];
    snprintf(buf, sizeof buf, "{\"slept_ms\":%ld}", ms);
    selu_reply_ok(reply, buf);
  } else if (strcmp(tool, "spin") == 0) {
    long ms = param_int(params, "ms", 100);
    struct timespec t0, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    volatile unsigned long x = 0;
    do {
      for (int i = 0; i < 100000; i++)
        x += (unsigned long)i;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
    char buf[64];
    snprintf(buf, sizeof buf, "{\"spun_ms\":%ld}", ms);
    selu_reply_ok(reply, buf);
  } else if (strcmp(tool, "list_tools") == 0 && bad_discovery) {
    selu_reply_ok(reply, "{\"tools\":[{\"name\":\"no_schema\"}]}");
  } else if (strcmp(tool, "list_tools") == 0) {
    selu_reply_ok(reply,
                  "{\"tools\":[{\"name\":\"dyn_upper\",\"description\":\"Upper-cases text.\","
                  "\"input_schema\":{\"type\":\"object\",\"properties\":{\"text\":{\"type\":"
                  "\"string\"}},\"required\":[\"text\"],\"additionalProperties\":false},"
                  "\"recommended_policy\":\"allow\"}]}");
  } else if (strcmp(tool, "dyn_upper") == 0) {
    json_t *text = json_object_get(params, "text");
    char *up = strdup(json_is_string(text) ? json_string_value(text) : "");
    for (char *p = up; *p; p++)
      *p = (char)toupper((unsigned char)*p);
    json_t *out = json_pack("{s:s}", "text", up);
    selu_reply_ok_owned(reply, json_dumps(out, JSON_COMPACT));
    json_decref(out);
    free(up);
  } else {
    selu_reply_error(reply, "unknown tool: %s", tool);
  }
  json_decref(params);
}

int main(int argc, char **argv)
{
  const char *mode = "normal", *addr = SELU_DEFAULT_ADDR;
  if (getrandom(&instance_id, sizeof instance_id, 0) != sizeof instance_id)
    instance_id = (unsigned long long)time(NULL) ^ (unsigned long long)getpid() << 32;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc)
      mode = argv[++i];
    else if (strcmp(argv[i], "--protocol") == 0 && i + 1 < argc) {
      const char *p = argv[++i];
      selu_set_protocols(strcmp(p, "service") == 0      ? SELU_SERVE_SERVICE
                         : strcmp(p, "capability") == 0 ? SELU_SERVE_CAPABILITY
                         : strcmp(p, "none") == 0       ? 0
                                                  : SELU_SERVE_SERVICE | SELU_SERVE_CAPABILITY);
    } else
      addr = argv[i];
  }
  if (strcmp(mode, "nolisten") == 0) {
    for (;;)
      pause();
  }
  if (strcmp(mode, "slow-start") == 0)
    sleep(2);
  if (strcmp(mode, "unhealthy") == 0)
    selu_set_healthy(false);
  exit_after_call = strcmp(mode, "exit-after-call") == 0;
  bad_discovery = strcmp(mode, "bad-discovery") == 0;
  return selu_serve(addr, handle, NULL) == 0 ? 0 : 1;
}
