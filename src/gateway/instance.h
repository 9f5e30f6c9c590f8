/* Warm instances of long-running capability servers (the Selu runtime).
 *
 * An instance is one sandboxed server kept by a small keeper process that
 * outlives the `capsule` command which started it. The keeper listens on a
 * unix socket in the state directory (RUN_DIR/KEY.sock, 0600); a call
 * connects, asks for a lease, and gets back a TCP connection to the
 * server's port made inside the sandbox's network namespace (by the
 * sandbox's pid 1: see sandbox_connect), which it hands to gRPC. The keeper
 * starts the server, waits until it is healthy (bounded), grants at most
 * max_concurrency leases at once (the rest wait in order), stops the server
 * after idle_timeout_ms without a lease, and exits when the server dies: the
 * next call starts a new one. Starting is serialized by a lock file, so two
 * calls never start two instances of one key. */
#ifndef CAPSULE_GATEWAY_INSTANCE_H
#define CAPSULE_GATEWAY_INSTANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "manifest/model.h"

struct cap_wait_hook;
struct gw_instance_request {
  const struct cap_spec *spec;
  const char *run_dir; /* where keepers' sockets and locks live (created 0700) */
  const char *key;     /* names this instance: the spec, its manifest and credentials */
  const char *user;    /* whose call starts it: its egress with no call in is stored as theirs */
  char *const *env;    /* NAME=value for the server's environment (credentials) */
  size_t n_env;
  const char *log_path;      /* the server's stdout and stderr, and the keeper's notes */
  uint64_t wait_ms;          /* how long the caller waits for a start and a lease */
  const char *const *hidden; /* masked in the sandbox (sandbox_options.hidden) */
  size_t n_hidden;
  uint32_t id_base; /* sandbox_options.id_base: as root, the capability's host ids */
  /* An image capability (image/image.h): the server runs with rootfs as
   * its root (sandbox_options.rootfs) as argv in workdir, as uid and gid
   * inside_id, without the host's system directories or the package
   * directory. NULL: the manifest's x-capsule.command from the package. */
  const char *rootfs;
  char *const *argv;
  const char *workdir;
  uint32_t inside_id;
  /* Lease only from a keeper already running: where one would be started
   * (a fork whose child speaks gRPC), -EWOULDBLOCK instead (gw_call.warm_only) */
  bool warm_only;
  /* The instance (gw_lease.instance) the caller keeps a connection to, or
   * 0: when the keeper is that instance still, the lease comes without a
   * new connection (fd -1) and the call goes on the kept one. */
  uint64_t have_instance;
  /* A connection to the keeper kept from an earlier lease
   * (gw_lease_release_keep; owned from now), tried first, or -1. */
  int control;
  /* control's lease was asked ahead (gw_lease_release_ahead): its reply
   * is awaited, not asked, and taken only while nothing changed since
   * (instance_int.h, KEEPER_AHEAD); else control is dropped and a lease
   * asked anew. */
  bool control_ahead;
  /* Run once when the lease's reply does not come within
   * CAP_WAIT_SOON_US (the server's calls at once all taken, a keeper
   * starting): gw_call.wait. NULL: nothing. */
  struct cap_wait_hook *wait;
  /* The count of the capability's revokes its call read before the grants
   * (gw_call.grants_epoch): a keeper starts only while it is unchanged,
   * and checks it again once its status is out. NULL: not read. */
  const uint64_t *grants_epoch;
};

/* A granted lease: fd is connected to the server (the caller owns it and
 * hands it to gRPC); control is held until the call is over. protocol is
 * the enum selu_protocol the server speaks, learnt by its keeper at the
 * first health check (runtime/selu_rpc.h). */
struct gw_lease {
  int control;
  int fd;
  int protocol;
  uint64_t instance; /* names the keeper's server (random, not 0), or 0 from an older keeper */
  bool egress;       /* its keeper hands back the lease's egress decisions (gw_lease_egress) */
  bool keep;         /* its keeper takes the lease's end without the connection's */
  bool ahead;        /* and the next lease asked with it (gw_lease_release_ahead) */
};

