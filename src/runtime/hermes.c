/* The Hermes runtime (hermes.h): one run on a Hermes gateway per dispatch. */
#include "runtime/hermes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/diag.h"
#include "core/escape.h"
#include "core/json.h"
#include "runtime/hermes_http.h"

#define REQUEST_TIMEOUT_MS 30000 /* covenant-runtime's per-request cap */
#define POLL_MS 250              /* its polling interval */
#define SSE_POLL_MS 1000         /* while the event stream carries the run */
#define STOP_TIMEOUT_MS 5000

enum approval_policy { OPERATOR_PROMPT, AUTO_DENY, AUTO_ONCE };

struct run {
  const struct cap_spec *spec;
  const struct hermes_options *o;
  struct http_url url;
  char run_id[129];
  char intent_id[37]; /* the dispatch's id: Hermes's session_id and Idempotency-Key */
  uint64_t deadline;
  struct hermes_http sse;
  bool sse_open;
  unsigned approvals_given;
  char *stop_reason; /* why capsule stops the run (a tool outside tools_allowed) */
};

static uint64_t soon(uint64_t ms, uint64_t deadline)
{
  uint64_t t = cap_now_ms(CLOCK_MONOTONIC) + ms;
  return t < deadline ? t : deadline;
}

/* "what the endpoint said" for messages: status, and the body escaped,
 * at most 512 bytes */
static char *answer_text(const struct hermes_http *h)
{
  struct cap_buf b = {0};
  cap_escape_text(&b, h->body.data ? h->body.data : "", h->body.len > 512 ? 512 : h->body.len);
  char *s = cap_xasprintf("%d: %s%s", h->status, b.data ? b.data : "",
                          h->body.len > 512 ? "\xe2\x80\xa6" : "");
  cap_buf_free(&b);
  return s;
}

/* One request and its JSON object answer (*doc owned by the caller). */
static int call_json(struct run *r, const char *method, const char *suffix,
                     const char *const *headers, const char *body, uint64_t deadline,
                     struct cap_doc **doc, struct cap_error *err)
{
  struct hermes_http h;
  int rc = hermes_http_call(&h, &r->spec->network, &r->url, &r->o->tls, method, suffix,
                            r->o->api_key, headers, body, soon(REQUEST_TIMEOUT_MS, deadline), err);
  if (rc == 0 && (h.status < 200 || h.status > 299)) {
    _cleanup_free_ char *said = answer_text(&h);
    rc = cap_error_set(err, EREMOTEIO, "the Hermes endpoint answered %s %s with %s", method, suffix,
                       said);
  }
  struct cap_diags diags = {0};
  *doc = cap_doc_new();
  if (rc == 0 &&
      (cap_json_parse(*doc, h.body.data ? h.body.data : "", h.body.len, "hermes", 0, &diags) < 0 ||
       (*doc)->root->kind != CAP_NODE_OBJECT)) {
    _cleanup_free_ char *said = answer_text(&h);
    rc = cap_error_set(err, EPROTO,
                       "the Hermes endpoint's answer to %s %s is not a JSON object (%s)", method,
                       suffix, said);
  }
  cap_diags_free(&diags);
  hermes_http_close(&h);
  if (rc < 0) {
    cap_doc_free(*doc);
    *doc = NULL;
  }
  return rc;
}

static const char *str_member(const struct cap_node *obj, const char *key)
{
  const struct cap_node *v = cap_node_get(obj, key);
  return v && v->kind == CAP_NODE_STRING ? v->u.str.ptr : NULL;
}

/* A run id goes into URLs: the characters a path segment takes as they are. */
static bool run_id_ok(const char *s)
{
  size_t n = strlen(s);
  if (!n || n > 128)
    return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          strchr("-._~", *s)))
      return false;
  return true;
}

