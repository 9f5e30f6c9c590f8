/* What `capsule triggers`' files share: triggers.c (poll, the poller, the
 * verb, events) and triggers_push.c (push triggers: subscriptions the
 * poller keeps). Internal to src/cli. */
#ifndef CAPSULE_CLI_TRIGGERS_H
#define CAPSULE_CLI_TRIGGERS_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "cli/plugin.h"
#include "gateway/plugin_state.h"
#include "gateway/registry.h"

/* Where the calls' logs, warm sockets and caches go, and what is masked. */
struct poll_env {
  const struct common *o;
  const struct gw_registry *reg;
  struct gw_state *st;
  char *logs, *cache, *run;
  char **hidden;
  size_t n_hidden;
};

/* Set by SIGTERM or SIGINT while the poller runs. */
extern volatile sig_atomic_t triggers_stopping;

/* The tool the operator attached to a trigger, called with {"event": E}
 * through the call pipeline; the outcome on stderr. */
void triggers_call_on_event(const struct poll_env *e, const char *cap, const char *tool,
                            const char *event);
/* An event's audit record (decision "trigger", outcome "event SEQ");
 * *audit_seq (when not NULL) its sequence number. */
int triggers_audit_event(struct gw_state *st, const char *user, const struct cap_spec *spec,
                         const struct cap_trigger *t, const char *event, int64_t seq,
                         int64_t *audit_seq, struct cap_error *err);

/* ---- push triggers (triggers_push.c) ---- */
struct push_sub {
  const struct cap_spec *spec;
  const struct cap_trigger *trigger;
  pid_t pid;           /* the subscription's process, or 0 */
  uint64_t restart_ms; /* when to (re)start it (CLOCK_MONOTONIC) */
};
struct push_set {
  struct push_sub *v;
  size_t n;
};
/* Which of spec's triggers push (export subscribe), by loading the module
 * once in its sandbox: spec->n_triggers flags (allocated), or NULL when
 * none does or the module cannot be loaded (then they are polled). */
bool *triggers_push_kinds(const struct poll_env *e, const struct cap_spec *spec);
void triggers_push_add(struct push_set *set, const struct cap_spec *spec,
                       const struct cap_trigger *t);
/* Starts the subscriptions due, notes the ones that ended (restarted a
 * minute later). */
void triggers_push_tick(const struct poll_env *e, struct push_set *set);
/* SIGTERM to every subscription (each unsubscribes), then waits. */
void triggers_push_stop(struct push_set *set);

#endif
