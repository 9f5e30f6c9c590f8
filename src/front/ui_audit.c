/* The dashboard's audit log: a search (capability, user, decision, and
 * text anywhere in a record), newest first, 100 records a page (keyset
 * paging: "older" names the last sequence number shown), each record
 * with its own place in the chain (gateway/state_query.h), and on
 * request the whole chain verified as `capsule audit verify` does. The
 * egress log the same way (capability, user, decision, text in the host,
 * method, path or reason; a call's decisions from its audit record). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "front/ui_internal.h"
#include "gateway/state.h"
#include "gateway/state_query.h"

struct audit_page {
  struct cap_buf *b;
  int64_t first, last;
  size_t n;
};

static void audit_row(void *arg, const struct gw_audit_record *r, enum gw_chain_status chain)
{
  struct audit_page *p = arg;
  struct cap_buf *b = p->b;
  if (!p->n++)
    p->first = r->seq;
  p->last = r->seq;
  cap_buf_puts(b, "<tr class=\"record\" data-seq=\"");
  cap_buf_put_i64(b, r->seq);
  cap_buf_puts(b, "\"><td>");
  cap_buf_put_i64(b, r->seq);
  cap_buf_puts(b, "</td><td>");
  const char *cells[] = {r->time, r->user, r->capability, r->tool, r->decision, r->outcome};
  for (size_t i = 0; i < ARRAY_SIZE(cells); i++) {
    ui_h(b, cells[i]);
    cap_buf_puts(b, "</td><td>");
  }
  cap_buf_put_i64(b, r->duration_ms);
  cap_buf_puts(b, chain == GW_CHAIN_OK ? "</td><td class=\"chain ok\">"
                                       : "</td><td class=\"chain bad\">");
  cap_buf_puts(b, gw_chain_status_name(chain));
  cap_buf_puts(b, "</td></tr>\n");
}

/* What a page of 100 records takes (about 23 KB): made room for at once
 * rather than by ten doublings. */
#define LOG_PAGE_BYTES 32768

/* A log page's filters: the query parameter and its label. */
struct log_filter {
  const char *name, *label;
};

static const struct log_filter audit_filters[] = {
    {"capability", "capability"}, {"user", "user"}, {"decision", "decision"}, {"q", "text"}};
static const struct log_filter egress_filters[] = {{"capability", "capability"},
                                                   {"user", "user"},
                                                   {"decision", "decision"},
                                                   {"q", "host, path or reason"},
                                                   {"call", "call (audit seq)"}};

/* A log page: its path, filters, and what it says when nothing matches. */
struct log_view {
  const char *path;
  const struct log_filter *filters;
  size_t n;
  const char *none;
};
static const struct log_view audit_view = {"/audit", audit_filters, ARRAY_SIZE(audit_filters),
                                           "No record matches."};
static const struct log_view egress_view = {"/egress", egress_filters, ARRAY_SIZE(egress_filters),
                                            "No decision matches."};

/* The form of v's filters, each holding the value given; buttons after
 * the search button. */
static void filter_form(struct cap_buf *b, const struct ui_request *rq, const struct log_view *v,
                        const char *buttons)
{
  const struct log_filter *f = v->filters;
  cap_buf_printf(b, "<form method=\"get\" action=\"%s%s\" class=\"filters\">", rq->base, v->path);
  for (size_t i = 0; i < v->n; i++) {
    cap_buf_printf(b, "<label>%s <input name=\"%s\" id=\"f-%s\" value=\"", f[i].label, f[i].name,
                   f[i].name);
    ui_h(b, ui_param(rq, f[i].name));
    cap_buf_puts(b, "\" size=\"14\"></label>");
  }
  cap_buf_printf(b, "<button type=\"submit\" id=\"search\">Search</button>%s</form>", buttons);
}

