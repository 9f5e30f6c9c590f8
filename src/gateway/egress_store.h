/* The egress log in the state: the decisions of a call's egress proxy
 * (net/proxy.h's sink) gathered in memory while the call runs, then
 * written in one transaction after its audit record, each row naming the
 * call's record (table egress, schema version 9). The proxy's threads
 * only copy an event into the batch under its mutex: the database is never
 * touched on the proxy's path. A batch keeps at most GW_EGRESS_BATCH_MAX
 * rows (the proxy's own rate limit keeps most calls far below); the rest
 * are counted and stored as one "suppressed" row. Reading it back is
 * gw_egress_query (state_query.h). */
#ifndef CAPSULE_GATEWAY_EGRESS_STORE_H
#define CAPSULE_GATEWAY_EGRESS_STORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "gateway/state.h"
#include "net/proxy.h"

#define GW_EGRESS_BATCH_MAX 4096

struct gw_egress_row {
  int64_t time_ms;
  enum proxy_decision decision;
  char *kind, *host, *method, *path, *credential, *reason;
  unsigned port;
  long long count, bytes_up, bytes_down;
};
/* Its strings freed (the row itself is its holder's) */
void gw_egress_row_free(struct gw_egress_row *r);

struct gw_egress_batch {
  pthread_mutex_t lock;
  struct gw_egress_row *rows;
  size_t n, cap;
  long long over;                /* decisions past GW_EGRESS_BATCH_MAX */
  struct proxy_egress_sink sink; /* hands events to this batch */
};

void gw_egress_batch_init(struct gw_egress_batch *b);
/* The batch a sink hands its events to, or NULL: not a batch's sink. */
struct gw_egress_batch *gw_egress_batch_of(const struct proxy_egress_sink *s);
/* Takes r (its strings) into b, as the sink would have (a run apart's
 * decisions, sent back by its process: gateway/call_apart.c). */
void gw_egress_batch_add(struct gw_egress_batch *b, const struct gw_egress_row *r, long long over);
void gw_egress_batch_free(struct gw_egress_batch *b);
/* Whether b holds anything for gw_egress_write to store (rows, or
 * decisions past the bound): without it, the write needs no state. */
bool gw_egress_batch_pending(struct gw_egress_batch *b);
/* Moves b's rows (and what went past its bound) to into, under b's lock
 * only: a batch still taking decisions is written from into, the proxy's
 * threads never waiting on the database (a Talos push subscription's,
 * written at each event); and a warm server's call gone before its
 * answer hands its decisions to the next call (mcp_keeper_route.c,
 * instance_egress.c). into keeps its bound: rows past it are counted as
 * the sink counts them. */
void gw_egress_batch_take(struct gw_egress_batch *b, struct gw_egress_batch *into);

/* A batch between processes: a run apart's, sent back with its result
 * (gateway/call_apart.c), and a warm instance's lease, sent back by its
 * keeper at the lease's end (gateway/instance_keeper.c). encode appends
 * b's rows to out (b NULL: none); decode adds those at *p (up to end) to
 * b (NULL: skipped), moving *p past them; false when they are malformed
 * (rows before the fault are kept). */
struct cap_buf;
void gw_egress_batch_encode(struct gw_egress_batch *b, struct cap_buf *out);
bool gw_egress_batch_decode(struct gw_egress_batch *b, const char **p, const char *end);
/* One row of them: decode fills r (its strings allocated) and moves *p
 * past it; false when malformed (r then holds nothing). */
void gw_egress_row_encode(const struct gw_egress_row *r, struct cap_buf *out);
bool gw_egress_row_decode(struct gw_egress_row *r, const char **p, const char *end);

/* "allow", "deny", "suppressed". */
const char *gw_egress_decision_name(enum proxy_decision d);

/* Writes b's rows (then empties b) for capability and user, linked to the
 * audit record call_seq (0: none). Nothing to write: no transaction. */
int gw_egress_write(struct gw_state *st, struct gw_egress_batch *b, const char *capability,
                    const char *user, int64_t call_seq, struct cap_error *err);
/* The same with no call (call_seq NULL), for a warm server's spool
 * (egress_spool.h): claim, a key of the state's meta table, is written in
 * the rows' transaction; one there already means these rows were stored
 * before (a recovery killed before it removed the file): nothing is
 * written and 1 returned. */
int gw_egress_write_claimed(struct gw_state *st, struct gw_egress_batch *b, const char *capability,
                            const char *user, const char *claim, struct cap_error *err);

#endif