/* Returns 0 with *lease filled, or -errno with err set (-ETIMEDOUT when
 * no lease came in time, -ECONNREFUSED when the server never became
 * healthy or stopped listening). */
int gw_instance_lease(const struct gw_instance_request *req, struct gw_lease *lease,
                      struct cap_error *err);
/* The run directory (created 0700 when missing): this user's own, not a
 * link, and private; anything else is refused with the fix named. */
int gw_instance_check_run_dir(const char *dir, struct cap_error *err);
/* Why the keeper ended this lease's server, when it did (the CPU budget):
 * true with the reason in buf. */
bool gw_lease_reason(struct gw_lease *lease, char *buf, size_t size);
/* When the call on the lease is done, before gw_lease_release: the
 * egress decisions its keeper's proxy gave this lease (docs/state.md, "A
 * warm instance's egress") added to b. Waits up to wait_ms; false when
 * none came back (an older keeper, no batch, the keeper gone). */
struct gw_egress_batch;
bool gw_lease_egress(struct gw_lease *lease, struct gw_egress_batch *b, uint64_t wait_ms);
/* Ends the lease (as gw_lease_release) but keeps the connection to the
 * keeper for the next lease of the same key (gw_instance_request.control):
 * the connection, or -1 when it cannot be kept (an older keeper, the
 * connection gone). */
int gw_lease_release_keep(struct gw_lease *lease);
/* The same, and asks the keeper at once for the next lease of the same
 * channel (a call expected soon: it then waits for no round trip), where
 * the keeper offers it (lease->ahead); else as gw_lease_release_keep.
 * *ahead says which. The lease asked is held until the connection goes
 * to a call (gw_instance_request.control_ahead) or is closed. */
int gw_lease_release_ahead(struct gw_lease *lease, bool *ahead);
/* gw_lease_release_ahead in two steps, for a caller that asks the next
 * lease once its call's answer went: detach ends the lease's hold here
 * (as gw_lease_release) but returns its keeper connection, the lease
 * still held by the keeper, and *instance; -1 (lease untouched) where
 * the keeper offers no lease ahead. ask_ahead then ends that lease and
 * asks the next on it: 0, or -errno (the keeper gone: close control,
 * which ends the lease). */
int gw_lease_detach_ahead(struct gw_lease *lease, uint64_t *instance);
int gw_lease_ask_ahead(int control, uint64_t instance);
/* Ends the lease (closes control; fd is the caller's, already given away
 * or closed). */
void gw_lease_release(struct gw_lease *lease);

/* ---- listing and stopping (instance_status.c) ----
 * Each keeper keeps RUN_DIR/KEY.status current (0600, replaced by rename,
 * removed when the keeper ends): what `capsule ps` lists. */
enum gw_instance_state { GW_INSTANCE_STARTING, GW_INSTANCE_SERVING, GW_INSTANCE_STOPPING };

struct gw_instance_info {
  char key[128];                /* the socket's name in the run directory, without .sock */
  char capability[256];         /* the capability's id */
  int pid;                      /* the keeper's */
  unsigned long long pid_start; /* its start time (/proc/PID/stat field 22): a reused pid differs */
  enum gw_instance_state state;
  char protocol[32]; /* the contract the server speaks (selu_protocol_name); "" while starting */
  unsigned leases, max_leases;
  uint64_t started_ms;    /* realtime, ms */
  uint64_t idle_since_ms; /* realtime, ms; 0 while a lease is held */
  char user[128];         /* whose exclusive instance it is ("" shared, or an MCP server's) */
};

/* "starting", "serving", "stopping". */
const char *gw_instance_state_name(enum gw_instance_state s);
/* Writes info to path atomically (path.tmp, then rename); a pid_start of
 * 0 is read from /proc first, once (a keeper writes at every lease). Errors are
 * ignored: the status is for listing, never for serving. */
void gw_instance_status_write(const char *path, struct gw_instance_info *info);
/* A keeper whose socket goes while it lives on (stopping; or retired by
 * a change in its package, serving the calls it holds): before the socket
 * goes (while it answers there, no keeper of the same name starts, so the
 * file is this keeper's), its status moves from path (RUN/KEY.status) to
 * a name of its own, RUN/KEY~PID.status, which path becomes, saying
 * stopping: a new keeper of the same name, writing RUN/KEY.status, never
 * hides it from ps, stop and revoke (which stop it by signal: that name
 * has no socket). gw_instance_list removes such a file once its keeper
 * is gone. */
