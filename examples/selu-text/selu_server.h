/* Serve Selu's capability contracts from C, on gRPC core's C API and
 * protobuf-c: the seed's selu.capability.v1.CapabilityService (Invoke,
 * HealthCheck) and the orchestrator's current selu.capability.v1.Capability
 * (Invoke, StreamInvoke, Healthcheck), both by default
 * (selu_set_protocols). One handler serves either.
 *
 * The caller writes one handler for Invoke; this layer runs the server:
 * it listens, decodes each InvokeRequest, runs the handler on a thread of
 * its own (so a slow or stuck tool call does not hold up the others or the
 * health checks), encodes the InvokeResponse, answers HealthCheck, and
 * shuts down on SIGTERM or SIGINT.
 *
 *   static void handle(void *ctx, const struct selu_call *call, struct selu_reply *reply)
 *   {
 *     if (strcmp(call->tool_name, "hello") == 0)
 *       selu_reply_ok(reply, "{\"hello\": \"world\"}");
 *     else
 *       selu_reply_error(reply, "unknown tool \"%s\"", call->tool_name);
 *   }
 *   int main(void) { return selu_serve("0.0.0.0:50051", handle, NULL) == 0 ? 0 : 1; }
 */
#ifndef SELU_SERVER_H
#define SELU_SERVER_H

#include <stdbool.h>
#include <stddef.h>

/* Selu's capability port: the orchestrator connects here. */
#define SELU_DEFAULT_ADDR "0.0.0.0:50051"

/* The contracts (a bit set for selu_set_protocols, and selu_call.protocol). */
#define SELU_SERVE_SERVICE 1u    /* the seed's CapabilityService */
#define SELU_SERVE_CAPABILITY 2u /* the orchestrator's Capability */

struct selu_kv {
  const char *key;
  const char *value;
};

/* One Invoke, as the handler sees it. Every string is NUL-terminated and
 * lives until the handler returns. */
struct selu_call {
  const char *tool_name;
  /* the tool's parameters as JSON text; "" when the caller sent none */
  const char *parameters;
  /* the orchestrator's context (session_id, user_id, ...; with Capability:
   * session_id, capability_id, thread_id); any key may be missing, so look
   * them up with selu_context_get */
  const struct selu_kv *context;
  size_t n_context;
  /* Capability only: the declared credentials as a JSON object; "" else */
  const char *config_json;
  unsigned protocol; /* SELU_SERVE_SERVICE or SELU_SERVE_CAPABILITY */
  bool streamed;     /* Capability's StreamInvoke (the reply goes as one chunk) */
};

/* The handler's answer. It starts as a failure with no message; set it
 * with selu_reply_ok or selu_reply_error (or fill the fields directly:
 * result and error are malloc'd strings this layer frees). */
struct selu_reply {
  bool success;
  char *result; /* JSON text for the LLM; NULL is sent as "" */
  char *error;  /* readable message, meant for success == false */
  /* end the whole server right after this reply has been sent (fault
   * injection: a capability that dies between calls) */
  bool exit_after;
};

/* Runs on a thread of its own per call, concurrently with other calls:
 * it must be thread-safe. It may block; the server keeps serving others. */
typedef void (*selu_handler_fn)(void *ctx, const struct selu_call *call, struct selu_reply *reply);

/* The value of a context key, or NULL when the orchestrator did not send it. */
const char *selu_context_get(const struct selu_call *call, const char *key);

/* success = true; result = a copy of json (NULL sends ""). */
void selu_reply_ok(struct selu_reply *reply, const char *json);
/* success = true; result = json, which the reply now owns (malloc'd). */
void selu_reply_ok_owned(struct selu_reply *reply, char *json);
/* success = false; error = the formatted message. */
void selu_reply_error(struct selu_reply *reply, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* What HealthCheck answers; true until set otherwise. Thread-safe, and may
 * be called before or while serving. */
void selu_set_healthy(bool healthy);

/* Which contracts to serve (SELU_SERVE_* bits; both by default); calls of
 * the other are answered UNIMPLEMENTED. Call before selu_serve. */
void selu_set_protocols(unsigned protocols);

/* Ask a running selu_serve to shut down, as SIGTERM does.
 * Async-signal-safe. */
void selu_stop(void);

/* Listen on addr ("0.0.0.0:50051", "[::]:50051", "127.0.0.1:0", ...) and
 * serve until SIGTERM, SIGINT or selu_stop. Installs handlers for SIGTERM and
 * SIGINT for its duration (a capability may run as PID 1 of its namespace,
 * where a signal without a handler is ignored). Returns 0 after a clean
 * shutdown, -1 (with a message on stderr) when it cannot listen. Calls still
 * stuck in the handler at shutdown are abandoned after a grace period; the
 * caller must then exit rather than call selu_serve again. */
int selu_serve(const char *addr, selu_handler_fn handler, void *ctx);

#endif
