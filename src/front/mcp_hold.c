/* A relayed third-party MCP server's requests to the client in the
 * 2026-07-28 form (multi round-trip requests). That revision has no
 * request from server to client on a call's stream: a tools/call whose
 * server asks (sampling/createMessage, elicitation/create, roots/list)
 * is answered `resultType: "input_required"` with the server's requests
 * in `inputRequests` (each under a key of ours) and a `requestState`;
 * the call itself is held, still running, its server waiting. The
 * client fulfils them and sends the call again (a new id, the same name
 * and arguments) with `inputResponses` and that state; the responses go
 * to the server under its own ids, and the held call goes on as the
 * retry: its answer (or the next input_required) is the retry's.
 *
 * Bounded: only what the request's _meta declares
 * (io.modelcontextprotocol/clientCapabilities; else the server is
 * answered -32601 as before); the state "h1.EXPIRY.NONCE.MAC" is an
 * HMAC (mcp_state_mac) over the user, the capability, the tool and the
 * arguments, and names a held call in the table below, which it leaves
 * when the retry takes it (single use); a held call not taken within
 * its deadline (MCP_HOLD_MS) is cancelled as notifications/cancelled
 * cancels a call (its server told, the call audited); at most
 * MCP_MAX_HELD_PER_USER held calls per user and MCP_MAX_HELD in all
 * (past them the server's requests are refused). A retry made in
 * another session (over HTTP each sessionless request has its own) is
 * moved to the held call's session by the transport (mcp_io.adopt).
 *
 * The same holds for the relayed requests the revision lets answer
 * input_required (resources/read, prompts/get, completion/complete,
 * mcp_forward_to): their state is over the method and the params
 * without what is capsule's (_meta, inputResponses, requestState), which
 * the server is not given. */
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/clock.h"
#include "core/json.h"
#include "front/mcp_internal.h"

#define KEY_PREFIX "capsule_relay_"

static struct held {
  char nonce[33];
  char *user;
  struct mcp_session *owner;
  struct mcp_run *r; /* NULL: a free slot */
} table[MCP_MAX_HELD];
static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *user_of(const struct mcp_session *s)
{
  return s->cfg->base.user ? s->cfg->base.user : "";
}

/* The deadline of a held call; CAPSULE_MCP_HOLD_MS (tests) shortens it */
static uint64_t hold_ms(void)
{
  const char *e = getenv("CAPSULE_MCP_HOLD_MS");
  char *end = NULL;
  unsigned long long v = e ? strtoull(e, &end, 10) : 0;
  return e && *e && end && !*end && v >= 100 && v <= MCP_HOLD_MS ? v : MCP_HOLD_MS;
}

static bool offered(const struct mcp_run *r, const char *method)
{
  if (strcmp(method, "sampling/createMessage") == 0)
    return r->offers_sampling;
  if (strcmp(method, "elicitation/create") == 0)
    return r->offers_elicitation;
  if (strcmp(method, "roots/list") == 0)
    return r->offers_roots;
  return false;
}

bool mcp_hold_allowed(const struct mcp_run *r)
{
  static const char *const relayed[] = {"resources/read", "prompts/get", "completion/complete"};
  if (!r->modern || r->for_listen || r->gather || r->want_watch)
    return false;
  for (size_t i = 0; r->method && i < ARRAY_SIZE(relayed); i++)
    if (strcmp(r->method, relayed[i]) == 0)
      return true;
  return !r->method;
}

void mcp_hold_request(struct mcp_session *s, struct mcp_run *r, const struct cap_node *msg,
                      const char *method)
{
  _cleanup_free_ char *theirs = cap_json_text(cap_node_get(msg, "id"));
  if (!offered(r, method)) {
    _cleanup_free_ char *m = cap_xasprintf(
        "the client did not declare what %s needs (this 2026-07-28 request's _meta names no "
        "such capability in io.modelcontextprotocol/clientCapabilities)",
        method);
    return mcp_relay_refuse(r, theirs, m);
  }
  struct mcp_asked *slot = mcp_relay_slot(r);
  if (!slot)
    return mcp_relay_refuse(r, theirs, "too many requests to the client in flight for this call");
  struct cap_buf b = {0};
  cap_buf_putc(&b, '{');
  mcp_relay_put_request(&b, method, msg);
  slot->ours = s->next_id++;
  slot->theirs = steal_pointer(&theirs);
  slot->request = cap_buf_steal(&b);
  slot->sent = false;
}

/* The held calls of user, and whether a slot is free */
static size_t held_by(const char *user, bool *room)
{
  size_t k = 0;
  *room = false;
  for (size_t i = 0; i < MCP_MAX_HELD; i++) {
    if (!table[i].r)
      *room = true;
    else if (strcmp(table[i].user, user) == 0)
      k++;
  }
  return k;
}