static int submit(struct run *r, const char *id, const char *text, struct cap_error *err)
{
  struct cap_buf body = {0};
  struct cap_jw w;
  cap_jw_init(&w, &body, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "input");
  cap_jw_string(&w, text);
  cap_jw_key(&w, "session_id");
  cap_jw_string(&w, id);
  cap_jw_end_object(&w);
  _cleanup_free_ char *idem = cap_xasprintf("Idempotency-Key: %s", id);
  const char *headers[] = {idem, "Accept: application/json", NULL};
  struct cap_doc *doc = NULL;
  int rc = call_json(r, "POST", "/runs", headers, body.data, r->deadline, &doc, err);
  cap_buf_free(&body);
  const char *run_id = rc == 0 ? str_member(doc->root, "run_id") : NULL;
  if (rc == 0 && (!run_id || !run_id_ok(run_id)))
    rc = cap_error_set(err, EPROTO,
                       "the Hermes endpoint's answer to POST /runs has no usable \"run_id\" (a "
                       "string of at most 128 letters, digits, '-', '.', '_', '~')");
  if (rc == 0)
    snprintf(r->run_id, sizeof r->run_id, "%s", run_id);
  cap_doc_free(doc);
  return rc;
}

static void stop_run(struct run *r)
{
  _cleanup_free_ char *suffix = cap_xasprintf("/runs/%s/stop", r->run_id);
  struct hermes_http h;
  struct cap_error ignored = {0};
  uint64_t until = cap_now_ms(CLOCK_MONOTONIC) + STOP_TIMEOUT_MS; /* past the run's deadline */
  hermes_http_call(&h, &r->spec->network, &r->url, &r->o->tls, "POST", suffix, r->o->api_key, NULL,
                   NULL, until, &ignored);
  hermes_http_close(&h);
  cap_error_clear(&ignored);
}

static bool tool_allowed(const struct cap_spec *spec, const char *tool)
{
  if (!spec->hermes_tools_allowed.len)
    return true; /* none declared: Hermes's own allowlist decides */
  for (size_t i = 0; i < spec->hermes_tools_allowed.len; i++)
    if (!strcmp(spec->hermes_tools_allowed.v[i], tool))
      return true;
  return false;
}

static enum approval_policy policy_of(const struct cap_spec *spec)
{
  const char *p = spec->hermes_approval_policy ? spec->hermes_approval_policy : "";
  return !strcmp(p, "auto-deny")   ? AUTO_DENY
         : !strcmp(p, "auto-once") ? AUTO_ONCE
                                   : OPERATOR_PROMPT;
}

/* The choice that approves once: "once" when offered, else the first
 * choice that is not "deny". */
static const char *approving_choice(const struct cap_node *choices)
{
  const char *first = NULL;
  for (size_t i = 0; choices && choices->kind == CAP_NODE_ARRAY && i < choices->u.arr.len; i++) {
    const struct cap_node *c = choices->u.arr.items[i];
    if (c->kind != CAP_NODE_STRING || !strcmp(c->u.str.ptr, "deny"))
      continue;
    if (!strcmp(c->u.str.ptr, "once"))
      return "once";
    if (!first)
      first = c->u.str.ptr;
  }
  return first ? first : "once";
}

