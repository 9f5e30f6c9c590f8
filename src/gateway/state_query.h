/* Queries the dashboard makes of the state (front/ui_audit.c): the audit
 * log and the egress log searched and filtered, newest first, a page at a time (keyset: the
 * records before a sequence number, so a page costs the same at any depth
 * of a log of millions), each record with its own chain check. Kept apart
 * from the state's writers so a second backend ports them as one piece.
 * Thread safety: that of the gw_state passed. */
#ifndef CAPSULE_GATEWAY_STATE_QUERY_H
#define CAPSULE_GATEWAY_STATE_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "gateway/db.h"
#include "gateway/state.h"

/* NULL or "" for a filter: any. text: found (case-sensitively) in the
 * user, capability, tool, decision or outcome. */
struct gw_audit_filter {
  const char *capability, *user, *decision, *text;
  int64_t before; /* only records with seq < before; 0: from the newest */
  size_t limit;   /* at most this many (0: 100) */
};

/* A record's own place in the chain: its MAC holds under the state key
 * and its prev is the hash of the record before it (for the first, the
 * zero hash). */
enum gw_chain_status {
  GW_CHAIN_OK,
  GW_CHAIN_EDITED,   /* its hash does not match its contents */
  GW_CHAIN_UNLINKED, /* its prev is not the record before's hash, or that record is gone */
};
const char *gw_chain_status_name(enum gw_chain_status s);

/* The SQL gw_audit_query prepares for f on a database of kind (its
 * parameters in the order capability, user, decision, text, before;
 * those not given are left out; the limit written in), appended to out:
 * what bench/dashboard runs directly. */
struct cap_buf;
void gw_audit_query_sql(const struct gw_audit_filter *f, enum gw_db_kind kind, struct cap_buf *out);

typedef void (*gw_audit_row_fn)(void *arg, const struct gw_audit_record *r,
                                enum gw_chain_status chain);
/* The records f selects, newest first; *more: older ones match too. */
int gw_audit_query(struct gw_state *st, const struct gw_audit_filter *f, gw_audit_row_fn fn,
                   void *arg, bool *more, struct cap_error *err);

/* The egress log (gateway/egress_store.h), newest first, keyset pages as
 * the audit log's. text: found in the host, method, path or reason. */
struct gw_egress_filter {
  const char *capability, *user, *decision, *text;
  int64_t call_seq; /* only this call's decisions; 0: any */
  int64_t before;   /* only rows with seq < before; 0: from the newest */
  size_t limit;     /* at most this many (0: 100) */
};
struct gw_egress_record {
  int64_t seq, call_seq; /* call_seq 0: no audit record */
  const char *time, *capability, *user, *decision;
  const char *kind, *host, *method, *path, *credential, *reason; /* "" where none */
  int64_t port, count, bytes_up, bytes_down;
};
typedef void (*gw_egress_row_fn)(void *arg, const struct gw_egress_record *r);
int gw_egress_query(struct gw_state *st, const struct gw_egress_filter *f, gw_egress_row_fn fn,
                    void *arg, bool *more, struct cap_error *err);

#endif
