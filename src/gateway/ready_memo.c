#include "gateway/ready_memo.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "gateway/ready.h"

struct memo_entry {
  pthread_mutex_t mu; /* held while its dry run runs: others wait for its answer */
  int64_t at_ms;      /* when it was checked; 0: never */
  enum gw_outcome outcome;
  int code;
  char *message;
};

struct gw_ready_memo {
  size_t n;
  int64_t ttl_ms;
  struct memo_entry *v;
};

static int64_t mono_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct gw_ready_memo *gw_ready_memo_new(size_t n, int64_t ttl_ms)
{
  struct gw_ready_memo *m = cap_xcalloc(1, sizeof *m);
  m->n = n;
  m->ttl_ms = ttl_ms;
  m->v = cap_xcalloc(n + 1, sizeof *m->v);
  for (size_t i = 0; i < n; i++)
    pthread_mutex_init(&m->v[i].mu, NULL);
  return m;
}

void gw_ready_memo_free(struct gw_ready_memo *m)
{
  if (!m)
    return;
  for (size_t i = 0; i < m->n; i++) {
    pthread_mutex_destroy(&m->v[i].mu);
    free(m->v[i].message);
  }
  free(m->v);
  free(m);
}

enum gw_outcome gw_ready_memo_get(struct gw_ready_memo *m, size_t i, const struct cap_spec *spec,
                                  const char *image_dir, const char *const *hidden, size_t n_hidden,
                                  struct cap_error *why)
{
  if (!m || i >= m->n)
    return gw_ready(spec, image_dir, hidden, n_hidden, why);
  struct memo_entry *e = &m->v[i];
  pthread_mutex_lock(&e->mu);
  int64_t now = mono_ms();
  if (!e->at_ms || now - e->at_ms >= m->ttl_ms) {
    struct cap_error fresh = {0};
    e->outcome = gw_ready(spec, image_dir, hidden, n_hidden, &fresh);
    e->code = fresh.code;
    free(e->message);
    e->message = fresh.message ? cap_xstrdup(fresh.message) : NULL;
    cap_error_clear(&fresh);
    e->at_ms = mono_ms();
  }
  enum gw_outcome o = e->outcome;
  if (o != GW_OUTCOME_OK)
    cap_error_set(why, e->code, "%s", e->message ? e->message : "not ready");
  pthread_mutex_unlock(&e->mu);
  return o;
}