static void answer_approval(struct run *r, const struct cap_node *event)
{
  const struct cap_node *choices = cap_node_get(event, "choices");
  struct cap_buf cj = {0};
  struct cap_jw w;
  cap_jw_init(&w, &cj, false);
  if (choices)
    cap_jw_node(&w, choices);
  else
    cap_jw_null(&w);
  bool approve = false;
  struct cap_error err = {0};
  switch (policy_of(r->spec)) {
  case AUTO_DENY: break;
  case AUTO_ONCE: approve = r->approvals_given == 0; break;
  case OPERATOR_PROMPT:
    if (!r->o->ask || r->o->ask(r->o->arg, r->run_id, cj.data, r->deadline, &approve, &err) < 0)
      approve = false; /* no operator answered: denied */
    break;
  }
  cap_error_clear(&err);
  const char *choice = approve ? approving_choice(choices) : "deny";
  r->approvals_given += approve;
  struct cap_buf body = {0};
  cap_jw_init(&w, &body, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "choice");
  cap_jw_string(&w, choice);
  cap_jw_end_object(&w);
  _cleanup_free_ char *suffix = cap_xasprintf("/runs/%s/approval", r->run_id);
  struct cap_doc *doc = NULL;
  /* the answer goes out even when the wait for the operator used the
   * run's time up (the run is stopped next) */
  call_json(r, "POST", suffix, NULL, body.data, r->deadline + STOP_TIMEOUT_MS, &doc, &err);
  cap_doc_free(doc);
  struct cap_buf what = {0}; /* choices and choice are the gateway's text: written as JSON */
  cap_jw_init(&w, &what, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "intent_id");
  cap_jw_string(&w, r->intent_id);
  cap_jw_key(&w, "run_id");
  cap_jw_string(&w, r->run_id);
  cap_jw_key(&w, "choices");
  if (choices)
    cap_jw_node(&w, choices);
  else
    cap_jw_null(&w);
  cap_jw_key(&w, "choice");
  cap_jw_string(&w, choice);
  cap_jw_key(&w, "policy");
  cap_jw_string(&w, r->spec->hermes_approval_policy);
  cap_jw_key(&w, "resolved");
  cap_jw_int(&w, err.message ? 0 : 1);
  cap_jw_end_object(&w);
  if (r->o->record)
    r->o->record(r->o->arg, "hermes-approval", what.data);
  cap_buf_free(&what);
  cap_error_clear(&err);
  cap_buf_free(&body);
  cap_buf_free(&cj);
}

static void tool_event(struct run *r, const struct cap_node *event, bool started)
{
  const char *tool = str_member(event, "tool");
  const char *preview = str_member(event, "preview");
  char hash[65] = "";
  gw_sha256_hex(preview ? preview : "", preview ? strlen(preview) : 0, hash);
  struct cap_buf what = {0};
  struct cap_jw w;
  cap_jw_init(&w, &what, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "event");
  cap_jw_string(&w, started ? "tool.started" : "tool.completed");
  cap_jw_key(&w, "intent_id");
  cap_jw_string(&w, r->intent_id);
  cap_jw_key(&w, "run_id");
  cap_jw_string(&w, r->run_id);
  cap_jw_key(&w, "tool");
  cap_jw_string(&w, tool ? tool : "");
  if (started) {
    cap_jw_key(&w, "preview_hash_hex"); /* never the tool's input itself */
    cap_jw_string(&w, hash);
  } else { /* Hermes gives seconds; covenant-runtime keeps ms */
    const struct cap_node *d = cap_node_get(event, "duration");
    const struct cap_node *e = cap_node_get(event, "error");
    cap_jw_key(&w, "duration_ms");
    cap_jw_int(&w, d && cap_node_is_number(d) && d->u.num.f > 0 && d->u.num.f < 1e12
                       ? (int64_t)(d->u.num.f * 1000)
                       : 0);
    cap_jw_key(&w, "error");
    cap_jw_bool(&w, e && e->kind == CAP_NODE_BOOL && e->u.boolean);
  }
  bool allowed = !started || tool_allowed(r->spec, tool ? tool : "");
  cap_jw_key(&w, "allowed");
  cap_jw_bool(&w, allowed);
  cap_jw_end_object(&w);
  if (r->o->record)
    r->o->record(r->o->arg, "hermes-tool", what.data);
  cap_buf_free(&what);
  if (!allowed && !r->stop_reason) {
    struct cap_buf list = {0};
    for (size_t i = 0; i < r->spec->hermes_tools_allowed.len; i++)
      cap_buf_printf(&list, "%s%s", i ? ", " : "", r->spec->hermes_tools_allowed.v[i]);
    struct cap_buf shown = {0};
    cap_escape_text(&shown, tool ? tool : "", tool ? strlen(tool) : 0);
    r->stop_reason = cap_xasprintf("the Hermes run invoked the tool \"%s\", which is not in the "
                                   "agent's [hermes] tools_allowed (%s); capsule stopped the run",
                                   shown.data ? shown.data : "", list.data);
    cap_buf_free(&shown);
    cap_buf_free(&list);
  }
}

