/* Covenant's formats: base58 and RFC 8785 against known vectors (Covenant's
 * golden keys, the RFC's examples), the signed bytes of a token, scope
 * rules, routing as covenant-router's tests route, budget arithmetic. */
#include <sodium.h>
#include <stdlib.h>

#include "core/base58.h"
#include "core/diag.h"
#include "core/jcs.h"
#include "core/json.h"
#include "gateway/budget.h"
#include "gateway/router.h"
#include "gateway/tokens.h"
#include "runtime/hermes_http.h"
#include "unit.h"

static void test_base58(void)
{
  unsigned char k[32], back[64];
  char s[GW_SIG_B58];
  memset(k, 1, 32);
  cap_base58_encode(k, 32, s); /* covenant-permissions' golden tool.json */
  CHECK_STR(s, "4vJ9JU1bJJE96FWSJKvHsmmFADCg4gpZQff4P3bkLKi");
  memset(k, 7, 32); /* covenant-audit's provenance vectors */
  cap_base58_encode(k, 32, s);
  CHECK_STR(s, "US517G5965aydkZ46HS38QLi7UQiSojurfbQfKCELFx");
  CHECK(cap_base58_decode(s, strlen(s), back, 32) && memcmp(back, k, 32) == 0);
  CHECK(!cap_base58_decode(s, strlen(s), back, 31));
  CHECK(!cap_base58_decode("0OIl", 4, back, 3));
  memset(k, 0, 3);
  k[3] = 9;
  cap_base58_encode(k, 4, s);
  CHECK_STR(s, "111A");
  CHECK(cap_base58_decode("111A", 4, back, 4) && memcmp(back, k, 4) == 0);
  for (int i = 0; i < 200; i++) {
    unsigned char sig[64];
    randombytes_buf(sig, sizeof sig);
    sig[0] = i % 3 ? sig[0] : 0;
    cap_base58_encode(sig, 64, s);
    CHECK(cap_base58_decode(s, strlen(s), back, 64) && memcmp(back, sig, 64) == 0);
  }
}

static char *jcs(const char *json)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  struct cap_buf b = {0};
  char *out = NULL;
  if (cap_json_parse(doc, json, strlen(json), "t", 0, &diags) == 0 &&
      cap_jcs_write(&b, doc->root) == 0)
    out = cap_buf_steal(&b);
  cap_buf_free(&b);
  cap_diags_free(&diags);
  cap_doc_free(doc);
  return out ? out : strdup("(error)");
}

#define CHECK_JCS(in, want)                                                                        \
  do {                                                                                             \
    char *_j = jcs(in);                                                                            \
    CHECK_STR(_j, want);                                                                           \
    free(_j);                                                                                      \
  } while (0)

static void test_jcs(void)
{
  /* RFC 8785 3.2.2.3 and appendix B numbers */
  CHECK_JCS("[1e30, 4.50, 0.002, 1e-7, 333333333.33333329, -0, 1e21, 1e20, 100, -1.5e-9]",
            "[1e+30,4.5,0.002,1e-7,333333333.3333333,0,1e+21,100000000000000000000,100,-1.5e-9]");
  /* 3.2.3: sorted by UTF-16 code units */
  CHECK_JCS("{\"\\u20ac\":1,\"\\r\":2,\"\\ufb33\":3,\"1\":4,\"\\ud83d\\ude00\":5,\"\\u0080\":6,"
            "\"\\u00f6\":7}",
            "{\"\\r\":2,\"1\":4,\"\xc2\x80\":6,\"\xc3\xb6\":7,\"\xe2\x82\xac\":1,"
            "\"\xf0\x9f\x98\x80\":5,\"\xef\xac\xb3\":3}");
  CHECK_JCS("{\"b\":[true,null,{\"z\":\"\\u0000\\u001f\\\"\\\\/\\u007f\"}],\"a\":\"\\n\"}",
            "{\"a\":\"\\n\",\"b\":[true,null,{\"z\":\"\\u0000\\u001f\\\"\\\\/\x7f\"}]}");
  CHECK_JCS("{\"a\":1,\"a\":2}", "(error)");
}

