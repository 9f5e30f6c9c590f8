/* A warm server's pending egress kept on disk as well (docs/state.md,
 * "A warm instance's egress"). A keeper gives what its proxy decides to a
 * call (while no call is in, to the next one); until that call's batch
 * goes back to it, each decision is also written to a spool file
 * STATE/run/egress/ID (ID random
 * hex; the file 0600, the directory 0700), which the keeper holds
 * write-locked: a POSIX record lock, which goes with the keeper's process
 * however it ends and which no child of it holds. When a batch goes back
 * to its call, the file is first written again with what no call has had
 * yet (gw_egress_spool_clear, then gw_egress_spool_batch of each batch
 * still held). A keeper that ends first (idle, retired, a
 * grant changed, `capsule stop`, SIGTERM, SIGKILL, a crash) leaves the
 * file with its lock free, and the next process that opens the state
 * (gw_state_open: gw_egress_spool_recover) stores its rows with no call
 * (call_seq NULL) under the capability and user the file names, then
 * removes it. Each file is stored once: it is taken only while locked and
 * still under its name, and its ID is claimed in the state's meta table in
 * the rows' transaction, so a recovery killed between its commit and the
 * removal stores nothing the second time. Bounds: GW_EGRESS_BATCH_MAX rows
 * and GW_EGRESS_SPOOL_MAX_BYTES a file; decisions past them are counted in
 * the file's head and stored as one "suppressed" row. A spool is its
 * keeper's: the caller serialises the calls on it (its egress lock). */
#ifndef CAPSULE_GATEWAY_EGRESS_SPOOL_H
#define CAPSULE_GATEWAY_EGRESS_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "gateway/egress_store.h"

#define GW_EGRESS_SPOOL_MAX_BYTES (4 * 1024 * 1024)

struct gw_egress_spool {
  int fd;      /* -1 until the first decision with no call in (the file is made then) */
  bool failed; /* the file could not be made or written: no more tries */
  char *dir;   /* RUN/egress */
  char *capability, *user;
  char name[25]; /* the file's, and its ID */
  off_t rows_at; /* where its rows begin */
  off_t end;     /* where the next row goes */
  size_t rows;
  int64_t over; /* decisions past the bounds */
};

/* A spool for the keeper of capability's server, started for user, with
 * its file in run_dir/egress once it has something to keep. */
void gw_egress_spool_init(struct gw_egress_spool *s, const char *run_dir, const char *capability,
                          const char *user);
/* One decision, and the rows (and count past the bound) of b, a batch no
 * call has had yet (b is not changed). */
void gw_egress_spool_event(struct gw_egress_spool *s, const struct proxy_egress_event *ev);
void gw_egress_spool_batch(struct gw_egress_spool *s, struct gw_egress_batch *b);
/* The file emptied (a batch went to its call: the rest spooled again). */
void gw_egress_spool_clear(struct gw_egress_spool *s);
/* The keeper ends: an empty file is removed, one with rows left to the
 * recovery; s keeps nothing from then on. */
void gw_egress_spool_close(struct gw_egress_spool *s);

/* A spool file's content (len bytes of data, read whole): its head's ID
 * (24 hex digits), capability and user (allocated), and its rows and the
 * count past the bounds into b (initialised); false when it is not a
 * spool's. Whatever the bytes: at most GW_EGRESS_BATCH_MAX rows, no count
 * below 0, the sum past the bounds saturated (tests/fuzz/fuzz_egress_spool.c). */
bool gw_egress_spool_parse(const char *data, size_t len, struct gw_egress_batch *b, char id[25],
                           char **capability, char **user);

/* The files of keepers gone stored (see above) and removed: how many, in
 * *n. A file that cannot be stored is left for the next open. */
struct gw_state;
int gw_egress_spool_recover(struct gw_state *st, size_t *n, struct cap_error *err);

#endif
