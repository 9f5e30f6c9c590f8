/* The audit log as Covenant's events.jsonl + events.chain.jsonl
 * (covenant_audit.h). */
#include "gateway/covenant_audit.h"

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
#include "core/buf.h"
#include "core/cleanup.h"
#include "core/diag.h"
#include "core/json.h"
#include "core/text.h"
#include "gateway/tokens.h"

#define GENESIS "0000000000000000000000000000000000000000000000000000000000000000"
#define MAX_FILE (1024u << 20)

static void sha256_hex(const char *data, size_t len, char out[65])
{
  gw_sha256_hex(data, len, out);
}

/* SHA-256(previous + "\n" + event), as covenant-audit's chain_hash */
static void chain_hash(const char *prev, const char *event, char out[65])
{
  char buf[64 + 1 + 64];
  memcpy(buf, prev, 64);
  buf[64] = '\n';
  memcpy(buf + 65, event, 64);
  sha256_hex(buf, sizeof buf, out);
}

/* ---- export ---- */

struct exporter {
  char issuer[GW_KEY_B58];
  struct cap_buf events, chain;
  char prev[65];
  size_t index, left_out;
};

/* A UUID (version 4 bits) from a record's hash: the same export twice
 * gives the same ids. */
static void uuid_from(const char *tag, const char *hash, char out[37])
{
  unsigned char d[32];
  _cleanup_free_ char *text = cap_xasprintf("%s\n%s", tag, hash);
  crypto_hash_sha256(d, (const unsigned char *)text, strlen(text));
  d[6] = (unsigned char)((d[6] & 0x0f) | 0x40);
  d[8] = (unsigned char)((d[8] & 0x3f) | 0x80);
  snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", d[0],
           d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9], d[10], d[11], d[12], d[13], d[14],
           d[15]);
}

static int64_t record_ms(const char *time)
{
  struct tm tm = {0};
  const char *rest = strptime(time, "%Y-%m-%dT%H:%M:%S", &tm);
  unsigned ms = 0;
  if (rest && *rest == '.')
    sscanf(rest, ".%3u", &ms);
  return rest ? (int64_t)timegm(&tm) * 1000 + ms : 0;
}

static void copy_member(struct cap_jw *w, const struct cap_node *obj, const char *key)
{
  const struct cap_node *v = cap_node_get(obj, key);
  cap_jw_key(w, key);
  if (v)
    cap_jw_node(w, v);
  else
    cap_jw_null(w);
}

static void display_member(struct cap_jw *w, const char *key, const char *agent)
{
  _cleanup_free_ char *display = cap_xasprintf("%s@agent", agent);
  cap_jw_key(w, key);
  cap_jw_string(w, display);
}

/* capsule's records that have a Covenant kind: the record's decision (and,
 * for a Hermes tool, its event), the kind, and the kind's fields in
 * covenant-audit's order, copied from the record's JSON outcome, or, for
 * a field starting with '@', made here: @agent the capability as
 * "<id>@agent", @intent a UUID from the record's hash, @empty "" (capsule
 * keeps no call's arguments, only their hash). */
static const struct kind {
  const char *decision, *event, *type;
  const char *fields[7];
} kinds[] = {
    {"capability-check",
     NULL,
     "capability_check",
     {"@agent", "required_actions", "missing_actions", "passed", "authorized_by"}},
    {"token-issue",
     NULL,
     "capability_granted",
     {"subject_display", "action", "granted_by_display", "signature_b58"}},
    {"token-revoke",
     NULL,
     "capability_revoked",
     {"subject_display", "action", "signature_b58", "removed"}},
    {"budget-exhausted",
     NULL,
     "budget_exhausted",
     {"agent_display", "@intent", "@empty", "requested", "tokens_remaining", "refill_eta_ms"}},
    {"hermes-tool",
     "tool.started",
     "hermes_tool_invoked",
     {"intent_id", "run_id", "tool", "preview_hash_hex"}},
    {"hermes-tool",
     "tool.completed",
     "hermes_tool_completed",
     {"intent_id", "run_id", "tool", "duration_ms", "error"}},
    {"hermes-approval",
     NULL,
     "hermes_approval_resolved",
     {"intent_id", "run_id", "choice", "resolved"}},
};

