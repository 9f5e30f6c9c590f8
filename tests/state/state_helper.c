/* The state tests' helper (tests/state/pg.sh): the state functions driven
 * directly, on whichever backend CAPSULE_STATE names (a postgres:// URL)
 * with DIR as this "gateway's" own directory, or on DIR's SQLite.
 *
 *   state_helper funcs DIR           every state function, checked
 *   state_helper append DIR N TAG    N audit records (outcome TAG-i); goes
 *                                    on past failures; prints "ok K fail F"
 *   state_helper verify DIR          the audit chain; prints its length
 *   state_helper outcomes DIR        every record's outcome, one a line
 *   state_helper ask DIR             a pending approval; prints its id
 *   state_helper wait DIR ID MS      waits for its decision; prints it
 *   state_helper event DIR           one trigger event; prints its number
 *   state_helper open DIR            opens the state (exit 1 with the error)
 *   state_helper sql TEXT            TEXT as the PostgreSQL driver sends it */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../unit/unit.h"
#include "core/buf.h"
#include "gateway/access.h"
#include "gateway/approval.h"
#include "gateway/budget.h"
#include "gateway/db.h"
#include "gateway/egress_store.h"
#include "gateway/plugin_state.h"
#include "gateway/state.h"
#include "gateway/state_query.h"
#include "gateway/tokens.h"
#include "gateway/ui_session.h"

int unit_failures, unit_checks;

static struct gw_state *open_state(const char *dir)
{
  const char *url = getenv("CAPSULE_STATE");
  if (gw_db_is_url(url))
    gw_state_use_database(url);
  struct gw_state *st = NULL;
  struct cap_error err = {0};
  if (gw_state_open(dir, &st, &err) < 0) {
    fprintf(stderr, "state_helper: %s\n", err.message);
    exit(1);
  }
  return st;
}

static void count_policy(void *arg, const char *cap, const char *tool, const char *user,
                         enum cap_policy p)
{
  (*(int *)arg)++;
}

static void count_cred(void *arg, const char *cap, const char *name, enum cap_secret_scope scope,
                       const char *user, const char *updated)
{
  (*(int *)arg)++;
}

static void count_setting(void *arg, const char *user, const char *name, const char *value,
                          const char *updated)
{
  (*(int *)arg)++;
}

static void count_grant(void *arg, const char *cap, enum gw_grant_kind kind, const char *value,
                        const char *created)
{
  (*(int *)arg)++;
}

static void count_event(void *arg, const struct gw_event *e) { (*(int *)arg)++; }
static void count_access(void *arg, const struct gw_access *a) { (*(int *)arg)++; }
static void count_approval(void *arg, const struct gw_approval *a) { (*(int *)arg)++; }
static void count_token(void *arg, const struct gw_token *t, enum gw_token_status s, int64_t ms)
{
  (*(int *)arg)++;
}
static void count_trust(void *arg, const char *key, const char *added, bool local)
{
  (*(int *)arg)++;
}

