/* Covenant capability tokens (covenant-permissions): a capability is a
 * subject (an Ed25519 public key and a display name), an action in a
 * reserved namespace, a JSON scope, the granter's key and display, and an
 * optional expiry in epoch ms; the granter signs
 *   subject[32] || len_be32(action) || action || len_be32(scope) ||
 *   JCS(scope) || granted_by[32] || has_expiry[1] || expires_at_be64
 * with Ed25519 (libsodium). The JSON form is Covenant's SignedCapability:
 * {"capability": {"subject": {"display", "pubkey" (base58)}, "action",
 * "scope", "granted_by": {...}, "expires_at": ms|null}, "signature": base58}.
 *
 * tokens.c: the format (signed bytes, JSON, action and scope rules);
 * token_store.c: the local issuer key (sealed in the state like a
 * credential), issued and revoked tokens, trust roots, and the check a
 * Covenant dispatch passes. Nothing here prints; returned strings are the
 * caller's to free. */
#ifndef CAPSULE_GATEWAY_TOKENS_H
#define CAPSULE_GATEWAY_TOKENS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/node.h"
#include "gateway/state.h"
#include "manifest/model.h"

#define GW_KEY_B58 48 /* room for a 32-byte key in base58 */
#define GW_SIG_B58 96 /* room for a 64-byte signature in base58 */

struct gw_token {
  unsigned char subject[32];
  char *subject_display;
  char *action;
  char *scope; /* RFC 8785 JSON */
  unsigned char granted_by[32];
  char *granted_by_display;
  bool expires;
  uint64_t expires_at; /* epoch ms */
  unsigned char signature[64];
};
void gw_token_free(struct gw_token *t);

/* The bytes the granter signs. */
void gw_token_message(const struct gw_token *t, struct cap_buf *out);
void gw_token_sign(struct gw_token *t, const unsigned char secret_key[64]);
bool gw_token_signature_ok(const struct gw_token *t);
/* Covenant's SignedCapability JSON (one line). */
void gw_token_json(const struct gw_token *t, struct cap_buf *out);
/* Reads a SignedCapability; -EINVAL with err saying what is wrong. */
int gw_token_parse(const char *text, size_t len, struct gw_token *t, struct cap_error *err);

/* An action Covenant can grant: a reserved namespace and a name after the
 * dot, no spaces or controls. */
int gw_action_validate(const char *action, struct cap_error *err);
/* Covenant's validate_scope: for its namespaces the scope is an object,
 * empty or {"version": 1, ...} with the namespace's fields well typed. */
int gw_scope_validate(const char *action, const struct cap_node *scope, struct cap_error *err);

/* ---- the store (token_store.c) ---- */

/* The local issuer's key pair, made and sealed in the state on first use
 * (*made then true). secret_key may be NULL. */
int gw_issuer_key(struct gw_state *st, unsigned char public_key[32], unsigned char secret_key[64],
                  bool *made, struct cap_error *err);
/* Reads an Ed25519 private key file: a 32-byte seed or a 64-byte secret
 * key, raw, hex or base58. */
int gw_key_file_read(const char *path, unsigned char public_key[32], unsigned char secret_key[64],
                     struct cap_error *err);

/* Signs and records a token granted by the local issuer; *out filled. */
int gw_token_issue(struct gw_state *st, const unsigned char subject[32],
                   const char *subject_display, const char *action, const char *scope_json,
                   bool expires, uint64_t expires_at, struct gw_token *out, struct cap_error *err);
/* Records a token granted elsewhere (Covenant's JSON): it must parse, its
 * action and scope be valid and its signature verify; it counts only when
 * its granter is a trust root. *out is the token. */
int gw_token_import(struct gw_state *st, const char *json, size_t len, struct gw_token *out,
                    struct cap_error *err);
/* Revokes the token whose base58 signature is id or starts with it (at
 * least 8 characters, one match); *out is the token. -ENOENT when none,
 * -EALREADY when it was revoked already. */
int gw_token_revoke(struct gw_state *st, const char *id, struct gw_token *out,
                    struct cap_error *err);

enum gw_token_status {
  GW_TOKEN_ACTIVE,
  GW_TOKEN_EXPIRED,
  GW_TOKEN_REVOKED,
  GW_TOKEN_UNTRUSTED,     /* granted by a key that is not a trust root */
  GW_TOKEN_BAD_SIGNATURE, /* the signature does not verify */
  GW_TOKEN_TAMPERED,      /* its row was changed outside capsule */
};
const char *gw_token_status_name(enum gw_token_status s);
typedef void (*gw_token_fn)(void *arg, const struct gw_token *t, enum gw_token_status status,
                            int64_t issued_ms);
int gw_token_list(struct gw_state *st, gw_token_fn fn, void *arg, struct cap_error *err);

/* Trust roots: keys whose grants count (the local issuer always does). */
int gw_trust_add(struct gw_state *st, const unsigned char key[32], bool *added,
                 struct cap_error *err);
typedef void (*gw_trust_fn)(void *arg, const char *key_b58, const char *added, bool local);
int gw_trust_list(struct gw_state *st, gw_trust_fn fn, void *arg, struct cap_error *err);

/* What a dispatch's issuer holds of an agent's actions: every required
 * action needs an active token (trusted granter, valid signature,
 * unexpired, unrevoked) whose scope is valid and matches the dispatch
 * (an "agent_id" names this agent, a "priority" this priority). */
struct gw_capability_check {
  struct cap_strv missing;    /* required actions not held */
  struct cap_strv why;        /* for each missing one, why */
  struct cap_strv authorized; /* for each held one: "action", "granted_by_display", "signature" */
  struct cap_strv optional_held, optional_missing;
};
void gw_capability_check_free(struct gw_capability_check *c);
int gw_capability_check(struct gw_state *st, const unsigned char issuer[32],
                        const struct cap_spec *spec, const char *priority,
                        struct gw_capability_check *out, struct cap_error *err);
/* The check as one JSON object (the audit record's outcome, and what
 * `audit export --format covenant` reads back). */
void gw_capability_check_json(const struct gw_capability_check *c, const struct cap_spec *spec,
                              struct cap_buf *out);

#endif
