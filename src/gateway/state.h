/* The gateway's state: one SQLite database in the state directory (WAL,
 * safe for several capsule processes at once) holding policies, sealed
 * credentials, approvals and the audit log; its schema is versioned
 * (PRAGMA user_version) and migrated forward on open, a newer one refused.
 * Credentials are sealed with libsodium (XChaCha20-Poly1305, the row's
 * capability, name, scope and user as associated data) under a 32-byte key
 * kept in STATE/key (0600, made on first use) or given as 64 hex digits in
 * CAPSULE_STATE_KEY. The directory and key must be the caller's or root's
 * and not writable by others (a directory only others can read is made
 * 0700). A process that opened the state is not dumpable from then on.
 * The audit log is a chain: each record's hash is HMAC-SHA-256 (under a
 * key derived from the state key) over the previous hash and the record;
 * the chain's head is kept, MACed, beside it, and a MACed high-water mark
 * (count and head) in STATE/audit-hwm outside the database, so an edited,
 * dropped, reordered or truncated record, or a restored older database,
 * is found by gw_audit_verify. */
#ifndef CAPSULE_GATEWAY_STATE_H
#define CAPSULE_GATEWAY_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "manifest/model.h"

struct gw_state;

/* $XDG_STATE_HOME/capsule, else ~/.local/state/capsule (allocated). */
char *gw_state_default_dir(void);
/* $XDG_CONFIG_HOME/capsule, else ~/.config/capsule (allocated; NULL
 * without either): the config file's directory, masked like the state. */
char *gw_config_dir(void);
/* The state directories no sandbox may see, those that exist, resolved:
 * the one in use, the default one, $CAPSULE_STATE, the config directory
 * (gw_config_dir: a tool rewriting `caps =` would pick what the next call
 * runs), and every one this user's capsule has opened (state_dirs.c): how many, in *ret (allocated;
 * free with gw_state_private_paths_free). */
size_t gw_state_private_paths(const char *state_dir, char ***ret);
/* The same, the components found not to be links kept in *cache (see
 * core/fs.h), for a sandbox started right after (sandbox_options.
 * hidden_cache): its mask plan does not ask them again. */
struct cap_path_cache;
size_t gw_state_private_paths_cached(const char *state_dir, struct cap_path_cache *cache,
                                     char ***ret);
void gw_state_private_paths_free(char **paths, size_t n);
/* Records dir in the default state directory's list (best effort). */
void gw_state_remember_dir(const char *dir);

int gw_state_open(const char *dir, struct gw_state **ret, struct cap_error *err);
/* What processes gone left in the state directory (the in-flight markers
 * of calls killed, the egress spools of warm servers' keepers that ended),
 * stored now as gw_state_open stores them; for a long-lived process
 * (serve), which opens no state while it runs. Best effort. */
void gw_state_recover(struct gw_state *st);
/* A PostgreSQL state (docs/state.md): dir may be a postgres:// URL (this
 * host's directory is then the default one), or gw_state_use_database
 * names the database for every later open while dir stays this host's
 * directory (the key, unless CAPSULE_STATE_KEY or CAPSULE_STATE_KEY_FILE
 * gives it; the audit high-water mark; calls in flight). NULL: SQLite. */
void gw_state_use_database(const char *url);
const char *gw_state_database(void);
/* Where the state's database is, for messages: DIR/state.db, or the URL
 * without its password (a buffer of the calling thread's). */
const char *gw_state_where(const struct gw_state *st);
void gw_state_close(struct gw_state *st);
/* How many stored credentials a migration made shared (they were global
 * by name before capabilities) and no one has warned about yet; taking
 * the count clears it. The command line warns about them. */
int gw_state_take_migrated_shared(struct gw_state *st, size_t *n, struct cap_error *err);

/* `capsule state migrate` (state_migrate.c): the SQLite state in the
 * directory from copied into the empty PostgreSQL database at the URL
 * to, in one transaction, under the source's key (CAPSULE_STATE_KEY or
 * CAPSULE_STATE_KEY_FILE, else FROM/key); then verified: each table's
 * rows agree on both sides (fn is told each table's count) and the copied
 * audit chain verifies, *audit_records long. The source's chain must
 * verify first; a target holding any row is refused. */
typedef void (*gw_migrate_fn)(void *arg, const char *table, int64_t rows);
int gw_state_migrate(const char *from, const char *to, gw_migrate_fn fn, void *arg,
                     size_t *audit_records, struct cap_error *err);