struct frames {
  struct run *r;
  bool ended;
};

/* One SSE frame's data: a JSON event. */
static void take_event(void *arg, const char *data, size_t len)
{
  struct frames *f = arg;
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  if (cap_json_parse(doc, data, len, "sse", 0, &diags) == 0 && doc->root->kind == CAP_NODE_OBJECT) {
    const char *event = str_member(doc->root, "event");
    if (event && !strcmp(event, "tool.started"))
      tool_event(f->r, doc->root, true);
    else if (event && !strcmp(event, "tool.completed"))
      tool_event(f->r, doc->root, false);
    else if (event && !strcmp(event, "approval.request"))
      answer_approval(f->r, doc->root);
    else if (event && !strncmp(event, "run.", 4))
      f->ended = true; /* run.completed, run.failed: poll now */
  }
  cap_diags_free(&diags);
  cap_doc_free(doc);
}

/* The frames that arrived whole; true when one said the run ended. */
static bool take_frames(struct run *r)
{
  struct frames f = {r, false};
  struct cap_buf *b = &r->sse.body;
  size_t used = hermes_sse_take(b->data, b->len, take_event, &f);
  if (used) { /* keep only the unfinished frame */
    memmove(b->data, b->data + used, b->len - used);
    b->len -= used;
  }
  return f.ended;
}

enum status { RUNNING, DONE, FAILED };

/* GET /runs/{id}: running, done (*output set) or failed (err says why). */
static enum status poll_status(struct run *r, char **output, struct cap_error *err)
{
  _cleanup_free_ char *suffix = cap_xasprintf("/runs/%s", r->run_id);
  struct cap_doc *doc = NULL;
  if (call_json(r, "GET", suffix, NULL, NULL, r->deadline, &doc, err) < 0)
    return FAILED;
  const char *status = str_member(doc->root, "status");
  const char *out = str_member(doc->root, "output"), *error = str_member(doc->root, "error");
  enum status s = RUNNING;
  if (!status) {
    cap_error_set(err, EPROTO, "the Hermes endpoint's run status has no \"status\" string");
    s = FAILED;
  } else if (!strcmp(status, "completed")) {
    *output = cap_xstrdup(out ? out : "");
    s = DONE;
  } else if (!strcmp(status, "failed") || !strcmp(status, "cancelled")) {
    struct cap_buf shown = {0};
    const char *why = !strcmp(status, "cancelled") ? "hermes run cancelled"
                      : error                      ? error
                                                   : "hermes run failed";
    cap_escape_text(&shown, why, strlen(why) > 512 ? 512 : strlen(why));
    cap_error_set(err, EREMOTEIO, "the Hermes run %s ended: %s", r->run_id, shown.data);
    cap_buf_free(&shown);
    s = FAILED;
  }
  cap_doc_free(doc);
  return s;
}

static void sse_open(struct run *r)
{
  _cleanup_free_ char *suffix = cap_xasprintf("/runs/%s/events", r->run_id);
  const char *headers[] = {"Accept: text/event-stream", NULL};
  struct cap_error err = {0};
  r->sse_open = hermes_http_send(&r->sse, &r->spec->network, &r->url, &r->o->tls, "GET", suffix,
                                 r->o->api_key, headers, NULL, r->deadline, &err) == 0;
  cap_error_clear(&err);
  if (!r->sse_open)
    hermes_http_close(&r->sse);
}

/* One turn of the loop: what the event stream brought (or a pause when it
 * is gone); true when the status should be polled now. */
static bool follow_events(struct run *r)
{
  if (!r->sse_open) {
    struct timespec ts = {0, POLL_MS * 1000000L};
    nanosleep(&ts, NULL);
    return false;
  }
  struct cap_error err = {0};
  int rc = hermes_http_read(&r->sse, POLL_MS, r->deadline, &err);
  cap_error_clear(&err);
  bool ended = false;
  if (rc == 0 && r->sse.headers_done && (r->sse.status != 200 || !r->sse.event_stream)) {
    rc = -EPROTO; /* not an event stream: fall back to polling */
  } else if (rc == 0) {
    ended = take_frames(r);
  }
  if ((rc < 0 && rc != -ETIMEDOUT) || r->sse.complete) { /* dropped: polling carries on */
    hermes_http_close(&r->sse);
    r->sse_open = false;
    ended = true;
  }
  return ended;
}