static void funcs_policies_creds(struct gw_state *st)
{
  struct cap_error err = {0};
  enum cap_policy p;
  bool found;
  int n = 0;
  CHECK(gw_policy_set(st, "c", "t", "", CAP_POLICY_ASK, &err) == 0);
  CHECK(gw_policy_set(st, "c", "t", "", CAP_POLICY_ALLOW, &err) == 0); /* replaces */
  CHECK(gw_policy_set(st, "c", "t", "bob", CAP_POLICY_BLOCK, &err) == 0);
  CHECK(gw_policy_get(st, "c", "t", "", &p, &found, &err) == 0 && found && p == CAP_POLICY_ALLOW);
  CHECK(gw_policy_list(st, count_policy, &n, &err) == 0 && n == 2);
  CHECK(gw_policy_rm(st, "c", "t", "bob", &found, &err) == 0 && found);
  CHECK(gw_policy_rm(st, "c", "t", "bob", &found, &err) == 0 && !found);
  char *v = NULL;
  CHECK(gw_cred_set(st, "c", "k", CAP_SCOPE_SYSTEM, NULL, "s3cret", 6, &err) == 0);
  CHECK(gw_cred_set(st, "c", "k", CAP_SCOPE_SYSTEM, NULL, "s3cret2", 7, &err) == 0);
  CHECK(gw_cred_set(st, NULL, "k", CAP_SCOPE_USER, "bob", "shared\x01\xff", 8, &err) == 0);
  CHECK(gw_cred_get(st, "c", "k", CAP_SCOPE_SYSTEM, NULL, &v, &found, &err) == 0 && found);
  CHECK_STR(v, "s3cret2");
  gw_secret_free(v);
  CHECK(gw_cred_lookup(st, "other", "k", "bob", &v, &found, &err) == 0 && found);
  CHECK(v && memcmp(v, "shared\x01\xff", 8) == 0);
  gw_secret_free(v);
  n = 0;
  CHECK(gw_cred_list(st, count_cred, &n, &err) == 0 && n == 2);
  CHECK(gw_cred_rm(st, "c", "k", CAP_SCOPE_SYSTEM, NULL, &found, &err) == 0 && found);
  CHECK(gw_cred_rm(st, "c", "k", CAP_SCOPE_SYSTEM, NULL, &found, &err) == 0 && !found);
  size_t shared;
  CHECK(gw_state_take_migrated_shared(st, &shared, &err) == 0 && shared == 0);
  cap_error_clear(&err);
}

static void funcs_plugins(struct gw_state *st)
{
  struct cap_error err = {0};
  bool found, enabled, taken;
  char *v = NULL, *cc = NULL, *ct = NULL;
  int n = 0;
  CHECK(gw_setting_set(st, "c", "", "region", "eu", &err) == 0);
  CHECK(gw_setting_set(st, "c", "bob", "region", "us", &err) == 0);
  CHECK(gw_setting_set(st, "c", "bob", "region", "ap", &err) == 0);
  CHECK(gw_setting_get(st, "c", "bob", "region", &v, &err) == 0);
  CHECK_STR(v, "ap");
  free(v);
  CHECK(gw_setting_list(st, "c", count_setting, &n, &err) == 0 && n == 2);
  CHECK(gw_setting_rm(st, "c", "bob", "region", &found, &err) == 0 && found);
  CHECK(gw_trigger_state_get(st, "c", "tr", "", &v, &err) == 0);
  CHECK_STR(v, "{}");
  free(v);
  int64_t seq1 = 0, seq2 = 0;
  CHECK(gw_trigger_commit(st, "c", "tr", "", "{\"a\":1}", "{\"e\":1}", &seq1, &err) == 0);
  CHECK(gw_trigger_commit(st, "c", "tr", "", "{\"a\":2}", "{\"e\":2}", &seq2, &err) == 0);
  CHECK(seq1 > 0 && seq2 == seq1 + 1);
  CHECK(gw_trigger_state_get(st, "c", "tr", "", &v, &err) == 0);
  CHECK_STR(v, "{\"a\":2}");
  free(v);
  n = 0;
  CHECK(gw_events_each(st, 0, count_event, &n, &err) == 0 && n == 2);
  CHECK(gw_trigger_configure(st, "c", "tr", 0, "c2", "t2", "{\"p\":1}", &err) == 0);
  char *cp = NULL;
  CHECK(gw_trigger_config(st, "c", "tr", true, &enabled, &cc, &ct, &cp, &err) == 0 && !enabled);
  CHECK_STR(cc, "c2");
  CHECK_STR(cp, "{\"p\":1}"); /* schema 8: the trigger call's parameters */
  free(cc);
  free(ct);
  free(cp);
  CHECK(gw_trigger_lease(st, "c", "tr", "", "g1", 60000, &taken, &err) == 0 && taken);
  CHECK(gw_trigger_lease(st, "c", "tr", "", "g2", 60000, &taken, &err) == 0 && !taken);
  CHECK(gw_trigger_release(st, "c", "tr", "", "g1", &err) == 0);
  CHECK(gw_trigger_lease(st, "c", "tr", "", "g2", 60000, &taken, &err) == 0 && taken);
  CHECK(gw_grant_add(st, "c", GW_GRANT_HOST, "example.org", &err) == 0);
  CHECK(gw_grant_add(st, "c", GW_GRANT_HOST, "example.org", &err) == 0);
  n = 0;
  CHECK(gw_grant_list(st, NULL, count_grant, &n, &err) == 0 && n == 1);
  CHECK(gw_grant_rm(st, "c", GW_GRANT_HOST, "example.org", &found, &err) == 0 && found);
  cap_error_clear(&err);
}