/* A capability's recorded id range read without opening the state (no
 * key, no database): from the host's registry, under the path of the
 * state directory dir, which statefd is (gw_statedir_open's checks
 * passed; -1: it did not); *base 0 when it records none there (then
 * gw_state_id_range decides). */
int gw_state_id_range_peek(int statefd, const char *dir, const char *key, uint32_t *base);
/* The host's id-range registry's text read as capsule reads the file,
 * without the file system (tests/fuzz/fuzz_id_registry.c): its lines,
 * its marker's format (0: none), the first line capsule cannot read (0:
 * none); -EPROTO when a line read, written back and read again differs. */
int gw_id_registry_scan(const char *text, size_t len, size_t *lines, unsigned *format,
                        size_t *foreign);
/* Creates dir (and parents, 0700) when missing; refuses one not owned by
 * the caller or root, or writable by group or others; repairs one only the
 * caller owns that others can read (0700, its files 0600). Returns a
 * directory fd (O_CLOEXEC) or a negative errno with err set. */
int gw_statedir_open(const char *dir, struct cap_error *err);

/* ---- host id ranges (gateway/id_range.c) ----
 * As root, the first of the GW_ID_RANGE_SIZE host uids and gids that
 * belong to `key` (gw_id_range_key of a capability; GW_ID_RANGE_ADHOC for
 * `capsule run` without a manifest) alone, for sandbox_options.id_base: the recorded one, else,
 * when create, a new one recorded now (clear of /etc/subuid, /etc/subgid,
 * host users and groups, and other keys' ranges). *base is 0 when there is
 * none and !create. */
#define GW_ID_RANGE_SIZE 65536u
/* The key of a capability's range (allocated): its id, '/', and 32 hex
 * digits of the SHA-256 of its package directory's resolved path. Two
 * packages that share an id (two nono folders named alike, a Selu id
 * taken on purpose) get two ranges; the same package keeps its range
 * across runs and restarts (a moved package gets a new one). Every key
 * holds a '/', so none is GW_ID_RANGE_ADHOC, the key of `capsule run`
 * without a manifest. */
#define GW_ID_RANGE_ADHOC "run"
char *gw_id_range_key(const char *id, const char *package_dir);
int gw_state_id_range(struct gw_state *st, const char *key, bool create, uint32_t *base,
                      struct cap_error *err);
/* gw_state_id_range(create true)'s answer for a range just read with it
 * (create false: base, not 0), without reading it again: the host's
 * registry checked for it. */
int gw_state_id_range_known(struct gw_state *st, const char *key, uint32_t base,
                            struct cap_error *err);

/* ---- policies: user "" is the operator default ---- */
int gw_policy_set(struct gw_state *st, const char *cap, const char *tool, const char *user,
                  enum cap_policy policy, struct cap_error *err);
/* Removes exactly this row; *found false when there was none. */
int gw_policy_rm(struct gw_state *st, const char *cap, const char *tool, const char *user,
                 bool *found, struct cap_error *err);
/* *found false when no row: the caller falls back. */
int gw_policy_get(struct gw_state *st, const char *cap, const char *tool, const char *user,
                  enum cap_policy *policy, bool *found, struct cap_error *err);
typedef void (*gw_policy_fn)(void *arg, const char *cap, const char *tool, const char *user,
                             enum cap_policy policy);
int gw_policy_list(struct gw_state *st, gw_policy_fn fn, void *arg, struct cap_error *err);

/* ---- credentials ----
 * A stored credential belongs to one capability (cap, its id) or, with cap
 * NULL, is shared: any capability declaring its name may use it. Scope
 * CAP_SCOPE_SYSTEM (user ignored) or CAP_SCOPE_USER. */
int gw_cred_set(struct gw_state *st, const char *cap, const char *name, enum cap_secret_scope scope,
                const char *user, const char *value, size_t len, struct cap_error *err);
/* Exactly this row. *value: allocated, NUL-terminated; wipe and free it
 * with gw_secret_free. */
int gw_cred_get(struct gw_state *st, const char *cap, const char *name, enum cap_secret_scope scope,
                const char *user, char **value, bool *found, struct cap_error *err);
/* What a call of cap by user gets for name, the first found of: cap and
 * user, cap and system, shared and user, shared and system (the user steps
 * only when user is given). */
int gw_cred_lookup(struct gw_state *st, const char *cap, const char *name, const char *user,
                   char **value, bool *found, struct cap_error *err);
int gw_cred_rm(struct gw_state *st, const char *cap, const char *name, enum cap_secret_scope scope,
               const char *user, bool *found, struct cap_error *err);
/* cap NULL for a shared row. */
typedef void (*gw_cred_fn)(void *arg, const char *cap, const char *name,
                           enum cap_secret_scope scope, const char *user, const char *updated);
