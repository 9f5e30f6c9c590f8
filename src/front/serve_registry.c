/* `capsule serve`'s registry (front/serve_core.h): loaded from the
 * capabilities' directory into a new generation with its readiness memo,
 * watched (front/caps_watch.h: inotify, or where this user's inotify
 * limits are reached a rescan every 2 s), reloaded with every session
 * moved to the new generation and told. */
#include <stdio.h>
#include <stdlib.h>

#include "front/caps_watch.h"
#include "front/serve_core.h"
#include "front/serve_internal.h"
#include "gateway/registry.h"

/* The watch renewed before the directory is read (a change while it is
 * read: another reload), its mode logged when it changed: one warning as
 * serve goes to rescanning (this user's inotify limits reached). */
static void rewatch(struct serve *sv)
{
  bool was = sv->watch.rescan;
  if (!caps_watch_renew(&sv->watch))
    return;
  if (sv->watch.rescan && !was)
    serve_log(sv, "warning",
              "cannot watch the capabilities with inotify: rescanning them every 2 s instead",
              "error", sv->watch.error, "caps", sv->opt->caps_dir);
  else if (!sv->watch.rescan && was)
    serve_log(sv, "info", "watching the capabilities with inotify again", "caps", sv->opt->caps_dir,
              NULL, NULL);
  sv->status_dirty = true;
}

int serve_load(struct serve *sv, struct cap_error *err)
{
  rewatch(sv);
  struct gen *g = cap_xcalloc(1, sizeof *g);
  struct cap_diags diags = {0};
  int r = gw_registry_load(sv->opt->caps_dir, &g->reg, &diags);
  char problems[32];
  snprintf(problems, sizeof problems, "%zu", diags.len);
  cap_diags_free(&diags);
  if (r < 0) {
    free(g);
    return cap_error_set(err, -r, "cannot read the capabilities in %s", sv->opt->caps_dir);
  }
  g->refs = 1;
  g->ready = gw_ready_memo_new(g->reg.n, GW_READY_MEMO_TTL_MS);
  serve_gen_unref(sv->cur);
  sv->cur = g;
  char n[32];
  snprintf(n, sizeof n, "%zu", g->reg.n);
  serve_log(sv, "info", "registry loaded", "capabilities", n, "problems", problems);
  serve_grpc_reloaded(sv->grpc);
  serve_selu_reloaded(sv->selu);
  sv->status_dirty = true;
  return 0;
}

/* Every session moves to the new registry; those that can hear it are
 * told their list changed. */
void serve_reload(struct serve *sv)
{
  struct cap_error err = {0};
  if (serve_load(sv, &err) < 0) {
    serve_log(sv, "error", "reload failed; the registry before stays", "error", err.message, NULL,
              NULL);
    cap_error_clear(&err);
    return;
  }
  for (struct sess *x = sv->sessions; x; x = x->next) {
    if (x->gen == sv->cur)
      continue;
    struct gen *old = x->gen;
    x->gen = sv->cur;
    x->gen->refs++;
    x->cfg.reg = &x->gen->reg;
    x->cfg.ready_memo = x->gen->ready;
    mcp_session_registry_changed(x->s);
    serve_gen_unref(old);
  }
}
