/* What a caller holding something others need (serve --grpc's thread
 * that takes new calls while it answers one) is told when the operation
 * it runs is about to wait long: the hook runs once, on that thread,
 * before such a wait, or once a wait has lasted CAP_WAIT_SOON_US, so that
 * it hands over what it holds then, and not before every call. A NULL
 * hook, or one already run, does nothing.
 *
 * Header-only (static inline), so the modules opened beside the
 * executable share it without a symbol. */
#ifndef CAPSULE_CORE_WAIT_HOOK_H
#define CAPSULE_CORE_WAIT_HOOK_H

#include <stdbool.h>
#include <stddef.h>

#define CAP_WAIT_SOON_US 500 /* a wait this long is a long one */

struct cap_wait_hook {
  void (*fn)(void *arg); /* NULL once run */
  void *arg;
};

static inline bool cap_wait_hook_armed(const struct cap_wait_hook *h) { return h && h->fn; }

static inline void cap_wait_hook_run(struct cap_wait_hook *h)
{
  if (!h || !h->fn)
    return;
  void (*fn)(void *) = h->fn;
  h->fn = NULL;
  fn(h->arg);
}

#endif