/* covenant-permissions' golden tool.json: its signed bytes' layout */
static void test_token_message(void)
{
  static const char golden[] =
      "{\"capability\":{\"subject\":{\"display\":\"research@agent\",\"pubkey\":"
      "\"4vJ9JU1bJJE96FWSJKvHsmmFADCg4gpZQff4P3bkLKi\"},\"action\":\"tool.call.echo\",\"scope\":"
      "{\"tool\":\"echo\",\"version\":1,\"max_uses\":5,\"arguments\":{\"allow\":{\"text\":\"hi\"}}}"
      ","
      "\"granted_by\":{\"display\":\"operator@local\",\"pubkey\":"
      "\"8qbHbw2BbbTHBW1sbeqakYXVKRQM8Ne7pLK7m6CVfeR\"},\"expires_at\":1700000000000},"
      "\"signature\":\"1111111111111111111111111111111111111111111111111111111111111111\"}";
  struct gw_token t;
  struct cap_error err = {0};
  CHECK(gw_token_parse(golden, strlen(golden), &t, &err) == 0);
  CHECK_STR(t.scope,
            "{\"arguments\":{\"allow\":{\"text\":\"hi\"}},\"max_uses\":5,\"tool\":\"echo\","
            "\"version\":1}");
  struct cap_buf m = {0};
  gw_token_message(&t, &m);
  size_t al = strlen(t.action), sl = strlen(t.scope);
  CHECK(m.len == 32 + 4 + al + 4 + sl + 32 + 1 + 8);
  CHECK(m.len > 40 && (unsigned char)m.data[0] == 1 && (unsigned char)m.data[31] == 1);
  CHECK(m.len > 40 && m.data[35] == (char)al && memcmp(m.data + 36, "tool.call.echo", al) == 0);
  CHECK(m.len > 40 && (unsigned char)m.data[36 + al + 3] == sl);
  CHECK(m.len > 40 && m.data[m.len - 9] == 1); /* has an expiry */
  uint64_t e = 0;
  for (int i = 0; i < 8 && m.len > 40; i++)
    e = e << 8 | (unsigned char)m.data[m.len - 8 + i];
  CHECK(e == 1700000000000ULL);
  CHECK(!gw_token_signature_ok(&t));
  /* signed with a key of our own, it verifies; any change breaks it */
  unsigned char pk[32], sk[64];
  crypto_sign_keypair(pk, sk);
  memcpy(t.granted_by, pk, 32);
  gw_token_sign(&t, sk);
  CHECK(gw_token_signature_ok(&t));
  struct cap_buf json = {0};
  gw_token_json(&t, &json);
  struct gw_token back;
  CHECK(gw_token_parse(json.data, json.len, &back, &err) == 0 && gw_token_signature_ok(&back));
  back.expires_at++;
  CHECK(!gw_token_signature_ok(&back));
  gw_token_free(&back);
  cap_buf_free(&json);
  cap_buf_free(&m);
  gw_token_free(&t);
  cap_error_clear(&err);
}

static int scope_ok(const char *action, const char *json)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  struct cap_error err = {0};
  int r = cap_json_parse(doc, json, strlen(json), "s", 0, &diags) == 0
              ? gw_scope_validate(action, doc->root, &err)
              : -1;
  cap_error_clear(&err);
  cap_diags_free(&diags);
  cap_doc_free(doc);
  return r == 0;
}

/* covenant-permissions' validate_scope tests */
static void test_scopes(void)
{
  CHECK(scope_ok("tool.web_search", "{}"));
  CHECK(scope_ok("custom.action", "\"opaque\""));
  CHECK(scope_ok("intent.delegate", "{\"version\":1,\"priority\":\"normal\"}"));
  CHECK(
      scope_ok("tool.call.echo",
               "{\"version\":1,\"tool\":\"echo\",\"arguments\":{\"allow\":{\"text\":\"hello\"}}}"));
  CHECK(scope_ok("memory.write", "{\"version\":1,\"tiers\":[\"working\",\"episodic\"],"
                                 "\"record_id\":null,\"before_ms\":null,\"apply\":false}"));
  CHECK(scope_ok("audit.verify",
                 "{\"version\":1,\"window\":100,\"before_ms\":null,\"include_integrity\":true}"));
  CHECK(scope_ok("chain.flush",
                 "{\"version\":1,\"limit\":10,\"mint\":null,\"cluster\":\"localnet\","
                 "\"payer_pubkey_b58\":null,\"resource\":\"memory\",\"batch_id\":null}"));
  CHECK(!scope_ok("tool.web_search", "\"bad\""));
  CHECK(!scope_ok("memory.write", "[\"bad\"]"));
  CHECK(!scope_ok("memory.write", "{\"tiers\":[\"working\"]}"));
  CHECK(!scope_ok("memory.write", "{\"version\":2}"));
  CHECK(!scope_ok("memory.write", "{\"version\":\"1\"}"));
  CHECK(!scope_ok("tool.call.echo", "{\"version\":1,\"tool\":\"search\"}"));
  CHECK(!scope_ok("tool.call.echo", "{\"version\":1,\"arguments\":{\"allow\":[\"text\"]}}"));
  CHECK(!scope_ok("memory.write", "{\"version\":1,\"tiers\":[\"archive\"]}"));
  CHECK(!scope_ok("a2a.requeue", "{\"version\":1,\"duplicate_risk\":\"unknown\"}"));
  CHECK(!scope_ok("audit.verify", "{\"version\":1,\"window\":0}"));
  CHECK(!scope_ok("peers.revoke", "{\"version\":1,\"force\":\"yes\"}"));
  CHECK(!scope_ok("peers.revoke", "{\"version\":1,\"token_prefix\":\"\"}"));
  CHECK(!scope_ok("peers.revoke", "{\"version\":1,\"peer_pubkey_b58\":\"peer-1\"}"));
  CHECK(!scope_ok("chain.flush", "{\"version\":1,\"limit\":-1}"));
  CHECK(!scope_ok("chain.flush", "{\"version\":1,\"resource\":\"unknown\"}"));
  CHECK(!scope_ok("chain.flush", "{\"version\":1,\"batch_id\":\"\"}"));
  struct cap_error err = {0};
  CHECK(gw_action_validate("tool.web_search", &err) == 0);
  CHECK(gw_action_validate("network.fetch", &err) < 0);
  cap_error_clear(&err);
  CHECK(gw_action_validate("memory.", &err) < 0);
  cap_error_clear(&err);
}

