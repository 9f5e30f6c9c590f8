/* The dashboard's pages (front/ui.h), rendered on an HTTP thread under
 * the state lock: the frame every page shares, the routes, the
 * capabilities with their tools' effective policies (and why), grants and
 * readiness, a policy change, and the pending approvals with approve and
 * deny. Every value from elsewhere (names, arguments, messages) goes
 * through cap_escape_html. A form's change is made as the signed-in
 * operator and audited as the command line's is. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cleanup.h"
#include "core/escape.h"
#include "core/json.h"
#include "core/text.h"
#include "front/ui_internal.h"
#include "gateway/access.h"
#include "gateway/approval.h"
#include "gateway/call.h"
#include "gateway/grants.h"
#include "gateway/ready.h"
#include "gateway/registry.h"
#include "gateway/selu.h"
#include "gateway/state.h"

/* ---- the frame ---- */

void ui_h(struct cap_buf *b, const char *s)
{
  if (s)
    cap_escape_html(b, s, strlen(s));
}

static const struct {
  const char *path, *label;
} nav[] = {
    {"/", "Capabilities"},      {"/approvals", "Approvals"}, {"/audit", "Audit"},
    {"/egress", "Egress"},      {"/talos", "Triggers"},      {"/covenant", "Budgets & tokens"},
    {"/rollback", "Snapshots"}, {"/images", "Images"},
};