int gw_cred_list(struct gw_state *st, gw_cred_fn fn, void *arg, struct cap_error *err);
void gw_secret_free(char *value);

/* The database, for the gateway modules that keep their own tables in it
 * (gateway/approval.h); owned by st, valid until gw_state_close. */
struct gw_db;
struct gw_db *gw_state_db(struct gw_state *st);
/* A PostgreSQL state: a connection of its own to its database, for a
 * thread that waits for notifications (gw_db_wait_notify_any); the caller
 * closes it. -ENOTSUP for SQLite. */
int gw_state_listener(struct gw_state *st, struct gw_db **ret, struct cap_error *err);

/* ---- audit ---- */
struct gw_audit_record {
  int64_t seq;   /* set by append */
  char time[32]; /* set by append: RFC 3339, UTC, milliseconds */
  const char *user;
  const char *capability;
  const char *tool;
  char args_hash[65];   /* SHA-256 hex of the arguments as sent */
  const char *decision; /* "allow", "ask-approved", "block", "approval-pending", "denied", ... */
  int64_t duration_ms;
  const char *outcome;     /* "ok", or what failed */
  char result_hash[65];    /* SHA-256 hex of the result, "" when none */
  char prev[65], hash[65]; /* set by append */
};
/* On PostgreSQL each append is announced (NOTIFY GW_AUDIT_CHANNEL, the
 * record's seq) once committed, for the dashboard's live stream. */
#define GW_AUDIT_CHANNEL "capsule_audit"
int gw_audit_append(struct gw_state *st, struct gw_audit_record *r, struct cap_error *err);
/* The records rs[0..n) appended in order in one transaction: all in, or
 * none (0, or the one error); the chain's head and the high-water mark
 * moved once, to the last. */
int gw_audit_append_many(struct gw_state *st, struct gw_audit_record *const *rs, size_t n,
                         struct cap_error *err);
/* The same, each call's in-flight marker markers[i] (NULL: none) spoilt
 * (gw_inflight_recorded) right after the COMMIT, before the high-water
 * mark moves (a lock other threads and processes hold in turn, a write,
 * now and then a sync): a kill in between recorded the calls again, as
 * interrupted. */
struct gw_inflight;
int gw_audit_append_marked(struct gw_state *st, struct gw_audit_record *const *rs,
                           struct gw_inflight *const *markers, size_t n, struct cap_error *err);
/* gw_audit_append by a thread of a process whose threads share st under
 * lock (gateway/call.h; held on entry when held says so, never on
 * return; NULL: gw_audit_append): the records of calls that get here
 * together are appended in one transaction (gw_audit_append_many) by one
 * of them, which then runs each one's then(then_ctx) (NULL: none) under
 * the lock, in the same holding; each returns once its own record is
 * committed (and its then run), or with the batch's error.
 * gateway/state_group.c. */
struct gw_state_lock;
/* A call this thread makes on st, begun and ended (gw_call's): within it
 * the policies, grants and id ranges it reads are kept while the database
 * does not change (gateway/state_cache.c); it sees every change committed
 * before it began. */
void gw_state_cache_begin(struct gw_state *st);
void gw_state_cache_end(struct gw_state *st);
/* inflight (NULL: none): the call's marker, told its record is in
 * (gw_inflight_recorded) as soon as the transaction holding it commits */
int gw_audit_append_shared(struct gw_state *st, const struct gw_state_lock *lock, bool held,
                           struct gw_audit_record *r, void (*then)(void *ctx), void *then_ctx,
                           struct gw_inflight *inflight, struct cap_error *err);
/* A change the operator made, as a record of its own: decision is the
 * kind ("policy-set", "policy-rm", "cred-set", "cred-rm", "approve",
 * "deny"), user who made it, capability and tool (or credential name)
 * what it is about, outcome what was done, in words (never a
 * credential's value); no arguments or result hash, duration 0. */
int gw_audit_change(struct gw_state *st, const char *kind, const char *who, const char *capability,
                    const char *tool, const char *what, struct cap_error *err);
typedef void (*gw_audit_fn)(void *arg, const struct gw_audit_record *r);
/* Records with seq > after, in order. */
int gw_audit_each(struct gw_state *st, int64_t after, gw_audit_fn fn, void *arg,
                  struct cap_error *err);
/* Returns 0 and *n records when the chain, its head and the high-water
 * mark agree; -EBADMSG with err naming the first bad record, or the gap
 * (deleted, truncated, rolled back), otherwise. */
int gw_audit_verify(struct gw_state *st, size_t *n, struct cap_error *err);

