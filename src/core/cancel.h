/* A cancellation token one thread fires and another's blocking operation
 * watches: the operation arms it with what stops it (a gRPC call's
 * cancel, say) while it runs and disarms it after; fired before, armed
 * never succeeds. The stop function runs under the token's lock, so the
 * operation's disarm waits for it and frees nothing it still uses.
 *
 * Header-only (static inline), so the modules opened beside the
 * executable (runtime/selu_rpc.c's) share it without a symbol. The token
 * is the caller's; cap_cancel_init before use, cap_cancel_destroy after. */
#ifndef CAPSULE_CORE_CANCEL_H
#define CAPSULE_CORE_CANCEL_H

#include <pthread.h>
#include <stdbool.h>

struct cap_cancel {
  pthread_mutex_t mu;
  bool fired;
  void (*stop)(void *arg); /* armed: what stops the operation */
  void *arg;
};

static inline void cap_cancel_init(struct cap_cancel *c)
{
  pthread_mutex_init(&c->mu, NULL);
  c->fired = false;
  c->stop = NULL;
  c->arg = NULL;
}

static inline void cap_cancel_destroy(struct cap_cancel *c) { pthread_mutex_destroy(&c->mu); }

/* Arms c with stop(arg); false (nothing armed) when c has fired already.
 * A NULL c never fires. */
static inline bool cap_cancel_arm(struct cap_cancel *c, void (*stop)(void *), void *arg)
{
  if (!c)
    return true;
  pthread_mutex_lock(&c->mu);
  bool ok = !c->fired;
  if (ok) {
    c->stop = stop;
    c->arg = arg;
  }
  pthread_mutex_unlock(&c->mu);
  return ok;
}

static inline void cap_cancel_disarm(struct cap_cancel *c)
{
  if (!c)
    return;
  pthread_mutex_lock(&c->mu);
  c->stop = NULL;
  c->arg = NULL;
  pthread_mutex_unlock(&c->mu);
}

/* Fires c: the armed operation stopped now, any later one refused. */
static inline void cap_cancel_fire(struct cap_cancel *c)
{
  pthread_mutex_lock(&c->mu);
  c->fired = true;
  if (c->stop)
    c->stop(c->arg);
  pthread_mutex_unlock(&c->mu);
}

static inline bool cap_cancel_fired(struct cap_cancel *c)
{
  if (!c)
    return false;
  pthread_mutex_lock(&c->mu);
  bool fired = c->fired;
  pthread_mutex_unlock(&c->mu);
  return fired;
}

#endif
