/* The gateway's state: one SQLite database in the state directory (WAL,
 * safe for several capsule processes at once) holding policies, sealed
 * credentials, approvals and the audit log. Credentials are sealed with
 * libsodium (XChaCha20-Poly1305, the row's name, scope and user as
 * associated data) under a 32-byte key kept in STATE/key (0600, made on
 * first use) or given as 64 hex digits in CAPSULE_STATE_KEY. The audit log
 * is a chain: each record's hash is HMAC-SHA-256 (under a key derived from
 * the state key) over the previous hash and the record, and the chain's
 * head is kept, MACed, beside it, so an edited, dropped, reordered or
 * truncated record is found by gw_audit_verify. */
#ifndef CAPSULE_GATEWAY_STATE_H
#define CAPSULE_GATEWAY_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "manifest/model.h"

struct gw_state;

/* $XDG_STATE_HOME/capsule, else ~/.local/state/capsule (allocated). */
char *gw_state_default_dir(void);
/* The state directories no sandbox may see, those that exist, resolved:
 * the one in use, the default one, $CAPSULE_STATE, and every one this
 * user's capsule has opened (state_dirs.c): how many, in *ret (allocated;
 * free with gw_state_private_paths_free). */
size_t gw_state_private_paths(const char *state_dir, char ***ret);
void gw_state_private_paths_free(char **paths, size_t n);
/* Records dir in the default state directory's list (best effort). */
void gw_state_remember_dir(const char *dir);

int gw_state_open(const char *dir, struct gw_state **ret, struct cap_error *err);
void gw_state_close(struct gw_state *st);

/* ---- policies: user "" is the operator default ---- */
int gw_policy_set(struct gw_state *st, const char *cap, const char *tool, const char *user,
                  enum cap_policy policy, struct cap_error *err);
/* *found false when no row: the caller falls back. */
int gw_policy_get(struct gw_state *st, const char *cap, const char *tool, const char *user,
                  enum cap_policy *policy, bool *found, struct cap_error *err);
typedef void (*gw_policy_fn)(void *arg, const char *cap, const char *tool, const char *user,
                             enum cap_policy policy);
int gw_policy_list(struct gw_state *st, gw_policy_fn fn, void *arg, struct cap_error *err);

/* ---- credentials: scope CAP_SCOPE_SYSTEM (user "") or CAP_SCOPE_USER ---- */
int gw_cred_set(struct gw_state *st, const char *name, enum cap_secret_scope scope,
                const char *user, const char *value, size_t len, struct cap_error *err);
/* *value: allocated, NUL-terminated; wipe and free it with gw_secret_free. */
int gw_cred_get(struct gw_state *st, const char *name, enum cap_secret_scope scope,
                const char *user, char **value, bool *found, struct cap_error *err);
int gw_cred_rm(struct gw_state *st, const char *name, enum cap_secret_scope scope,
               const char *user, bool *found, struct cap_error *err);
typedef void (*gw_cred_fn)(void *arg, const char *name, enum cap_secret_scope scope,
                           const char *user, const char *updated);
int gw_cred_list(struct gw_state *st, gw_cred_fn fn, void *arg, struct cap_error *err);
void gw_secret_free(char *value);

/* ---- approvals ---- */
enum gw_approval { GW_APPROVAL_NONE, GW_APPROVAL_PENDING, GW_APPROVAL_APPROVED, GW_APPROVAL_DENIED };
/* The newest approval for exactly this call (capability, tool, user, args
 * hash). An approved one is consumed (it allows one call). */
int gw_approval_take(struct gw_state *st, const char *cap, const char *tool, const char *user,
                     const char *args_hash, enum gw_approval *status, int64_t *id,
                     struct cap_error *err);
int gw_approval_create(struct gw_state *st, const char *cap, const char *tool, const char *user,
                       const char *args_hash, const char *args, int64_t *id,
                       struct cap_error *err);
/* pending -> approved or denied; *found false when no pending approval has id. */
int gw_approval_resolve(struct gw_state *st, int64_t id, bool approve, bool *found,
                        struct cap_error *err);

/* ---- audit ---- */
struct gw_audit_record {
  int64_t seq;        /* set by append */
  char time[32];      /* set by append: RFC 3339, UTC, milliseconds */
  const char *user;
  const char *capability;
  const char *tool;
  char args_hash[65]; /* SHA-256 hex of the arguments as sent */
  const char *decision; /* "allow", "ask-approved", "block", "approval-pending", "denied", ... */
  int64_t duration_ms;
  const char *outcome;  /* "ok", or what failed */
  char result_hash[65]; /* SHA-256 hex of the result, "" when none */
  char prev[65], hash[65]; /* set by append */
};
int gw_audit_append(struct gw_state *st, struct gw_audit_record *r, struct cap_error *err);
typedef void (*gw_audit_fn)(void *arg, const struct gw_audit_record *r);
/* Records with seq > after, in order. */
int gw_audit_each(struct gw_state *st, int64_t after, gw_audit_fn fn, void *arg,
                  struct cap_error *err);
/* Returns 0 and *n records when the chain holds; -EBADMSG with err naming
 * the first bad record otherwise. */
int gw_audit_verify(struct gw_state *st, size_t *n, struct cap_error *err);

/* SHA-256 of data as 64 hex digits into out[65]. */
void gw_sha256_hex(const void *data, size_t len, char out[65]);

#endif