/* ---- calls in flight (state_audit.c) ----
 * gw_inflight_begin records a call as in flight before it runs: a marker
 * STATE/run/calls/NAME holding r's fields, locked (fcntl) by this process
 * until gw_inflight_end removes it. A capsule killed mid-call leaves its
 * marker with the lock free: gw_state_open (gw_audit_recover_interrupted)
 * appends one record for it, outcome "interrupted", and removes it. */
struct gw_inflight {
  int fd, dirfd;
  char *name;
  uint64_t start_ms;
  size_t len;    /* what the marker's file holds */
  bool recorded; /* its tag spoilt: the record is in the log (gw_inflight_recorded) */
  bool keyed;    /* dev and ino are dirfd's (an open descriptor's: they never change) */
  dev_t dev;
  ino_t ino;
  pid_t pid; /* getpid() at its begin: a call ends in the process that began it */
};
int gw_inflight_begin(struct gw_state *st, const struct gw_audit_record *r, struct gw_inflight *m,
                      struct cap_error *err);
/* Whether this process keeps its ended calls' markers (at most 8, under
 * their names, locked, their tag spoilt so they record nothing) for its
 * next calls instead of creating and removing a file per call: for a
 * long-running front door (serve). false removes those kept; a process
 * killed leaves them to the recovery, which records nothing of them and
 * keeps them as spare files. */
void gw_inflight_spares(bool on);
/* Rewrites the marker's fields (e.g. the decision, once made). */
void gw_inflight_update(struct gw_inflight *m, const struct gw_audit_record *r);
/* The call's own record is in the log: the marker's tag spoilt at once,
 * so a process killed before gw_inflight_end leaves a marker that records
 * nothing (one write; a no-op on one never begun). */
void gw_inflight_recorded(struct gw_inflight *m);
/* Removes the marker (the call's own record is then written). No-op on
 * one that was never begun ({.fd = -1}). */
void gw_inflight_end(struct gw_inflight *m);
/* The call ended and is answered before its record is appended
 * (gateway/call.h, audit_later): its record, finished, written into the
 * marker, which stays locked and in flight; a kill from now on leaves it
 * to the next gw_state_open, which appends it as it ended (not
 * interrupted), and a reader opening the state meanwhile waits for it
 * (at most GW_INFLIGHT_ANSWERED_WAIT_MS in all). 0, or -errno (the
 * marker unwritten: append the record now). */
#define GW_INFLIGHT_ANSWERED_WAIT_MS 2000
int gw_inflight_answered(struct gw_inflight *m, const struct gw_audit_record *r);
/* gw_inflight_keep with r as it is (its duration as measured), not
 * measured again: an answered call's record that could not be appended. */
void gw_inflight_leave(struct gw_inflight *m, const struct gw_audit_record *r);
/* Whether st is shared by gateways on several hosts (PostgreSQL): a
 * record left in a local marker would reach it late, or never. */
bool gw_state_shared(const struct gw_state *st);
/* The call's own record could not be written (the database went away,
 * and the record is not in it): the marker keeps it, finished, and the
 * next gw_state_open on this host appends it. */
void gw_inflight_keep(struct gw_inflight *m, const struct gw_audit_record *r);
/* A `capsule run` session, audited without opening the database (a run's
 * start-up stays lean): a marker in the state directory dir, opened as
 * statefd (gw_statedir_open), and gw_inflight_finish leaves it
 * behind with r's outcome (its duration measured from the begin) and
 * frees m; the next gw_state_open appends its record (past 64 waiting,
 * this one opens the state STATEDIR to record them). */
int gw_inflight_begin_at(int statefd, const char *dir, const struct gw_audit_record *r,
                         struct gw_inflight *m, struct cap_error *err);
void gw_inflight_finish(struct gw_inflight *m, const struct gw_audit_record *r,
                        const char *statedir);
/* The abandoned markers as "interrupted" records, and the finished ones
 * with their outcome: how many, in *n. */
int gw_audit_recover_interrupted(struct gw_state *st, size_t *n, struct cap_error *err);

/* SHA-256 of data as 64 hex digits into out[65]. */
void gw_sha256_hex(const void *data, size_t len, char out[65]);

/* state_read.c: the reads a call makes before its run (id range,
 * policy, credentials, grants) in one read transaction, for a caller
 * that makes no write meanwhile: true when one began (SQLite), and then
 * gw_state_read_end before any write or a wait. Nothing read is kept
 * past it. */
bool gw_state_read_begin(struct gw_state *st);
void gw_state_read_end(struct gw_state *st);

#endif
