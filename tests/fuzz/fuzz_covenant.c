/* libFuzzer target for Covenant's formats: a capability token in
 * Covenant's JSON (gateway/tokens.c), base58 (core/base58.c), RFC 8785
 * (core/jcs.c) and a Hermes gateway's server-sent events
 * (runtime/hermes_http.c). Whatever the bytes: no crash; a token that
 * parses writes JSON that parses back to the same signed bytes; base58 that
 * decodes encodes back to itself; canonical JSON is a fixed point; the
 * event splitter takes whole frames only, and no more than it was given. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base58.h"
#include "core/diag.h"
#include "core/jcs.h"
#include "core/json.h"
#include "gateway/tokens.h"
#include "runtime/hermes_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void token_round_trip(const char *text, size_t len)
{
  struct gw_token t, back;
  struct cap_error err = {0};
  if (gw_token_parse(text, len, &t, &err) < 0) {
    cap_error_clear(&err);
    return;
  }
  struct cap_buf json = {0}, m1 = {0}, m2 = {0};
  gw_token_json(&t, &json);
  if (gw_token_parse(json.data, json.len, &back, &err) < 0)
    abort();
  gw_token_message(&t, &m1);
  gw_token_message(&back, &m2);
  if (m1.len != m2.len || memcmp(m1.data, m2.data, m1.len))
    abort();
  gw_token_signature_ok(&back);
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  if (cap_json_parse(doc, t.scope, strlen(t.scope), "scope", 0, &diags) == 0)
    gw_scope_validate(t.action, doc->root, &err);
  gw_action_validate(t.action, &err);
  cap_error_clear(&err);
  cap_diags_free(&diags);
  cap_doc_free(doc);
  cap_buf_free(&json);
  cap_buf_free(&m1);
  cap_buf_free(&m2);
  gw_token_free(&t);
  gw_token_free(&back);
}

static void jcs_fixed_point(const char *text, size_t len)
{
  struct cap_doc *doc = cap_doc_new(), *again = cap_doc_new();
  struct cap_diags diags = {0};
  struct cap_buf a = {0}, b = {0};
  if (cap_json_parse(doc, text, len, "in", 0, &diags) == 0 && cap_jcs_write(&a, doc->root) == 0) {
    cap_diags_free(&diags);
    if (cap_json_parse(again, a.data, a.len, "jcs", 0, &diags) < 0 ||
        cap_jcs_write(&b, again->root) < 0 || a.len != b.len || memcmp(a.data, b.data, a.len))
      abort();
  }
  cap_diags_free(&diags);
  cap_buf_free(&a);
  cap_buf_free(&b);
  cap_doc_free(doc);
  cap_doc_free(again);
}

static void sse_event(void *arg, const char *data, size_t len)
{
  size_t *total = arg;
  *total += len;
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  cap_json_parse(doc, data, len, "sse", 0, &diags);
  cap_diags_free(&diags);
  cap_doc_free(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  size_t payload = 0, used = hermes_sse_take((const char *)data, size, sse_event, &payload);
  if (used > size || payload > used)
    abort();
  const char *text = (const char *)data;
  token_round_trip(text, size);
  jcs_fixed_point(text, size);
  unsigned char key[64];
  char enc[GW_SIG_B58];
  for (size_t want = 32; want <= 64; want += 32)
    if (size < 100 && cap_base58_decode(text, size, key, want)) {
      cap_base58_encode(key, want, enc);
      if (strlen(enc) != size || memcmp(enc, text, size))
        abort();
    }
  return 0;
}