void ui_begin(struct ui_response *out, const struct ui_request *rq, const char *title)
{
  struct cap_buf *b = &out->body;
  cap_buf_puts(b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>");
  ui_h(b, title);
  cap_buf_puts(b, " · capsule</title><link rel=\"stylesheet\" href=\"/static/ui.css\">"
                  "<script src=\"/static/ui.js\" defer></script></head><body data-base=\"");
  ui_h(b, rq->base);
  cap_buf_puts(b, "\"><header><strong>capsule</strong>");
  for (size_t i = 0; i < ARRAY_SIZE(nav); i++)
    cap_buf_printf(b, "<a href=\"%s%s\"%s>%s</a>", rq->base, nav[i].path,
                   strcmp(rq->path, nav[i].path) == 0 ? " class=\"here\"" : "", nav[i].label);
  cap_buf_printf(b, "<form method=\"post\" action=\"%s/logout\" class=\"inline\">", rq->base);
  ui_csrf(b, rq);
  cap_buf_puts(b, "<span class=\"who\">");
  ui_h(b, rq->user);
  cap_buf_puts(b, "</span> <button type=\"submit\" id=\"logout\">Sign out</button></form>"
                  "</header><main><h1>");
  ui_h(b, title);
  cap_buf_puts(b, "</h1>\n");
}

void ui_end(struct ui_response *out) { cap_buf_puts(&out->body, "</main></body></html>\n"); }

void ui_fail(struct ui_response *out, const struct ui_request *rq, int status, const char *msg)
{
  cap_buf_free(&out->body);
  out->status = status;
  ui_begin(out, rq, status == 404 ? "Not found" : "Not done");
  cap_buf_puts(&out->body, "<p class=\"error\" role=\"alert\">");
  ui_h(&out->body, msg);
  cap_buf_puts(&out->body, "</p>");
  ui_end(out);
}

void ui_csrf(struct cap_buf *b, const struct ui_request *rq)
{
  cap_buf_printf(b, "<input type=\"hidden\" name=\"csrf\" value=\"%s\">", rq->csrf);
}

void ui_thead(struct cap_buf *b, const char *const *cols)
{
  cap_buf_puts(b, "<table><thead><tr>");
  for (; *cols; cols++)
    cap_buf_printf(b, "<th>%s</th>", *cols);
  cap_buf_puts(b, "</tr></thead><tbody>\n");
}

void ui_time(int64_t ms, char out[32])
{
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* What a form did, from a closed set (the redirect's ?done=). */
static void notice(struct cap_buf *b, const struct ui_request *rq)
{
  static const struct {
    const char *key, *text;
  } done[] = {{"policy", "Policy set; the tool's outstanding approvals are void."},
              {"approved", "Approved: the call runs when it is made again."},
              {"denied", "Denied."}};
  const char *d = ui_param(rq, "done");
  for (size_t i = 0; d && i < ARRAY_SIZE(done); i++)
    if (strcmp(d, done[i].key) == 0)
      cap_buf_printf(b, "<p class=\"notice\" role=\"status\">%s</p>", done[i].text);
}

/* ---- capabilities ---- */

struct policy_rows {
  struct cap_buf *b;
  const char *cap, *tool;
};

static void override_row(void *arg, const char *cap, const char *tool, const char *user,
                         enum cap_policy policy)
{
  struct policy_rows *p = arg;
  if (!*user || strcmp(cap, p->cap) || strcmp(tool, p->tool))
    return;
  cap_buf_puts(p->b, "<br><span class=\"muted\">user ");
  ui_h(p->b, user);
  cap_buf_printf(p->b, ": %s</span>", cap_policy_name(policy));
}

static void policy_form(struct cap_buf *b, const struct ui_request *rq, const char *cap,
                        const char *tool, enum cap_policy now)
{
  cap_buf_printf(b, "<form method=\"post\" action=\"%s/policy\" class=\"inline policy\">",
                 rq->base);
  ui_csrf(b, rq);
  cap_buf_puts(b, "<input type=\"hidden\" name=\"capability\" value=\"");
  ui_h(b, cap);
  cap_buf_puts(b, "\"><input type=\"hidden\" name=\"tool\" value=\"");
  ui_h(b, tool);
  cap_buf_puts(b, "\"><select name=\"policy\">");
  for (int p = CAP_POLICY_ALLOW; p <= CAP_POLICY_BLOCK; p++)
    cap_buf_printf(b, "<option%s>%s</option>", p == (int)now ? " selected" : "",
                   cap_policy_name((enum cap_policy)p));
  cap_buf_puts(b, "</select> <input name=\"user\" placeholder=\"user (empty: operator default)\" "
                  "size=\"14\"> <button type=\"submit\">Set</button></form>");
}

static void tools_table(struct gw_state *st, struct cap_buf *b, const struct ui_request *rq,
                        const struct cap_spec *spec, const struct cap_tool *tools, size_t n)
{
  static const char *const cols[] = {"tool",   "description", "effective policy",
                                     "source", "change",      NULL};
  ui_thead(b, cols);
  for (size_t i = 0; i < n; i++) {
    const struct cap_tool *t = &tools[i];
    enum cap_policy policy = CAP_POLICY_BLOCK;
    const char *source = "?";
    struct cap_error err = {0};
    if (gw_effective_policy(st, spec->id, t, NULL, &policy, &source, &err) < 0)
      source = "unreadable";
    cap_error_clear(&err);
    cap_buf_puts(b, "<tr data-tool=\"");
    ui_h(b, spec->id);
    cap_buf_putc(b, '.');
    ui_h(b, t->name);
    cap_buf_puts(b, "\"><td><code>");
    ui_h(b, t->name);
    cap_buf_puts(b, "</code></td><td>");
    ui_h(b, t->description);
    cap_buf_printf(b, "</td><td class=\"policy\">%s", cap_policy_name(policy));
    struct policy_rows rows = {b, spec->id, t->name};
    gw_policy_list(st, override_row, &rows, &err);
    cap_error_clear(&err);
    cap_buf_printf(b, "</td><td class=\"source\">%s</td><td>", source);
    policy_form(b, rq, spec->id, t->name, policy);
    cap_buf_puts(b, "</td></tr>\n");
  }
  cap_buf_puts(b, "</tbody></table>\n");
}

/* What the sandbox grants: network, paths, credentials by name, limits. */
static void grants_list(struct cap_buf *b, const struct cap_spec *spec)
{
  cap_buf_printf(b, "<dl class=\"grants\"><dt>network</dt><dd>%s",
                 cap_net_mode_name(spec->network.mode));
  for (size_t i = 0; i < spec->network.allow_domains.len; i++) {
    cap_buf_puts(b, " <code>");
    ui_h(b, spec->network.allow_domains.v[i]);
    cap_buf_puts(b, "</code>");
  }
  for (size_t i = 0; i < spec->network.n_endpoints; i++) {
    cap_buf_puts(b, " <code>");
    ui_h(b, spec->network.endpoints[i].host);
    cap_buf_puts(b, "</code>");
  }
  cap_buf_puts(b, "</dd><dt>paths</dt><dd>");
  for (size_t i = 0; i < spec->n_grants; i++) {
    const struct cap_fs_grant *g = &spec->grants[i];
    if (g->origin == CAP_ORIGIN_SYSTEM)
      continue;
    cap_buf_puts(b, "<code>");
    ui_h(b, g->path);
    cap_buf_printf(b, "</code> %s (%s)<br>", cap_access_name(g->access),
                   cap_origin_name(g->origin));
  }
  cap_buf_puts(b, "</dd><dt>credentials</dt><dd>");
  for (size_t i = 0; i < spec->n_secrets; i++) {
    cap_buf_puts(b, i ? ", <code>" : "<code>");
    ui_h(b, spec->secrets[i].name);
    cap_buf_printf(b, "</code>%s", spec->secrets[i].required ? " (required)" : "");
  }
  const struct cap_limits *l = &spec->limits;
  const struct {
    const char *name, *unit;
    uint64_t value;
  } limits[] = {
      {"memory", " MiB", l->memory_bytes >> 20},
      {"cpu per task", " ms", l->cpu_ms_per_task},
      {"wall", " ms", l->wall_ms},
      {"pids", "", l->pids},
      {"files", "", l->nofile},
      {"disk", " MiB", l->disk_bytes >> 20},
  };
  cap_buf_puts(b, "</dd><dt>limits</dt><dd>");
  if (l->cpu_fraction > 0)
    cap_buf_printf(b, "cpu %.2f, ", l->cpu_fraction);
  for (size_t i = 0; i < ARRAY_SIZE(limits); i++)
    if (limits[i].value)
      cap_buf_printf(b, "%s %llu%s, ", limits[i].name, (unsigned long long)limits[i].value,
                     limits[i].unit);
  cap_buf_puts(b, "the rest unlimited</dd></dl>\n");
}

/* Whether it can start, as `capsule list` checks it (a dry run). */
static void readiness(struct serve *sv, struct cap_buf *b, const struct cap_spec *spec)
{
  struct cap_error why = {0};
  const char *const *hidden = (const char *const *)sv->hidden;
  bool ok = spec->runtime.kind != CAP_RUNTIME_EXEC &&
            gw_ready(spec, sv->images, hidden, sv->n_hidden, &why) == GW_OUTCOME_OK &&
            gw_ready_module(spec, sv->opt->st, NULL, hidden, sv->n_hidden, sv->cache, &why) ==
                GW_OUTCOME_OK;
  cap_buf_printf(b, "<p class=\"ready %s\">", ok ? "ok" : "bad");
  if (ok)
    cap_buf_puts(b, "ready");
  else if (spec->runtime.kind == CAP_RUNTIME_EXEC)
    cap_buf_puts(b, "no tools: a command sandbox for <code>capsule run</code>");
  else {
    cap_buf_puts(b, "not ready: ");
    ui_h(b, why.message ? why.message : "unknown");
  }
  cap_buf_puts(b, "</p>");
  cap_error_clear(&why);
}

static void page_capabilities(struct serve *sv, const struct ui_request *rq,
                              struct ui_response *out)
{
  const char *only = ui_param(rq, "id");
  bool check = ui_param(rq, "ready") != NULL;
  ui_begin(out, rq, "Capabilities");
  struct cap_buf *b = &out->body;
  notice(b, rq);
  const struct gw_registry *reg = &sv->cur->reg;
  if (!reg->n)
    cap_buf_puts(b, "<p class=\"muted\">No capabilities in the capabilities directory.</p>");
  for (size_t i = 0; i < reg->n; i++) {
    const struct cap_spec *spec = reg->caps[i];
    if (only && *only && strcmp(only, spec->id))
      continue;
    cap_buf_puts(b, "<section class=\"capability\" id=\"cap-");
    ui_h(b, spec->id);
    cap_buf_puts(b, "\"><h2>");
    ui_h(b, spec->id);
    cap_buf_printf(b, " <span class=\"muted\">%s, %s</span></h2><p>", cap_format_name(spec->format),
                   cap_runtime_kind_name(spec->runtime.kind));
    ui_h(b, spec->description);
    cap_buf_puts(b, "</p>");
    struct gw_granted g = {0};
    struct cap_error err = {0};
    if (gw_spec_with_grants(sv->opt->st, spec, &g, &err) == 0) {
      grants_list(b, &g.spec);
      if (check)
        readiness(sv, b, &g.spec);
      gw_granted_free(&g);
    }
    cap_error_clear(&err);
    if (!check) {
      cap_buf_printf(b, "<p><a href=\"%s/?ready=1&amp;id=", rq->base);
      ui_h(b, spec->id);
      cap_buf_puts(b, "\">Check readiness</a></p>");
    }
    struct gw_tools found = {0};
    if (spec->tool_source == CAP_TOOL_SOURCE_DYNAMIC) /* those its last discovery found */
      gw_selu_cached_tools(sv->cache, spec, &found, &err);
    cap_error_clear(&err);
    if (spec->n_tools || found.n)
      tools_table(sv->opt->st, b, rq, spec, found.n ? found.tools : spec->tools,
                  found.n ? found.n : spec->n_tools);
    else
      cap_buf_printf(b, "<p class=\"muted\">%s</p>",
                     spec->tool_source == CAP_TOOL_SOURCE_DYNAMIC
                         ? "Its tools are discovered on its first call."
                     : spec->runtime.kind == CAP_RUNTIME_EXEC
                         ? "No tools: a command sandbox for <code>capsule run</code>."
                         : "No tools declared.");
    gw_tools_free(&found);
    cap_buf_puts(b, "</section>\n");
  }
  ui_end(out);
}

/* Whether cap has tool: among its own, or (tool_source dynamic) those its
 * last discovery found. */
static bool has_tool(struct serve *sv, const char *cap, const char *tool)
{
  const struct cap_spec *spec = cap ? gw_registry_find(&sv->cur->reg, cap) : NULL;
  if (!spec || !tool)
    return false;
  if (gw_spec_tool(spec, tool))
    return true;
  struct gw_tools found = {0};
  struct cap_error err = {0};
  if (spec->tool_source == CAP_TOOL_SOURCE_DYNAMIC)
    gw_selu_cached_tools(sv->cache, spec, &found, &err);
  cap_error_clear(&err);
  bool has = gw_tools_find(&found, tool) != NULL;
  gw_tools_free(&found);
  return has;
}

/* POST /policy: capability, tool, policy, user (empty: the operator's default). */
static void post_policy(struct serve *sv, const struct ui_request *rq, struct ui_response *out)
{
  const char *cap = ui_param(rq, "capability"), *tool = ui_param(rq, "tool");
  const char *pol = ui_param(rq, "policy"), *user = ui_param(rq, "user");
  int p = -1;
  for (int i = CAP_POLICY_ALLOW; pol && i <= CAP_POLICY_BLOCK; i++)
    if (strcmp(pol, cap_policy_name((enum cap_policy)i)) == 0)
      p = i;
  if (p < 0)
    return ui_fail(out, rq, 400, "the policy is allow, ask or block");
  if (!has_tool(sv, cap, tool))
    return ui_fail(out, rq, 400, "no such capability and tool in the registry");
  if (!user)
    user = "";
  struct cap_error err = {0};
  int r = gw_policy_set(sv->opt->st, cap, tool, user, (enum cap_policy)p, &err);
  if (r == 0) /* what was approved under the old policy is not approved under the new one */
    r = gw_approval_void_for(sv->opt->st, cap, tool, &err);
  _cleanup_free_ char *what = *user ? cap_xasprintf("%s for user %s", pol, user)
                                    : cap_xasprintf("%s (operator default)", pol);
  if (r == 0)
    r = gw_audit_change(sv->opt->st, "policy-set", rq->user, cap, tool, what, &err);
  if (r < 0) {
    ui_fail(out, rq, 500, err.message);
    cap_error_clear(&err);
    return;
  }
  serve_log(sv, "info", "policy set from the dashboard", "by", rq->user, "policy", what);
  out->location = cap_xasprintf("/?done=policy#cap-%s", cap);
}

/* ---- approvals ---- */

static void approval_row(void *arg, const struct gw_approval *a)
{
  const struct ui_request *rq = ((void **)arg)[0];
  struct cap_buf *b = ((void **)arg)[1];
  char created[32], expires[32];
  ui_time(a->created_ms, created);
  ui_time(a->expires_ms, expires);
  /* the id is the database's, like every other field: escaped (a shared
   * PostgreSQL's row may hold anything) */
  cap_buf_puts(b, "<tr id=\"approval-");
  ui_h(b, a->id);
  cap_buf_puts(b, "\"><td><code>");
  ui_h(b, a->id);
  cap_buf_puts(b, "</code></td><td>");
  ui_h(b, a->capability);
  cap_buf_puts(b, ".");
  ui_h(b, a->tool);
  cap_buf_puts(b, "</td><td>");
  ui_h(b, a->user);
  cap_buf_puts(b, "</td><td>");
  ui_h(b, a->asked_by);
  cap_buf_printf(b, "</td><td>%s<br>until %s</td><td><pre class=\"args\">", created, expires);
  /* all of them, as capsule writes JSON: nothing hidden past a cut */
  _cleanup_free_ char *args = cap_json_canonical(a->args, strlen(a->args));
  ui_h(b, args ? args : a->args);
  cap_buf_puts(b, "</pre></td><td>");
  for (int approve = 1; approve >= 0; approve--) {
    cap_buf_printf(b, "<form method=\"post\" action=\"%s/approvals/decide\" class=\"inline\">",
                   rq->base);
    ui_csrf(b, rq);
    cap_buf_puts(b, "<input type=\"hidden\" name=\"id\" value=\"");
    ui_h(b, a->id);
    cap_buf_printf(b,
                   "\"><input type=\"hidden\" name=\"decision\" value=\"%s\"><button "
                   "type=\"submit\" class=\"%s\">%s</button></form> ",
                   approve ? "approve" : "deny", approve ? "approve" : "deny",
                   approve ? "Approve" : "Deny");
  }
  cap_buf_puts(b, "</td></tr>\n");
}

static void page_approvals(struct serve *sv, const struct ui_request *rq, struct ui_response *out)
{
  ui_begin(out, rq, "Pending approvals");
  struct cap_buf *b = &out->body;
  notice(b, rq);
  cap_buf_puts(b, "<div id=\"approvals\">");
  static const char *const cols[] = {"id",    "tool",      "for user", "asked by",
                                     "asked", "arguments", "decide",   NULL};
  ui_thead(b, cols);
  size_t before = b->len;
  void *arg[] = {(void *)rq, b};
  struct cap_error err = {0};
  int r = gw_approval_list_pending(sv->opt->st, approval_row, arg, &err);
  bool none = b->len == before;
  cap_buf_puts(b, "</tbody></table>");
  if (r < 0) {
    cap_buf_puts(b, "<p class=\"error\">");
    ui_h(b, err.message);
    cap_buf_puts(b, "</p>");
  } else if (none) {
    cap_buf_puts(b, "<p class=\"muted\" id=\"no-approvals\">No pending approvals.</p>");
  }
  cap_error_clear(&err);
  cap_buf_puts(b, "</div><p class=\"hint\">This list follows new approvals as they are asked "
                  "(a stream from the server).</p>");
  ui_end(out);
}

/* POST /approvals/decide: id, decision (approve or deny). */
static void post_decide(struct serve *sv, const struct ui_request *rq, struct ui_response *out)
{
  const char *id = ui_param(rq, "id"), *decision = ui_param(rq, "decision");
  bool approve = decision && strcmp(decision, "approve") == 0;
  if (!id || !gw_approval_id_valid(id) || !decision || (!approve && strcmp(decision, "deny")))
    return ui_fail(out, rq, 400, "give an approval's id and approve or deny");
  enum gw_approval_status was = GW_APPROVAL_NONE;
  struct gw_approval a = {0};
  struct cap_error err = {0};
  int r = gw_approval_resolve(sv->opt->st, id, approve, &was, &a, &err);
  if (r == 0 && (was != GW_APPROVAL_PENDING || a.status == GW_APPROVAL_EXPIRED)) {
    _cleanup_free_ char *msg =
        cap_xasprintf("approval %s is %s: only a pending one can be decided", id,
                      gw_approval_status_name(was != GW_APPROVAL_PENDING ? was : a.status));
    gw_approval_clear(&a);
    return ui_fail(out, rq, 409, msg);
  }
  if (r == 0) {
    _cleanup_free_ char *what = cap_xasprintf("approval %s for user %s", id, a.user);
    r = gw_audit_change(sv->opt->st, approve ? "approve" : "deny", rq->user, a.capability, a.tool,
                        what, &err);
  }
  gw_approval_clear(&a);
  if (r < 0) {
    ui_fail(out, rq, 500, err.message);
    cap_error_clear(&err);
    return;
  }
  serve_log(sv, "info", approve ? "approved from the dashboard" : "denied from the dashboard", "by",
            rq->user, "approval", id);
  out->location = cap_xstrdup(approve ? "/approvals?done=approved" : "/approvals?done=denied");
}

/* ---- routes ---- */

static const struct {
  const char *method, *path;
  ui_page_fn fn;
} routes[] = {
    {"GET", "/", page_capabilities},        {"POST", "/policy", post_policy},
    {"GET", "/approvals", page_approvals},  {"POST", "/approvals/decide", post_decide},
    {"GET", "/audit", ui_page_audit},       {"GET", "/talos", ui_page_talos},
    {"GET", "/covenant", ui_page_covenant}, {"GET", "/rollback", ui_page_rollback},
    {"GET", "/images", ui_page_images},     {"GET", "/egress", ui_page_egress},
};

void ui_page(struct serve *sv, const struct ui_request *rq, struct ui_response *out)
{
  const char *method = strcmp(rq->method, "HEAD") == 0 ? "GET" : rq->method;
  serve_lock_state(sv);
  for (size_t i = 0; i < ARRAY_SIZE(routes); i++)
    if (strcmp(rq->path, routes[i].path) == 0 && strcmp(method, routes[i].method) == 0) {
      routes[i].fn(sv, rq, out);
      serve_unlock_state(sv);
      return;
    }
  serve_unlock_state(sv);
  ui_fail(out, rq, 404, "There is no such page.");
}

static void pulse_id(void *arg, const struct gw_approval *a) { cap_buf_puts(arg, a->id); }

void ui_pulse(struct serve *sv, uint64_t out[2])
{
  /* a digest of the pending approvals' ids: a new one, or one gone, changes it */
  struct cap_buf ids = {0};
  struct cap_error err = {0};
  serve_lock_state(sv);
  gw_approval_list_pending(sv->opt->st, pulse_id, &ids, &err);
  out[1] = (uint64_t)ui_audit_head(sv);
  serve_unlock_state(sv);
  cap_error_clear(&err);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < ids.len; i++)
    h = (h ^ (unsigned char)ids.data[i]) * 1099511628211ull;
  cap_buf_free(&ids);
  out[0] = h;
}

int ui_login(struct serve *sv, const char *token, char **user)
{
  bool op = false;
  struct cap_error err = {0};
  serve_lock_state(sv);
  int r = gw_access_check(sv->opt->st, token, user, &op, &err);
  serve_unlock_state(sv);
  cap_error_clear(&err);
  if (r < 0)
    return -EACCES;
  if (!op) {
    free(*user);
    *user = NULL;
    return -EPERM;
  }
  return 0;
}
