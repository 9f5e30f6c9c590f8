/* The dashboard's read-only listings of what the other ecosystems keep:
 * Talos triggers (enabled, what they call) and their events, Covenant
 * agents' budgets and capability tokens, nono rollback snapshots, and the
 * Selu image store. The same library calls the command line's listings
 * make (`triggers`, `events`, `budget show`, `token list`, `rollback
 * list`, `image ls`), escaped for HTML. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/cleanup.h"
#include "front/ui_internal.h"
#include "gateway/budget.h"
#include "gateway/plugin_state.h"
#include "gateway/registry.h"
#include "gateway/tokens.h"
#include "image/image.h"
#include "sandbox/rollback.h"

#define UI_EVENTS_SHOWN 200

static void error_line(struct cap_buf *b, struct cap_error *err)
{
  cap_buf_puts(b, "<p class=\"error\">");
  ui_h(b, err->message);
  cap_buf_puts(b, "</p>");
  cap_error_clear(err);
}

/* ---- Talos ---- */

struct events_ring {
  char *rows[UI_EVENTS_SHOWN]; /* the newest, as HTML rows */
  size_t n;
};

static void event_row(void *arg, const struct gw_event *e)
{
  struct events_ring *ring = arg;
  struct cap_buf b = {0};
  cap_buf_printf(&b, "<tr><td>%lld</td><td>", (long long)e->seq);
  const char *cells[] = {e->time, e->capability, e->trigger, e->user};
  for (size_t i = 0; i < ARRAY_SIZE(cells); i++) {
    ui_h(&b, cells[i]);
    cap_buf_puts(&b, "</td><td>");
  }
  cap_buf_puts(&b, "<pre>");
  ui_h(&b, e->event);
  cap_buf_puts(&b, "</pre></td></tr>\n");
  size_t slot = ring->n++ % UI_EVENTS_SHOWN;
  free(ring->rows[slot]);
  ring->rows[slot] = cap_buf_steal(&b);
}

void ui_page_talos(struct serve *sv, const struct ui_request *rq, struct ui_response *out)
{
  ui_begin(out, rq, "Triggers and events");
  struct cap_buf *b = &out->body;
  static const char *const cols[] = {"capability", "trigger", "label", "enabled", "calls", NULL};
  ui_thead(b, cols);
  const struct gw_registry *reg = &sv->cur->reg;
  for (size_t i = 0; i < reg->n; i++) {
    const struct cap_spec *spec = reg->caps[i];
    for (size_t j = 0; j < spec->n_triggers; j++) {
      const struct cap_trigger *t = &spec->triggers[j];
      bool on = false;
      _cleanup_free_ char *call_cap = NULL, *call_tool = NULL;
      struct cap_error err = {0};
      gw_trigger_config(sv->opt->st, spec->id, t->id, spec->talos.default_enabled, &on, &call_cap,
                        &call_tool, NULL, &err);
      cap_error_clear(&err);
      const char *cells[] = {spec->id, t->id, t->label};
      cap_buf_puts(b, "<tr>");
      for (size_t k = 0; k < ARRAY_SIZE(cells); k++) {
        cap_buf_puts(b, "<td>");
        ui_h(b, cells[k]);
        cap_buf_puts(b, "</td>");
      }
      cap_buf_printf(b, "<td>%s</td><td>", on ? "yes" : "no");
      if (call_cap) {
        ui_h(b, call_cap);
        cap_buf_putc(b, '.');
        ui_h(b, call_tool);
      }
      cap_buf_puts(b, "</td></tr>\n");
    }
  }
  cap_buf_printf(b, "</tbody></table><h2>Events (the newest %d)</h2>", UI_EVENTS_SHOWN);
  static const char *const ecols[] = {"seq",  "time",  "capability", "trigger",
                                      "user", "event", NULL};
  ui_thead(b, ecols);
  struct events_ring ring = {0};
  struct cap_error err = {0};
  int r = gw_events_each(sv->opt->st, 0, event_row, &ring, &err);
  size_t shown = ring.n < UI_EVENTS_SHOWN ? ring.n : UI_EVENTS_SHOWN;
  for (size_t k = 0; k < shown; k++) { /* newest first */
    size_t slot = (ring.n - 1 - k) % UI_EVENTS_SHOWN;
    cap_buf_puts(b, ring.rows[slot]);
  }
  for (size_t k = 0; k < UI_EVENTS_SHOWN; k++)
    free(ring.rows[k]);
  cap_buf_puts(b, "</tbody></table>");
  if (r < 0)
    error_line(b, &err);
  ui_end(out);
}

/* ---- Covenant ---- */

static void token_row(void *arg, const struct gw_token *t, enum gw_token_status status,
                      int64_t issued_ms)
{
  struct cap_buf *b = arg;
  char issued[32], expires[32] = "never";
  ui_time(issued_ms, issued);
  if (t->expires)
    ui_time((int64_t)t->expires_at, expires);
  cap_buf_puts(b, "<tr><td>");
  const char *cells[] = {t->subject_display, t->action, t->scope, t->granted_by_display};
  for (size_t i = 0; i < ARRAY_SIZE(cells); i++) {
    ui_h(b, cells[i]);
    cap_buf_puts(b, "</td><td>");
  }
  cap_buf_printf(b, "%s</td><td>%s</td><td>%s</td></tr>\n", issued, expires,
                 gw_token_status_name(status));
}

