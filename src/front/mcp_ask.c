/* Policy `ask` in the 2026-07-28 form (multi round-trip requests): the
 * tools/call is answered with `resultType: "input_required"`, an
 * elicitation/create form in `inputRequests` and a `requestState`; the
 * client asks its human and sends the same call again with
 * `inputResponses` and that `requestState`, which then runs with the
 * answer (accept: yes; decline, cancel: no, audited by the pipeline as
 * the 2025 elicitation's answer is). A client that did not declare
 * elicitation in the request's _meta gets the approval queue.
 *
 * requestState is "v1.EXPIRY.NONCE.MAC": MAC an HMAC-SHA-256, under a key
 * this process drew at random, over the expiry, the nonce, the caller (the
 * token's or the peer's user), the capability, the tool and the digest of
 * the canonical arguments; so a state is this process's, this user's and
 * this call's, for MCP_ASK_TTL_MS. Its nonce is spent when an answer is
 * taken (one answer per question: a replayed "accept" is refused). The
 * spent nonces are remembered until they expire, at most SPENT_PER_USER
 * of each user's: a user past it is asked again, and no one else (a
 * table shared by all, once 4,096, let one user's answers fill it and
 * every user's answers go untaken: tests/review10/ask_spent_flood.sh). */
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cleanup.h"
#include "core/clock.h"
#include "front/mcp_internal.h"
#include "gateway/state.h"

#define ASK_KEY "capsule_approval" /* our one input request's key */
#define SPENT_PER_USER 4096        /* a user's answered states remembered until they expire */

static unsigned char key[crypto_auth_hmacsha256_KEYBYTES];
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t spent_mu = PTHREAD_MUTEX_INITIALIZER;
static struct spent {
  char nonce[33];
  uint64_t expiry_ms;
  unsigned char who[16]; /* a hash of the user who answered */
} * spent;
static size_t n_spent;

static void key_init(void)
{
  if (sodium_init() < 0)
    abort(); /* no randomness: nothing safe to sign with */
  randombytes_buf(key, sizeof key);
}

static uint64_t wall_ms(void) { return cap_now_ms(CLOCK_REALTIME); }

/* The MAC of a state's fields and the call it is for, as hex */
void mcp_state_mac(const struct mcp_session *s, const struct mcp_run *r, const char *tag,
                   uint64_t expiry, const char *nonce, char out[65])
{
  pthread_once(&key_once, key_init);
  _cleanup_free_ char *canon = cap_json_canonical(r->args, strlen(r->args));
  char args_hash[65];
  gw_sha256_hex(canon ? canon : r->args, strlen(canon ? canon : r->args), args_hash);
  const char *user = s->cfg->base.user ? s->cfg->base.user : "";
  _cleanup_free_ char *text =
      cap_xasprintf("%s\n%llu\n%s\n%s\n%s\n%s\n%s", tag, (unsigned long long)expiry, nonce, user,
                    r->cap, r->tool, args_hash);
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256(mac, (const unsigned char *)text, strlen(text), key);
  sodium_bin2hex(out, 65, mac, sizeof mac);
}

enum state_check {
  STATE_GOOD,    /* this user's, this call's, in time, not answered before */
  STATE_STALE,   /* expired, or already answered: ask again */
  STATE_INVALID, /* not one of ours for this call: refused */
};

static enum state_check state_check(const struct mcp_session *s, const struct mcp_run *r,
                                    const char *state, char nonce[33])
{
  unsigned long long expiry;
  char mac[65], want[65];
  int end = 0;
  if (strlen(state) > 128 ||
      sscanf(state, "v1.%llu.%32[0-9a-f].%64[0-9a-f]%n", &expiry, nonce, mac, &end) != 3 ||
      state[end] || strlen(nonce) != 32 || strlen(mac) != 64)
    return STATE_INVALID;
  mcp_state_mac(s, r, "v1", expiry, nonce, want);
  if (sodium_memcmp(mac, want, 64) != 0)
    return STATE_INVALID;
  uint64_t now = wall_ms();
  if (expiry < now)
    return STATE_STALE;
  bool used = false;
  pthread_mutex_lock(&spent_mu);
  for (size_t i = 0; i < n_spent && !used; i++)
    used = spent[i].expiry_ms >= now && strcmp(spent[i].nonce, nonce) == 0;
  pthread_mutex_unlock(&spent_mu);
  return used ? STATE_STALE : STATE_GOOD;
}

/* The nonce answered by user; false when user has SPENT_PER_USER answers
 * still in time (the answer is then not taken: the client is asked again) */
