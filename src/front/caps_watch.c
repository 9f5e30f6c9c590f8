/* The capabilities' directory watched for a reload (front/caps_watch.h). */
#include "front/caps_watch.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/clock.h"

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

static uint64_t now_ms(void) { return cap_now_ms(CLOCK_MONOTONIC); }

void caps_watch_init(struct caps_watch *w, const char *dir)
{
  *w = (struct caps_watch){.dir = dir, .fd = -1};
}

bool caps_watch_renew(struct caps_watch *w)
{
  if (w->fd >= 0)
    close(w->fd);
  char *why = NULL;
  w->fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  int e = w->fd < 0 ? errno : watch_tree(w->fd, w->dir, 0);
  if (e)
    why = watch_error(w->fd < 0 ? "inotify_init1" : "inotify_add_watch", e);
  if (e && w->fd >= 0) {
    close(w->fd);
    w->fd = -1;
  }
  bool was = w->rescan;
  w->rescan = why != NULL;
  if (why) {
    w->fp = fingerprint(w->dir, 0);
    w->scan_at = now_ms() + CAPS_WATCH_RESCAN_MS;
  }
  bool changed = was != w->rescan || (why && (!w->error || strcmp(why, w->error) != 0));
  free(w->error);
  w->error = why;
  return changed;
}

int caps_watch_timeout(const struct caps_watch *w, int timeout)
{
  uint64_t now = now_ms();
  uint64_t at = w->rescan ? w->scan_at : 0;
  if (w->reload_at && (!at || w->reload_at < at))
    at = w->reload_at;
  if (!at)
    return timeout;
  int t = at <= now ? 0 : at - now > 1000000 ? 1000000 : (int)(at - now);
  return timeout < 0 || t < timeout ? t : timeout;
}

bool caps_watch_turn(struct caps_watch *w, short revents)
{
  uint64_t now = now_ms();
  if (revents && w->fd >= 0) {
    char buf[4096];
    while (read(w->fd, buf, sizeof buf) > 0)
      ;
    w->reload_at = now + CAPS_WATCH_SETTLE_MS; /* a burst of changes: one reload */
  }
  if (w->rescan && now >= w->scan_at) {
    w->scan_at = now + CAPS_WATCH_RESCAN_MS;
    if (!w->reload_at && fingerprint(w->dir, 0) != w->fp)
      w->reload_at = now; /* the settle time is the rescan's own */
  }
  if (!w->reload_at || now < w->reload_at)
    return false;
  w->reload_at = 0;
  return true;
}

void caps_watch_free(struct caps_watch *w)
{
  if (w->fd >= 0)
    close(w->fd);
  w->fd = -1;
  free(w->error);
  w->error = NULL;
}