static const struct kind *kind_of(const struct gw_audit_record *r, const struct cap_node *o)
{
  const struct cap_node *ev = o ? cap_node_get(o, "event") : NULL;
  for (size_t i = 0; o && i < sizeof kinds / sizeof *kinds; i++)
    if (!strcmp(r->decision, kinds[i].decision) &&
        (!kinds[i].event ||
         (ev && ev->kind == CAP_NODE_STRING && !strcmp(ev->u.str.ptr, kinds[i].event))))
      return &kinds[i];
  return NULL;
}

static void write_fields(struct cap_jw *w, const struct kind *k, const struct gw_audit_record *r,
                         const struct cap_node *o)
{
  char id[37];
  for (size_t i = 0; i < sizeof k->fields / sizeof *k->fields && k->fields[i]; i++) {
    const char *f = k->fields[i];
    if (!strcmp(f, "@agent")) {
      display_member(w, "agent_id", r->capability);
    } else if (!strcmp(f, "@intent")) {
      uuid_from("intent", r->hash, id);
      cap_jw_key(w, "intent_id");
      cap_jw_string(w, id);
    } else if (!strcmp(f, "@empty")) {
      cap_jw_key(w, "intent_text");
      cap_jw_string(w, "");
    } else {
      copy_member(w, o, f);
    }
  }
}

/* A dispatch that ran: intent_dispatched. */
static void write_dispatch(struct cap_jw *w, const struct gw_audit_record *r)
{
  char id[37], empty[65];
  cap_jw_string(w, "intent_dispatched");
  uuid_from("intent", r->hash, id);
  cap_jw_key(w, "intent_id");
  cap_jw_string(w, id);
  cap_jw_key(w, "intent_text");
  cap_jw_string(w, "");
  cap_jw_key(w, "matched_agent");
  cap_jw_string(w, r->capability);
  sha256_hex("", 0, empty);
  cap_jw_key(w, "result_hash_hex");
  cap_jw_string(w, r->result_hash[0] ? r->result_hash : empty);
  cap_jw_key(w, "status");
  cap_jw_string(w, strcmp(r->outcome, "ok") == 0 ? "ok" : "error");
}

/* The dispatches that ran or failed have a kind too (not those a check
 * refused: the check's record stands for them). */
static bool is_dispatch(const struct gw_audit_record *r)
{
  return !strcmp(r->tool, "dispatch") && r->args_hash[0] &&
         (!strcmp(r->decision, "allow") || !strcmp(r->decision, "ask-approved"));
}

static void export_record(void *arg, const struct gw_audit_record *r)
{
  struct exporter *x = arg;
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  const struct cap_node *o = NULL;
  if (r->outcome[0] == '{' &&
      cap_json_parse(doc, r->outcome, strlen(r->outcome), "outcome", 0, &diags) == 0 &&
      doc->root->kind == CAP_NODE_OBJECT)
    o = doc->root;
  const struct kind *k = kind_of(r, o);
  if (!k && !is_dispatch(r)) {
    x->left_out++;
  } else {
    struct cap_buf line = {0};
    struct cap_jw w;
    char id[37], display[300], h[65], c[65];
    uuid_from("event", r->hash, id);
    snprintf(display, sizeof display, "%s@local", r->user);
    cap_jw_init(&w, &line, false);
    cap_jw_begin_object(&w);
    cap_jw_key(&w, "id");
    cap_jw_string(&w, id);
    cap_jw_key(&w, "timestamp_ms");
    cap_jw_int(&w, record_ms(r->time));
    cap_jw_key(&w, "issuer");
    cap_jw_begin_object(&w);
    cap_jw_key(&w, "display");
    cap_jw_string(&w, display);
    cap_jw_key(&w, "pubkey");
    cap_jw_string(&w, x->issuer);
    cap_jw_end_object(&w);
    cap_jw_key(&w, "kind");
    cap_jw_begin_object(&w);
    cap_jw_key(&w, "type");
    if (k) {
      cap_jw_string(&w, k->type);
      write_fields(&w, k, r, o);
    } else {
      write_dispatch(&w, r);
    }
    cap_jw_end_object(&w);
    cap_jw_end_object(&w);
    sha256_hex(line.data, line.len, h);
    chain_hash(x->prev, h, c);
    cap_buf_append(&x->events, line.data, line.len);
    cap_buf_putc(&x->events, '\n');
    cap_buf_printf(&x->chain,
                   "{\"index\":%zu,\"event_id\":\"%s\",\"timestamp_ms\":%lld,\"event_hash_hex\":"
                   "\"%s\",\"previous_hash_hex\":\"%s\",\"chain_hash_hex\":\"%s\"}\n",
                   x->index++, id, (long long)record_ms(r->time), h, x->prev, c);
    memcpy(x->prev, c, 65);
    cap_buf_free(&line);
  }
  cap_diags_free(&diags);
  cap_doc_free(doc);
}

