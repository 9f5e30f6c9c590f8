/* Per-agent token buckets in the state database (budget.h). */
#include "gateway/budget.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "gateway/state_int.h"

#define MS_PER_HOUR 3600000u

uint64_t gw_budget_cost(uint64_t cpu_ms)
{
  uint64_t c = cpu_ms / 1000 + (cpu_ms % 1000 != 0);
  return c ? c : 1;
}

/* covenant-budget's refill: whole credits only, the rest of the time kept */
static void refill(struct gw_bucket *b, uint64_t now)
{
  if (b->capacity == 0 || now <= b->last_refill_ms)
    return;
  unsigned __int128 add = (unsigned __int128)(now - b->last_refill_ms) * b->capacity / MS_PER_HOUR;
  if (add == 0)
    return;
  if (add > b->capacity)
    add = b->capacity;
  b->tokens = b->tokens + (uint64_t)add > b->capacity ? b->capacity : b->tokens + (uint64_t)add;
  b->last_refill_ms += (uint64_t)(add * MS_PER_HOUR / b->capacity);
  if (b->tokens == b->capacity)
    b->last_refill_ms = now;
}

uint64_t gw_budget_refill_eta(const struct gw_bucket *b, uint64_t credits, uint64_t now_ms)
{
  if (credits <= b->tokens)
    return now_ms;
  if (b->capacity == 0)
    return UINT64_MAX;
  unsigned __int128 need = (unsigned __int128)(credits - b->tokens) * MS_PER_HOUR;
  unsigned __int128 ms = (need + b->capacity - 1) / b->capacity;
  return ms > UINT64_MAX - now_ms ? UINT64_MAX : now_ms + (uint64_t)ms;
}

static void bucket_mac(const struct gw_state *st, const char *agent, const struct gw_bucket *b,
                       char out[65])
{
  char body[160];
  int n = snprintf(body, sizeof body, "covenant-budget%c%llu%c%llu%c%llu", 0,
                   (unsigned long long)b->capacity, 0, (unsigned long long)b->tokens, 0,
                   (unsigned long long)b->last_refill_ms);
  crypto_auth_hmacsha256_state h;
  crypto_auth_hmacsha256_init(&h, st->keys->audit, GW_KEY_BYTES);
  crypto_auth_hmacsha256_update(&h, (const unsigned char *)agent, strlen(agent) + 1);
  crypto_auth_hmacsha256_update(&h, (const unsigned char *)body, (size_t)n);
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_final(&h, mac);
  sodium_bin2hex(out, 65, mac, sizeof mac);
}

