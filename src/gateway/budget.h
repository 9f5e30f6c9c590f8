/* Covenant's budgets (covenant-budget): settlement.budget_credits_per_hour
 * as a per-agent token bucket, capacity = credits per hour, refilled
 * lazily at capacity / 3,600,000 credits per ms when read (whole credits
 * only; the unspent fraction of time carries over; a full bucket restarts
 * its clock so an idle agent banks nothing past capacity). A capacity
 * change in the manifest refills under the old one, then rebases and
 * clamps. Buckets live in the state database (table covenant_budgets),
 * each row HMACed under the state's audit key: a row edited outside
 * capsule is refused, never trusted. capacity 0: not enforced. Nothing
 * here prints. */
#ifndef CAPSULE_GATEWAY_BUDGET_H
#define CAPSULE_GATEWAY_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "gateway/state.h"

struct gw_bucket {
  uint64_t capacity, tokens, last_refill_ms;
};

/* What one dispatch costs: one credit per started CPU second the agent's
 * sandbox used, at least one (docs/gateway.md). */
uint64_t gw_budget_cost(uint64_t cpu_ms);

/* The agent's bucket now (refilled; made full when new), capacity from
 * its manifest. -EBADMSG when its row was changed outside capsule. */
int gw_budget_get(struct gw_state *st, const char *agent, uint64_t capacity, uint64_t now_ms,
                  struct gw_bucket *out, struct cap_error *err);
/* covenant-budget's try_debit: takes credits when the bucket holds them
 * (0, *out after), else takes nothing and returns -EDQUOT (*out as it is,
 * err untouched). */
int gw_budget_take(struct gw_state *st, const char *agent, uint64_t capacity, uint64_t credits,
                   uint64_t now_ms, struct gw_bucket *out, struct cap_error *err);
/* Spends credits (down to 0 at most: the run already happened). */
int gw_budget_spend(struct gw_state *st, const char *agent, uint64_t capacity, uint64_t credits,
                    uint64_t now_ms, struct gw_bucket *out, struct cap_error *err);
/* Sets the credits left (at most the capacity): the operator's top-up or
 * drain, and the way to reset a refused row. */
int gw_budget_set(struct gw_state *st, const char *agent, uint64_t capacity, uint64_t credits,
                  uint64_t now_ms, struct gw_bucket *out, struct cap_error *err);
/* When the bucket will hold `credits` again (epoch ms; UINT64_MAX never). */
uint64_t gw_budget_refill_eta(const struct gw_bucket *b, uint64_t credits, uint64_t now_ms);

#endif
