/* A call's audit record appended after its answer (gateway/call.h,
 * gw_call.audit_later): serve --grpc's warm path answers a call that
 * succeeded once its record is written into its in-flight marker (one
 * write to a file of the state's, kept locked), and appends the record
 * to the log right after the answer went. The record is on the state's
 * disk before the answer either way (the log's own commit is no more
 * durable: WAL, synchronous=NORMAL); what moves is the transaction, the
 * chain's head and the high-water mark (0.06 ms of a warm call's 0.3
 * added through serve: docs/benchmarks.md) off the call's path. A kill in between leaves the
 * marker, finished, to the next gw_state_open, which appends the record
 * as the call ended; a reader opening the state meanwhile waits for the
 * append (gateway/state_inflight.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "gateway/call.h"
#include "gateway/state.h"

struct gw_audit_later {
  struct gw_audit_record rec;
  char *user, *capability, *tool, *decision, *outcome; /* rec's, owned */
  struct gw_inflight marker;
};

/* An append after an answer failed: until an append succeeds again
 * (gw_audit_later_resume), this process's calls append before their
 * answer, so that a log that cannot be written withholds their results
 * again rather than fill markers. */
static bool later_off;

void gw_audit_later_resume(void)
{
  if (__atomic_load_n(&later_off, __ATOMIC_RELAXED))
    __atomic_store_n(&later_off, false, __ATOMIC_RELAXED);
}

struct gw_audit_later *gw_audit_later_take(const struct gw_audit_record *rec, struct gw_inflight *m)
{
  if (__atomic_load_n(&later_off, __ATOMIC_RELAXED) || gw_inflight_answered(m, rec) < 0)
    return NULL;
  struct gw_audit_later *l = cap_xcalloc(1, sizeof *l);
  l->rec = *rec;
  l->rec.user = l->user = cap_xstrdup(rec->user ? rec->user : "");
  l->rec.capability = l->capability = cap_xstrdup(rec->capability ? rec->capability : "");
  l->rec.tool = l->tool = cap_xstrdup(rec->tool ? rec->tool : "");
  l->rec.decision = l->decision = cap_xstrdup(rec->decision ? rec->decision : "");
  l->rec.outcome = l->outcome = cap_xstrdup(rec->outcome ? rec->outcome : "ok");
  l->marker = *m;
  *m = (struct gw_inflight){.fd = -1};
  return l;
}

int gw_audit_later_commit(struct gw_audit_later *l, struct gw_state *st, struct cap_error *err)
{
  /* no state lock: a pooled connection of the caller's own */
  int r = st ? gw_audit_append_shared(st, NULL, false, &l->rec, NULL, NULL, &l->marker, err) : -EIO;
  if (r < 0)
    __atomic_store_n(&later_off, true, __ATOMIC_RELAXED);
  /* not in the log: the marker keeps it, as it ended, for the next open;
   * in (committed, the marker spoilt, then the high-water mark failed):
   * kept, it would be recorded twice */
  if (r < 0 && !l->marker.recorded)
    gw_inflight_leave(&l->marker, &l->rec);
  else
    gw_inflight_end(&l->marker);
  free(l->user);
  free(l->capability);
  free(l->tool);
  free(l->decision);
  free(l->outcome);
  free(l);
  return r;
}