static void funcs_access_budget_tokens(struct gw_state *st)
{
  struct cap_error err = {0};
  char token[GW_ACCESS_TOKEN_LEN + 1], *user = NULL;
  bool op, found, added;
  int n = 0;
  CHECK(gw_access_issue(st, "ops", "alice", true, token, &err) == 0);
  CHECK(gw_access_issue(st, "ops", "alice", true, token, &err) == -EEXIST);
  cap_error_clear(&err);
  CHECK(gw_access_issue(st, "ops2", "bob", false, token, &err) == 0);
  CHECK(gw_access_check(st, token, &user, &op, &err) == 0 && !op);
  CHECK_STR(user, "bob");
  free(user);
  CHECK(gw_access_list(st, count_access, &n, &err) == 0 && n == 2);
  CHECK(gw_access_revoke(st, "ops2", &found, &err) == 0 && found);
  struct gw_bucket b;
  CHECK(gw_budget_get(st, "agent", 10, 1000, &b, &err) == 0 && b.tokens == 10);
  CHECK(gw_budget_take(st, "agent", 10, 4, 1000, &b, &err) == 0 && b.tokens == 6);
  CHECK(gw_budget_take(st, "agent", 10, 40, 1000, &b, &err) == -EDQUOT);
  cap_error_clear(&err);
  CHECK(gw_budget_spend(st, "agent", 10, 2, 1000, &b, &err) == 0 && b.tokens == 4);
  CHECK(gw_budget_set(st, "agent", 10, 9, 1000, &b, &err) == 0 && b.tokens == 9);
  unsigned char pk[32], sk[64], pk2[32], sk2[64];
  bool made;
  CHECK(gw_issuer_key(st, pk, sk, &made, &err) == 0 && made);
  CHECK(gw_issuer_key(st, pk2, sk2, &made, &err) == 0 && !made && memcmp(pk, pk2, 32) == 0);
  struct gw_token t = {0};
  unsigned char subject[32] = {1, 2, 3};
  CHECK(gw_token_issue(st, subject, "agent", "tool.web_search", "{}", false, 0, &t, &err) == 0);
  if (err.message)
    fprintf(stderr, "token: %s\n", err.message);
  n = 0;
  CHECK(gw_token_list(st, count_token, &n, &err) == 0 && n == 1);
  unsigned char other[32] = {9};
  CHECK(gw_trust_add(st, other, &added, &err) == 0 && added);
  CHECK(gw_trust_add(st, other, &added, &err) == 0 && !added);
  n = 0;
  CHECK(gw_trust_list(st, count_trust, &n, &err) == 0 && n >= 1);
  gw_token_free(&t);
  cap_error_clear(&err);
}

struct found {
  size_t n;
  int64_t last_seq;
  bool all_ok;
};

static void found_row(void *arg, const struct gw_audit_record *r, enum gw_chain_status chain)
{
  struct found *f = arg;
  f->all_ok = (f->n == 0 || f->all_ok) && chain == GW_CHAIN_OK;
  f->n++;
  f->last_seq = r->seq;
}

