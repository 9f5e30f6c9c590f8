/* Capability tokens in the state database: the local issuer's key (its
 * secret sealed under the state key like a credential), issued tokens with
 * their revocations, trust roots, and the check a Covenant dispatch passes.
 * Rows carry an HMAC under the state's audit key: a token or trust row
 * changed outside capsule (a revocation cleared, a root added) no longer
 * counts. */
#include "gateway/tokens.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/base58.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/diag.h"
#include "core/jcs.h"
#include "core/json.h"
#include "core/text.h"
#include "gateway/state_int.h"

#define ISSUER_AD "capsule covenant issuer"

/* HMAC-SHA-256 under the audit key over the NUL-joined parts, as hex. */
static void row_mac(const struct gw_state *st, const char *const *parts, size_t n, char out[65])
{
  crypto_auth_hmacsha256_state h;
  crypto_auth_hmacsha256_init(&h, st->keys->audit, GW_KEY_BYTES);
  for (size_t i = 0; i < n; i++)
    crypto_auth_hmacsha256_update(&h, (const unsigned char *)parts[i], strlen(parts[i]) + 1);
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_final(&h, mac);
  sodium_bin2hex(out, 65, mac, sizeof mac);
}

static void token_row_mac(const struct gw_state *st, const char *sig, const char *json,
                          int64_t revoked_ms, char out[65])
{
  char revoked[24];
  snprintf(revoked, sizeof revoked, "%lld", (long long)revoked_ms);
  const char *parts[] = {"covenant-token", sig, json, revoked};
  row_mac(st, parts, 4, out);
}

static void trust_row_mac(const struct gw_state *st, const char *key, char out[65])
{
  const char *parts[] = {"covenant-trust", key};
  row_mac(st, parts, 2, out);
}

/* ---- the issuer key ---- */