static struct cap_spec *card(const char *id, const char *a, const char *b)
{
  struct cap_spec *s = calloc(1, sizeof *s);
  s->id = strdup(id);
  s->format = CAP_FORMAT_COVENANT;
  cap_strv_push(&s->actions_required, a);
  if (b)
    cap_strv_push(&s->actions_required, b);
  return s;
}

/* covenant-router's tests */
static void test_router(void)
{
  struct cap_spec *cards[] = {card("renderer", "tool.gpu_inference", NULL),
                              card("research", "tool.web_search", "memory.write")};
  struct gw_registry reg = {.caps = cards, .n = 2};
  unsigned score = 0;
  const struct cap_spec *s = gw_route(&reg, "find recent papers on agent memory", &score);
  CHECK(s == cards[1] && score >= 2);
  CHECK(gw_route(&reg, "find papers and summarize them", &score) == cards[1]);
  CHECK(gw_route(&reg, "generate an image of a cat", &score) == cards[0]);
  CHECK(gw_route(&reg, "zzz no keywords here", &score) == NULL && score == 0);
  CHECK(gw_route(&reg, "LOO\xe2\x84\xaa UP", &score) == cards[1]); /* KELVIN SIGN: k */
  struct cap_spec *tie[] = {card("alpha", "intent.subscribe", NULL),
                            card("beta", "intent.subscribe", NULL)};
  struct gw_registry reg2 = {.caps = tie, .n = 2};
  CHECK(gw_route(&reg2, "ping", &score) == tie[0]);
  CHECK(*gw_route_keywords("unknown.capability") == NULL);
  CHECK(*gw_route_keywords("") == NULL);
  for (int i = 0; i < 2; i++) {
    cap_spec_free(cards[i]);
    cap_spec_free(tie[i]);
  }
}

static void test_budget_math(void)
{
  CHECK(gw_budget_cost(0) == 1);
  CHECK(gw_budget_cost(1000) == 1);
  CHECK(gw_budget_cost(1001) == 2);
  CHECK(gw_budget_cost(1200) == 2);
  struct gw_bucket b = {.capacity = 3600, .tokens = 0, .last_refill_ms = 0};
  CHECK(gw_budget_refill_eta(&b, 1, 5000) == 6000); /* one credit a second */
  b.capacity = 1;
  CHECK(gw_budget_refill_eta(&b, 1, 0) == 3600000);
  b.capacity = 0;
  CHECK(gw_budget_refill_eta(&b, 1, 0) == UINT64_MAX);
}

static void collect(void *arg, const char *data, size_t len)
{
  struct cap_buf *b = arg;
  cap_buf_append(b, data, len);
  cap_buf_putc(b, '|');
}

/* covenant-runtime's SSE tests: LF and CRLF frames, comments skipped,
 * data lines joined, an unfinished frame left */
static void test_sse(void)
{
  static const char in[] = ": keepalive 1710000000\n\n"
                           "data: {\"event\":\"tool.started\"}\r\n\r\n"
                           ": keepalive\ndata:a\ndata: b\n\n"
                           "event: x\nid: 7\n\n"
                           "data: unfinished";
  struct cap_buf got = {0};
  size_t used = hermes_sse_take(in, sizeof in - 1, collect, &got);
  CHECK_STR(got.data, "{\"event\":\"tool.started\"}|a\nb|");
  CHECK(used == sizeof in - 1 - strlen("data: unfinished"));
  cap_buf_free(&got);
  CHECK(hermes_sse_take("data: x", 7, collect, &got) == 0 && got.len == 0);
}

UNIT_MAIN(test_sse, test_base58, test_jcs, test_token_message, test_scopes, test_router,
          test_budget_math)
