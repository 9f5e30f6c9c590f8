/* Room for a new session when serve holds SERVE_MAX_SESSIONS: an idle
 * HTTP session (no request in flight, no subscriptions/listen, no fast
 * call) gives way, the least recently used one of the user holding the
 * most sessions. So one token holder opening sessions without end (an
 * idle one lives an hour) evicts its own, never those of a user holding
 * fewer; the client of a session evicted is told 404 at its next
 * request and starts a new one, as the transport says. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "front/serve_core.h"

static bool evictable(struct sess *x)
{
  return x->http && !x->sessionless && !x->dead && !x->n_routes && !x->n_fast &&
         !mcp_session_busy(x->s) && !mcp_session_listening(x->s);
}

/* by user, then the least recently used first */
static int by_user_then_age(const void *a, const void *b)
{
  const struct sess *x = *(struct sess *const *)a, *y = *(struct sess *const *)b;
  int c = strcmp(x->user, y->user);
  if (c)
    return c;
  return x->last_ms < y->last_ms ? -1 : x->last_ms > y->last_ms;
}

bool serve_room_evict(struct serve *sv)
{
  size_t n = 0;
  for (struct sess *x = sv->sessions; x; x = x->next)
    n += !x->dead;
  _cleanup_free_ struct sess **all = cap_xcalloc(n ? n : 1, sizeof *all);
  size_t k = 0;
  for (struct sess *x = sv->sessions; x && k < n; x = x->next)
    if (!x->dead)
      all[k++] = x;
  qsort(all, k, sizeof *all, by_user_then_age);
  struct sess *victim = NULL;
  size_t most = 0;
  for (size_t i = 0, j; i < k; i = j) {
    struct sess *oldest = NULL; /* the user's least recently used idle one */
    for (j = i; j < k && strcmp(all[j]->user, all[i]->user) == 0; j++)
      if (!oldest && evictable(all[j]))
        oldest = all[j];
    if (oldest && j - i > most) {
      most = j - i;
      victim = oldest;
    }
  }
  if (!victim)
    return false;
  serve_log(sv, "info", "session evicted: serve holds as many sessions as it allows", "session",
            victim->id, "user", victim->user);
  victim->dead = true;
  return true;
}

/* Calls in flight a user may have across all its sessions (each session
 * has MCP_MAX_RUNNING of its own): a token holder opening sessions
 * without end would otherwise run a sandbox each, MCP_MAX_RUNNING times a
 * session. Counted on whatever thread starts or ends a run. */
static pthread_mutex_t runs_mu = PTHREAD_MUTEX_INITIALIZER;
static struct user_runs {
  char *user;
  unsigned n;
} * runs;
static size_t n_runs;

/* SERVE_USER_RUNS, or the operator's CAPSULE_SERVE_USER_CALLS */
static unsigned runs_max(void)
{
  const char *v = getenv("CAPSULE_SERVE_USER_CALLS");
  long n = v && *v ? strtol(v, NULL, 10) : SERVE_USER_RUNS;
  return n >= 1 && n <= 65536 ? (unsigned)n : SERVE_USER_RUNS;
}

bool serve_run_take(void *ctx, const char *user)
{
  (void)ctx;
  user = user ? user : "";
  pthread_mutex_lock(&runs_mu);
  struct user_runs *u = NULL;
  for (size_t i = 0; i < n_runs && !u; i++)
    if (strcmp(runs[i].user, user) == 0)
      u = &runs[i];
  if (!u) {
    runs = cap_xrealloc(runs, (n_runs + 1) * sizeof *runs);
    u = &runs[n_runs++];
    *u = (struct user_runs){.user = cap_xstrdup(user)};
  }
  bool room = u->n < runs_max();
  u->n += room;
  pthread_mutex_unlock(&runs_mu);
  return room;
}

void serve_run_give(void *ctx, const char *user)
{
  (void)ctx;
  user = user ? user : "";
  pthread_mutex_lock(&runs_mu);
  for (size_t i = 0; i < n_runs; i++)
    if (strcmp(runs[i].user, user) == 0) {
      if (runs[i].n && --runs[i].n == 0) { /* none left: the entry goes */
        free(runs[i].user);
        runs[i] = runs[--n_runs];
      }
      break;
    }
  pthread_mutex_unlock(&runs_mu);
}
