/* What the state keeps for plugins besides policies and credentials:
 * settings (text, per capability; user "" is the operator's, a user's row
 * wins for that user), each trigger's persisted state per capability,
 * trigger and user (stored together with the event it fired, in one
 * transaction), the fired events, triggers' enablement and the tool call an
 * event starts, poll leases (so two pollers on one state never poll one
 * trigger at once), and operator grants. Tables: schema v7 and v8 in state.c.
 * Strings returned are allocated; the caller frees them. A handle is used
 * by one thread at a time. */
#ifndef CAPSULE_GATEWAY_PLUGIN_STATE_H
#define CAPSULE_GATEWAY_PLUGIN_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "gateway/state.h"
#include "runtime/talos.h"

/* ---- settings ---- */
int gw_setting_set(struct gw_state *st, const char *cap, const char *user, const char *name,
                   const char *value, struct cap_error *err);
int gw_setting_rm(struct gw_state *st, const char *cap, const char *user, const char *name,
                  bool *found, struct cap_error *err);
/* user's row, else the operator's; *value NULL when neither. */
int gw_setting_get(struct gw_state *st, const char *cap, const char *user, const char *name,
                   char **value, struct cap_error *err);
typedef void (*gw_setting_fn)(void *arg, const char *user, const char *name, const char *value,
                              const char *updated);
int gw_setting_list(struct gw_state *st, const char *cap, gw_setting_fn fn, void *arg,
                    struct cap_error *err);

/* ---- triggers ---- */
/* The stored state ("{}" when none; allocated). */
int gw_trigger_state_get(struct gw_state *st, const char *cap, const char *trigger,
                         const char *user, char **state, struct cap_error *err);
/* Stores new_state and, when event is not NULL, appends it (one
 * transaction); *seq is the event's number (0 when none). */
int gw_trigger_commit(struct gw_state *st, const char *cap, const char *trigger, const char *user,
                      const char *new_state, const char *event, int64_t *seq,
                      struct cap_error *err);
/* enabled: -1 leaves it, 0/1 sets it; call_cap/call_tool NULL leave them
 * (and call_params), "" clears; call_params: the call's task configuration
 * (a JSON object of the trigger's params, which its filter reads), or
 * NULL for none. */
int gw_trigger_configure(struct gw_state *st, const char *cap, const char *trigger, int enabled,
                         const char *call_cap, const char *call_tool, const char *call_params,
                         struct cap_error *err);
/* *enabled: the stored choice, else dflt. *call_cap, *call_tool and
 * *call_params (when asked for) NULL when none. */
int gw_trigger_config(struct gw_state *st, const char *cap, const char *trigger, bool dflt,
                      bool *enabled, char **call_cap, char **call_tool, char **call_params,
                      struct cap_error *err);
/* Takes the lease of (cap, trigger, user) for holder until now + ttl_ms
 * when it is free or expired; *taken says whether it was. */
int gw_trigger_lease(struct gw_state *st, const char *cap, const char *trigger, const char *user,
                     const char *holder, int64_t ttl_ms, bool *taken, struct cap_error *err);
int gw_trigger_release(struct gw_state *st, const char *cap, const char *trigger, const char *user,
                       const char *holder, struct cap_error *err);

struct gw_event {
  int64_t seq;
  const char *time, *capability, *trigger, *user, *event;
};
typedef void (*gw_event_fn)(void *arg, const struct gw_event *e);
/* Events with seq > after, in order. */
int gw_events_each(struct gw_state *st, int64_t after, gw_event_fn fn, void *arg,
                   struct cap_error *err);

/* ---- operator grants ---- */
enum gw_grant_kind { GW_GRANT_HOST, GW_GRANT_READ, GW_GRANT_WRITE, GW_GRANT_RW };
extern const char *const gw_grant_kind_names[4]; /* "host", "read", "write", "rw" */
int gw_grant_add(struct gw_state *st, const char *cap, enum gw_grant_kind kind, const char *value,
                 struct cap_error *err);
int gw_grant_rm(struct gw_state *st, const char *cap, enum gw_grant_kind kind, const char *value,
                bool *found, struct cap_error *err);
typedef void (*gw_grant_fn)(void *arg, const char *cap, enum gw_grant_kind kind, const char *value,
                            const char *created);
/* cap NULL: every capability's. */
int gw_grant_list(struct gw_state *st, const char *cap, gw_grant_fn fn, void *arg,
                  struct cap_error *err);

/* ---- a Talos plugin's config (call.c) ---- */
/* A Talos plugin's stored settings and node_path for user, with its
 * credentials (secrets, per spec->secrets[i], borrowed): what
 * runtime/talos.h's calls and polls take as cfg->in. */
#define GW_SETTING_NODE_PATH "node_path"
/* For a plugin with `oauth`: the provider's token endpoint (an http or
 * https URL), which turns on the refresh (runtime/talos.h). */
#define GW_SETTING_OAUTH_TOKEN_URL "oauth_token_url"
struct gw_talos_config {
  char **settings;
  char *node_path;
  char *token_url;
  struct talos_oauth oauth; /* for in.oauth; renewed tokens stored sealed */
  struct gw_state *st;      /* where oauth's store writes */
  const char *cap, *user;
  struct talos_input in;
};
int gw_talos_config_load(struct gw_state *st, const struct cap_spec *spec, const char *user,
                         char *const *secrets, struct gw_talos_config *cfg, struct cap_error *err);
void gw_talos_config_free(struct gw_talos_config *cfg, const struct cap_spec *spec);
/* The plugin's credentials for user, per spec->secrets[i] (NULL when not
 * set); a required one missing is an error naming the command that sets
 * it. Free with gw_talos_secrets_free (it wipes them). */
int gw_talos_secrets_load(struct gw_state *st, const struct cap_spec *spec, const char *user,
                          char ***out, struct cap_error *err);
void gw_talos_secrets_free(char **secrets, const struct cap_spec *spec);

#endif
