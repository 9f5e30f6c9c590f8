/* The state's reads a call makes, kept (gateway/state_int.h,
 * gw_state_cache_*): the policies, a capability's grants and id range as
 * last read, valid while the database is as it was then. SQLite says so
 * cheaply: PRAGMA data_version moves when another connection commits
 * (another capsule's `policy set`, grant, revoke), and the connection's
 * own count of changed rows moves when this process writes (less the
 * audit's own appends, which touch no kept read: gw_state_cache_quiet).
 * Anything else that changed clears the whole cache, so a call never
 * reads a value older than the last change committed before it began.
 * Only within a call (gw_state_cache_begin, gw_call's, in its thread):
 * every other read goes to the database, as do all on PostgreSQL (no
 * such version). Used under the handle's lock, as the handle is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "gateway/state.h"
#include "gateway/state_int.h"

#define CACHE_MAX 256 /* entries; past them the cache starts again */

struct entry {
  char *key;
  char **vals; /* n strings */
  size_t n;
};

struct gw_state_cache {
  int64_t version[2]; /* gw_db_version when the entries were read, changes less quiet */
  struct entry *e;
  size_t n;
};

static void clear(struct gw_state_cache *c)
{
  for (size_t i = 0; i < c->n; i++) {
    free(c->e[i].key);
    for (size_t j = 0; j < c->e[i].n; j++)
      free(c->e[i].vals[j]);
    free(c->e[i].vals);
  }
  c->n = 0;
}

void gw_state_cache_free(struct gw_state *st)
{
  if (!st->cache)
    return;
  clear(st->cache);
  free(st->cache->e);
  free(st->cache);
  st->cache = NULL;
}

void gw_state_cache_quiet(struct gw_state *st, int64_t changes) { st->quiet_changes += changes; }

/* The call this thread is making (gw_state_cache_begin): its state, and
 * whether the other connections' commits were looked for since it began */
static _Thread_local const struct gw_state *call_st;
static _Thread_local bool call_checked;

void gw_state_cache_begin(struct gw_state *st)
{
  call_st = st;
  call_checked = false;
  __atomic_fetch_add(&st->calls, 1, __ATOMIC_RELAXED);
}

void gw_state_cache_end(struct gw_state *st)
{
  call_st = NULL;
  __atomic_fetch_sub(&st->calls, 1, __ATOMIC_RELAXED); /* maybe without the lock */
}

/* The cache, its entries dropped when the database moved since they were
 * read; NULL when nothing is kept: outside a call, on PostgreSQL, after a
 * failed check. Another connection's commits are looked for once a call
 * (PRAGMA data_version: a read of the write-ahead log's index), so a call
 * sees every change committed before it began; this connection's own
 * changes (a count in memory) at every read. */
static struct gw_state_cache *fresh(struct gw_state *st)
{
  if (call_st != st)
    return NULL;
  int64_t v[2];
  if (!call_checked) {
    if (gw_db_version(st->db, v) < 0) {
      gw_state_cache_free(st);
      return NULL;
    }
    call_checked = true;
  } else {
    v[0] = st->cache ? st->cache->version[0] : -1;
    v[1] = gw_db_total_changes(st->db);
  }
  v[1] -= st->quiet_changes;
  if (!st->cache)
    st->cache = cap_xcalloc(1, sizeof *st->cache);
  struct gw_state_cache *c = st->cache;
  if (c->n && (c->version[0] != v[0] || c->version[1] != v[1]))
    clear(c);
  c->version[0] = v[0];
  c->version[1] = v[1];
  return c;
}

void gw_state_cache_key(struct cap_buf *key, const char *kind, const char *const *parts, size_t n)
{
  cap_buf_puts(key, kind);
  for (size_t i = 0; i < n; i++) { /* length-prefixed: no part can pass for two */
    const char *part = parts[i] ? parts[i] : "";
    size_t len = strlen(part);
    char num[24], *p = num + sizeof num; /* " %zu:", without printf (a few times a call) */
    *--p = ':';
    do
      *--p = (char)('0' + len % 10);
    while (len /= 10);
    *--p = ' ';
    cap_buf_append(key, p, (size_t)(num + sizeof num - p));
    cap_buf_puts(key, part);
  }
}

bool gw_state_cache_get(struct gw_state *st, const char *key, char *const **vals, size_t *n)
{
  struct gw_state_cache *c = fresh(st);
  for (size_t i = 0; c && i < c->n; i++)
    if (strcmp(c->e[i].key, key) == 0) {
      *vals = c->e[i].vals;
      *n = c->e[i].n;
      return true;
    }
  return false;
}

/* Right after the read that a gw_state_cache_get missed: a commit by
 * another connection in between moves data_version, and the next check
 * drops what is kept here. */
void gw_state_cache_put(struct gw_state *st, const char *key, const char *const *vals, size_t n)
{
  struct gw_state_cache *c = st->cache;
  if (!c || call_st != st)
    return;
  if (c->n == CACHE_MAX)
    clear(c);
  c->e = cap_xrealloc(c->e, (c->n + 1) * sizeof *c->e);
  struct entry *e = &c->e[c->n++];
  e->key = cap_xstrdup(key);
  e->n = n;
  e->vals = cap_xcalloc(n ? n : 1, sizeof *e->vals);
  for (size_t i = 0; i < n; i++)
    e->vals[i] = cap_xstrdup(vals[i]);
}
