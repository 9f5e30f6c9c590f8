/* A front door's kept connections to warm MCP servers' keepers
 * (gateway/mcp_keeper.c): a connection whose call ended with its answer
 * is kept, a few per keeper, and the next call to that keeper takes it
 * instead of connecting anew. The keeper tells calls from idle kept
 * connections (mcp_keeper_route.c: a call begins with a request, the
 * keeper says "taken" again, and ends with its answer). A kept connection
 * on which anything came meanwhile (its keeper ended, or restarted under
 * the same socket: its end) is closed at the take; a keeper that ends
 * after the take, before it read the call, ends the connection before its
 * "taken": the call goes to a new connection (gateway/call.c). A forked
 * child never uses its parent's kept connections. */
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "gateway/mcp_keeper_int.h"

#define POOL_PER_KEEPER 8 /* kept connections to one keeper */
#define POOL_MAX 64       /* in all */

static struct {
  pthread_mutex_t mu;
  size_t n;
  struct {
    int fd, ack; /* the connection, its take pipe (or -1) */
    char *path;  /* the keeper's socket */
  } e[POOL_MAX];
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void pool_lock(void) { pthread_mutex_lock(&pool.mu); }
static void pool_unlock(void) { pthread_mutex_unlock(&pool.mu); }

/* the child's copy of the parent's connections: closed, never shared */
static void pool_child(void)
{
  for (size_t i = 0; i < pool.n; i++) {
    close(pool.e[i].fd);
    if (pool.e[i].ack >= 0)
      close(pool.e[i].ack);
    free(pool.e[i].path);
  }
  pool.n = 0;
  pthread_mutex_init(&pool.mu, NULL);
}

static void pool_init(void) { pthread_atfork(pool_lock, pool_unlock, pool_child); }

int keeper_pool_take(const char *path, int *ack)
{
  pthread_once(&pool_once, pool_init);
  for (;;) {
    int fd = -1;
    *ack = -1;
    pool_lock();
    for (size_t i = pool.n; i-- > 0 && fd < 0;)
      if (strcmp(pool.e[i].path, path) == 0) {
        fd = pool.e[i].fd;
        *ack = pool.e[i].ack;
        free(pool.e[i].path);
        pool.e[i] = pool.e[--pool.n];
      }
    pool_unlock();
    if (fd < 0)
      return -1;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) == 0)
      return fd; /* nothing came since its last answer: its keeper is there */
    close(fd);   /* its keeper's end, or a line no call asked for */
    if (*ack >= 0)
      close(*ack);
  }
}

void keeper_pool_put(const char *path, int fd, int ack)
{
  pthread_once(&pool_once, pool_init);
  size_t same = 0;
  pool_lock();
  for (size_t i = 0; i < pool.n; i++)
    same += strcmp(pool.e[i].path, path) == 0;
  bool kept = same < POOL_PER_KEEPER && pool.n < POOL_MAX;
  if (kept) {
    pool.e[pool.n].fd = fd;
    pool.e[pool.n].ack = ack;
    pool.e[pool.n++].path = cap_xstrdup(path);
  }
  pool_unlock();
  if (!kept) {
    close(fd);
    if (ack >= 0)
      close(ack);
  }
}