static enum gw_outcome drive(struct run *r, char **output, struct cap_error *err)
{
  uint64_t next_poll = 0;
  for (;;) {
    if (r->stop_reason) {
      stop_run(r);
      cap_error_set(err, EPERM, "%s", r->stop_reason);
      return GW_OUTCOME_DENIED;
    }
    uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
    if (now >= r->deadline) {
      stop_run(r);
      cap_error_set(err, ETIMEDOUT,
                    "the agent was stopped: wall clock exceeded (the Hermes run %s ran past "
                    "%llu ms; capsule asked the gateway to stop it)",
                    r->run_id, (unsigned long long)r->spec->limits.wall_ms);
      return GW_OUTCOME_KILLED_BY_LIMIT;
    }
    if (follow_events(r))
      next_poll = 0;
    now = cap_now_ms(CLOCK_MONOTONIC); /* an approval may have waited */
    if (r->stop_reason || now >= r->deadline || now < next_poll)
      continue;
    enum status s = poll_status(r, output, err);
    if (s == DONE)
      return GW_OUTCOME_OK;
    if (s == FAILED)
      return GW_OUTCOME_FAILED;
    next_poll = cap_now_ms(CLOCK_MONOTONIC) + (r->sse_open ? SSE_POLL_MS : POLL_MS);
  }
}

enum gw_outcome hermes_run(const struct gw_call *call, const struct cap_spec *spec,
                           const struct cap_node *args, const struct hermes_options *o,
                           char **result, struct cap_error *err)
{
  const struct cap_node *text = cap_node_get(args, "text");
  if (!o->base_url || !*o->base_url)
    return cap_error_set(err, ENOTSUP,
                         "agent %s runs on Hermes, and no endpoint is configured: set "
                         "HERMES_API_BASE_URL (e.g. http://127.0.0.1:8642/v1) for capsule",
                         spec->id),
           GW_OUTCOME_HOST_CANNOT_ENFORCE;
  struct run r = {.spec = spec, .o = o, .sse = {.fd = -1}};
  if (!http_parse_url(o->base_url, &r.url))
    return cap_error_set(err, EINVAL,
                         "HERMES_API_BASE_URL \"%s\" is not an http:// or https:// URL (such as "
                         "https://hermes.example:8642/v1)",
                         o->base_url),
           GW_OUTCOME_HOST_CANNOT_ENFORCE;
  if (!text || text->kind != CAP_NODE_STRING)
    return cap_error_set(err, EINVAL, "a Covenant dispatch takes a JSON object with \"text\""),
           GW_OUTCOME_FAILED;
  uint64_t wall = spec->limits.wall_ms ? spec->limits.wall_ms : GW_DEFAULT_DEADLINE_MS;
  if (call->deadline_ms && call->deadline_ms < wall)
    wall = call->deadline_ms;
  r.deadline = cap_now_ms(CLOCK_MONOTONIC) + wall;
  gw_uuid4(r.intent_id);
  if (submit(&r, r.intent_id, text->u.str.ptr, err) < 0)
    return GW_OUTCOME_FAILED;
  sse_open(&r);
  char *output = NULL;
  enum gw_outcome out = drive(&r, &output, err);
  hermes_http_close(&r.sse);
  free(r.stop_reason);
  if (out == GW_OUTCOME_OK) {
    struct cap_buf b = {0};
    struct cap_jw w;
    cap_jw_init(&w, &b, false);
    cap_jw_begin_object(&w);
    cap_jw_key(&w, "text");
    cap_jw_string(&w, output);
    cap_jw_key(&w, "sources");
    cap_jw_begin_array(&w);
    cap_jw_end_array(&w);
    cap_jw_end_object(&w);
    *result = cap_buf_steal(&b);
  }
  free(output);
  return out;
}
