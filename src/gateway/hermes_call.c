/* The Hermes runtime's ties to the gateway (hermes_call.h). */
#include "gateway/hermes_call.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "gateway/approval.h"
#include "runtime/hermes.h"

#define ASK_POLL_MS 250

struct glue {
  const struct gw_call *call;
  struct gw_state *st;
  const struct cap_spec *spec;
};

/* operator-prompt: a pending approval of the agent's "hermes-approval"
 * for this run; the operator answers it with `capsule approve ID` or
 * `capsule deny ID` while the run waits (until its deadline). */
static int ask(void *arg, const char *run_id, const char *choices, uint64_t deadline, bool *approve,
               struct cap_error *err)
{
  struct glue *g = arg;
  *approve = false;
  _cleanup_free_ char *args = cap_xasprintf("{\"run_id\":\"%s\",\"choices\":%s}", run_id, choices);
  _cleanup_free_ char *bind_text = cap_xasprintf("hermes\n%s\n%s", g->spec->id, run_id);
  char args_hash[65], binding[65];
  gw_sha256_hex(args, strlen(args), args_hash);
  gw_sha256_hex(bind_text, strlen(bind_text), binding);
  uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
  struct gw_approval_call req = {.capability = g->spec->id,
                                 .tool = "hermes-approval",
                                 .user = g->call->user,
                                 .args = args,
                                 .args_hash = args_hash,
                                 .binding = binding,
                                 .ttl_ms = deadline > now ? (int64_t)(deadline - now) : 1};
  char id[9], lapsed_id[9];
  if (gw_approval_create(g->st, &req, id, err) < 0)
    return -EIO;
  while (cap_now_ms(CLOCK_MONOTONIC) < deadline) {
    enum gw_approval_status status, lapsed;
    if (gw_approval_take(g->st, &req, &status, id, &lapsed, lapsed_id, err) < 0)
      return -EIO;
    if (status == GW_APPROVAL_APPROVED || status == GW_APPROVAL_DENIED) {
      *approve = status == GW_APPROVAL_APPROVED;
      return 0;
    }
    if (status != GW_APPROVAL_PENDING)
      return 0; /* expired or void: denied */
    struct timespec ts = {0, ASK_POLL_MS * 1000000L};
    nanosleep(&ts, NULL);
  }
  return 0;
}

/* An operator's file named in the environment; unset or empty: none. */
static const char *env_file(const char *name)
{
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

static void record(void *arg, const char *kind, const char *what)
{
  struct glue *g = arg;
  struct cap_error ignored = {0}; /* the call's own record still follows */
  gw_audit_change(g->st, kind, g->call->user, g->spec->id, "dispatch", what, &ignored);
  cap_error_clear(&ignored);
}

enum gw_outcome gw_hermes_call(const struct gw_call *call, struct gw_state *st,
                               const struct cap_spec *spec, const struct cap_node *args,
                               char **result, struct cap_error *err)
{
  char *key = NULL;
  bool found = false;
  if (gw_cred_lookup(st, spec->id, "HERMES_API_KEY", call->user, &key, &found, err) < 0)
    return GW_OUTCOME_FAILED;
  struct glue g = {call, st, spec};
  struct hermes_options o = {.base_url = getenv("HERMES_API_BASE_URL"),
                             .api_key = found ? key : NULL,
                             .tls = {.ca_file = env_file("HERMES_CA_FILE"),
                                     .cert_file = env_file("HERMES_CLIENT_CERT"),
                                     .key_file = env_file("HERMES_CLIENT_KEY")},
                             .ask = ask,
                             .record = record,
                             .arg = &g};
  enum gw_outcome out = hermes_run(call, spec, args, &o, result, err);
  gw_secret_free(key);
  return out;
}