/* The row as stored: *found false when none. */
static int bucket_read(struct gw_state *st, const char *agent, struct gw_bucket *b, bool *found,
                       struct cap_error *err)
{
  struct gw_stmt *s = gw_state_prep(
      st, "SELECT capacity, tokens, last_refill_ms, mac FROM covenant_budgets WHERE agent = ?",
      agent, NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR, r = 0;
  *found = rc == GW_DB_ROW;
  if (rc == GW_DB_ROW) {
    int64_t cap = gw_stmt_int64(s, 0), tok = gw_stmt_int64(s, 1), last = gw_stmt_int64(s, 2);
    const char *mac = (const char *)gw_stmt_text(s, 3);
    *b = (struct gw_bucket){(uint64_t)cap, (uint64_t)tok, (uint64_t)last};
    char want[65];
    bucket_mac(st, agent, b, want);
    if (cap < 0 || tok < 0 || last < 0 || tok > cap || !mac || strcmp(mac, want))
      r = cap_error_set(err, EBADMSG,
                        "agent %s's budget row in %s/state.db was changed outside capsule (its "
                        "HMAC does not match); nothing was spent; reset it with `capsule budget "
                        "set %s CREDITS`",
                        agent, st->dir, agent);
  } else if (rc != GW_DB_DONE) {
    r = gw_state_db_error(st, err, "cannot read the budget");
  }
  gw_stmt_finalize(s);
  return r;
}

static int bucket_write(struct gw_state *st, const char *agent, const struct gw_bucket *b,
                        struct cap_error *err)
{
  char mac[65];
  bucket_mac(st, agent, b, mac);
  struct gw_stmt *s =
      gw_state_prep(st,
                    "INSERT INTO covenant_budgets (agent, capacity, tokens, last_refill_ms, mac)"
                    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (agent) DO UPDATE SET"
                    " capacity = excluded.capacity, tokens = excluded.tokens,"
                    " last_refill_ms = excluded.last_refill_ms, mac = excluded.mac",
                    agent, NULL);
  int rc = GW_DB_ERROR;
  if (s) {
    gw_stmt_bind_int64(s, 2, (int64_t)b->capacity);
    gw_stmt_bind_int64(s, 3, (int64_t)b->tokens);
    gw_stmt_bind_int64(s, 4, (int64_t)b->last_refill_ms);
    gw_stmt_bind_text(s, 5, mac);
    rc = gw_stmt_step(s);
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot write the budget");
}

enum op { OP_GET, OP_TAKE, OP_SPEND, OP_SET };

/* Read, refill, rebase to capacity, apply op, write: one transaction. */
static int bucket_update(struct gw_state *st, const char *agent, uint64_t capacity, enum op op,
                         uint64_t credits, uint64_t now, struct gw_bucket *out,
                         struct cap_error *err)
{
  if (capacity > INT64_MAX || credits > INT64_MAX)
    return cap_error_set(err, ERANGE, "a budget of more than 2^63 credits cannot be stored");
  if (gw_db_exec(st->db, "BEGIN IMMEDIATE") != GW_DB_OK)
    return gw_state_db_error(st, err, "cannot lock the budget");
  struct gw_bucket b = {capacity, capacity, now};
  bool found = false;
  int r = bucket_read(st, agent, &b, &found, err);
  bool reset = r == -EBADMSG && op == OP_SET; /* setting is how a refused row is reset */
  if (reset) {
    cap_error_clear(err);
    r = 0;
    b = (struct gw_bucket){capacity, capacity, now};
  }
  if (r == 0 && found && !reset) {
    refill(&b, now);
    if (b.capacity != capacity) { /* covenant-budget's set_capacity */
      b.capacity = capacity;
      if (b.tokens > capacity)
        b.tokens = capacity;
      b.last_refill_ms = now > b.last_refill_ms ? now : b.last_refill_ms;
    }
  }
  bool short_of = op == OP_TAKE && b.tokens < credits; /* nothing taken (the refill is kept) */
  if (op == OP_TAKE && !short_of)
    b.tokens -= credits;
  if (op == OP_SPEND)
    b.tokens = credits > b.tokens ? 0 : b.tokens - credits;
  else if (op == OP_SET)
    b.tokens = credits > capacity ? capacity : credits;
  if (r == 0)
    r = bucket_write(st, agent, &b, err);
  if (r == 0 && gw_db_exec(st->db, "COMMIT") != GW_DB_OK)
    r = gw_state_db_error(st, err, "cannot commit the budget");
  if (r < 0)
    gw_db_exec(st->db, "ROLLBACK");
  if (r == 0)
    *out = b;
  return r == 0 && short_of ? -EDQUOT : r;
}

int gw_budget_get(struct gw_state *st, const char *agent, uint64_t capacity, uint64_t now_ms,
                  struct gw_bucket *out, struct cap_error *err)
{
  return bucket_update(st, agent, capacity, OP_GET, 0, now_ms, out, err);
}

int gw_budget_take(struct gw_state *st, const char *agent, uint64_t capacity, uint64_t credits,
                   uint64_t now_ms, struct gw_bucket *out, struct cap_error *err)
{
  return bucket_update(st, agent, capacity, OP_TAKE, credits, now_ms, out, err);
}

int gw_budget_spend(struct gw_state *st, const char *agent, uint64_t capacity, uint64_t credits,
                    uint64_t now_ms, struct gw_bucket *out, struct cap_error *err)
{
  return bucket_update(st, agent, capacity, OP_SPEND, credits, now_ms, out, err);
}

int gw_budget_set(struct gw_state *st, const char *agent, uint64_t capacity, uint64_t credits,
                  uint64_t now_ms, struct gw_bucket *out, struct cap_error *err)
{
  return bucket_update(st, agent, capacity, OP_SET, credits, now_ms, out, err);
}