/* r's input requests refused to its server: no room to hold it */
static void refuse_all(struct mcp_run *r, const char *why)
{
  for (size_t i = 0; i < MCP_MAX_ASKED; i++) {
    if (!r->asked[i].request)
      continue;
    mcp_relay_refuse(r, r->asked[i].theirs, why);
    free(r->asked[i].theirs);
    free(r->asked[i].request);
    r->asked[i] = (struct mcp_asked){0};
  }
}

/* input_required with every input request of r still unanswered, and a
 * fresh state naming r, which is held */
static void send_input_required(struct mcp_session *s, struct mcp_run *r)
{
  unsigned char raw[16];
  char mac[65];
  if (sodium_init() < 0)
    abort(); /* no randomness: nothing safe to sign with */
  randombytes_buf(raw, sizeof raw);
  sodium_bin2hex(r->hold_nonce, sizeof r->hold_nonce, raw, sizeof raw);
  uint64_t ms = hold_ms();
  uint64_t expiry = cap_now_ms(CLOCK_REALTIME) + ms;
  mcp_state_mac(s, r, "h1", expiry, r->hold_nonce, mac);
  struct cap_buf b = {0};
  cap_buf_printf(&b,
                 "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"resultType\":\"input_required\","
                 "\"inputRequests\":{",
                 r->id_json);
  bool first = true;
  for (size_t i = 0; i < MCP_MAX_ASKED; i++) {
    if (!r->asked[i].request)
      continue;
    cap_buf_printf(&b, "%s\"" KEY_PREFIX "%lld\":%s", first ? "" : ",", (long long)r->asked[i].ours,
                   r->asked[i].request);
    r->asked[i].sent = true;
    first = false;
  }
  cap_buf_printf(&b, "},\"requestState\":\"h1.%llu.%s.%s\"}}", (unsigned long long)expiry,
                 r->hold_nonce, mac);
  r->held = true;
  r->hold_until = cap_now_ms(CLOCK_MONOTONIC) + ms;
  mcp_send_buf(s, r->id_json, true, &b);
}

void mcp_hold_flush(struct mcp_session *s, struct mcp_run *r)
{
  bool pending = false;
  for (size_t i = 0; i < MCP_MAX_ASKED && !pending; i++)
    pending = r->asked[i].request && !r->asked[i].sent;
  if (!pending || r->held || r->cancelled)
    return;
  const char *user = user_of(s);
  bool room;
  pthread_mutex_lock(&table_mu);
  size_t mine = held_by(user, &room);
  struct held *slot = NULL;
  for (size_t i = 0; i < MCP_MAX_HELD && !slot && room && mine < MCP_MAX_HELD_PER_USER; i++)
    if (!table[i].r)
      slot = &table[i];
  if (slot) {
    send_input_required(s, r);
    memcpy(slot->nonce, r->hold_nonce, sizeof slot->nonce);
    slot->user = cap_xstrdup(user);
    slot->owner = s;
    slot->r = r;
  }
  pthread_mutex_unlock(&table_mu);
  if (!slot)
    refuse_all(r, mine >= MCP_MAX_HELD_PER_USER
                      ? "the client's user has as many calls waiting for its input as capsule "
                        "holds: answer or abandon one first"
                      : "capsule holds as many calls waiting for their clients' input as it "
                        "allows: try again later");
}

static void forget_locked(const struct mcp_run *r)
{
  for (size_t i = 0; i < MCP_MAX_HELD; i++)
    if (table[i].r == r) {
      free(table[i].user);
      table[i] = (struct held){0};
    }
}

void mcp_hold_forget(struct mcp_run *r)
{
  if (!r->held)
    return;
  pthread_mutex_lock(&table_mu);
  forget_locked(r);
  pthread_mutex_unlock(&table_mu);
  r->held = false;
}

void mcp_hold_expire(struct mcp_session *s, struct mcp_run *r)
{
  mcp_hold_forget(r);
  if (r->ended) /* its answer can go nowhere: the request was answered */
    return mcp_run_drop(s, r);
  mcp_run_cancel(s, r); /* the server told, the call audited as cancelled */
}

bool mcp_hold_is_state(const struct cap_node *params)
{
  const struct cap_node *st = cap_node_get(params, "requestState");
  return st && st->kind == CAP_NODE_STRING && strncmp(st->u.str.ptr, "h1.", 3) == 0;
}

/* The held call the state names, for this user and this call (run:
 * the retry's); NULL with the error sent */
static struct held *find(struct mcp_session *s, struct mcp_run *run, const char *state)
{
  unsigned long long expiry;
  char nonce[33], mac[65], want[65];
  int end = 0;
  if (strlen(state) > 128 ||
      sscanf(state, "h1.%llu.%32[0-9a-f].%64[0-9a-f]%n", &expiry, nonce, mac, &end) != 3 ||
      state[end] || strlen(nonce) != 32 || strlen(mac) != 64 ||
      (mcp_state_mac(s, run, "h1", expiry, nonce, want), sodium_memcmp(mac, want, 64) != 0)) {
    mcp_send_error(s, run->id_json, MCP_INVALID_PARAMS,
                   "params.requestState is not one this server gave for this call and user "
                   "(or the server restarted since): send the call again without it",
                   NULL);
    return NULL;
  }
  struct held *h = NULL;
  for (size_t i = 0; i < MCP_MAX_HELD && !h; i++)
    if (table[i].r && strcmp(table[i].nonce, nonce) == 0 && strcmp(table[i].user, user_of(s)) == 0)
      h = &table[i];
  if (!h)
    mcp_send_error(s, run->id_json, MCP_INVALID_PARAMS,
                   "params.requestState names no call waiting for input: it was answered "
                   "already, or its call ended or waited past its deadline; send the call "
                   "again without it",
                   NULL);
  return h;
}

