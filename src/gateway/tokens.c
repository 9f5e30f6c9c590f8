/* Capability tokens: the signed bytes, Covenant's JSON form, and the
 * action and scope rules of covenant-permissions (validate_scope). */
#include "gateway/tokens.h"

#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "core/base58.h"
#include "core/cleanup.h"
#include "core/diag.h"
#include "core/jcs.h"
#include "core/json.h"

void gw_token_free(struct gw_token *t)
{
  free(t->subject_display);
  free(t->action);
  free(t->scope);
  free(t->granted_by_display);
  *t = (struct gw_token){0};
}

static void put_be32(struct cap_buf *b, uint32_t v)
{
  unsigned char x[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
                        (unsigned char)v};
  cap_buf_append(b, (const char *)x, 4);
}

void gw_token_message(const struct gw_token *t, struct cap_buf *out)
{
  cap_buf_append(out, (const char *)t->subject, 32);
  put_be32(out, (uint32_t)strlen(t->action));
  cap_buf_puts(out, t->action);
  put_be32(out, (uint32_t)strlen(t->scope));
  cap_buf_puts(out, t->scope);
  cap_buf_append(out, (const char *)t->granted_by, 32);
  cap_buf_putc(out, t->expires ? 1 : 0);
  uint64_t e = t->expires ? t->expires_at : 0;
  for (int i = 7; i >= 0; i--)
    cap_buf_putc(out, (char)(unsigned char)(e >> (8 * i)));
}

void gw_token_sign(struct gw_token *t, const unsigned char secret_key[64])
{
  struct cap_buf m = {0};
  gw_token_message(t, &m);
  crypto_sign_detached(t->signature, NULL, (const unsigned char *)m.data, m.len, secret_key);
  cap_buf_free(&m);
}

bool gw_token_signature_ok(const struct gw_token *t)
{
  struct cap_buf m = {0};
  gw_token_message(t, &m);
  bool ok = crypto_sign_verify_detached(t->signature, (const unsigned char *)m.data, m.len,
                                        t->granted_by) == 0;
  cap_buf_free(&m);
  return ok;
}

static void agent_id_json(struct cap_jw *w, const char *key, const char *display,
                          const unsigned char pub[32])
{
  char b58[GW_KEY_B58];
  cap_base58_encode(pub, 32, b58);
  cap_jw_key(w, key);
  cap_jw_begin_object(w);
  cap_jw_key(w, "display");
  cap_jw_string(w, display);
  cap_jw_key(w, "pubkey");
  cap_jw_string(w, b58);
  cap_jw_end_object(w);
}

void gw_token_json(const struct gw_token *t, struct cap_buf *out)
{
  struct cap_jw w;
  cap_jw_init(&w, out, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "capability");
  cap_jw_begin_object(&w);
  agent_id_json(&w, "subject", t->subject_display, t->subject);
  cap_jw_key(&w, "action");
  cap_jw_string(&w, t->action);
  cap_jw_key(&w, "scope"); /* canonical already: its members in JCS order */
  struct cap_doc *scope = cap_doc_new();
  struct cap_diags diags = {0};
  if (cap_json_parse(scope, t->scope, strlen(t->scope), "scope", 0, &diags) == 0)
    cap_jw_node(&w, scope->root);
  else
    cap_jw_null(&w);
  cap_diags_free(&diags);
  cap_doc_free(scope);
  agent_id_json(&w, "granted_by", t->granted_by_display, t->granted_by);
  cap_jw_key(&w, "expires_at");
  if (t->expires)
    cap_jw_int(&w, (int64_t)t->expires_at);
  else
    cap_jw_null(&w);
  cap_jw_end_object(&w);
  char sig[GW_SIG_B58];
  cap_base58_encode(t->signature, 64, sig);
  cap_jw_key(&w, "signature");
  cap_jw_string(&w, sig);
  cap_jw_end_object(&w);
}

/* ---- reading ---- */

static int read_agent_id(const struct cap_node *obj, const char *key, char **display,
                         unsigned char pub[32], struct cap_error *err)
{
  const struct cap_node *a = cap_node_get(obj, key);
  const struct cap_node *d = a ? cap_node_get(a, "display") : NULL;
  const struct cap_node *p = a ? cap_node_get(a, "pubkey") : NULL;
  if (!a || a->kind != CAP_NODE_OBJECT || !d || d->kind != CAP_NODE_STRING || !p ||
      p->kind != CAP_NODE_STRING)
    return cap_error_set(err, EINVAL,
                         "capability.%s must be an object with \"display\" and \"pubkey\" strings",
                         key);
  if (!cap_base58_decode(p->u.str.ptr, p->u.str.len, pub, 32))
    return cap_error_set(err, EINVAL,
                         "capability.%s.pubkey is not a base58 Ed25519 public key (32 bytes)", key);
  *display = cap_xstrdup(d->u.str.ptr);
  return 0;
}

