/* Inside the gateway's state module: the handle's layout and the pieces
 * split across state.c (database, schema, policies, credentials,
 * approvals), state_audit.c (the audit chain and its high-water mark) and
 * state_dir.c (the directory, its permissions, the key and the mark's
 * file). Not for other modules. */
#ifndef CAPSULE_GATEWAY_STATE_INT_H
#define CAPSULE_GATEWAY_STATE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <sodium.h>

#include "core/error.h"
#include "core/sha256.h"
#include "gateway/db.h"
#include "manifest/model.h"

#define GW_KEY_BYTES 32

/* The keys derived from the state key, on pages a fork does not copy. */
struct gw_state_keys {
  unsigned char cred[GW_KEY_BYTES];
  unsigned char audit[GW_KEY_BYTES];
  struct cap_hmac_sha256 audit_mac; /* HMAC under audit, its key blocks hashed */
};

struct gw_state {
  struct gw_db *db;
  char *url; /* a PostgreSQL state's database (NULL: STATE/state.db) */
  /* the audit high-water mark's file in dir: audit-hwm, or for a
   * PostgreSQL state audit-hwm-ID (ID: the database's state_id), so that
   * one host's marks of several states never meet */
  char hwm_name[48];
  char *dir;
  int dirfd;          /* the state directory, as checked */
  struct stat dir_sb; /* dirfd's fstat, once (an open directory's device and inode never change) */
  bool dir_sb_ok;
  struct gw_state_keys *keys;
  struct gw_audit_seen *seen; /* records whose MAC the dashboard checked (state_query.c) */
  /* the mark's group commit (state_dir.c): when this handle last made it
   * durable, and whether it moved since */
  uint64_t hwm_synced_ms;
  bool hwm_dirty;
  /* kept between appends (gw_hwm_hold): the mark's lock and the mark,
   * each descriptor + 1 (0: not open); the mark's text as this handle last
   * wrote it, so a mark found as it was left is not verified again */
  int hwm_lock1, hwm_fd1;
  char hwm_text[256];
  int64_t hwm_text_seq; /* the record count and head hash hwm_text names */
  char hwm_text_hash[65];
  ssize_t hwm_held_len;   /* the mark's length as gw_hwm_read_held read it (-1: unknown) */
  char hwm_held_name[48]; /* the hwm_name they are of (a migration names it later) */
  struct gw_access_cache *access_cache; /* tokens checked since the last revoke (access.c) */
  struct gw_audit_group *group;         /* the audit's group commit (state_group.c) */
  struct gw_state_cache *cache;         /* reads kept while the database is unchanged */
  int64_t quiet_changes;                /* rows the audit's appends changed (state_cache.c) */
  /* the chain's last record as this handle's last append left it, kept
   * while the database is as that append left it (state_audit.c,
   * last_record_kept): SQLite's data_version then (another connection's
   * commit moves it) and this connection's total changes (any write of
   * its own moves them); SQLite only */
  bool audit_last_ok;
  int64_t audit_last_seq;
  char audit_last_hash[65];
  int64_t audit_last_version[2];
  unsigned calls; /* gw_call's on this handle at the moment (atomic: __atomic_*) */
};

/* Reads kept (state_cache.c): valid while no other connection committed
 * (SQLite's data_version) and this one changed no row but the audit's;
 * nothing kept on PostgreSQL. A key made by gw_state_cache_key; a hit's
 * values are the cache's, valid until the next call into it; a miss is
 * followed by the read and gw_state_cache_put of what it read. */
struct cap_buf;
void gw_state_cache_key(struct cap_buf *key, const char *kind, const char *const *parts, size_t n);
bool gw_state_cache_get(struct gw_state *st, const char *key, char *const **vals, size_t *n);
void gw_state_cache_put(struct gw_state *st, const char *key, const char *const *vals, size_t n);
/* Rows changed by the audit's own appends: not a change of any read kept. */
void gw_state_cache_quiet(struct gw_state *st, int64_t changes);
void gw_state_cache_free(struct gw_state *st);

/* Frees st->group (state_group.c). */
void gw_audit_group_free(struct gw_state *st);

/* Frees st->access_cache (access.c). */
void gw_access_cache_free(struct gw_state *st);

/* Frees st->seen (state_query.c). */
void gw_audit_seen_free(struct gw_state *st);

int gw_state_db_error(struct gw_state *st, struct cap_error *err, const char *what);
struct gw_stmt *gw_state_prep(struct gw_state *st, const char *sql, ...);
void gw_state_now(char out[32]);

/* CAPSULE_STATE_KEY, else DIR/key (made 0600 on first use; refused when
 * not the caller's or root's, or open to others). */
int gw_statedir_load_key(int dirfd, const char *dir, unsigned char key[GW_KEY_BYTES],
                         struct cap_error *err);

/* The audit high-water mark: the record count and head hash capsule last
 * wrote, MACed with the audit key, in DIR/audit-hwm. */
struct gw_hwm {
  int64_t seq;
  char hash[65];
};
enum gw_hwm_status { GW_HWM_OK, GW_HWM_MISSING, GW_HWM_FORGED };
int gw_hwm_read(const struct gw_state *st, struct gw_hwm *out, enum gw_hwm_status *status,
                struct cap_error *err);
/* Atomically replaces the mark (write, fsync, rename). create_only: only
 * when there is none yet. */
int gw_hwm_write(const struct gw_state *st, const struct gw_hwm *mark, bool create_only,
                 struct cap_error *err);
/* Moves an existing mark in place (never creates one: a missing mark is
 * evidence), written at once but made durable in batches: at most every
 * GW_HWM_SYNC_MS by the appender that passes, and at gw_hwm_sync. Under
 * gw_hwm_lock. */
#define GW_HWM_SYNC_MS 200
int gw_hwm_advance(struct gw_state *st, const struct gw_hwm *mark, struct cap_error *err);
/* The appender's side: the mark's lock taken on a descriptor kept by st,
 * the mark read on one kept too (opened again when its file was replaced
 * or removed: a removed mark stays missing), released; gw_hwm_forget
 * closes them (gw_state_close). */
int gw_hwm_hold(struct gw_state *st, struct cap_error *err);
int gw_hwm_read_held(struct gw_state *st, struct gw_hwm *out, enum gw_hwm_status *status,
                     struct cap_error *err);
void gw_hwm_release(struct gw_state *st);
void gw_hwm_forget(struct gw_state *st);
/* Makes a mark this handle moved durable. */
void gw_hwm_sync(struct gw_state *st);
/* Exclusive lock serialising mark updates; returns an fd to close. */
int gw_hwm_lock(const struct gw_state *st, struct cap_error *err);

/* A record's hash: HMAC-SHA-256 over its fields and prev (state_audit.c):
 * the bytes it covers (appended to b), their MAC, both at once. */
struct gw_audit_record;
struct cap_buf;
void gw_audit_mac_input(const struct gw_audit_record *r, struct cap_buf *b);
void gw_audit_mac_bytes(const struct gw_state *st, const void *msg, size_t len, char out[65]);
void gw_audit_mac(const struct gw_state *st, const struct gw_audit_record *r, char out[65]);

/* After the schema's migrations: a mark for a log that has none yet (a new
 * or pre-mark state), never replacing one. */
int gw_audit_init_mark(struct gw_state *st, struct cap_error *err);

/* PostgreSQL: the approvals' table, made at open (approval.c). */
int gw_approvals_prepare(struct gw_state *st, struct cap_error *err);

#endif
