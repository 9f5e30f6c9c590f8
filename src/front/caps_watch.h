/* The capabilities' directory watched for a reload, by `capsule serve`
 * and `capsule mcp` alike: inotify on three levels of its directories
 * (node_modules and dot-names left out), renewed before each load so a
 * change while the tree is read is another reload; where this user's
 * inotify limits are reached, the tree's fingerprint compared every
 * CAPS_WATCH_RESCAN_MS instead. A burst of changes is one reload,
 * CAPS_WATCH_SETTLE_MS after the last. Not thread-safe: its owner's
 * loop drives it. */
#ifndef CAPSULE_FRONT_CAPS_WATCH_H
#define CAPSULE_FRONT_CAPS_WATCH_H

#include <stdbool.h>
#include <stdint.h>

#define CAPS_WATCH_SETTLE_MS 300
#define CAPS_WATCH_RESCAN_MS 2000

struct caps_watch {
  const char *dir; /* borrowed */
  int fd;          /* inotify, or -1 while rescanning */
  bool rescan;     /* no inotify: the fingerprint every CAPS_WATCH_RESCAN_MS */
  uint64_t fp, scan_at;
  uint64_t reload_at; /* CLOCK_MONOTONIC ms a change is to be reloaded at, or 0 */
  char *error;        /* why inotify could not be had (rescan), or NULL */
};

void caps_watch_init(struct caps_watch *w, const char *dir);
/* The watch made again (before a load). True when its mode changed
 * (inotify to rescan or back) or, rescanning, its reason did. */
bool caps_watch_renew(struct caps_watch *w);
/* timeout (ms, -1: none) shortened to what the watch waits for. */
int caps_watch_timeout(const struct caps_watch *w, int timeout);
/* After a poll that watched w->fd with POLLIN (revents: what it said):
 * the events read, the rescan made when due; true when a reload is due
 * now (reload_at then 0). */
bool caps_watch_turn(struct caps_watch *w, short revents);
void caps_watch_free(struct caps_watch *w);

#endif