static int read_expiry(const struct cap_node *cap, struct gw_token *t, struct cap_error *err)
{
  const struct cap_node *e = cap_node_get(cap, "expires_at");
  if (!e || e->kind == CAP_NODE_NULL)
    return 0;
  if (e->kind != CAP_NODE_INT || e->u.num.i < 0)
    return cap_error_set(err, EINVAL,
                         "capability.expires_at must be epoch milliseconds (an integer) or null");
  t->expires = true;
  t->expires_at = (uint64_t)e->u.num.i;
  return 0;
}

static int read_capability(const struct cap_node *root, struct gw_token *t, struct cap_error *err)
{
  const struct cap_node *cap = cap_node_get(root, "capability");
  const struct cap_node *sig = cap_node_get(root, "signature");
  if (!cap || cap->kind != CAP_NODE_OBJECT)
    return cap_error_set(err, EINVAL, "\"capability\" must be an object");
  if (!sig || sig->kind != CAP_NODE_STRING ||
      !cap_base58_decode(sig->u.str.ptr, sig->u.str.len, t->signature, 64))
    return cap_error_set(err, EINVAL,
                         "\"signature\" must be a base58 Ed25519 signature (64 bytes)");
  int r = read_agent_id(cap, "subject", &t->subject_display, t->subject, err);
  if (r == 0)
    r = read_agent_id(cap, "granted_by", &t->granted_by_display, t->granted_by, err);
  const struct cap_node *action = cap_node_get(cap, "action");
  if (r == 0 && (!action || action->kind != CAP_NODE_STRING ||
                 memchr(action->u.str.ptr, 0, action->u.str.len)))
    r = cap_error_set(err, EINVAL, "capability.action must be a string");
  if (r == 0)
    t->action = cap_xstrdup(action->u.str.ptr);
  const struct cap_node *scope = cap_node_get(cap, "scope");
  struct cap_buf jcs = {0};
  if (r == 0 && (!scope || cap_jcs_write(&jcs, scope) < 0))
    r = cap_error_set(err, EINVAL, "capability.scope is missing or has no canonical JSON form");
  if (r == 0)
    t->scope = cap_buf_steal(&jcs);
  cap_buf_free(&jcs);
  return r == 0 ? read_expiry(cap, t, err) : r;
}

int gw_token_parse(const char *text, size_t len, struct gw_token *t, struct cap_error *err)
{
  *t = (struct gw_token){0};
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  int r = cap_json_parse(doc, text, len, "token", 0, &diags);
  if (r < 0)
    r = cap_error_set(err, EINVAL, "the token is not JSON: %s",
                      diags.len ? diags.items[0].message : "parse error");
  else if (doc->root->kind != CAP_NODE_OBJECT)
    r = cap_error_set(err, EINVAL, "the token must be a JSON object");
  else
    r = read_capability(doc->root, t, err);
  cap_diags_free(&diags);
  cap_doc_free(doc);
  if (r < 0)
    gw_token_free(t);
  return r;
}

/* ---- actions ---- */

/* covenant-permissions' namespaces (its golden capability files), plus
 * capabilities.purge */
static const char *const namespaces[] = {
    "intent",   "tool",  "memory", "agent",      "a2a",  "audit",  "peers",
    "identity", "chain", "secret", "settlement", "x402", "wallet", "capabilities",
};

int gw_action_validate(const char *action, struct cap_error *err)
{
  const char *dot = strchr(action, '.');
  for (const char *p = action; *p; p++)
    if ((unsigned char)*p <= ' ' || *p == 0x7f)
      return cap_error_set(err, EINVAL, "action \"%s\" holds a space or a control character",
                           action);
  for (size_t i = 0; dot && i < sizeof namespaces / sizeof *namespaces; i++)
    if ((size_t)(dot - action) == strlen(namespaces[i]) &&
        strncmp(action, namespaces[i], (size_t)(dot - action)) == 0) {
      if (!dot[1])
        return cap_error_set(err, EINVAL,
                             "action \"%s\" names nothing after the namespace; write e.g. "
                             "\"%sread\"",
                             action, action);
      return 0;
    }
  return cap_error_set(err, EINVAL,
                       "action \"%s\" is outside Covenant's namespaces (intent., tool., memory., "
                       "agent., identity., a2a., audit., peers., chain., secret., settlement., "
                       "x402., wallet., capabilities.)",
                       action);
}