static int write_new(int dirfd, const char *dir, const char *name, const struct cap_buf *b,
                     struct cap_error *err)
{
  _cleanup_close_ int fd =
      openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return cap_error_errno(err, errno, "cannot create %s/%s%s", dir, name,
                           errno == EEXIST ? " (it exists: export into a new directory)" : "");
  if (b->len && write(fd, b->data, b->len) != (ssize_t)b->len)
    return cap_error_errno(err, errno, "cannot write %s/%s", dir, name);
  if (fsync(fd) < 0)
    return cap_error_errno(err, errno, "cannot write %s/%s", dir, name);
  return 0;
}

int gw_covenant_export(struct gw_state *st, const char *dir, size_t *exported, size_t *left_out,
                       struct cap_error *err)
{
  struct exporter x = {0};
  memcpy(x.prev, GENESIS, 65);
  unsigned char pub[32];
  bool made;
  int r = gw_issuer_key(st, pub, NULL, &made, err);
  if (r < 0)
    return r;
  cap_base58_encode(pub, 32, x.issuer);
  r = gw_audit_each(st, 0, export_record, &x, err);
  if (r == 0 && mkdir(dir, 0700) < 0 && errno != EEXIST)
    r = cap_error_errno(err, errno, "cannot create %s", dir);
  _cleanup_close_ int dirfd = r == 0 ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (r == 0 && dirfd < 0)
    r = cap_error_errno(err, errno, "cannot open %s", dir);
  if (r == 0)
    r = write_new(dirfd, dir, "events.jsonl", &x.events, err);
  if (r == 0)
    r = write_new(dirfd, dir, "events.chain.jsonl", &x.chain, err);
  *exported = x.index;
  *left_out = x.left_out;
  cap_buf_free(&x.events);
  cap_buf_free(&x.chain);
  return r;
}

/* ---- verify ---- */

void gw_covenant_report_free(struct gw_covenant_report *rep) { cap_strv_free(&rep->failures); }

struct lines {
  char *data;
  size_t n;
  char **v;
  size_t *len;
};

/* Non-empty lines, as Rust's str::lines sees them (a final \r dropped). */
static int read_lines(const char *path, struct lines *out, struct cap_error *err)
{
  size_t size = 0;
  int r = cap_read_file(path, MAX_FILE, &out->data, &size, err);
  if (r < 0)
    return r;
  for (size_t i = 0; i < size;) {
    char *nl = memchr(out->data + i, '\n', size - i);
    size_t end = nl ? (size_t)(nl - out->data) : size, len = end - i;
    if (len && out->data[i + len - 1] == '\r')
      len--;
    if (len) {
      out->v = cap_xrealloc(out->v, (out->n + 1) * sizeof *out->v);
      out->len = cap_xrealloc(out->len, (out->n + 1) * sizeof *out->len);
      out->v[out->n] = out->data + i;
      out->len[out->n++] = len;
      out->data[i + len] = '\0';
    }
    i = end + 1;
  }
  return 0;
}

static void lines_free(struct lines *l)
{
  free(l->data);
  free(l->v);
  free(l->len);
}

static bool string_is(const struct cap_node *n, const char *want, bool fold)
{
  return n && n->kind == CAP_NODE_STRING &&
         (fold ? strcasecmp(n->u.str.ptr, want) : strcmp(n->u.str.ptr, want)) == 0;
}

/* The anchor equals what the event line gives (covenant-audit compares
 * the whole entry). */
