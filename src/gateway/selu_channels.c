/* gRPC channels kept between calls to warm Selu instances (gateway/selu.h),
 * for a long-lived caller (serve --grpc's warm path): one per instance key,
 * tied to the keeper's instance it was leased from. Each call still takes
 * a lease (the keeper's concurrency limit, idle clock and package check
 * hold), but one without a new connection while the instance is the one
 * the channel reaches; a new instance, or a channel whose connection
 * failed, gets a new connection and channel. Entries are reference
 * counted: a channel replaced or evicted while calls are on it closes
 * after the last of them. */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "gateway/instance.h"
#include "gateway/selu.h"
#include "runtime/selu_rpc.h"

#define CHANNELS_MAX 64 /* instances with a kept channel; the least recently used goes */
#define CONTROLS_MAX 16 /* connections to keepers kept between leases; the oldest goes */

struct gw_channel {
  char key[33];
  uint64_t instance;
  struct selu_channel *ch;
  unsigned refs; /* the table's, and one per call on it */
  uint64_t used; /* a tick of the last take */
};

struct gw_control {
  char key[33];
  int fd; /* -1: a free slot */
  uint64_t used;
  bool ahead;        /* its next lease asked: held until taken or dropped */
  bool parked;       /* its call's lease still held, its end and the next lease not asked yet */
  uint64_t instance; /* with parked: the instance the next lease is asked on */
  uint64_t until_ms; /* with ahead or parked: dropped then (CLOCK_MONOTONIC) */
};

struct gw_channels {
  pthread_mutex_t mu;
  struct gw_channel *slot[CHANNELS_MAX];
  struct gw_control control[CONTROLS_MAX];
  uint64_t tick;
  pthread_cond_t wake;  /* the sweeper's: a lease asked ahead kept, or the end */
  pthread_t sweeper;    /* drops the leases asked ahead that no call took */
  bool sweeping, ended; /* it runs; it is to end */
  bool sweep_idle;      /* it waits with no lease to give back: woken for the next */
  bool deferred;        /* leases' ends parked until gw_channels_flush */
};

struct gw_channels *gw_channels_new(void)
{
  struct gw_channels *c = cap_xcalloc(1, sizeof *c);
  pthread_mutex_init(&c->mu, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&c->wake, &attr);
  pthread_condattr_destroy(&attr);
  for (size_t i = 0; i < CONTROLS_MAX; i++)
    c->control[i].fd = -1;
  return c;
}

struct gw_channels *gw_channels_new_deferred(void)
{
  struct gw_channels *c = gw_channels_new();
  c->deferred = true;
  return c;
}

/* The sweeper: a lease asked ahead is held by the keeper (its concurrency
 * slot, its idle clock) until a call takes it; past GW_AHEAD_LINGER_MS
 * without one its connection is closed, which ends it. A parked lease
 * (its end not yet asked) no flush came for in that time ends the same
 * way. */