void ui_page_covenant(struct serve *sv, const struct ui_request *rq, struct ui_response *out)
{
  ui_begin(out, rq, "Budgets and tokens");
  struct cap_buf *b = &out->body;
  static const char *const cols[] = {"agent", "credits", "capacity (an hour)", NULL};
  ui_thead(b, cols);
  const struct gw_registry *reg = &sv->cur->reg;
  uint64_t now = cap_now_ms(CLOCK_REALTIME);
  for (size_t i = 0; i < reg->n; i++) {
    const struct cap_spec *spec = reg->caps[i];
    if (spec->format != CAP_FORMAT_COVENANT || !spec->budget_credits_per_hour)
      continue;
    struct gw_bucket bk = {0};
    struct cap_error err = {0};
    cap_buf_puts(b, "<tr><td>");
    ui_h(b, spec->id);
    if (gw_budget_get(sv->opt->st, spec->id, spec->budget_credits_per_hour, now, &bk, &err) < 0) {
      cap_buf_puts(b, "</td><td colspan=\"2\" class=\"bad\">");
      ui_h(b, err.message);
      cap_buf_puts(b, "</td></tr>\n");
      cap_error_clear(&err);
      continue;
    }
    cap_buf_printf(b, "</td><td>%llu</td><td>%llu</td></tr>\n", (unsigned long long)bk.tokens,
                   (unsigned long long)bk.capacity);
  }
  cap_buf_puts(b, "</tbody></table><h2>Capability tokens</h2>");
  static const char *const tcols[] = {"subject", "action",  "scope",  "granted by",
                                      "issued",  "expires", "status", NULL};
  ui_thead(b, tcols);
  struct cap_error err = {0};
  int r = gw_token_list(sv->opt->st, token_row, b, &err);
  cap_buf_puts(b, "</tbody></table>");
  if (r < 0)
    error_line(b, &err);
  ui_end(out);
}

/* ---- nono rollback snapshots ---- */

void ui_page_rollback(struct serve *sv, const struct ui_request *rq, struct ui_response *out)
{
  ui_begin(out, rq, "Rollback snapshots");
  struct cap_buf *b = &out->body;
  _cleanup_free_ char *store = rb_store_dir(sv->opt->state_dir);
  struct cap_strv ids = {0};
  struct cap_error err = {0};
  static const char *const cols[] = {"id", "time", "command", "paths", "after", NULL};
  ui_thead(b, cols);
  int r = rb_record_ids(store, &ids, &err);
  for (size_t i = ids.len; r == 0 && i-- > 0;) { /* newest first */
    struct rb_record rec = {0};
    if (rb_record_load(store, ids.v[i], &rec, &err) < 0) {
      cap_error_clear(&err);
      continue;
    }
    cap_buf_puts(b, "<tr><td><code>");
    ui_h(b, rec.id);
    cap_buf_puts(b, "</code></td><td>");
    ui_h(b, rec.time);
    cap_buf_puts(b, "</td><td><code>");
    for (size_t k = 0; k < rec.command.len; k++) {
      ui_h(b, k ? " " : "");
      ui_h(b, rec.command.v[k]);
    }
    cap_buf_puts(b, "</code></td><td>");
    for (size_t k = 0; k < rec.paths.len; k++) {
      ui_h(b, rec.paths.v[k]);
      cap_buf_puts(b, "<br>");
    }
    cap_buf_printf(b, "</td><td>%s</td></tr>\n", rec.has_after ? "recorded" : "none");
    rb_record_free(&rec);
  }
  cap_strv_free(&ids);
  cap_buf_puts(b, "</tbody></table><p class=\"hint\"><code>capsule rollback show|diff|restore "
                  "ID</code> works on one.</p>");
  if (r < 0)
    error_line(b, &err);
  ui_end(out);
}

/* ---- Selu images ---- */

void ui_page_images(struct serve *sv, const struct ui_request *rq, struct ui_response *out)
{
  ui_begin(out, rq, "Images");
  struct cap_buf *b = &out->body;
  struct image_info *list = NULL;
  size_t n = 0;
  struct cap_error err = {0};
  static const char *const cols[] = {"reference", "image id", "size", "unpacked", NULL};
  ui_thead(b, cols);
  int r = image_store_list(sv->images, &list, &n, &err);
  for (size_t i = 0; r == 0 && i < n; i++) {
    cap_buf_puts(b, "<tr><td>");
    ui_h(b, list[i].ref ? list[i].ref : "(untagged)");
    cap_buf_puts(b, "</td><td><code>");
    ui_h(b, list[i].config_digest);
    cap_buf_printf(b, "</code></td><td>%lld</td><td>%s</td></tr>\n", (long long)list[i].size,
                   list[i].rootfs ? "yes" : "no");
  }
  image_infos_free(list, n);
  cap_buf_puts(b, "</tbody></table>");
  if (r < 0)
    error_line(b, &err);
  ui_end(out);
}