static void funcs_approvals_audit(struct gw_state *st)
{
  struct cap_error err = {0};
  struct gw_approval_call call = {.capability = "c",
                                  .tool = "t",
                                  .user = "bob",
                                  .args = "{}",
                                  .args_hash = "h",
                                  .binding = "b"};
  char id[9], id2[9], lid[9];
  enum gw_approval_status status, lapsed, was;
  int n = 0;
  CHECK(gw_approval_create(st, &call, id, &err) == 0);
  CHECK(gw_approval_list_pending(st, count_approval, &n, &err) == 0 && n == 1);
  CHECK(gw_approval_wait(st, id, 300, &status, &err) == 0 && status == GW_APPROVAL_PENDING);
  struct gw_approval a = {0};
  CHECK(gw_approval_resolve(st, id, true, &was, &a, &err) == 0 && was == GW_APPROVAL_PENDING);
  gw_approval_clear(&a);
  CHECK(gw_approval_wait(st, id, 300, &status, &err) == 0 && status == GW_APPROVAL_APPROVED);
  CHECK(gw_approval_take(st, &call, &status, id2, &lapsed, lid, &err) == 0 &&
        status == GW_APPROVAL_APPROVED && strcmp(id, id2) == 0);
  CHECK(gw_approval_take(st, &call, &status, id2, &lapsed, lid, &err) == 0 &&
        status == GW_APPROVAL_NONE);
  CHECK(gw_approval_create(st, &call, id, &err) == 0);
  CHECK(gw_approval_void_for(st, "c", "t", &err) == 0);
  CHECK(gw_approval_resolve(st, id, true, &was, &a, &err) == 0 && was == GW_APPROVAL_VOID);
  gw_approval_clear(&a);
  struct gw_audit_record r = {.user = "bob",
                              .capability = "c",
                              .tool = "t",
                              .decision = "allow",
                              .outcome = "ok",
                              .duration_ms = 5};
  CHECK(gw_audit_append(st, &r, &err) == 0 && r.seq > 0);
  CHECK(gw_audit_change(st, "policy-set", "root", "c", "t", "allow", &err) == 0);
  size_t count = 0;
  CHECK(gw_audit_verify(st, &count, &err) == 0 && count >= 2);
  /* the dashboard's search: filters, a substring, keyset pages, chain status */
  struct found f = {0};
  bool more = true;
  CHECK(gw_audit_query(st, &(struct gw_audit_filter){.user = "bob", .capability = "c"}, found_row,
                       &f, &more, &err) == 0 &&
        f.n >= 1 && f.last_seq == r.seq && f.all_ok && !more);
  f = (struct found){0};
  CHECK(gw_audit_query(st, &(struct gw_audit_filter){.text = "policy-s"}, found_row, &f, &more,
                       &err) == 0 &&
        f.n == 1 && f.all_ok);
  f = (struct found){0};
  CHECK(gw_audit_query(st, &(struct gw_audit_filter){.before = r.seq + 1, .limit = 1}, found_row,
                       &f, &more, &err) == 0 &&
        f.n == 1 && f.last_seq == r.seq && more == (r.seq > 1));
  if (err.message)
    fprintf(stderr, "verify: %s\n", err.message);
  bool has = false;
  CHECK(gw_db_column_exists(gw_state_db(st), "trigger_config", "call_tool", &has) == 0 && has);
  CHECK(gw_db_column_exists(gw_state_db(st), "trigger_config", "nope", &has) == 0 && !has);
  uint32_t base = 0;
  CHECK(gw_state_id_range(st, "c", false, &base, &err) == 0 && base == 0);
  cap_error_clear(&err);
}

/* ---- the egress log (schema 9) ---- */

struct egress_seen {
  int n, allow, deny, suppressed;
  int64_t last_seq, call, count, bytes_up;
  char host[64], method[16], credential[16];
};

static void see_egress(void *arg, const struct gw_egress_record *r)
{
  struct egress_seen *e = arg;
  e->n++;
  e->last_seq = r->seq;
  e->call = r->call_seq;
  if (strcmp(r->decision, "allow") == 0) {
    e->allow++;
    e->bytes_up = r->bytes_up;
    snprintf(e->method, sizeof e->method, "%s", r->method);
    snprintf(e->credential, sizeof e->credential, "%s", r->credential);
  } else if (strcmp(r->decision, "deny") == 0) {
    e->deny++;
  } else {
    e->suppressed++;
    e->count = r->count;
  }
  snprintf(e->host, sizeof e->host, "%s", r->host);
}

