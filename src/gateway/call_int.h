/* The pipeline's state for one call (gateway/call.c) and the steps kept
 * in files of their own: what gw_call's steps share. Internal to them. */
#ifndef CAPSULE_GATEWAY_CALL_INT_H
#define CAPSULE_GATEWAY_CALL_INT_H

#include "gateway/call.h"
#include "gateway/egress_store.h"
#include "gateway/plugin_state.h"
#include "gateway/selu.h"
#include "gateway/state.h"
#include "runtime/talos.h"

/* One call as it goes through the steps; each step fills its part. */
struct call_ctx {
  const struct gw_call *call;
  const struct gw_registry *reg;
  struct gw_state *st;
  const struct cap_spec *spec;
  const struct cap_tool *tool;
  struct gw_tools dynamic;       /* a dynamic capability's tools, as discovered for this call */
  const struct gw_tools *cached; /* or as last discovered (gw_tools_cached_hold) */
  void *cached_hold;
  struct cap_doc *args; /* the parsed arguments */
  char **env;           /* NAME=value, for the environment */
  size_t n_env;
  char **handler; /* per secret: its value when delivered to a Talos handler */
  char *out;      /* the tool's JSON result */
  struct gw_audit_record rec;
  struct gw_inflight inflight;    /* the call's in-flight marker (gateway/state.h) */
  struct gw_call with_ids;        /* the call with what gw_call sets (id_base, grants_epoch) */
  struct gw_egress_batch *egress; /* the proxy's decisions, stored after the record */
  struct gw_talos_config *talos;  /* a run apart's Talos settings, read before its fork */
  bool reading; /* a read transaction holds its reads (gw_state_read_begin) until the run */
  bool locked;  /* the call holds call->state_lock (when there is one) */
};

/* The state lock taken for the call's next use of the state (a no-op
 * when the call holds it, or has none), or let go */
static inline void lock_get(struct call_ctx *c)
{
  if (!c->locked && c->call->state_lock)
    c->call->state_lock->acquire(c->call->state_lock->ctx);
  c->locked = true;
}

static inline void lock_put(struct call_ctx *c)
{
  if (c->locked && c->call->state_lock)
    c->call->state_lock->release(c->call->state_lock->ctx);
  c->locked = false;
}

/* The call's reads done: its read transaction, if any, ended (before the
 * run waits and the audit writes). */
static inline void reads_done(struct call_ctx *c)
{
  if (c->reading) {
    lock_get(c);
    gw_state_read_end(c->st);
  }
  c->reading = false;
}

/* The policy step (call_policy.c): allow goes on, block is refused, ask
 * asks (the client, the terminal, or the approval queue). */
enum gw_outcome call_step_policy(struct call_ctx *c, struct cap_error *err);

#endif