static int issuer_load(struct gw_state *st, unsigned char pub[32], unsigned char sk[64],
                       bool *found, struct cap_error *err)
{
  *found = false;
  struct gw_stmt *s = gw_state_prep(st, "SELECT pubkey, nonce, sealed FROM covenant_issuer", NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  int r = 0;
  if (rc == GW_DB_ROW) {
    const char *b58 = (const char *)gw_stmt_text(s, 0);
    const unsigned char *nonce = gw_stmt_blob(s, 1);
    const unsigned char *sealed = gw_stmt_blob(s, 2);
    size_t slen = (size_t)gw_stmt_bytes(s, 2);
    _cleanup_free_ char *ad = cap_xasprintf(ISSUER_AD "/%s", b58 ? b58 : "");
    unsigned char plain[64];
    unsigned long long plen = 0;
    if (!b58 || !cap_base58_decode(b58, strlen(b58), pub, 32) ||
        gw_stmt_bytes(s, 1) != crypto_aead_xchacha20poly1305_ietf_NPUBBYTES ||
        slen != 64 + crypto_aead_xchacha20poly1305_ietf_ABYTES ||
        crypto_aead_xchacha20poly1305_ietf_decrypt(plain, &plen, NULL, sealed, slen,
                                                   (const unsigned char *)ad, strlen(ad), nonce,
                                                   st->keys->cred) != 0 ||
        memcmp(plain + 32, pub, 32) != 0)
      r = cap_error_set(err, EBADMSG,
                        "the token issuer key in %s/state.db cannot be unsealed: the state key "
                        "is not the one it was made with, or the row was changed",
                        st->dir);
    else if (sk)
      memcpy(sk, plain, 64);
    sodium_memzero(plain, sizeof plain);
    *found = r == 0;
  } else if (rc != GW_DB_DONE) {
    r = gw_state_db_error(st, err, "cannot read the token issuer key");
  }
  gw_stmt_finalize(s);
  return r;
}

static int issuer_make(struct gw_state *st, unsigned char pub[32], unsigned char sk[64],
                       struct cap_error *err)
{
  crypto_sign_keypair(pub, sk);
  char b58[GW_KEY_B58];
  cap_base58_encode(pub, 32, b58);
  _cleanup_free_ char *ad = cap_xasprintf(ISSUER_AD "/%s", b58);
  unsigned char nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
  unsigned char sealed[64 + crypto_aead_xchacha20poly1305_ietf_ABYTES];
  unsigned long long slen = 0;
  randombytes_buf(nonce, sizeof nonce);
  crypto_aead_xchacha20poly1305_ietf_encrypt(sealed, &slen, sk, 64, (const unsigned char *)ad,
                                             strlen(ad), NULL, nonce, st->keys->cred);
  /* OR IGNORE: another capsule may have made one first; the caller reads it back */
  struct gw_stmt *s = gw_state_prep(
      st, "INSERT OR IGNORE INTO covenant_issuer (id, pubkey, nonce, sealed) VALUES (1, ?, ?, ?)",
      b58, NULL);
  int rc = GW_DB_ERROR;
  if (s) {
    gw_stmt_bind_blob(s, 2, nonce, sizeof nonce);
    gw_stmt_bind_blob(s, 3, sealed, (int)slen);
    rc = gw_stmt_step(s);
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot store the token issuer key");
}

int gw_issuer_key(struct gw_state *st, unsigned char public_key[32], unsigned char secret_key[64],
                  bool *made, struct cap_error *err)
{
  unsigned char sk[64];
  bool found = false;
  *made = false;
  int r = issuer_load(st, public_key, sk, &found, err);
  if (r == 0 && !found) {
    r = issuer_make(st, public_key, sk, err);
    if (r == 0)
      r = issuer_load(st, public_key, sk, &found, err);
    *made = r == 0;
  }
  if (r == 0 && secret_key)
    memcpy(secret_key, sk, 64);
  sodium_memzero(sk, sizeof sk);
  return r;
}

/* raw, hex or base58; 32 bytes (a seed) or 64 (seed and public key) */
static bool key_bytes(const char *text, size_t len, unsigned char *out, size_t *n)
{
  while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
    len--;
  size_t got = 0;
  if (sodium_hex2bin(out, 64, text, len, NULL, &got, NULL) == 0 && (got == 32 || got == 64) &&
      len == 2 * got) {
    *n = got;
    return true;
  }
  if (cap_base58_decode(text, len, out, 64)) {
    *n = 64;
    return true;
  }
  if (cap_base58_decode(text, len, out, 32)) {
    *n = 32;
    return true;
  }
  return false;
}

int gw_key_file_read(const char *path, unsigned char public_key[32], unsigned char secret_key[64],
                     struct cap_error *err)
{
  /* like ssh with an identity file: a private key others may read is refused */
  struct stat sb;
  if (stat(path, &sb) == 0 && (sb.st_mode & 077))
    return cap_error_set(err, EPERM,
                         "%s is a private key that others may read or write (mode %04o); "
                         "`chmod 600 %s` first",
                         path, (unsigned)(sb.st_mode & 07777), path);
  char *data = NULL;
  size_t len = 0;
  int r = cap_read_file(path, 4096, &data, &len, err);
  if (r < 0)
    return cap_error_prefix(err, "issuer key"), r;
  unsigned char bytes[64];
  size_t n = 0;
  if (len == 32 || len == 64) {
    memcpy(bytes, data, len);
    n = len;
  } else if (!key_bytes(data, len, bytes, &n)) {
    n = 0;
  }
  sodium_memzero(data, len);
  free(data);
  if (!n)
    return cap_error_set(err, EINVAL,
                         "%s is not an Ed25519 private key: write its 32-byte seed (or the "
                         "64-byte secret key) raw, in hex or in base58 (`capsule token keygen "
                         "FILE` makes one)",
                         path);
  unsigned char seed[32];
  memcpy(seed, bytes, 32);
  crypto_sign_seed_keypair(public_key, secret_key, seed);
  bool consistent = n == 32 || memcmp(bytes + 32, public_key, 32) == 0;
  sodium_memzero(seed, sizeof seed);
  sodium_memzero(bytes, sizeof bytes);
  if (!consistent)
    return cap_error_set(err, EINVAL,
                         "%s holds a 64-byte secret key whose public half does not match its seed",
                         path);
  return 0;
}

/* ---- issuing and revoking ---- */

static int token_insert(struct gw_state *st, const struct gw_token *t, struct cap_error *err)
{
  char sig[GW_SIG_B58], subject[GW_KEY_B58], mac[65];
  cap_base58_encode(t->signature, 64, sig);
  cap_base58_encode(t->subject, 32, subject);
  struct cap_buf json = {0};
  gw_token_json(t, &json);
  token_row_mac(st, sig, json.data, 0, mac);
  struct gw_stmt *s =
      gw_state_prep(st,
                    "INSERT INTO covenant_tokens (signature, subject, action, token,"
                    " issued_ms, revoked_ms, mac) VALUES (?, ?, ?, ?, ?, 0, ?)",
                    sig, subject, t->action, json.data, NULL);
  int rc = GW_DB_ERROR;
  if (s) {
    gw_stmt_bind_int64(s, 5, (int64_t)cap_now_ms(CLOCK_REALTIME));
    gw_stmt_bind_text(s, 6, mac);
    rc = gw_stmt_step(s);
  }
  gw_stmt_finalize(s);
  cap_buf_free(&json);
  if (rc == GW_DB_CONSTRAINT) /* Ed25519 signs deterministically: the same grant, the same id */
    return cap_error_set(err, EEXIST,
                         "token %.12s exists already: the same subject, action, scope and expiry "
                         "give the same signature, and a revoked one stays revoked; give another "
                         "--expires or --scope for a new grant",
                         sig);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot record the token");
}

int gw_token_issue(struct gw_state *st, const unsigned char subject[32],
                   const char *subject_display, const char *action, const char *scope_json,
                   bool expires, uint64_t expires_at, struct gw_token *out, struct cap_error *err)
{
  *out = (struct gw_token){0};
  int r = gw_action_validate(action, err);
  if (r < 0)
    return r;
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  const char *text = scope_json ? scope_json : "{}";
  struct cap_buf jcs = {0};
  r = cap_json_parse(doc, text, strlen(text), "--scope", 0, &diags);
  if (r < 0)
    r = cap_error_set(err, EINVAL, "--scope is not JSON: %s",
                      diags.len ? diags.items[0].message : "parse error");
  if (r == 0)
    r = gw_scope_validate(action, doc->root, err);
  if (r == 0 && cap_jcs_write(&jcs, doc->root) < 0)
    r = cap_error_set(err, EINVAL, "--scope repeats a key or holds what JSON cannot");
  cap_diags_free(&diags);
  cap_doc_free(doc);
  unsigned char sk[64];
  bool made;
  if (r == 0)
    r = gw_issuer_key(st, out->granted_by, sk, &made, err);
  if (r < 0) {
    cap_buf_free(&jcs);
    return r;
  }
  memcpy(out->subject, subject, 32);
  out->subject_display = cap_xstrdup(subject_display);
  out->action = cap_xstrdup(action);
  out->scope = cap_buf_steal(&jcs);
  out->granted_by_display = cap_xstrdup("operator@local");
  out->expires = expires;
  out->expires_at = expires ? expires_at : 0;
  gw_token_sign(out, sk);
  sodium_memzero(sk, sizeof sk);
  r = token_insert(st, out, err);
  if (r < 0)
    gw_token_free(out);
  return r;
}

int gw_token_import(struct gw_state *st, const char *json, size_t len, struct gw_token *out,
                    struct cap_error *err)
{
  int r = gw_token_parse(json, len, out, err);
  if (r < 0)
    return r;
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  r = gw_action_validate(out->action, err);
  if (r == 0 && cap_json_parse(doc, out->scope, strlen(out->scope), "scope", 0, &diags) == 0)
    r = gw_scope_validate(out->action, doc->root, err);
  cap_diags_free(&diags);
  cap_doc_free(doc);
  if (r == 0 && !gw_token_signature_ok(out))
    r = cap_error_set(err, EBADMSG,
                      "the token's signature does not verify against its granted_by key: it was "
                      "forged or changed");
  if (r == 0)
    r = token_insert(st, out, err);
  if (r < 0)
    gw_token_free(out);
  return r;
}

int gw_token_revoke(struct gw_state *st, const char *id, struct gw_token *out,
                    struct cap_error *err)
{
  *out = (struct gw_token){0};
  unsigned char ignored[64];
  if (strlen(id) < 8 ||
      strspn(id, "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz") != strlen(id) ||
      (strlen(id) > 90 && !cap_base58_decode(id, strlen(id), ignored, 64)))
    return cap_error_set(err, EINVAL,
                         "a token id is its signature (base58), or at least its first 8 "
                         "characters; `capsule token list` shows them");
  /* a prefix (both dialects: no GLOB, and LIKE folds case in SQLite) */
  struct gw_stmt *s = gw_state_prep(st,
                                    "SELECT signature, token, revoked_ms FROM covenant_tokens"
                                    " WHERE substr(signature, 1, length(CAST(?1 AS TEXT))) = ?1",
                                    id, NULL);
  int rc, n = 0;
  int64_t revoked = 0;
  _cleanup_free_ char *sig = NULL, *json = NULL;
  while (s && (rc = gw_stmt_step(s)) == GW_DB_ROW && ++n == 1) {
    const char *a = gw_stmt_text(s, 0), *b = gw_stmt_text(s, 1); /* NULL: an edited row */
    sig = cap_xstrdup(a ? a : "");
    json = cap_xstrdup(b ? b : "");
    revoked = gw_stmt_int64(s, 2);
  }
  gw_stmt_finalize(s);
  if (!s)
    return gw_state_db_error(st, err, "cannot read the tokens");
  if (n != 1)
    return cap_error_set(err, n ? EINVAL : ENOENT,
                         n ? "\"%s\" starts more than one token's id; give more of it"
                           : "no token's id starts with \"%s\"; `capsule token list` shows them",
                         id);
  int r = gw_token_parse(json, strlen(json), out, err);
  if (r < 0)
    return r;
  if (revoked) { /* *out is the caller's only on success */
    gw_token_free(out);
    return cap_error_set(err, EALREADY, "token %.12s was revoked already", sig);
  }
  char mac[65];
  int64_t now = (int64_t)cap_now_ms(CLOCK_REALTIME);
  token_row_mac(st, sig, json, now, mac);
  s = gw_state_prep(st, "UPDATE covenant_tokens SET revoked_ms = ?, mac = ? WHERE signature = ?",
                    NULL);
  rc = GW_DB_ERROR;
  if (s) {
    gw_stmt_bind_int64(s, 1, now);
    gw_stmt_bind_text(s, 2, mac);
    gw_stmt_bind_text(s, 3, sig);
    rc = gw_stmt_step(s);
  }
  gw_stmt_finalize(s);
  if (rc == GW_DB_DONE)
    return 0;
  gw_token_free(out);
  return gw_state_db_error(st, err, "cannot record the revocation");
}

const char *gw_token_status_name(enum gw_token_status s)
{
  static const char *const names[] = {"active",    "expired",       "revoked",
                                      "untrusted", "bad-signature", "tampered"};
  return names[s];
}

/* ---- trust roots ---- */

int gw_trust_add(struct gw_state *st, const unsigned char key[32], bool *added,
                 struct cap_error *err)
{
  char b58[GW_KEY_B58], mac[65], when[32];
  cap_base58_encode(key, 32, b58);
  trust_row_mac(st, b58, mac);
  gw_state_now(when);
  struct gw_stmt *s = gw_state_prep(
      st, "INSERT OR IGNORE INTO covenant_trust (pubkey, added, mac) VALUES (?, ?, ?)", b58, when,
      mac, NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  *added = rc == GW_DB_DONE && gw_db_changes(st->db) > 0;
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot record the trust root");
}

int gw_trust_list(struct gw_state *st, gw_trust_fn fn, void *arg, struct cap_error *err)
{
  unsigned char pub[32];
  char b58[GW_KEY_B58];
  bool made;
  int r = gw_issuer_key(st, pub, NULL, &made, err);
  if (r < 0)
    return r;
  cap_base58_encode(pub, 32, b58);
  fn(arg, b58, "", true);
  struct gw_stmt *s =
      gw_state_prep(st, "SELECT pubkey, added, mac FROM covenant_trust ORDER BY added", NULL);
  int rc;
  while (s && (rc = gw_stmt_step(s)) == GW_DB_ROW) {
    const char *key = (const char *)gw_stmt_text(s, 0);
    const char *mac = (const char *)gw_stmt_text(s, 2);
    char want[65];
    trust_row_mac(st, key, want);
    if (mac && strcmp(mac, want) == 0) /* a root added outside capsule is no root */
      fn(arg, key, (const char *)gw_stmt_text(s, 1), false);
  }
  gw_stmt_finalize(s);
  return s && rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot read the trust roots");
}

static int trusted(struct gw_state *st, const unsigned char key[32], const unsigned char local[32],
                   bool *yes, struct cap_error *err)
{
  *yes = memcmp(key, local, 32) == 0;
  if (*yes)
    return 0;
  char b58[GW_KEY_B58], want[65];
  cap_base58_encode(key, 32, b58);
  trust_row_mac(st, b58, want);
  struct gw_stmt *s =
      gw_state_prep(st, "SELECT mac FROM covenant_trust WHERE pubkey = ?", b58, NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  if (rc == GW_DB_ROW) {
    const char *mac = (const char *)gw_stmt_text(s, 0);
    *yes = mac && strcmp(mac, want) == 0;
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_ROW || rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot read trust");
}

/* ---- reading tokens back ---- */

struct row_token {
  struct gw_token t;
  enum gw_token_status status;
  int64_t issued_ms;
  bool parsed;
};

/* The token of the current row of SELECT signature, subject, action,
 * token, issued_ms, revoked_ms, mac, and what it is worth now. */
static int row_read(struct gw_state *st, struct gw_stmt *s, const unsigned char local[32],
                    uint64_t now, struct row_token *out, struct cap_error *err)
{
  *out = (struct row_token){.status = GW_TOKEN_TAMPERED};
  const char *sig = (const char *)gw_stmt_text(s, 0);
  const char *subject = (const char *)gw_stmt_text(s, 1);
  const char *action = (const char *)gw_stmt_text(s, 2);
  const char *json = (const char *)gw_stmt_text(s, 3);
  int64_t revoked = gw_stmt_int64(s, 5);
  const char *mac = (const char *)gw_stmt_text(s, 6);
  out->issued_ms = gw_stmt_int64(s, 4);
  struct cap_error ignored = {0};
  if (!sig || !subject || !action || !json || !mac ||
      gw_token_parse(json, strlen(json), &out->t, &ignored) < 0) {
    cap_error_clear(&ignored);
    /* listed as what its columns say, tampered: the row does not hide */
    out->parsed = sig && subject && action &&
                  cap_base58_decode(sig, strlen(sig), out->t.signature, 64) &&
                  cap_base58_decode(subject, strlen(subject), out->t.subject, 32);
    if (out->parsed) {
      out->t.action = cap_xstrdup(action);
      out->t.scope = cap_xstrdup("null");
      out->t.subject_display = cap_xstrdup("?");
      out->t.granted_by_display = cap_xstrdup("?");
    }
    return 0;
  }
  out->parsed = true;
  char want[65], sig2[GW_SIG_B58], subject2[GW_KEY_B58];
  token_row_mac(st, sig, json, revoked, want);
  cap_base58_encode(out->t.signature, 64, sig2);
  cap_base58_encode(out->t.subject, 32, subject2);
  if (strcmp(mac, want) || strcmp(sig, sig2) || strcmp(subject, subject2) ||
      strcmp(action, out->t.action))
    return 0;
  bool trust = false;
  int r = trusted(st, out->t.granted_by, local, &trust, err);
  if (r < 0)
    return r;
  out->status = revoked                                     ? GW_TOKEN_REVOKED
                : !trust                                    ? GW_TOKEN_UNTRUSTED
                : !gw_token_signature_ok(&out->t)           ? GW_TOKEN_BAD_SIGNATURE
                : out->t.expires && now > out->t.expires_at ? GW_TOKEN_EXPIRED
                                                            : GW_TOKEN_ACTIVE;
  return 0;
}

#define TOKEN_COLUMNS "signature, subject, action, token, issued_ms, revoked_ms, mac"

int gw_token_list(struct gw_state *st, gw_token_fn fn, void *arg, struct cap_error *err)
{
  unsigned char local[32];
  bool made;
  int r = gw_issuer_key(st, local, NULL, &made, err);
  if (r < 0)
    return r;
  struct gw_stmt *s = gw_state_prep(
      st, "SELECT " TOKEN_COLUMNS " FROM covenant_tokens ORDER BY issued_ms, signature", NULL);
  uint64_t now = cap_now_ms(CLOCK_REALTIME);
  int rc = GW_DB_ERROR;
  while (r == 0 && s && (rc = gw_stmt_step(s)) == GW_DB_ROW) {
    struct row_token row;
    r = row_read(st, s, local, now, &row, err);
    if (r == 0 && row.parsed)
      fn(arg, &row.t, row.status, row.issued_ms);
    gw_token_free(&row.t);
  }
  gw_stmt_finalize(s);
  if (r < 0)
    return r;
  return s && rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot read the tokens");
}

/* ---- the dispatch check ---- */

void gw_capability_check_free(struct gw_capability_check *c)
{
  cap_strv_free(&c->missing);
  cap_strv_free(&c->why);
  cap_strv_free(&c->authorized);
  cap_strv_free(&c->optional_held);
  cap_strv_free(&c->optional_missing);
}

/* NULL when the token's scope admits this dispatch, else why not. */
static char *scope_problem(const struct gw_token *t, const struct cap_spec *spec,
                           const char *priority)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  struct cap_error err = {0};
  char *why = NULL;
  if (cap_json_parse(doc, t->scope, strlen(t->scope), "scope", 0, &diags) < 0)
    why = cap_xstrdup("its scope is not JSON");
  else if (gw_scope_validate(t->action, doc->root, &err) < 0)
    why = cap_xstrdup(err.message);
  else {
    const struct cap_node *agent = cap_node_get(doc->root, "agent_id");
    const struct cap_node *prio = cap_node_get(doc->root, "priority");
    if (agent && agent->kind != CAP_NODE_NULL &&
        (agent->kind != CAP_NODE_STRING || strcmp(agent->u.str.ptr, spec->id)))
      why = cap_xasprintf("its scope names another agent (agent_id), not %s", spec->id);
    else if (prio && prio->kind != CAP_NODE_NULL &&
             (prio->kind != CAP_NODE_STRING || strcmp(prio->u.str.ptr, priority)))
      why = cap_xasprintf("its scope admits another priority, not %s", priority);
  }
  cap_error_clear(&err);
  cap_diags_free(&diags);
  cap_doc_free(doc);
  return why;
}

/* The issuer's active, matching token for action: *held, and its
 * granter and signature; else *why says what the nearest one lacks. */
static int find_grant(struct gw_state *st, const unsigned char issuer[32],
                      const unsigned char local[32], const char *action,
                      const struct cap_spec *spec, const char *priority, bool *held,
                      struct cap_strv *authorized, char **why, struct cap_error *err)
{
  char subject[GW_KEY_B58];
  cap_base58_encode(issuer, 32, subject);
  struct gw_stmt *s =
      gw_state_prep(st,
                    "SELECT " TOKEN_COLUMNS " FROM covenant_tokens WHERE subject = ?"
                    " AND action = ? ORDER BY issued_ms",
                    subject, action, NULL);
  uint64_t now = cap_now_ms(CLOCK_REALTIME);
  int rc = GW_DB_ERROR, r = 0;
  *held = false;
  *why = cap_xasprintf("no token grants it to issuer %s", subject);
  while (r == 0 && !*held && s && (rc = gw_stmt_step(s)) == GW_DB_ROW) {
    struct row_token row;
    r = row_read(st, s, local, now, &row, err);
    char *problem = NULL;
    if (r == 0 && row.status != GW_TOKEN_ACTIVE)
      problem = cap_xasprintf("its token %.12s is %s", gw_stmt_text(s, 0),
                              gw_token_status_name(row.status));
    else if (r == 0 && (problem = scope_problem(&row.t, spec, priority)) != NULL) {
      char *p = cap_xasprintf("its token %.12s does not match: %s", gw_stmt_text(s, 0), problem);
      free(problem);
      problem = p;
    }
    if (r == 0 && !problem) {
      *held = true;
      cap_strv_push(authorized, action);
      cap_strv_push(authorized, row.t.granted_by_display);
      cap_strv_push(authorized, (const char *)gw_stmt_text(s, 0));
    }
    if (problem) {
      free(*why);
      *why = problem;
    }
    gw_token_free(&row.t);
  }
  gw_stmt_finalize(s);
  if (r == 0 && (!s || (rc != GW_DB_DONE && !*held)))
    r = gw_state_db_error(st, err, "cannot read the tokens");
  return r;
}

int gw_capability_check(struct gw_state *st, const unsigned char issuer[32],
                        const struct cap_spec *spec, const char *priority,
                        struct gw_capability_check *out, struct cap_error *err)
{
  *out = (struct gw_capability_check){0};
  unsigned char local[32];
  bool made;
  int r = gw_issuer_key(st, local, NULL, &made, err);
  for (int opt = 0; r == 0 && opt < 2; opt++) {
    const struct cap_strv *actions = opt ? &spec->actions_optional : &spec->actions_required;
    for (size_t i = 0; r == 0 && i < actions->len; i++) {
      bool held;
      char *why = NULL;
      struct cap_strv ignored = {0};
      r = find_grant(st, issuer, local, actions->v[i], spec, priority, &held,
                     opt ? &ignored : &out->authorized, &why, err);
      cap_strv_free(&ignored);
      if (r == 0 && !held && !opt) {
        cap_strv_push(&out->missing, actions->v[i]);
        cap_strv_push(&out->why, why);
      } else if (r == 0 && opt)
        cap_strv_push(held ? &out->optional_held : &out->optional_missing, actions->v[i]);
      free(why);
    }
  }
  if (r < 0)
    gw_capability_check_free(out);
  return r;
}

static void string_array(struct cap_jw *w, const char *key, const struct cap_strv *v)
{
  cap_jw_key(w, key);
  cap_jw_begin_array(w);
  for (size_t i = 0; i < v->len; i++)
    cap_jw_string(w, v->v[i]);
  cap_jw_end_array(w);
}

void gw_capability_check_json(const struct gw_capability_check *c, const struct cap_spec *spec,
                              struct cap_buf *out)
{
  struct cap_jw w;
  cap_jw_init(&w, out, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "agent_id");
  cap_jw_string(&w, spec->id);
  string_array(&w, "required_actions", &spec->actions_required);
  string_array(&w, "missing_actions", &c->missing);
  cap_jw_key(&w, "passed");
  cap_jw_bool(&w, c->missing.len == 0);
  cap_jw_key(&w, "authorized_by");
  cap_jw_begin_array(&w);
  for (size_t i = 0; i + 2 < c->authorized.len; i += 3) {
    cap_jw_begin_object(&w);
    cap_jw_key(&w, "action");
    cap_jw_string(&w, c->authorized.v[i]);
    cap_jw_key(&w, "granted_by_display");
    cap_jw_string(&w, c->authorized.v[i + 1]);
    cap_jw_key(&w, "signature_b58");
    cap_jw_string(&w, c->authorized.v[i + 2]);
    cap_jw_end_object(&w);
  }
  cap_jw_end_array(&w);
  string_array(&w, "why_missing", &c->why);
  string_array(&w, "optional_held", &c->optional_held);
  string_array(&w, "optional_missing", &c->optional_missing);
  cap_jw_end_object(&w);
}