static void funcs_egress(struct gw_state *st)
{
  struct cap_error err = {0};
  struct gw_egress_batch b;
  gw_egress_batch_init(&b);
  /* as the proxy hands them over: a tunnel allowed (no method, path or
   * credential), a request refused */
  struct proxy_egress_event ev = {.decision = PROXY_ALLOW,
                                  .time_ms = 1764115200123,
                                  .kind = "tunnel",
                                  .host = "api.example.org",
                                  .port = 443,
                                  .reason = "tunnel closed",
                                  .bytes_up = 517,
                                  .bytes_down = 4096};
  b.sink.event(b.sink.arg, &ev);
  ev = (struct proxy_egress_event){.decision = PROXY_DENY,
                                   .time_ms = 1764115200200,
                                   .kind = "http",
                                   .host = "evil.example",
                                   .port = 80,
                                   .method = "GET",
                                   .path = "/x?q=1",
                                   .reason = "not in the allowlist"};
  b.sink.event(b.sink.arg, &ev);
  CHECK(gw_egress_write(st, &b, "c", "bob", 7, &err) == 0);
  CHECK(b.n == 0);
  struct egress_seen e = {0};
  bool more = false;
  struct gw_egress_filter f = {.capability = "c"};
  CHECK(gw_egress_query(st, &f, see_egress, &e, &more, &err) == 0 && e.n == 2 && !more);
  CHECK(e.allow == 1 && e.deny == 1 && e.bytes_up == 517 && e.call == 7);
  CHECK_STR(e.method, ""); /* NULL read back as "" */
  CHECK_STR(e.credential, "");
  e = (struct egress_seen){0};
  f = (struct gw_egress_filter){.decision = "deny", .text = "/x?q"};
  CHECK(gw_egress_query(st, &f, see_egress, &e, &more, &err) == 0 && e.n == 1);
  CHECK_STR(e.host, "evil.example");
  /* past the batch's bound: one summary row, the rest counted */
  for (int i = 0; i < GW_EGRESS_BATCH_MAX + 10; i++) {
    ev = (struct proxy_egress_event){.decision = PROXY_DENY,
                                     .kind = "connect",
                                     .host = "h",
                                     .port = (unsigned)i % 65536,
                                     .reason = "r"};
    b.sink.event(b.sink.arg, &ev);
  }
  CHECK(gw_egress_write(st, &b, "flood", "", 0, &err) == 0);
  e = (struct egress_seen){0};
  f = (struct gw_egress_filter){.capability = "flood", .decision = "suppressed"};
  CHECK(gw_egress_query(st, &f, see_egress, &e, &more, &err) == 0 && e.n == 1 && e.count == 10);
  CHECK(e.call == 0); /* no audit record: NULL */
  /* keyset pages: 100, then older ones, none shown twice */
  e = (struct egress_seen){0};
  f = (struct gw_egress_filter){.capability = "flood", .limit = 100};
  CHECK(gw_egress_query(st, &f, see_egress, &e, &more, &err) == 0 && e.n == 100 && more);
  int64_t first_page_end = e.last_seq;
  e = (struct egress_seen){0};
  f.before = first_page_end;
  f.limit = GW_EGRESS_BATCH_MAX;
  CHECK(gw_egress_query(st, &f, see_egress, &e, &more, &err) == 0);
  CHECK(e.n == GW_EGRESS_BATCH_MAX + 1 - 100 && !more);
  e = (struct egress_seen){0};
  f = (struct gw_egress_filter){.call_seq = 7};
  CHECK(gw_egress_query(st, &f, see_egress, &e, &more, &err) == 0 && e.n == 2);
  gw_egress_batch_free(&b);
  cap_error_clear(&err);
}

/* ---- the dashboard's sessions (schema 10) ---- */