static bool state_spend(const char *nonce, uint64_t expiry, const char *user)
{
  unsigned char who[16];
  crypto_generichash(who, sizeof who, (const unsigned char *)user, strlen(user), NULL, 0);
  uint64_t now = wall_ms();
  size_t mine = 0, slot = SIZE_MAX;
  pthread_mutex_lock(&spent_mu);
  for (size_t i = 0; i < n_spent; i++)
    if (spent[i].expiry_ms < now)
      slot = slot == SIZE_MAX ? i : slot;
    else if (memcmp(spent[i].who, who, sizeof who) == 0)
      mine++;
  bool done = mine < SPENT_PER_USER;
  if (done && slot == SIZE_MAX) {
    spent = cap_xrealloc(spent, (n_spent + 1) * sizeof *spent);
    slot = n_spent++;
  }
  if (done) {
    memcpy(spent[slot].nonce, nonce, 33);
    spent[slot].expiry_ms = expiry;
    memcpy(spent[slot].who, who, sizeof who);
  }
  pthread_mutex_unlock(&spent_mu);
  return done;
}

/* The answer: input_required, our question and a fresh state */
static void send_input_required(struct mcp_session *s, struct mcp_run *r)
{
  unsigned char raw[16];
  char nonce[33], mac[65];
  pthread_once(&key_once, key_init);
  randombytes_buf(raw, sizeof raw);
  sodium_bin2hex(nonce, sizeof nonce, raw, sizeof raw);
  uint64_t expiry = wall_ms() + MCP_ASK_TTL_MS;
  mcp_state_mac(s, r, "v1", expiry, nonce, mac);
  _cleanup_free_ char *text = mcp_ask_text(s, r);
  struct cap_buf b = {0};
  cap_buf_printf(&b,
                 "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"resultType\":\"input_required\","
                 "\"inputRequests\":{\"" ASK_KEY "\":{\"method\":\"elicitation/create\","
                 "\"params\":{\"mode\":\"form\",\"message\":",
                 r->id_json);
  cap_json_quote(&b, text, strlen(text));
  cap_buf_printf(&b,
                 ",\"requestedSchema\":{\"type\":\"object\",\"properties\":{}}}}},"
                 "\"requestState\":\"v1.%llu.%s.%s\"}}",
                 (unsigned long long)expiry, nonce, mac);
  mcp_send_buf(s, r->id_json, true, &b);
  mcp_run_drop(s, r);
}

/* The human's answer in params.inputResponses: GW_ANSWER_YES for accept,
 * GW_ANSWER_NO for decline or cancel, GW_ANSWER_NONE when there is none */
static enum gw_answer answer_of(const struct cap_node *params)
{
  const struct cap_node *resp = cap_node_get(cap_node_get(params, "inputResponses"), ASK_KEY);
  const struct cap_node *action = cap_node_get(resp, "action");
  if (!action || action->kind != CAP_NODE_STRING)
    return GW_ANSWER_NONE;
  if (strcmp(action->u.str.ptr, "accept") == 0)
    return GW_ANSWER_YES;
  if (strcmp(action->u.str.ptr, "decline") == 0 || strcmp(action->u.str.ptr, "cancel") == 0)
    return GW_ANSWER_NO;
  return GW_ANSWER_NONE;
}

void mcp_ask_modern(struct mcp_session *s, struct mcp_run *r, const struct cap_node *params)
{
  const struct cap_node *state = cap_node_get(params, "requestState");
  if (state && state->kind != CAP_NODE_STRING) {
    mcp_send_error(s, r->id_json, MCP_INVALID_PARAMS, "params.requestState must be a string", NULL);
    return mcp_run_drop(s, r);
  }
  char nonce[33] = "";
  enum state_check check = state ? state_check(s, r, state->u.str.ptr, nonce) : STATE_STALE;
  if (check == STATE_INVALID) {
    mcp_send_error(s, r->id_json, MCP_INVALID_PARAMS,
                   "params.requestState is not one this server gave for this call and user "
                   "(or the server restarted since): send the call again without it",
                   NULL);
    return mcp_run_drop(s, r);
  }
  enum gw_answer answer = check == STATE_GOOD ? answer_of(params) : GW_ANSWER_NONE;
  unsigned long long expiry = 0;
  if (answer != GW_ANSWER_NONE && sscanf(state->u.str.ptr, "v1.%llu.", &expiry) == 1 &&
      state_spend(nonce, expiry, s->cfg->base.user ? s->cfg->base.user : ""))
    return mcp_run_start(s, r, answer);
  if (!s->req_elicits) /* the client cannot ask: the approval queue */
    return mcp_run_start(s, r, GW_ANSWER_NONE);
  send_input_required(s, r);
}