static void verify_result(struct serve *sv, struct cap_buf *b)
{
  size_t n = 0;
  struct cap_error err = {0};
  int r = gw_audit_verify(sv->opt->st, &n, &err);
  if (r == 0)
    cap_buf_printf(b,
                   "<p class=\"ok\" id=\"verify\" role=\"status\">The chain verifies: %zu "
                   "records, its head and the high-water mark agree.</p>",
                   n);
  else {
    cap_buf_puts(b, "<p class=\"bad\" id=\"verify\" role=\"alert\">The chain does not verify: ");
    ui_h(b, err.message);
    cap_buf_puts(b, "</p>");
  }
  cap_error_clear(&err);
}

/* The link to v's next page: the same filters, older than last. */
static void older_link(struct cap_buf *b, const struct ui_request *rq, const struct log_view *v,
                       int64_t last)
{
  cap_buf_printf(b, "<p><a id=\"older\" href=\"%s%s?", rq->base, v->path);
  for (size_t i = 0; i < v->n; i++) {
    const char *val = ui_param(rq, v->filters[i].name);
    if (!val || !*val)
      continue;
    cap_buf_printf(b, "%s=", v->filters[i].name);
    for (const unsigned char *c = (const unsigned char *)val; *c; c++)
      if ((*c >= '0' && *c <= '9') || (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
          strchr("-_.~", *c))
        cap_buf_putc(b, (char)*c);
      else
        cap_buf_printf(b, "%%%02X", *c);
    cap_buf_puts(b, "&amp;");
  }
  cap_buf_printf(b, "before=%lld\">Older records</a></p>", (long long)last);
}

/* After v's rows: the table closed, the query's error or that nothing
 * matched, the link to older rows with the same filters. */
static void table_end(struct cap_buf *b, const struct ui_request *rq, const struct log_view *v,
                      int r, struct cap_error *err, size_t shown, bool more, int64_t last)
{
  cap_buf_puts(b, "</tbody></table>");
  if (r < 0) {
    cap_buf_puts(b, "<p class=\"error\">");
    ui_h(b, err->message);
    cap_buf_puts(b, "</p>");
    cap_error_clear(err);
  } else if (!shown) {
    cap_buf_printf(b, "<p class=\"muted\" id=\"no-records\">%s</p>", v->none);
  }
  if (more)
    older_link(b, rq, v, last);
}

static void head_of(void *arg, const struct gw_audit_record *r, enum gw_chain_status chain)
{
  (void)chain;
  *(int64_t *)arg = r->seq;
}

int64_t ui_audit_head(struct serve *sv)
{
  struct gw_audit_filter f = {.limit = 1};
  int64_t head = 0;
  bool more = false;
  struct cap_error err = {0};
  gw_audit_query(sv->opt->st, &f, head_of, &head, &more, &err);
  cap_error_clear(&err);
  return head;
}

void ui_page_audit(struct serve *sv, const struct ui_request *rq, struct ui_response *out)
{
  cap_buf_reserve(&out->body, LOG_PAGE_BYTES);
  ui_begin(out, rq, "Audit log");
  struct cap_buf *b = &out->body;
  filter_form(b, rq, &audit_view,
              " <button type=\"submit\" name=\"verify\" value=\"1\" id=\"verify-chain\">Verify "
              "the chain</button>");
  if (ui_param(rq, "verify"))
    verify_result(sv, b);
  const char *before = ui_param(rq, "before");
  struct gw_audit_filter f = {.capability = ui_param(rq, "capability"),
                              .user = ui_param(rq, "user"),
                              .decision = ui_param(rq, "decision"),
                              .text = ui_param(rq, "q"),
                              .before = before ? strtoll(before, NULL, 10) : 0};
  static const char *const cols[] = {"seq",      "time",    "user",        "capability", "tool",
                                     "decision", "outcome", "duration ms", "chain",      NULL};
  ui_thead(b, cols);
  struct audit_page p = {.b = b};
  bool more = false;
  struct cap_error err = {0};
  int r = gw_audit_query(sv->opt->st, &f, audit_row, &p, &more, &err);
  table_end(b, rq, &audit_view, r, &err, p.n, more, p.last);
  if (!before) {                              /* the newest page follows the log (ui.js) */
    bool any = f.capability && *f.capability; /* filtered: the head may not be shown */
    any = any || (f.user && *f.user) || (f.decision && *f.decision) || (f.text && *f.text);
    cap_buf_puts(b, "<p id=\"audit-live\" class=\"notice\" data-head=\"");
    cap_buf_put_i64(b, any || r < 0 ? ui_audit_head(sv) : p.first);
    cap_buf_puts(b, "\" hidden></p>");
  }
  ui_end(out);
}

/* ---- the egress log ---- */

struct egress_page {
  struct cap_buf *b;
  const char *base; /* the session's path */
  int64_t last;
  size_t n;
};

static void egress_row(void *arg, const struct gw_egress_record *r)
{
  struct egress_page *p = arg;
  struct cap_buf *b = p->b;
  p->last = r->seq;
  p->n++;
  cap_buf_printf(b, "<tr class=\"egress\" data-seq=\"%lld\"><td>%lld</td><td>", (long long)r->seq,
                 (long long)r->seq);
  const char *cells[] = {r->time, r->user, r->capability};
  for (size_t i = 0; i < ARRAY_SIZE(cells); i++) {
    ui_h(b, cells[i]);
    cap_buf_puts(b, "</td><td>");
  }
  if (r->call_seq)
    cap_buf_printf(b, "<a href=\"%s/egress?call=%lld\">%lld</a>", p->base, (long long)r->call_seq,
                   (long long)r->call_seq);
  cap_buf_printf(b, "</td><td class=\"decision %s\">",
                 strcmp(r->decision, "allow") == 0 ? "ok" : "bad");
  ui_h(b, r->decision);
  cap_buf_puts(b, "</td><td>");
  ui_h(b, r->kind);
  cap_buf_puts(b, "</td><td>");
  ui_h(b, r->host);
  cap_buf_printf(b, "</td><td>%lld</td><td>", (long long)r->port);
  ui_h(b, r->method);
  if (*r->path) {
    cap_buf_puts(b, " ");
    ui_h(b, r->path);
  }
  cap_buf_puts(b, "</td><td>");
  ui_h(b, r->credential);
  cap_buf_printf(b, "</td><td>%lld / %lld</td><td>", (long long)r->bytes_up,
                 (long long)r->bytes_down);
  ui_h(b, r->reason);
  if (r->count)
    cap_buf_printf(b, " (%lld)", (long long)r->count);
  cap_buf_puts(b, "</td></tr>\n");
}

void ui_page_egress(struct serve *sv, const struct ui_request *rq, struct ui_response *out)
{
  cap_buf_reserve(&out->body, LOG_PAGE_BYTES);
  ui_begin(out, rq, "Egress log");
  struct cap_buf *b = &out->body;
  filter_form(b, rq, &egress_view, "");
  const char *before = ui_param(rq, "before"), *call = ui_param(rq, "call");
  struct gw_egress_filter f = {.capability = ui_param(rq, "capability"),
                               .user = ui_param(rq, "user"),
                               .decision = ui_param(rq, "decision"),
                               .text = ui_param(rq, "q"),
                               .call_seq = call ? strtoll(call, NULL, 10) : 0,
                               .before = before ? strtoll(before, NULL, 10) : 0};
  static const char *const cols[] = {
      "seq",  "time",    "user",       "capability",      "call",   "decision", "kind", "host",
      "port", "request", "credential", "bytes up / down", "reason", NULL};
  ui_thead(b, cols);
  struct egress_page p = {.b = b, .base = rq->base};
  bool more = false;
  struct cap_error err = {0};
  int r = gw_egress_query(sv->opt->st, &f, egress_row, &p, &more, &err);
  table_end(b, rq, &egress_view, r, &err, p.n, more, p.last);
  ui_end(out);
}