/* ---- scopes (covenant-permissions' validate_scope) ---- */

enum field_rule {
  F_STR_OR_NULL,
  F_NONEMPTY_STR_OR_NULL,
  F_KEY_OR_NULL,    /* a base58 32-byte key */
  F_PREFIX_OR_NULL, /* a non-empty base58 prefix */
  F_BOOL,
  F_BOOL_OR_NULL,
  F_UINT_OR_NULL,
  F_POSITIVE,
  F_ENUM,
  F_ENUM_OR_NULL,
  F_ENUM_ARRAY,
  F_TOOL_ARGUMENTS,
};

struct field {
  const char *name;
  enum field_rule rule;
  const char *const *values; /* for the enums, NULL-terminated */
};

static const char *const tiers[] = {"working", "episodic", "longterm", NULL};
static const char *const risks[] = {"idempotent", "operator-accepted", "operator_accepted", NULL};
static const char *const resources[] = {"compute", "memory",       "tool",
                                        "message", "registration", NULL};

static const struct field tool_fields[] = {
    {"tool", F_STR_OR_NULL, NULL}, {"arguments", F_TOOL_ARGUMENTS, NULL}, {NULL, 0, NULL}};
static const struct field memory_fields[] = {{"tiers", F_ENUM_ARRAY, tiers},
                                             {"record_id", F_STR_OR_NULL, NULL},
                                             {"before_ms", F_UINT_OR_NULL, NULL},
                                             {"apply", F_BOOL, NULL},
                                             {NULL, 0, NULL}};
static const struct field a2a_fields[] = {{"peer_pubkey_b58", F_STR_OR_NULL, NULL},
                                          {"task_id", F_STR_OR_NULL, NULL},
                                          {"lease_id", F_STR_OR_NULL, NULL},
                                          {"duplicate_risk", F_ENUM, risks},
                                          {NULL, 0, NULL}};
static const struct field audit_fields[] = {{"window", F_POSITIVE, NULL},
                                            {"before_ms", F_UINT_OR_NULL, NULL},
                                            {"include_integrity", F_BOOL, NULL},
                                            {NULL, 0, NULL}};
static const struct field peer_fields[] = {
    {"peer_pubkey_b58", F_KEY_OR_NULL, NULL}, {"token_prefix", F_PREFIX_OR_NULL, NULL},
    {"self", F_BOOL_OR_NULL, NULL},           {"force", F_BOOL_OR_NULL, NULL},
    {"before_ms", F_UINT_OR_NULL, NULL},      {NULL, 0, NULL}};
static const struct field chain_fields[] = {{"limit", F_POSITIVE, NULL},
                                            {"mint", F_NONEMPTY_STR_OR_NULL, NULL},
                                            {"cluster", F_NONEMPTY_STR_OR_NULL, NULL},
                                            {"payer_pubkey_b58", F_KEY_OR_NULL, NULL},
                                            {"resource", F_ENUM_OR_NULL, resources},
                                            {"batch_id", F_NONEMPTY_STR_OR_NULL, NULL},
                                            {NULL, 0, NULL}};
static const struct field no_fields[] = {{NULL, 0, NULL}};

static const struct {
  const char *prefix;
  const struct field *fields;
} scoped[] = {
    {"intent.", no_fields},     {"agent.", no_fields},      {"tool.", tool_fields},
    {"memory.", memory_fields}, {"a2a.", a2a_fields},       {"audit.", audit_fields},
    {"peers.", peer_fields},    {"identity.", peer_fields}, {"chain.", chain_fields},
};

static bool in_set(const struct cap_node *v, const char *const *values)
{
  for (size_t i = 0; v->kind == CAP_NODE_STRING && values[i]; i++)
    if (strcmp(v->u.str.ptr, values[i]) == 0)
      return true;
  return false;
}

static bool base58_text(const struct cap_node *v)
{
  for (size_t i = 0; i < v->u.str.len; i++)
    if (!strchr("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz", v->u.str.ptr[i]) ||
        !v->u.str.ptr[i])
      return false;
  return v->u.str.len > 0;
}

