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
#include <unistd.h>

#include "core/buf.h"
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
};

struct gw_channels {
  pthread_mutex_t mu;
  struct gw_channel *slot[CHANNELS_MAX];
  struct gw_control control[CONTROLS_MAX];
  uint64_t tick;
};

struct gw_channels *gw_channels_new(void)
{
  struct gw_channels *c = cap_xcalloc(1, sizeof *c);
  pthread_mutex_init(&c->mu, NULL);
  for (size_t i = 0; i < CONTROLS_MAX; i++)
    c->control[i].fd = -1;
  return c;
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

void gw_channels_keep_control(struct gw_channels *c, const char *key, int fd)
{
  if (fd < 0)
    return;
  int drop = -1;
  pthread_mutex_lock(&c->mu);
  size_t at = 0;
  for (size_t i = 0; i < CONTROLS_MAX; i++) /* a free slot, else the oldest */
    if (c->control[i].fd < 0 ||
        (c->control[at].fd >= 0 && c->control[i].used < c->control[at].used))
      at = i;
  drop = c->control[at].fd;
  snprintf(c->control[at].key, sizeof c->control[at].key, "%s", key);
  c->control[at].fd = fd;
  c->control[at].used = ++c->tick;
  pthread_mutex_unlock(&c->mu);
  if (drop >= 0)
    close(drop);
}

int gw_channels_take_control(struct gw_channels *c, const char *key)
{
  int fd = -1;
  pthread_mutex_lock(&c->mu);
  for (size_t i = 0; i < CONTROLS_MAX && fd < 0; i++)
    if (c->control[i].fd >= 0 && strcmp(c->control[i].key, key) == 0) {
      fd = c->control[i].fd;
      c->control[i].fd = -1;
    }
  pthread_mutex_unlock(&c->mu);
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
  for (size_t i = 0; i < CONTROLS_MAX; i++)
    if (c->control[i].fd >= 0)
      close(c->control[i].fd);
  for (size_t i = 0; i < CHANNELS_MAX; i++)
    if (c->slot[i])
      unref_locked(c->slot[i]);
  pthread_mutex_destroy(&c->mu);
  free(c);
}