void gw_instance_status_retire(const char *run_dir, const char *key, char *path, size_t size,
                               struct gw_instance_info *info);
/* The instances of run_dir whose keeper is alive, sorted by capability;
 * *out (free it) holds *n. A missing run_dir is no instance. */
int gw_instance_list(const char *run_dir, struct gw_instance_info **out, size_t *n,
                     struct cap_error *err);
/* Asks the keeper of inst to stop its server and waits up to wait_ms for
 * it to exit (a keeper that no longer answers on its socket gets SIGTERM).
 * Returns 0 once it is gone, -ETIMEDOUT when it is not yet. */
int gw_instance_stop(const char *run_dir, const struct gw_instance_info *inst, uint64_t wait_ms,
                     struct cap_error *err);
/* Stops every instance of capability cap in state_dir's run directory
 * (gw_instance_stop, each within wait_ms), telling each(ctx, instance,
 * failed: NULL once it stopped) of each; then, when there was one, stores
 * what their egress proxies decided since their last call, left in their
 * spools (the state opened: its recovery; best effort, else at its next
 * open). The count found, or -errno with err set when the instances
 * cannot be listed. */
typedef void (*gw_instance_stopped_fn)(void *ctx, const struct gw_instance_info *inst,
                                       const struct cap_error *failed);
long gw_instances_stop(const char *state_dir, const char *cap, uint64_t wait_ms,
                       gw_instance_stopped_fn each, void *ctx, struct cap_error *err);
/* The same in run_dir itself, without the egress spools' storing (the
 * caller's state stores them at its next recovery); each may be NULL. */
long gw_instances_stop_run(const char *run_dir, const char *cap, uint64_t wait_ms,
                           gw_instance_stopped_fn each, void *ctx, struct cap_error *err);
/* The count of revokes of cap's grants seen in run_dir (RUN/grants-
 * HASH.epoch): gw_instances_revoke moves it after the revoke committed
 * and before it looks for the capability's keepers. A call reads it
 * before its first state read (gw_call.grants_epoch), starts a keeper
 * only while it is unchanged, and hands it to the keeper, which reads it
 * again once its status is out: a revoke that committed after the call
 * read the grants and looked before that status was there has moved it by
 * then, and the keeper ends itself; a revoke that looked after finds the
 * keeper and stops it. 0 with *epoch set (0 when no revoke was ever seen),
 * or -errno with err set. */
int gw_grants_epoch(const char *run_dir, const char *cap, uint64_t *epoch, struct cap_error *err);
/* Whether the count moved from epoch (a keeper's check; unreadable: yes) */
bool gw_grants_epoch_moved(const char *run_dir, const char *cap, uint64_t epoch);
/* A revoke of cap's grants in state_dir: moves the count, then stops the
 * capability's warm servers as gw_instances_stop. */
long gw_instances_revoke(const char *state_dir, const char *cap, uint64_t wait_ms,
                         gw_instance_stopped_fn each, void *ctx, struct cap_error *err);
/* Room in run_dir for one more exclusive warm instance of capability cap
 * for user: at most CAPSULE_SELU_MAX_WARM (default GW_SELU_MAX_WARM) live
 * a user and capability, one a session (a client choosing a new session
 * per call would otherwise start servers without end). At the bound, the
 * least recently idle of them is stopped; when all are busy, -EBUSY with
 * err saying so. *lock: a lock (a descriptor, or -1) held from the count
 * until the new keeper has published its status, so that starts at once
 * do not all count the same room; the caller closes it. */
#define GW_SELU_MAX_WARM 16
int gw_instance_room(const char *run_dir, const char *cap, const char *user, uint64_t deadline,
                     int *lock, struct cap_error *err);
/* Whose exclusive instance req starts: its user, "" for a shared one. */
static inline const char *gw_instance_owner(const struct gw_instance_request *req)
{
  return req->spec->runtime.shared || !req->user ? "" : req->user;
}

#endif