/* NULL when v is well typed for rule, else what it must be. */
static const char *field_problem(const struct field *f, const struct cap_node *v)
{
  bool null = v->kind == CAP_NODE_NULL, str = v->kind == CAP_NODE_STRING;
  bool uint = v->kind == CAP_NODE_INT && v->u.num.i >= 0;
  unsigned char key[32];
  switch (f->rule) {
  case F_STR_OR_NULL: return null || str ? NULL : "must be a string or null";
  case F_NONEMPTY_STR_OR_NULL:
    return null || (str && v->u.str.len) ? NULL : "must be a non-empty string or null";
  case F_KEY_OR_NULL:
    return null || (str && cap_base58_decode(v->u.str.ptr, v->u.str.len, key, 32))
               ? NULL
               : "must be a base58 public key (32 bytes) or null";
  case F_PREFIX_OR_NULL:
    return null || (str && base58_text(v)) ? NULL : "must be a non-empty base58 prefix or null";
  case F_BOOL: return v->kind == CAP_NODE_BOOL ? NULL : "must be a boolean";
  case F_BOOL_OR_NULL: return null || v->kind == CAP_NODE_BOOL ? NULL : "must be a boolean or null";
  case F_UINT_OR_NULL: return null || uint ? NULL : "must be a non-negative integer or null";
  case F_POSITIVE: return uint && v->u.num.i > 0 ? NULL : "must be a positive integer";
  case F_ENUM: return in_set(v, f->values) ? NULL : "has an unsupported value";
  case F_ENUM_OR_NULL: return null || in_set(v, f->values) ? NULL : "has an unsupported value";
  case F_ENUM_ARRAY:
    if (v->kind != CAP_NODE_ARRAY)
      return "must be an array";
    for (size_t i = 0; i < v->u.arr.len; i++)
      if (!in_set(v->u.arr.items[i], f->values))
        return "contains an unsupported value";
    return NULL;
  case F_TOOL_ARGUMENTS: {
    const struct cap_node *allow = cap_node_get(v, "allow");
    if (v->kind != CAP_NODE_OBJECT)
      return "must be an object";
    return !allow || allow->kind == CAP_NODE_OBJECT ? NULL : "allow must be an object";
  }
  }
  return "is not understood";
}

static int check_fields(const char *action, const struct cap_node *scope,
                        const struct field *fields, struct cap_error *err)
{
  for (const struct field *f = fields; f->name; f++) {
    const struct cap_node *v = cap_node_get(scope, f->name);
    const char *problem = v ? field_problem(f, v) : NULL;
    if (problem)
      return cap_error_set(err, EINVAL, "invalid capability scope: %s: %s %s", action, f->name,
                           problem);
  }
  const struct cap_node *tool = cap_node_get(scope, "tool");
  if (fields == tool_fields && tool && tool->kind == CAP_NODE_STRING &&
      strncmp(action, "tool.call.", 10) == 0 && strcmp(tool->u.str.ptr, action + 10) != 0)
    return cap_error_set(err, EINVAL,
                         "invalid capability scope: %s: tool must match action suffix \"%s\"",
                         action, action + 10);
  return 0;
}

int gw_scope_validate(const char *action, const struct cap_node *scope, struct cap_error *err)
{
  const struct field *fields = NULL;
  for (size_t i = 0; !fields && i < sizeof scoped / sizeof *scoped; i++)
    if (strncmp(action, scoped[i].prefix, strlen(scoped[i].prefix)) == 0)
      fields = scoped[i].fields;
  if (!fields)
    return 0; /* a namespace Covenant gives no scope shape: opaque */
  if (scope->kind != CAP_NODE_OBJECT)
    return cap_error_set(err, EINVAL, "invalid capability scope: %s: scope must be a JSON object",
                         action);
  if (scope->u.obj.len == 0)
    return 0;
  const struct cap_node *version = cap_node_get(scope, "version");
  if (!version || version->kind != CAP_NODE_INT || version->u.num.i < 0)
    return cap_error_set(
        err, EINVAL, "invalid capability scope: %s: non-empty scopes must set version 1", action);
  if (version->u.num.i != 1)
    return cap_error_set(err, EINVAL,
                         "invalid capability scope: %s: unsupported scope version %lld", action,
                         (long long)version->u.num.i);
  return check_fields(action, scope, fields, err);
}