/* The retry's inputResponses to the server, under its own ids; what it
 * left unanswered is asked again */
static void deliver(struct mcp_run *h, const struct cap_node *params)
{
  const struct cap_node *resp = cap_node_get(params, "inputResponses");
  for (size_t i = 0; i < MCP_MAX_ASKED; i++) {
    struct mcp_asked *a = &h->asked[i];
    if (!a->request || !a->sent)
      continue;
    char key[48];
    snprintf(key, sizeof key, KEY_PREFIX "%lld", (long long)a->ours);
    const struct cap_node *v =
        resp && resp->kind == CAP_NODE_OBJECT ? cap_node_get(resp, key) : NULL;
    if (!v || v->kind != CAP_NODE_OBJECT) {
      a->sent = false;
      continue;
    }
    _cleanup_free_ char *result = cap_json_text(v);
    struct cap_buf b = {0};
    cap_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}", a->theirs, result);
    mcp_relay_to_server(h, &b);
    free(a->theirs);
    free(a->request);
    *a = (struct mcp_asked){0};
  }
}

void mcp_hold_resume(struct mcp_session *s, struct mcp_run *run, const struct cap_node *params)
{
  pthread_mutex_lock(&table_mu);
  struct held *h = find(s, run, cap_node_get(params, "requestState")->u.str.ptr);
  struct mcp_session *owner = h ? h->owner : NULL;
  struct mcp_run *r = h ? h->r : NULL;
  pthread_mutex_unlock(&table_mu);
  if (!r)
    return mcp_run_drop(s, run);
  if (owner != s &&
      (!owner->io.adopt || !owner->io.adopt(owner->io.ctx, s->io.ctx, run->id_json))) {
    mcp_send_error(s, run->id_json, MCP_INVALID_PARAMS,
                   "the call this requestState names waits for input on another connection: "
                   "send the retry there",
                   NULL);
    return mcp_run_drop(s, run);
  }
  mcp_hold_forget(r); /* single use: a replay of this state finds nothing */
  free(r->id_json);   /* the call goes on as the retry */
  r->id_json = steal_pointer(&run->id_json);
  run->id_json = cap_xstrdup(r->id_json);
  free(r->token_json);
  r->token_json = steal_pointer(&run->token_json);
  free(r->client_caps); /* the retry's own capabilities */
  r->client_caps = steal_pointer(&run->client_caps);
  r->offers_sampling = run->offers_sampling;
  r->offers_elicitation = run->offers_elicitation;
  r->offers_roots = run->offers_roots;
  mcp_run_drop(s, run);
  deliver(r, params);
  if (r->ended)
    return mcp_run_finish(owner, r, r->end_status);
  mcp_hold_flush(owner, r);
}

/* params (an object) without what is capsule's, as JSON text */
static char *server_params(const struct cap_node *params)
{
  static const char *const ours[] = {"_meta", "inputResponses", "requestState"};
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_begin_object(&w);
  for (size_t i = 0; i < params->u.obj.len; i++) {
    const struct cap_member *m = &params->u.obj.items[i];
    bool mine = false;
    for (size_t k = 0; k < ARRAY_SIZE(ours) && !mine; k++)
      mine = strcmp(m->key, ours[k]) == 0;
    if (mine)
      continue;
    cap_jw_key(&w, m->key);
    cap_jw_node(&w, m->value);
  }
  cap_jw_end_object(&w);
  return cap_buf_steal(&b);
}

bool mcp_hold_relayed(struct mcp_session *s, struct mcp_run *r)
{
  if (!mcp_hold_allowed(r) || !r->method)
    return false;
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  bool resumed = false;
  if (cap_json_parse(doc, r->args, strlen(r->args), "params", 0, &d) == 0 && doc->root &&
      doc->root->kind == CAP_NODE_OBJECT) {
    const struct cap_node *meta = cap_node_get(doc->root, "_meta");
    free(r->client_caps); /* what its server may ask of it: this request's own */
    r->client_caps = mcp_caps_offered(cap_node_get(meta, MCP_META_CLIENT_CAPS), &r->offers_sampling,
                                      &r->offers_elicitation, &r->offers_roots);
    free(r->args);
    r->args = server_params(doc->root);
    if (mcp_hold_is_state(doc->root)) { /* the retry of a request held for input */
      mcp_hold_resume(s, r, doc->root);
      resumed = true;
    }
  }
  cap_diags_free(&d);
  cap_doc_free(doc);
  return resumed;
}
