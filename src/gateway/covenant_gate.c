/* The Covenant checks around an agent's run (covenant_gate.h). */
#include "gateway/covenant_gate.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/base58.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/json.h"
#include "gateway/budget.h"
#include "gateway/tokens.h"

static const char *priority_of(const struct cap_node *args)
{
  const struct cap_node *p = args ? cap_node_get(args, "priority") : NULL;
  return p && p->kind == CAP_NODE_STRING ? p->u.str.ptr : "normal";
}

/* One audit record of the check, whatever it found; a check that cannot
 * be recorded refuses the dispatch. */
static enum gw_outcome record(struct gw_state *st, const struct gw_call *call, const char *kind,
                              const char *agent, const char *json, struct cap_error *err)
{
  struct cap_error aerr = {0};
  if (gw_audit_change(st, kind, call->user, agent, "dispatch", json, &aerr) == 0)
    return GW_OUTCOME_OK;
  cap_error_set(err, EIO, "the %s cannot be audited: %s; nothing ran", kind, aerr.message);
  cap_error_clear(&aerr);
  return GW_OUTCOME_FAILED;
}

static enum gw_outcome check_tokens(struct gw_state *st, const struct gw_call *call,
                                    const struct cap_spec *spec, const char *priority,
                                    struct gw_audit_record *rec, struct cap_error *err)
{
  struct gw_capability_check check;
  if (gw_capability_check(st, call->issuer->pubkey, spec, priority, &check, err) < 0)
    return GW_OUTCOME_FAILED;
  struct cap_buf json = {0};
  gw_capability_check_json(&check, spec, &json);
  enum gw_outcome o = record(st, call, "capability-check", spec->id, json.data, err);
  cap_buf_free(&json);
  if (o == GW_OUTCOME_OK && check.missing.len) {
    char who[GW_KEY_B58];
    cap_base58_encode(call->issuer->pubkey, 32, who);
    /* the fix names the subject as the operator types it: `local` for the
     * state's own key (the same --state as the call's) */
    cap_error_set(err, EPERM,
                  "the issuer %s (%s) does not hold the capability %s that agent %s requires: "
                  "%s; grant it with `capsule token issue %s %s`%s",
                  call->issuer->display, who, check.missing.v[0], spec->id, check.why.v[0],
                  call->issuer->local ? "local" : who, check.missing.v[0],
                  call->issuer->local ? " on the same state (--state)" : "");
    rec->decision = "capability-denied";
    o = GW_OUTCOME_DENIED;
  }
  gw_capability_check_free(&check);
  return o;
}

static enum gw_outcome check_budget(struct gw_state *st, const struct gw_call *call,
                                    const struct cap_spec *spec, const char *priority,
                                    struct gw_audit_record *rec, struct cap_error *err)
{
  uint64_t now = cap_now_ms(CLOCK_REALTIME);
  struct gw_bucket b;
  struct cap_error berr = {0};
  /* the dispatch's first credit is taken before it runs (covenant-budget's
   * try_debit: two dispatches cannot both spend the last one); the rest
   * of its cost once its CPU time is known (gw_covenant_settle) */
  int r = gw_budget_take(st, spec->id, spec->budget_credits_per_hour, 1, now, &b, &berr);
  if (r < 0 && r != -EBADMSG && r != -EDQUOT) {
    *err = berr;
    return GW_OUTCOME_FAILED;
  }
  if (r == 0) {
    cap_error_clear(&berr);
    return GW_OUTCOME_OK;
  }
  bool tampered = r == -EBADMSG;
  _cleanup_free_ char *agent = cap_xasprintf("%s@agent", spec->id);
  struct cap_buf json = {0};
  struct cap_jw w;
  cap_jw_init(&w, &json, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "agent_display");
  cap_jw_string(&w, agent);
  cap_jw_key(&w, "requested");
  cap_jw_int(&w, 1);
  cap_jw_key(&w, "tokens_remaining");
  cap_jw_int(&w, tampered ? 0 : (int64_t)b.tokens);
  uint64_t eta = tampered ? UINT64_MAX : gw_budget_refill_eta(&b, 1, now);
  cap_jw_key(&w, "refill_eta_ms");
  cap_jw_int(&w, eta == UINT64_MAX ? INT64_MAX : (int64_t)(eta - now));
  cap_jw_key(&w, "priority"); /* the dispatch's; capsule runs dispatches as they come */
  cap_jw_string(&w, priority);
  cap_jw_key(&w, "reason");
  cap_jw_string(&w, tampered ? "tampered" : "exhausted");
  cap_jw_end_object(&w);
  enum gw_outcome o = record(st, call, "budget-exhausted", spec->id, json.data, err);
  cap_buf_free(&json);
  if (o == GW_OUTCOME_OK) {
    if (!tampered)
      cap_error_set(
          err, EDQUOT,
          "agent %s's budget is spent: 0 of %llu credits left this hour, the next in "
          "%llu ms (each dispatch costs a credit per started CPU second); `capsule budget "
          "show %s`",
          spec->id, (unsigned long long)b.capacity, (unsigned long long)(eta - now), spec->id);
    else
      cap_error_set(err, EBADMSG, "%s", berr.message);
    rec->decision = "budget-exhausted";
    o = GW_OUTCOME_DENIED;
  }
  cap_error_clear(&berr);
  return o;
}

enum gw_outcome gw_covenant_local_issuer(struct gw_state *st, const char *user,
                                         struct gw_issuer *out, struct cap_error *err)
{
  bool made;
  *out = (struct gw_issuer){.local = true};
  if (gw_issuer_key(st, out->pubkey, NULL, &made, err) < 0) {
    cap_error_prefix(err, "the call's issuer (the local issuer key)");
    return GW_OUTCOME_FAILED;
  }
  out->display = cap_xasprintf("%s@local", user && *user ? user : "user");
  return GW_OUTCOME_OK;
}

enum gw_outcome gw_covenant_gate(struct gw_state *st, const struct gw_call *call,
                                 const struct cap_spec *spec, const struct cap_node *args,
                                 struct gw_audit_record *rec, struct cap_error *err)
{
  /* gw_call gives every call an issuer (the local one unless named); an
   * agent declaring no actions has nothing to check or record */
  enum gw_outcome o = GW_OUTCOME_OK;
  if (spec->actions_required.len || spec->actions_optional.len)
    o = check_tokens(st, call, spec, priority_of(args), rec, err);
  if (o == GW_OUTCOME_OK && spec->budget_credits_per_hour)
    o = check_budget(st, call, spec, priority_of(args), rec, err);
  return o;
}

void gw_covenant_settle(struct gw_state *st, const struct cap_spec *spec, uint64_t cpu_ms)
{
  if (!spec->budget_credits_per_hour)
    return;
  struct gw_bucket b;
  struct cap_error err = {0};
  /* the first credit was taken by the gate; best effort: the run happened,
   * and a row that cannot be written refuses the next dispatch */
  uint64_t rest = gw_budget_cost(cpu_ms) - 1;
  if (rest)
    gw_budget_spend(st, spec->id, spec->budget_credits_per_hour, rest, cap_now_ms(CLOCK_REALTIME),
                    &b, &err);
  cap_error_clear(&err);
}
