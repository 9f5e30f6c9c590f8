/* `capsule serve`'s registry (front/serve_core.h): loaded from the
 * capabilities' directory into a new generation with its readiness memo,
 * watched with inotify (three levels, node_modules left out) or, where
 * this user's inotify limits are reached, rescanned every 2 s, reloaded
 * with every session moved to the new generation and told. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/clock.h"
#include "front/serve_core.h"
#include "front/serve_internal.h"
#include "gateway/registry.h"

/* The limit an inotify call's errno points at, for the warning: its
 * sysctl and its value now. */
static char *watch_error(const char *call, int e)
{
  const char *knob = e == EMFILE ? "max_user_instances" : e == ENOSPC ? "max_user_watches" : NULL;
  if (!knob)
    return cap_xasprintf("%s: %s", call, strerror(e));
  _cleanup_free_ char *path = cap_xasprintf("/proc/sys/fs/inotify/%s", knob);
  char now[32] = "?";
  FILE *f = fopen(path, "re");
  if (f) {
    if (!fgets(now, sizeof now, f))
      snprintf(now, sizeof now, "?");
    now[strcspn(now, "\n")] = '\0';
    fclose(f);
  }
  return cap_xasprintf("%s: %s: this user's inotify limit fs.inotify.%s (%s) is reached; raise it "
                       "(sysctl -w fs.inotify.%s=N, or a file in /etc/sysctl.d)",
                       call, strerror(e), knob, now, knob);
}

/* Three levels of directories, node_modules and dot-names left out;
 * 0, or the errno of the first watch refused for want of this user's
 * watches (ENOSPC) or kernel memory; below the top, another refusal (a
 * directory gone meanwhile, one unreadable) leaves that one unwatched,
 * as the load leaves it unread. */
static int watch_tree(int fd, const char *dir, int depth)
{
  if (inotify_add_watch(fd, dir,
                        IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE |
                            IN_ATTRIB | IN_ONLYDIR) < 0)
    return depth > 0 && errno != ENOSPC && errno != ENOMEM ? 0 : errno;
  if (depth >= 3)
    return 0;
  DIR *d = opendir(dir);
  int r = 0;
  for (struct dirent *e; r == 0 && d && (e = readdir(d));) {
    if (e->d_name[0] == '.' || strcmp(e->d_name, "node_modules") == 0)
      continue;
    _cleanup_free_ char *sub = cap_xasprintf("%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(sub, &sb) == 0 && S_ISDIR(sb.st_mode))
      r = watch_tree(fd, sub, depth + 1);
  }
  if (d)
    closedir(d);
  return r;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ULL;
  return h;
}

/* What the watch would hear of, without it: each entry of the directories
 * watch_tree watches, by path, inode, type and mode, size, mtime and ctime.
 * Summed, so the order readdir gives does not count. */
static uint64_t fingerprint(const char *dir, int depth)
{
  uint64_t sum = 0;
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    _cleanup_free_ char *sub = cap_xasprintf("%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(sub, &sb) < 0)
      continue;
    int64_t id[] = {(int64_t)sb.st_ino,          (int64_t)sb.st_mode,
                    (int64_t)sb.st_size,         (int64_t)sb.st_mtim.tv_sec,
                    (int64_t)sb.st_mtim.tv_nsec, (int64_t)sb.st_ctim.tv_sec,
                    (int64_t)sb.st_ctim.tv_nsec};
    sum += fnv(fnv(0xcbf29ce484222325ULL, sub, strlen(sub) + 1), id, sizeof id);
    if (S_ISDIR(sb.st_mode) && depth < 3 && e->d_name[0] != '.' &&
        strcmp(e->d_name, "node_modules") != 0)
      sum += fingerprint(sub, depth + 1);
  }
  if (d)
    closedir(d);
  return sum;
}

/* The watch renewed before the directory is read (a change while it is
 * read: another reload). Without inotify (this user's limits reached):
 * the tree's fingerprint, compared every SERVE_RESCAN_MS (serve_rescan),
 * and one warning as serve goes to that mode. */
static void rewatch(struct serve *sv)
{
  if (sv->inotify_fd >= 0)
    close(sv->inotify_fd);
  _cleanup_free_ char *why = NULL;
  sv->inotify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  int e = sv->inotify_fd < 0 ? errno : watch_tree(sv->inotify_fd, sv->opt->caps_dir, 0);
  if (e)
    why = watch_error(sv->inotify_fd < 0 ? "inotify_init1" : "inotify_add_watch", e);
  if (e && sv->inotify_fd >= 0) {
    close(sv->inotify_fd);
    sv->inotify_fd = -1;
  }
  bool was = sv->caps_rescan;
  sv->caps_rescan = why != NULL;
  if (why) {
    sv->caps_fp = fingerprint(sv->opt->caps_dir, 0);
    sv->caps_scan_at = cap_now_ms(CLOCK_MONOTONIC) + SERVE_RESCAN_MS;
  }
  if (why && !was)
    serve_log(sv, "warning",
              "cannot watch the capabilities with inotify: rescanning them every 2 s instead",
              "error", why, "caps", sv->opt->caps_dir);
  else if (!why && was)
    serve_log(sv, "info", "watching the capabilities with inotify again", "caps", sv->opt->caps_dir,
              NULL, NULL);
  if (was != sv->caps_rescan ||
      (why && (!sv->caps_watch_error || strcmp(why, sv->caps_watch_error) != 0)))
    sv->status_dirty = true;
  free(sv->caps_watch_error);
  sv->caps_watch_error = why ? cap_xstrdup(why) : NULL;
}

void serve_rescan(struct serve *sv)
{
  uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
  if (!sv->caps_rescan || now < sv->caps_scan_at)
    return;
  sv->caps_scan_at = now + SERVE_RESCAN_MS;
  if (!sv->reload_at && fingerprint(sv->opt->caps_dir, 0) != sv->caps_fp)
    sv->reload_at = now; /* the settle time is the rescan's own */
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