static void funcs_ui_sessions(struct gw_state *st)
{
  struct cap_error err = {0};
  const char *id = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
  struct gw_ui_session s = {.user = "alice", .token = "capsule_tok", .created_ms = 0};
  memset(s.csrf, 'c', 64);
  memset(s.path_key, 'k', 64);
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  int64_t now = (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
  s.created_ms = s.last_ms = now - 120000; /* two minutes ago: a touch moves it */
  CHECK(gw_ui_session_put(st, id, &s, &err) == 0);
  struct gw_ui_session got;
  bool found = false, alive = false;
  CHECK(gw_ui_session_get(st, id, 600000, 3600000, &got, &found, &err) == 0 && found);
  CHECK_STR(got.user, "alice");
  CHECK_STR(got.token, "capsule_tok");
  CHECK(memcmp(got.csrf, s.csrf, 64) == 0 && got.created_ms == now - 120000);
  CHECK(memcmp(got.path_key, s.path_key, 64) == 0 && got.path_key[64] == '\0');
  gw_ui_session_clear(&got);
  CHECK(gw_ui_session_touch(st, id, NULL, 600000, 3600000, &alive, &err) == 0 && alive);
  CHECK(gw_ui_session_get(st, id, 600000, 3600000, &got, &found, &err) == 0 && found);
  CHECK(got.last_ms >= now); /* touched */
  gw_ui_session_clear(&got);
  /* with its token: standing while the token is an operator's, in one statement */
  char op_tok[GW_ACCESS_TOKEN_LEN + 1], user_tok[GW_ACCESS_TOKEN_LEN + 1];
  CHECK(gw_access_issue(st, "ui-op", "alice", true, op_tok, &err) == 0);
  CHECK(gw_access_issue(st, "ui-user", "bob", false, user_tok, &err) == 0);
  CHECK(gw_ui_session_touch(st, id, op_tok, 600000, 3600000, &alive, &err) == 0 && alive);
  CHECK(gw_ui_session_touch(st, id, user_tok, 600000, 3600000, &alive, &err) == 0 && !alive);
  CHECK(gw_ui_session_touch(st, id, "capsule_none", 600000, 3600000, &alive, &err) == 0 && !alive);
  bool had = false;
  CHECK(gw_access_revoke(st, "ui-op", &had, &err) == 0 && had);
  CHECK(gw_ui_session_touch(st, id, op_tok, 600000, 3600000, &alive, &err) == 0 && !alive);
  CHECK(gw_access_revoke(st, "ui-user", &had, &err) == 0 && had);
  CHECK(gw_ui_session_touch(st, "no-such-session", NULL, 600000, 3600000, &alive, &err) == 0 &&
        !alive);
  /* the cookie's value is not in the table: only its hash */
  struct gw_stmt *q = gw_db_prepare(gw_state_db(st), "SELECT count(*) FROM ui_sessions WHERE"
                                                     " id_sha256 = ?");
  gw_stmt_bind_text(q, 1, id);
  CHECK(q && gw_stmt_step(q) == GW_DB_ROW && gw_stmt_int64(q, 0) == 0);
  gw_stmt_finalize(q);
  /* a row whose user was changed in the database does not unseal */
  CHECK(gw_db_exec(gw_state_db(st), "UPDATE ui_sessions SET user = 'mallory'") == GW_DB_OK);
  CHECK(gw_ui_session_get(st, id, 600000, 3600000, &got, &found, &err) == -EBADMSG && !found);
  cap_error_clear(&err);
  /* idle past its bound (20 minutes, of 10): gone, and removed */
  CHECK(gw_ui_session_rm(st, id, &err) == 0);
  s.created_ms = s.last_ms = now - 1200000;
  CHECK(gw_ui_session_put(st, id, &s, &err) == 0);
  CHECK(gw_ui_session_get(st, id, 600000, 3600000, &got, &found, &err) == 0 && !found);
  CHECK(gw_ui_session_touch(st, id, NULL, 600000, 3600000, &alive, &err) == 0 && !alive);
  CHECK(gw_ui_session_put(st, id, &s, &err) == 0);
  CHECK(gw_ui_session_rm(st, id, &err) == 0);
  CHECK(gw_ui_session_get(st, id, 600000, 3600000, &got, &found, &err) == 0 && !found);
  cap_error_clear(&err);
}

static int funcs(const char *dir)
{
  struct gw_state *st = open_state(dir);
  funcs_policies_creds(st);
  funcs_plugins(st);
  funcs_access_budget_tokens(st);
  funcs_approvals_audit(st);
  funcs_egress(st);
  funcs_ui_sessions(st);
  gw_state_close(st);
  printf("%d checks, %d failed\n", unit_checks, unit_failures);
  return unit_failures ? 1 : 0;
}

static int append(const char *dir, long n, const char *tag)
{
  struct gw_state *st = open_state(dir);
  long ok = 0, fail = 0;
  for (long i = 0; i < n; i++) {
    char outcome[96];
    snprintf(outcome, sizeof outcome, "%s-%ld", tag, i);
    struct gw_audit_record r = {
        .user = tag, .capability = "c", .tool = "t", .decision = "allow", .outcome = outcome};
    struct cap_error err = {0};
    if (gw_audit_append(st, &r, &err) == 0)
      ok++;
    else
      fail++;
    if (err.message && fail == 1)
      fprintf(stderr, "state_helper append: %s\n", err.message);
    cap_error_clear(&err);
  }
  gw_state_close(st);
  printf("ok %ld fail %ld\n", ok, fail);
  return 0;
}

static void print_outcome(void *arg, const struct gw_audit_record *r) { puts(r->outcome); }

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: state_helper funcs|append|verify|outcomes|ask|wait|open DIR ...\n");
    return 2;
  }
  const char *cmd = argv[1], *dir = argv[2];
  struct cap_error err = {0};
  if (strcmp(cmd, "sql") == 0) {
    int n = 0;
    char *text = gw_db_sql_pg(argv[2], &n);
    printf("%s [%d]\n", text ? text : "(malformed)", n);
    free(text);
    return 0;
  }
  if (strcmp(cmd, "funcs") == 0)
    return funcs(dir);
  if (strcmp(cmd, "append") == 0 && argc == 5)
    return append(dir, strtol(argv[3], NULL, 10), argv[4]);
  struct gw_state *st = open_state(dir);
  int r = 0;
  if (strcmp(cmd, "verify") == 0) {
    size_t n = 0;
    r = gw_audit_verify(st, &n, &err);
    printf("%zu\n", n);
  } else if (strcmp(cmd, "outcomes") == 0) {
    r = gw_audit_each(st, 0, print_outcome, NULL, &err);
  } else if (strcmp(cmd, "ask") == 0) {
    struct gw_approval_call call = {.capability = "c",
                                    .tool = "t",
                                    .user = "bob",
                                    .args = "{}",
                                    .args_hash = "h",
                                    .binding = "b"};
    char id[9];
    if ((r = gw_approval_create(st, &call, id, &err)) == 0)
      puts(id);
  } else if (strcmp(cmd, "wait") == 0 && argc == 5) {
    enum gw_approval_status s;
    if ((r = gw_approval_wait(st, argv[3], strtoll(argv[4], NULL, 10), &s, &err)) == 0)
      puts(gw_approval_status_name(s));
  } else if (strcmp(cmd, "event") == 0) {
    int64_t seq = 0;
    if ((r = gw_trigger_commit(st, "c", "tr", "", "{}", "{}", &seq, &err)) == 0)
      printf("%" PRId64 "\n", seq);
  } else if (strcmp(cmd, "open") != 0) {
    fprintf(stderr, "state_helper: unknown command %s\n", cmd);
    r = -EINVAL;
  }
  fflush(stdout);
  if (r < 0 && err.message)
    fprintf(stderr, "state_helper: %s\n", err.message);
  cap_error_clear(&err);
  gw_state_close(st);
  return r < 0 ? 1 : 0;
}