static void *sweep(void *arg)
{
  struct gw_channels *c = arg;
  pthread_mutex_lock(&c->mu);
  while (!c->ended) {
    uint64_t now = cap_now_ms(CLOCK_MONOTONIC), next = 0;
    int drop[CONTROLS_MAX];
    size_t n = 0;
    for (size_t i = 0; i < CONTROLS_MAX; i++) {
      struct gw_control *k = &c->control[i];
      if (k->fd < 0 || (!k->ahead && !k->parked))
        continue;
      if (now >= k->until_ms) {
        drop[n++] = k->fd;
        k->fd = -1;
      } else if (!next || k->until_ms < next) {
        next = k->until_ms;
      }
    }
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < n; i++)
      close(drop[i]);
    pthread_mutex_lock(&c->mu);
    if (c->ended)
      break;
    if (!next) {
      c->sweep_idle = true;
      pthread_cond_wait(&c->wake, &c->mu);
      c->sweep_idle = false;
      continue;
    }
    struct timespec t = {.tv_sec = (time_t)(next / 1000), .tv_nsec = (long)(next % 1000) * 1000000};
    pthread_cond_timedwait(&c->wake, &c->mu, &t);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

/* Drops one reference; the last closes the channel. Under c->mu. */
static void unref_locked(struct gw_channel *e)
{
  if (--e->refs == 0) {
    selu_channel_close(e->ch);
    free(e);
  }
}

struct gw_channel *gw_channels_take(struct gw_channels *c, const char *key)
{
  struct gw_channel *found = NULL;
  pthread_mutex_lock(&c->mu);
  for (size_t i = 0; i < CHANNELS_MAX && !found; i++) {
    struct gw_channel *e = c->slot[i];
    if (!e || strcmp(e->key, key) != 0)
      continue;
    if (!selu_channel_usable(e->ch)) { /* its connection is gone: never again */
      c->slot[i] = NULL;
      unref_locked(e);
      break;
    }
    found = e;
    e->refs++;
    e->used = ++c->tick;
  }
  pthread_mutex_unlock(&c->mu);
  return found;
}

struct selu_channel *gw_channel_get(const struct gw_channel *e, uint64_t *instance)
{
  *instance = e->instance;
  return e->ch;
}

struct gw_channel *gw_channels_keep(struct gw_channels *c, const char *key, uint64_t instance,
                                    struct selu_channel *ch)
{
  struct gw_channel *e = cap_xcalloc(1, sizeof *e);
  snprintf(e->key, sizeof e->key, "%s", key);
  e->instance = instance;
  e->ch = ch;
  e->refs = 2; /* the table's and the caller's */
  pthread_mutex_lock(&c->mu);
  e->used = ++c->tick;
  size_t at = CHANNELS_MAX;
  for (size_t i = 0; i < CHANNELS_MAX; i++) {
    struct gw_channel *o = c->slot[i], *chosen = at < CHANNELS_MAX ? c->slot[at] : NULL;
    if (o && strcmp(o->key, key) == 0) { /* an older instance's */
      at = i;
      break;
    }
    bool better = at == CHANNELS_MAX || (!o && chosen) || (o && chosen && o->used < chosen->used);
    if (better)
      at = i; /* a free slot, else the least recently used */
  }
  if (c->slot[at])
    unref_locked(c->slot[at]);
  c->slot[at] = e;
  pthread_mutex_unlock(&c->mu);
  return e;
}

void gw_channels_forget(struct gw_channels *c, struct gw_channel *e)
{
  pthread_mutex_lock(&c->mu);
  for (size_t i = 0; i < CHANNELS_MAX; i++)
    if (c->slot[i] == e) {
      c->slot[i] = NULL;
      unref_locked(e);
    }
  pthread_mutex_unlock(&c->mu);
}

void gw_channels_give(struct gw_channels *c, struct gw_channel *e)
{
  if (!e)
    return;
  pthread_mutex_lock(&c->mu);
  unref_locked(e);
  pthread_mutex_unlock(&c->mu);
}

/* Puts fd in the table (a free slot, else the oldest, closed): asked
 * ahead, parked (its lease's end not asked yet, on instance), or idle. */
static void put_control(struct gw_channels *c, const char *key, int fd, bool ahead, bool parked,
                        uint64_t instance)
{
  bool held = ahead || parked; /* a lease the keeper holds until a call or the sweeper ends it */
  pthread_mutex_lock(&c->mu);
  if (held && !c->sweeping) /* without it, no lease is held in the table */
    c->sweeping = pthread_create(&c->sweeper, NULL, sweep, c) == 0;
  if (held && !c->sweeping) { /* nothing would give it back, so it goes now */
    pthread_mutex_unlock(&c->mu);
    close(fd);
    return;
  }
  size_t at = 0;
  for (size_t i = 0; i < CONTROLS_MAX; i++) /* a free slot, else the oldest */
    if (c->control[i].fd < 0 ||
        (c->control[at].fd >= 0 && c->control[i].used < c->control[at].used))
      at = i;
  int drop = c->control[at].fd;
  struct gw_control *k = &c->control[at];
  snprintf(k->key, sizeof k->key, "%s", key);
  k->fd = fd;
  k->used = ++c->tick;
  k->ahead = ahead;
  k->parked = parked;
  k->instance = instance;
  k->until_ms = cap_now_ms(CLOCK_MONOTONIC) + GW_AHEAD_LINGER_MS;
  if (held && c->sweep_idle) /* else it wakes by an earlier time, and sees this one then */
    pthread_cond_signal(&c->wake);
  pthread_mutex_unlock(&c->mu);
  if (drop >= 0)
    close(drop);
}

void gw_channels_keep_control(struct gw_channels *c, const char *key, int fd, bool ahead)
{
  if (fd >= 0)
    put_control(c, key, fd, ahead, false, 0);
}

bool gw_channels_park_control(struct gw_channels *c, const char *key, struct gw_lease *lease)
{
  if (!c->deferred)
    return false;
  uint64_t instance = 0;
  int fd = gw_lease_detach_ahead(lease, &instance);
  if (fd < 0)
    return false;
  put_control(c, key, fd, false, true, instance);
  return true;
}

void gw_channels_flush(struct gw_channels *c)
{
  pthread_mutex_lock(&c->mu);
  uint64_t until = cap_now_ms(CLOCK_MONOTONIC) + GW_AHEAD_LINGER_MS;
  for (size_t i = 0; i < CONTROLS_MAX; i++) {
    struct gw_control *k = &c->control[i];
    if (k->fd < 0 || !k->parked)
      continue;
    k->parked = false;
    if (gw_lease_ask_ahead(k->fd, k->instance) == 0) { /* a short message: never blocks long */
      k->ahead = true;
      k->until_ms = until;
    } else { /* the keeper is gone: the entry with it */
      close(k->fd);
      k->fd = -1;
    }
  }
  pthread_mutex_unlock(&c->mu);
}

int gw_channels_take_control(struct gw_channels *c, const char *key, bool *ahead)
{
  int fd = -1;
  bool parked = false;
  uint64_t instance = 0;
  *ahead = false;
  pthread_mutex_lock(&c->mu);
  for (size_t i = 0; i < CONTROLS_MAX && fd < 0; i++)
    if (c->control[i].fd >= 0 && strcmp(c->control[i].key, key) == 0) {
      fd = c->control[i].fd;
      *ahead = c->control[i].ahead;
      parked = c->control[i].parked;
      instance = c->control[i].instance;
      c->control[i].fd = -1;
    }
  pthread_mutex_unlock(&c->mu);
  if (parked) { /* its call's answer not flushed yet: its end and this lease asked now */
    *ahead = gw_lease_ask_ahead(fd, instance) == 0;
    if (!*ahead) {
      close(fd);
      fd = -1;
    }
  }
  if (*ahead) /* the keeper's reply is awaited: gw_instance_lease judges it */
    return fd;
  /* the keeper closed it (idle, gone) or said something unasked: not reused */
  struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
  if (fd >= 0 && (poll(&p, 1, 0) != 0 || p.revents)) {
    close(fd);
    fd = -1;
  }
  return fd;
}

void gw_channels_free(struct gw_channels *c)
{
  if (!c)
    return;
  pthread_mutex_lock(&c->mu);
  c->ended = true;
  pthread_cond_signal(&c->wake);
  pthread_mutex_unlock(&c->mu);
  if (c->sweeping)
    pthread_join(c->sweeper, NULL);
  pthread_cond_destroy(&c->wake);
  for (size_t i = 0; i < CONTROLS_MAX; i++)
    if (c->control[i].fd >= 0)
      close(c->control[i].fd);
  for (size_t i = 0; i < CHANNELS_MAX; i++)
    if (c->slot[i])
      unref_locked(c->slot[i]);
  pthread_mutex_destroy(&c->mu);
  free(c);
}
