/* Group commit of the audit (gateway/state.h, gw_audit_append_shared):
 * in a process whose threads share one state handle under a lock (serve),
 * the records of calls that finish together are appended in one
 * transaction by one of them, the leader, while the others wait; each
 * call returns once its own record is committed, so no answer of these
 * calls leaves before its record is in. What a call does under the lock right after
 * its record (its then) the leader does for it, in the same holding: a
 * follower never takes the lock again. The chain, its head and the high-water mark
 * are gw_audit_append_many's: exactly as for records appended one by
 * one. Split from state_audit.c. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdlib.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/fork_mutex.h"
#include "gateway/call.h"
#include "gateway/state.h"
#include "gateway/state_int.h"

/* A record waiting for its transaction, on its caller's stack. */
struct pending {
  struct gw_audit_record *rec;
  void (*then)(void *ctx); /* run by the leader under the state lock once appended */
  void *then_ctx;
  struct gw_inflight *inflight; /* told by the leader once the record is in */
  struct pending *next;
  int rc;
  struct cap_error err;
  sem_t told; /* posted once: its caller is done, or leads (the fields above set before) */
  bool done;  /* committed, or failed: rc and err say */
  bool lead;  /* made the next leader by the one before */
};

/* Each waiting caller is woken alone (its own semaphore, posted once and
 * outside the group's mutex, so the woken one runs on with nothing to
 * wait for): when its record is in, or when it is to lead the next
 * batch; none is woken for nothing (a broadcast would wake the whole next
 * batch to find one leader). A semaphore may go once its wait returns
 * (glibc's sem_post touches nothing of it after the post that wakes). */
struct gw_audit_group {
  pthread_mutex_t mu; /* the queue, leading, each pending's outcome */
  struct pending *head, **tail;
  bool leading; /* a caller is appending the queue (or waits for the state to) */
};

void gw_audit_group_free(struct gw_state *st)
{
  if (!st->group)
    return;
  pthread_mutex_destroy(&st->group->mu);
  free(st->group);
  st->group = NULL;
}

/* st's group, made on first use: with or without the state lock (a
 * call after a warm run gets here without it), so two first calls may
 * race to make it; one group is kept, the other let go. */
