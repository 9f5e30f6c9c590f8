/* The Talos runtime: a plugin's module (index.ts, index.mjs or index.js;
 * TypeScript transformed on the host by runtime/talos_ts.h) loaded by a
 * Node shim (src/runtime/talos_shim.mjs, embedded at build time) inside the
 * plugin's sandbox, in one exchange per call: a handler called as Talos
 * calls it, handler(args, config), a trigger polled as
 * triggers[id].poll(config, state, config), or the module probed for the
 * declared functions; a push trigger's subscription (talos_subscribe) is a
 * run of its own that lasts until it is stopped. config is one flat object of strings: the plugin's
 * credentials (never its environment) and settings (stored, else the
 * manifest's default). Nothing here prints. */
#ifndef CAPSULE_RUNTIME_TALOS_H
#define CAPSULE_RUNTIME_TALOS_H

#include "gateway/call.h"
#include "manifest/model.h"

/* A plugin with `oauth` whose operator named the provider's token endpoint
 * (`capsule config set CAP oauth_token_url URL`): the stored tokens and
 * client (credentials by these names; token_expiry in ms since the epoch,
 * as Talos keeps it), given to the handler in its config as Talos gives
 * them. The shim renews the access token first, with the refresh token
 * (RFC 6749 section 6, a form POST through the plugin's own egress: the
 * endpoint's host must be granted) when it is missing or expires within a
 * minute; store is then called with what the endpoint returned. */
enum {
  TALOS_OAUTH_ACCESS,
  TALOS_OAUTH_REFRESH,
  TALOS_OAUTH_EXPIRY,
  TALOS_OAUTH_CLIENT_ID,
  TALOS_OAUTH_CLIENT_SECRET,
  TALOS_OAUTH_N
};
extern const char *const talos_oauth_names[TALOS_OAUTH_N];
struct talos_oauth {
  const char *token_url;
  char *values[TALOS_OAUTH_N]; /* NULL when not set */
  void (*store)(void *arg, const char *access, const char *refresh, const char *expiry);
  void *store_arg;
};

/* What a plugin is given besides its arguments. */
struct talos_input {
  char *const *secrets;  /* per spec->secrets[i]: its value, or NULL */
  char *const *settings; /* per spec->settings[i]: the stored value, or NULL (the default) */
  const char *node_path; /* a directory whose node_modules the plugin's imports fall back to;
                            NULL: a Talos checkout's root when the plugin is in its plugins/ */
  const struct talos_oauth *oauth; /* or NULL */
};

/* One function call. *result (allocated) is the handler's return value as
 * JSON (a string stays a JSON string). */
enum gw_outcome talos_run(const struct gw_call *call, const struct cap_spec *spec,
                          const struct cap_tool *tool, const struct cap_node *args,
                          const struct talos_input *in, char **result, struct cap_error *err);

/* One poll of trigger (its local id) with state (a JSON object). On
 * success *event is the event as JSON or NULL when none, *new_state the
 * JSON object to store (both allocated). task_config (a JSON object, or
 * NULL when no task is attached): the attached call's parameters, given to
 * the trigger's filter(event, taskConfig) when it exports one; *pass says
 * whether the attached call should run (true without a filter, or when the
 * filter throws, as Talos's poller does). */
enum gw_outcome talos_poll(const struct gw_call *call, const struct cap_spec *spec,
                           const char *trigger, const struct talos_input *in, const char *state,
                           const char *task_config, char **event, char **new_state, bool *pass,
                           struct cap_error *err);

/* Loads the module in its sandbox and checks that it exports every
 * declared function (readiness). subscribes (spec->n_triggers entries, or
 * NULL): whether each trigger exports subscribe (a push trigger, which
 * Talos subscribes to instead of polling). */
enum gw_outcome talos_probe(const struct gw_call *call, const struct cap_spec *spec,
                            const struct talos_input *in, bool *subscribes, struct cap_error *err);

/* An event a push trigger emitted (JSON text, borrowed) and whether the
 * trigger's filter passed it for the attached call. Called from a thread
 * of the subscription's own. */
typedef void talos_event_fn(void *arg, const char *event, bool pass);

/* Subscribes to trigger as Talos's subscriber does,
 * triggers[id].subscribe(config, config, emit), in the plugin's sandbox,
 * with no wall clock: fn is called with each event emitted (an object;
 * anything else is dropped with a line in the tool log), filtered by the
 * trigger's filter(event, taskConfig) when task_config is not NULL. Runs
 * until the process gets SIGTERM (the shim then calls the unsubscribe
 * function subscribe returned, and exits) or the plugin fails; OK when it
 * was stopped, else why it ended. */
enum gw_outcome talos_subscribe(const struct gw_call *call, const struct cap_spec *spec,
                                const char *trigger, const struct talos_input *in,
                                const char *task_config, talos_event_fn *fn, void *arg,
                                struct cap_error *err);

/* The module a Talos capability loads (allocated). */
char *talos_module_path(const struct cap_spec *spec);

/* The node_path a plugin falls back to when the operator names none: the
 * root of a Talos checkout holding the plugin in its plugins/ folder, when
 * that root has a node_modules; else NULL (allocated). */
char *talos_default_node_path(const struct cap_spec *spec);

#endif
