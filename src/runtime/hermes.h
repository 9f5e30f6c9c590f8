/* The Hermes runtime (Covenant's runtime = "hermes"): the dispatch is run
 * by a Hermes gateway over its /v1/runs API, the way covenant-runtime's
 * HermesRunner drives it: POST /runs ({"input", "session_id"}, an
 * Idempotency-Key), the run's events followed over SSE (GET
 * /runs/{id}/events) with GET /runs/{id} polled for its status (and as the
 * fallback when the stream fails), POST /runs/{id}/stop when the agent's
 * wall clock (cpu_ms_per_task) runs out, and POST /runs/{id}/approval
 * answering approval.request events by the manifest's approval_policy.
 * A tool.started event naming a tool outside [hermes] tools_allowed (when
 * that is not empty) stops the run. An https:// endpoint's certificate is
 * verified (hermes_http.h). Nothing here
 * prints; the caller supplies the endpoint, the key and the operator. */
#ifndef CAPSULE_RUNTIME_HERMES_H
#define CAPSULE_RUNTIME_HERMES_H

#include <stdbool.h>

#include "core/node.h"
#include "gateway/call.h"
#include "manifest/model.h"
#include "net/tls_client.h"

struct hermes_options {
  const char *base_url; /* HERMES_API_BASE_URL, e.g. http://127.0.0.1:8642/v1 */
  const char *api_key;  /* HERMES_API_KEY, or NULL */
  /* HERMES_CA_FILE: CAs trusted besides the system's; HERMES_CLIENT_CERT and
   * HERMES_CLIENT_KEY: capsule's certificate and key for mutual TLS (each
   * NULL when not set) */
  struct tls_client_files tls;
  /* approval_policy operator-prompt: asks the operator (capsule's approval
   * queue) and waits at most until deadline (CLOCK_MONOTONIC ms);
   * *approve when the operator approved */
  int (*ask)(void *arg, const char *run_id, const char *choices_json, uint64_t deadline,
             bool *approve, struct cap_error *err);
  /* each tool the run invoked or finished, and each approval answered:
   * kind "hermes-tool" or "hermes-approval", what a JSON object */
  void (*record)(void *arg, const char *kind, const char *what);
  void *arg;
};

/* Runs the dispatch (args: {"text", ...}); *result is {"text": output,
 * "sources": []}. */
enum gw_outcome hermes_run(const struct gw_call *call, const struct cap_spec *spec,
                           const struct cap_node *args, const struct hermes_options *o,
                           char **result, struct cap_error *err);

#endif