static bool anchor_matches(const struct cap_node *a, size_t index, const struct cap_node *event,
                           const char *h, const char *prev, const char *c)
{
  const struct cap_node *i = cap_node_get(a, "index"), *ts = cap_node_get(a, "timestamp_ms");
  if (!i || i->kind != CAP_NODE_INT || (uint64_t)i->u.num.i != index ||
      !string_is(cap_node_get(a, "event_hash_hex"), h, false) ||
      !string_is(cap_node_get(a, "previous_hash_hex"), prev, false) ||
      !string_is(cap_node_get(a, "chain_hash_hex"), c, false))
    return false;
  if (!event) /* an event that does not parse: the hashes alone */
    return true;
  const struct cap_node *id = cap_node_get(event, "id");
  const struct cap_node *ets = cap_node_get(event, "timestamp_ms");
  return id && id->kind == CAP_NODE_STRING &&
         string_is(cap_node_get(a, "event_id"), id->u.str.ptr, true) && ts && ets &&
         ts->kind == CAP_NODE_INT && ets->kind == CAP_NODE_INT && ts->u.num.i == ets->u.num.i;
}

/* An AuditEvent: id, timestamp_ms, issuer {display, pubkey}, kind {type}. */
static bool event_shape(const struct cap_node *e)
{
  const struct cap_node *issuer = cap_node_get(e, "issuer"), *kind = cap_node_get(e, "kind");
  const struct cap_node *ts = cap_node_get(e, "timestamp_ms");
  return e->kind == CAP_NODE_OBJECT && cap_node_get(e, "id") &&
         cap_node_get(e, "id")->kind == CAP_NODE_STRING && ts && ts->kind == CAP_NODE_INT &&
         ts->u.num.i >= 0 && issuer && issuer->kind == CAP_NODE_OBJECT && kind &&
         kind->kind == CAP_NODE_OBJECT && cap_node_get(kind, "type") &&
         cap_node_get(kind, "type")->kind == CAP_NODE_STRING;
}

static struct cap_doc *parse_line(const char *line, size_t len)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  int r = cap_json_parse(doc, line, len, "line", 0, &diags);
  cap_diags_free(&diags);
  if (r == 0 && doc->root->kind == CAP_NODE_OBJECT)
    return doc;
  cap_doc_free(doc);
  return NULL;
}

static void verify_one(struct gw_covenant_report *rep, const struct lines *ev,
                       const struct lines *an, size_t i, char prev[65])
{
  char h[65], c[65];
  sha256_hex(ev->v[i], ev->len[i], h);
  chain_hash(prev, h, c);
  struct cap_doc *e = parse_line(ev->v[i], ev->len[i]);
  if (!e || !event_shape(e->root)) {
    char *f = cap_xasprintf("event line %zu parse error: not a Covenant AuditEvent", i);
    cap_strv_push(&rep->failures, f);
    free(f);
  }
  struct cap_doc *a = i < an->n ? parse_line(an->v[i], an->len[i]) : NULL;
  const char *problem =
      i >= an->n ? "missing"
      : !a || !anchor_matches(a->root, i, e && event_shape(e->root) ? e->root : NULL, h, prev, c)
          ? "mismatch"
          : NULL;
  if (problem) {
    char *f = cap_xasprintf("chain entry %zu %s", i, problem);
    cap_strv_push(&rep->failures, f);
    free(f);
  }
  cap_doc_free(e);
  cap_doc_free(a);
  memcpy(prev, c, 65);
}

int gw_covenant_verify(const char *dir, struct gw_covenant_report *rep, struct cap_error *err)
{
  *rep = (struct gw_covenant_report){0};
  _cleanup_free_ char *events = cap_xasprintf("%s/events.jsonl", dir);
  _cleanup_free_ char *chain = cap_xasprintf("%s/events.chain.jsonl", dir);
  struct lines ev = {0}, an = {0};
  int r = read_lines(events, &ev, err);
  if (r == 0)
    r = read_lines(chain, &an, err);
  if (r < 0) {
    lines_free(&ev);
    lines_free(&an);
    return r;
  }
  if (ev.n != an.n) {
    char *f = cap_xasprintf("chain length mismatch: %zu event(s), %zu anchor(s)", ev.n, an.n);
    cap_strv_push(&rep->failures, f);
    free(f);
  }
  char prev[65] = GENESIS;
  for (size_t i = 0; i < ev.n; i++)
    verify_one(rep, &ev, &an, i, prev);
  if (an.n > ev.n) {
    char *f = cap_xasprintf("%zu dangling chain anchor(s)", an.n - ev.n);
    cap_strv_push(&rep->failures, f);
    free(f);
  }
  rep->events = ev.n;
  rep->anchors = an.n;
  memcpy(rep->root, prev, 65);
  lines_free(&ev);
  lines_free(&an);
  return 0;
}
