/* What a Covenant agent's dispatch passes before it runs, and what it
 * spends after (covenant_gate.c): the issuer's capability tokens for the
 * agent's required actions (whatever the front door: call, dispatch, MCP,
 * serve, gRPC; its optional actions are recorded), and the agent's budget
 * bucket. Each check leaves its own
 * audit record (kinds "capability-check" and "budget-exhausted", their
 * outcome a JSON object `audit export --format covenant` reads back); the
 * call's own record names the refusal. */
#ifndef CAPSULE_GATEWAY_COVENANT_GATE_H
#define CAPSULE_GATEWAY_COVENANT_GATE_H

#include "gateway/call.h"

/* The issuer of a call that names none: the state's local issuer key
 * (made on first use), displayed "USER@local"; out->display is the
 * caller's to free. */
enum gw_outcome gw_covenant_local_issuer(struct gw_state *st, const char *user,
                                         struct gw_issuer *out, struct cap_error *err);
/* GW_OUTCOME_DENIED with err naming the missing action or the empty
 * bucket; rec's decision and outcome say the same. */
enum gw_outcome gw_covenant_gate(struct gw_state *st, const struct gw_call *call,
                                 const struct cap_spec *spec, const struct cap_node *args,
                                 struct gw_audit_record *rec, struct cap_error *err);
/* Spends the rest of gw_budget_cost(cpu_ms) from the agent's bucket (the
 * gate took its first credit; budget 0: none). */
void gw_covenant_settle(struct gw_state *st, const struct cap_spec *spec, uint64_t cpu_ms);

#endif