static struct gw_audit_group *group_of(struct gw_state *st)
{
  struct gw_audit_group *g = __atomic_load_n(&st->group, __ATOMIC_ACQUIRE);
  if (g)
    return g;
  g = cap_xcalloc(1, sizeof *g);
  pthread_mutex_init(&g->mu, NULL);
  g->tail = &g->head;
  struct gw_audit_group *was = NULL;
  if (__atomic_compare_exchange_n(&st->group, &was, g, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return g;
  pthread_mutex_destroy(&g->mu);
  free(g);
  return was;
}

static int outcome(struct pending *me, struct cap_error *err)
{
  if (me->rc < 0 && err) {
    cap_error_set(err, me->err.code ? me->err.code : EIO, "%s",
                  me->err.message ? me->err.message : "cannot append to the audit log");
    err->outcome = me->err.outcome;
  }
  cap_error_clear(&me->err);
  return me->rc;
}

/* The leader, holding the state lock: every record queued so far in one
 * transaction, each one's then run, the state lock let go, each one's
 * outcome set and its caller woken, the first of the next queue (if any)
 * made leader. */
static void lead(struct gw_state *st, struct gw_audit_group *g, const struct gw_state_lock *lock,
                 struct pending *me)
{
  pthread_mutex_lock(&g->mu);
  struct pending *batch = g->head;
  g->head = NULL;
  g->tail = &g->head;
  pthread_mutex_unlock(&g->mu);
  size_t n = 0;
  for (struct pending *p = batch; p; p = p->next)
    n++;
  _cleanup_free_ struct gw_audit_record **recs = cap_xcalloc(n ? n : 1, sizeof *recs);
  _cleanup_free_ struct gw_inflight **markers = cap_xcalloc(n ? n : 1, sizeof *markers);
  n = 0;
  for (struct pending *p = batch; p; p = p->next) {
    markers[n] = p->inflight; /* spoilt right after the COMMIT: a kill then records nothing twice */
    recs[n++] = p->rec;
  }
  struct cap_error berr = {0};
  int rc = gw_audit_append_marked(st, recs, markers, n, &berr);
  for (struct pending *p = batch; p; p = p->next) /* still under the state lock */
    if (p->then)
      p->then(p->then_ctx);
  lock->release(lock->ctx); /* before the next leader is woken to take it */
  pthread_mutex_lock(&g->mu);
  struct pending *next_leader = g->head; /* queued meanwhile, waiting */
  g->leading = next_leader != NULL;
  if (next_leader)
    next_leader->lead = true;
  pthread_mutex_unlock(&g->mu);
  for (struct pending *p = batch, *next; p; p = next) {
    next = p->next; /* p is its caller's once told */
    p->rc = rc;
    if (rc < 0) {
      cap_error_set(&p->err, berr.code ? berr.code : EIO, "%s",
                    berr.message ? berr.message : "cannot append to the audit log");
      p->err.outcome = berr.outcome;
    }
    p->done = true;
    if (p != me)
      sem_post(&p->told);
  }
  if (next_leader)
    sem_post(&next_leader->told);
  cap_error_clear(&berr);
}

/* Appends with no shared handle (each thread its own pooled state
 * connection: serve --grpc's and the warm Selu process's warm calls)
 * take turns on this mutex, so a process's threads wait for each other's
 * transaction here, woken as it ends, not in SQLite's busy handler,
 * which sleeps 1, 2, 5... ms between tries (the tail of 8 calls at once
 * was hundreds of ms). Other processes still meet at SQLite's lock. It
 * guards no memory: a child forked meanwhile (which opens a state of its
 * own) gets it unlocked. */
static struct cap_fork_mutex solo_mu = CAP_FORK_MUTEX_INIT;

static int append_solo(struct gw_state *st, struct gw_audit_record *r, struct gw_inflight *inflight,
                       struct cap_error *err)
{
  cap_fork_mutex_lock(&solo_mu);
  int rc = gw_audit_append_marked(st, &r, &inflight, 1, err); /* inflight spoilt at the COMMIT */
  cap_fork_mutex_unlock(&solo_mu);
  return rc;
}

int gw_audit_append_shared(struct gw_state *st, const struct gw_state_lock *lock, bool held,
                           struct gw_audit_record *r, void (*then)(void *ctx), void *then_ctx,
                           struct gw_inflight *inflight, struct cap_error *err)
{
  if (!lock) {
    int rc = append_solo(st, r, inflight, err);
    if (then)
      then(then_ctx);
    return rc;
  }
  struct gw_audit_group *g = group_of(st);
  struct pending me = {.rec = r, .then = then, .then_ctx = then_ctx, .inflight = inflight};
  sem_init(&me.told, 0, 0);
  bool others = __atomic_load_n(&st->calls, __ATOMIC_RELAXED) > 1; /* calls on their way here */
  /* the lock let go (or not held): the other calls reach this point and
   * queue theirs meanwhile, while the leader waits for the lock */
  if (held)
    lock->release(lock->ctx);
  pthread_mutex_lock(&g->mu);
  *g->tail = &me;
  g->tail = &me.next;
  bool leader = !g->leading;
  if (leader)
    g->leading = true;
  pthread_mutex_unlock(&g->mu);
  if (!leader) {
    while (sem_wait(&me.told) < 0 && errno == EINTR)
      ;
    leader = me.lead && !me.done;
  }
  if (leader && others) /* the calls woken for the lock as it was let go get to queue
                           theirs first (a mutex let go is mostly taken again by its last
                           holder) */
    sched_yield();
  if (leader) { /* me among the batch: done when it returns */
    lock->acquire(lock->ctx);
    lead(st, g, lock, &me);
  }
  sem_destroy(&me.told);
  /* a follower's record, and its then, were the leader's: it never takes the lock */
  return outcome(&me, err);
}
