/* `capsule serve`'s registry (front/serve_core.h): loaded from the
 * capabilities' directory into a new generation with its readiness memo,
 * watched with inotify (three levels, node_modules left out), reloaded
 * with every session moved to the new generation and told. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "front/serve_core.h"
#include "front/serve_internal.h"
#include "gateway/registry.h"

static void watch_tree(int fd, const char *dir, int depth)
{
  if (inotify_add_watch(fd, dir,
                        IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE |
                            IN_ATTRIB | IN_ONLYDIR) < 0 ||
      depth >= 3)
    return;
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.' || strcmp(e->d_name, "node_modules") == 0)
      continue;
    _cleanup_free_ char *sub = cap_xasprintf("%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(sub, &sb) == 0 && S_ISDIR(sb.st_mode))
      watch_tree(fd, sub, depth + 1);
  }
  if (d)
    closedir(d);
}

static void rewatch(struct serve *sv)
{
  if (sv->inotify_fd >= 0)
    close(sv->inotify_fd);
  sv->inotify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (sv->inotify_fd >= 0)
    watch_tree(sv->inotify_fd, sv->opt->caps_dir, 0);
}

int serve_load(struct serve *sv, struct cap_error *err)
{
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
  rewatch(sv);
  return 0;
}

/* Every session moves to the new registry; those that can hear it are
 * told their list changed. */
void serve_reload(struct serve *sv)
{
  sv->reload_at = 0;
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
