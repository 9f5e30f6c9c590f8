/* The state database: its schema and migrations, policies, sealed
 * credentials and approvals (the audit log is in state_audit.c, the
 * directory and key in state_dir.c). */
#include "gateway/state.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/fork_mutex.h"
#include "core/secret.h"
#include "core/sha256.h"
#include "gateway/call.h"
#include "gateway/egress_spool.h"
#include "gateway/state_int.h"

/* ---- schema versions (PRAGMA user_version) ----
 * Each step moves the database from the version before it to its own, in
 * a transaction of its own; a database newer than the last step is
 * refused, never written. Version 0 is a new database or one from before
 * versions (its tables are version 1's, so step 1 is idempotent). */

static const char schema_v1[] =
    "CREATE TABLE IF NOT EXISTS policies (capability TEXT NOT NULL, tool TEXT NOT NULL,"
    " user TEXT NOT NULL, decision TEXT NOT NULL, PRIMARY KEY (capability, tool, user));"
    "CREATE TABLE IF NOT EXISTS credentials (name TEXT NOT NULL, scope TEXT NOT NULL,"
    " user TEXT NOT NULL, nonce BLOB NOT NULL, sealed BLOB NOT NULL, updated TEXT NOT NULL,"
    " PRIMARY KEY (name, scope, user));"
    "CREATE TABLE IF NOT EXISTS approvals (id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " capability TEXT NOT NULL, tool TEXT NOT NULL, user TEXT NOT NULL, args_hash TEXT NOT NULL,"
    " args TEXT NOT NULL, created TEXT NOT NULL, status TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS audit (seq INTEGER PRIMARY KEY, time TEXT NOT NULL,"
    " user TEXT NOT NULL, capability TEXT NOT NULL, tool TEXT NOT NULL, args_hash TEXT NOT NULL,"
    " decision TEXT NOT NULL, duration_ms INTEGER NOT NULL, outcome TEXT NOT NULL,"
    " result_hash TEXT NOT NULL, prev TEXT NOT NULL, hash TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);";

/* Credentials belong to a capability; '' is shared. Rows from before stay
 * sealed as they were: a shared row's associated data is the old one. */
static const char schema_v2[] =
    "CREATE TABLE credentials_v2 (capability TEXT NOT NULL, name TEXT NOT NULL,"
    " scope TEXT NOT NULL, user TEXT NOT NULL, nonce BLOB NOT NULL, sealed BLOB NOT NULL,"
    " updated TEXT NOT NULL, PRIMARY KEY (capability, name, scope, user));"
    "INSERT INTO credentials_v2 SELECT '', name, scope, user, nonce, sealed, updated"
    " FROM credentials;"
    "DROP TABLE credentials;"
    "ALTER TABLE credentials_v2 RENAME TO credentials;";

static const char schema_v4[] = "CREATE TABLE IF NOT EXISTS id_ranges (capability TEXT PRIMARY KEY,"
                                " base INTEGER UNIQUE NOT NULL);";

/* Covenant (gateway/token_store.c, gateway/budget.c): issued capability
 * tokens and their revocations, trust roots, the local issuer's key pair
 * (the secret sealed like a credential), per-agent budget buckets; token,
 * trust and budget rows carry an HMAC under the audit key. */
static const char schema_v5_covenant[] =
    "CREATE TABLE IF NOT EXISTS covenant_tokens (signature TEXT PRIMARY KEY,"
    " subject TEXT NOT NULL, action TEXT NOT NULL, token TEXT NOT NULL,"
    " issued_ms INTEGER NOT NULL, revoked_ms INTEGER NOT NULL, mac TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS covenant_trust (pubkey TEXT PRIMARY KEY, added TEXT NOT NULL,"
    " mac TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS covenant_issuer (id INTEGER PRIMARY KEY CHECK (id = 1),"
    " pubkey TEXT NOT NULL, nonce BLOB NOT NULL, sealed BLOB NOT NULL);"
    "CREATE TABLE IF NOT EXISTS covenant_budgets (agent TEXT PRIMARY KEY,"
    " capacity INTEGER NOT NULL, tokens INTEGER NOT NULL, last_refill_ms INTEGER NOT NULL,"
    " mac TEXT NOT NULL);";

/* The serve front doors' bearer tokens (gateway/access.h), hashed. */
static const char schema_v6_access[] =
    "CREATE TABLE IF NOT EXISTS access (name TEXT PRIMARY KEY, token_sha256 TEXT UNIQUE NOT NULL,"
    " user TEXT NOT NULL, operator INTEGER NOT NULL, created TEXT NOT NULL);";

/* Plugin settings (Talos: text values; user '' is the operator's), the
 * triggers' persisted state and fired events, their enablement and poll
 * leases (gateway/plugin_state.c), and operator grants. */
static const char schema_v7_plugins[] =
    "CREATE TABLE IF NOT EXISTS settings (capability TEXT NOT NULL, user TEXT NOT NULL,"
    " name TEXT NOT NULL, value TEXT NOT NULL, updated TEXT NOT NULL,"
    " PRIMARY KEY (capability, user, name));"
    "CREATE TABLE IF NOT EXISTS trigger_state (capability TEXT NOT NULL, trigger TEXT NOT NULL,"
    " user TEXT NOT NULL, state TEXT NOT NULL, last_poll TEXT NOT NULL,"
    " PRIMARY KEY (capability, trigger, user));"
    "CREATE TABLE IF NOT EXISTS trigger_config (capability TEXT NOT NULL, trigger TEXT NOT NULL,"
    " enabled INTEGER, call_capability TEXT, call_tool TEXT,"
    " PRIMARY KEY (capability, trigger));"
    "CREATE TABLE IF NOT EXISTS trigger_leases (capability TEXT NOT NULL, trigger TEXT NOT NULL,"
    " user TEXT NOT NULL, holder TEXT NOT NULL, expires INTEGER NOT NULL,"
    " PRIMARY KEY (capability, trigger, user));"
    "CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, time TEXT NOT NULL,"
    " capability TEXT NOT NULL, trigger TEXT NOT NULL, user TEXT NOT NULL, event TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS grants (capability TEXT NOT NULL, kind TEXT NOT NULL,"
    " value TEXT NOT NULL, created TEXT NOT NULL, PRIMARY KEY (capability, kind, value));";

/* The egress log (gateway/egress_store.h): each decision of a call's
 * egress proxy, stored in a batch after the call, linked to its audit
 * record by call_seq (NULL: none was written). */
static const char schema_v9_egress[] =
    "CREATE TABLE IF NOT EXISTS egress (seq INTEGER PRIMARY KEY, time TEXT NOT NULL,"
    " capability TEXT NOT NULL, user TEXT NOT NULL, call_seq INTEGER, decision TEXT NOT NULL,"
    " kind TEXT, host TEXT, port INTEGER NOT NULL, method TEXT, path TEXT, credential TEXT,"
    " reason TEXT, count INTEGER NOT NULL, bytes_up INTEGER NOT NULL,"
    " bytes_down INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS egress_capability ON egress (capability, seq);"
    "CREATE INDEX IF NOT EXISTS egress_call ON egress (call_seq);";

/* The dashboard's signed-in sessions, shared by every serve on the state
 * (gateway/ui_session.h). */
static const char schema_v10_ui_sessions[] =
    "CREATE TABLE IF NOT EXISTS ui_sessions (id_sha256 TEXT PRIMARY KEY, user TEXT NOT NULL,"
    " nonce BLOB NOT NULL, sealed BLOB NOT NULL, created_ms INTEGER NOT NULL,"
    " last_ms INTEGER NOT NULL);";

/* A trigger's tool call carries its task configuration (Talos's
 * triggerConfig: values of the trigger's params, a JSON object), which the
 * trigger's filter reads (gateway/plugin_state.c). */
static int add_trigger_params(struct gw_state *st, struct cap_error *err)
{
  /* idempotent: a state whose version was reset runs the migrations again */
  if (gw_db_kind(st->db) == GW_DB_POSTGRES) {
    if (gw_db_exec(st->db,
                   "ALTER TABLE trigger_config ADD COLUMN IF NOT EXISTS call_params TEXT") !=
        GW_DB_OK)
      return gw_state_db_error(st, err, "cannot add the trigger calls' parameters");
    return 0;
  }
  struct gw_stmt *s = gw_state_prep(
      st, "SELECT count(*) FROM pragma_table_info('trigger_config') WHERE name = 'call_params'",
      NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  bool have = rc == GW_DB_ROW && gw_stmt_int(s, 0) > 0;
  gw_stmt_finalize(s);
  if (rc != GW_DB_ROW)
    return gw_state_db_error(st, err, "cannot read the triggers' table");
  if (!have &&
      gw_db_exec(st->db, "ALTER TABLE trigger_config ADD COLUMN call_params TEXT") != GW_DB_OK)
    return gw_state_db_error(st, err, "cannot add the trigger calls' parameters");
  return 0;
}

/* How many credentials become shared, kept in meta until a command line
 * has warned about them (the first process to migrate may be one that
 * cannot, e.g. `capsule run` reading a stored credential). */
static int count_legacy_credentials(struct gw_state *st, struct cap_error *err)
{
  struct gw_stmt *s = gw_state_prep(st,
                                    "INSERT INTO meta SELECT 'migrated_shared', count(*) FROM"
                                    " credentials WHERE (SELECT count(*) FROM credentials) > 0",
                                    NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot count the credentials");
}

static const struct migration {
  int version;
  const char *what;
  int (*before)(struct gw_state *st, struct cap_error *err);
  const char *sql;
  int (*after)(struct gw_state *st, struct cap_error *err);
} migrations[] = {
    {1, "the first tables", NULL, schema_v1, NULL},
    {2, "credentials scoped to a capability", count_legacy_credentials, schema_v2, NULL},
    /* the audit log's high-water mark file, made once for an existing log */
    {3, "the audit high-water mark", NULL, NULL, gw_audit_init_mark},
    /* as root, each capability's own host ids (id_range.c) */
    {4, "host id ranges", NULL, schema_v4, NULL},
    /* Covenant: capability tokens, trust roots, the issuer key, budgets */
    {5, "Covenant tokens and budgets", NULL, schema_v5_covenant, NULL},
    /* the serve front doors' bearer tokens */
    {6, "access tokens", NULL, schema_v6_access, NULL},
    /* Talos: plugin settings, trigger state, events; operator grants */
    {7, "plugin settings, trigger state, events and grants", NULL, schema_v7_plugins, NULL},
    /* Talos: a trigger call's task configuration, for the trigger's filter */
    {8, "trigger call parameters", NULL, NULL, add_trigger_params},
    /* the egress proxy's decisions, per call */
    {9, "the egress log", NULL, schema_v9_egress, NULL},
    /* serve --ui: sessions shared by several serve processes */
    {10, "the dashboard's sessions", NULL, schema_v10_ui_sessions, NULL},
};
#define SCHEMA_VERSION 10

static int user_version(struct gw_state *st, int *v, struct cap_error *err)
{
  if (gw_db_schema_version(st->db, v) < 0)
    return gw_state_db_error(st, err, "cannot read the schema version");
  if (*v > SCHEMA_VERSION)
    return cap_error_set(err, EPROTO,
                         "state %s has schema version %d, newer than this capsule knows (%d): it "
                         "was written by a newer capsule; use that one (nothing was changed)",
                         gw_state_where(st), *v, SCHEMA_VERSION);
  return 0;
}

static int migrate_step(struct gw_state *st, const struct migration *m, struct cap_error *err)
{
  int v = 0, r;
  if (gw_db_exec(st->db, "BEGIN IMMEDIATE") != GW_DB_OK)
    return gw_state_db_error(st, err, "cannot start a schema migration");
  /* read again under the lock: another capsule may have migrated first */
  if ((r = user_version(st, &v, err)) == 0 && v < m->version) {
    if (m->before)
      r = m->before(st, err);
    if (r == 0 && m->sql && gw_db_exec(st->db, m->sql) != GW_DB_OK)
      r = gw_state_db_error(st, err, m->what);
    if (r == 0 && m->after)
      r = m->after(st, err);
    if (r == 0 && gw_db_set_schema_version(st->db, m->version) < 0)
      r = gw_state_db_error(st, err, "cannot record the schema version");
  }
  if (r == 0 && gw_db_exec(st->db, "COMMIT") != GW_DB_OK)
    r = gw_state_db_error(st, err, "cannot commit a schema migration");
  if (r < 0)
    gw_db_exec(st->db, "ROLLBACK");
  return r;
}

static int migrate(struct gw_state *st, struct cap_error *err)
{
  int v = 0;
  int r = user_version(st, &v, err);
  for (size_t i = 0; r == 0 && i < ARRAY_SIZE(migrations); i++)
    if (migrations[i].version > v)
      r = migrate_step(st, &migrations[i], err);
  return r;
}

/* ---- the handle ---- */

int gw_state_db_error(struct gw_state *st, struct cap_error *err, const char *what)
{
  static const char *const hints[] = {
      [GW_DB_FAULT_OTHER] = "",
      [GW_DB_FAULT_FULL] = " (the disk is full)",
      [GW_DB_FAULT_READONLY] = " (is the state directory writable? else use --state DIR)",
      [GW_DB_FAULT_BUSY] = " (another capsule holds the state database; try again)",
      [GW_DB_FAULT_CONNECTION] = " (the state database is unreachable: is the server up?)",
  };
  return cap_error_set(err, EIO, "state %s: %s: %s%s", gw_state_where(st), what,
                       gw_db_errmsg(st->db), hints[gw_db_fault(st->db)]);
}

void gw_state_now(char out[32])
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out + n, 32 - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

void gw_sha256_hex(const void *data, size_t len, char out[65])
{
  unsigned char h[32];
  struct cap_sha256 s; /* the CPU's SHA extensions where it has them */
  cap_sha256_init(&s);
  cap_sha256_update(&s, data, len);
  cap_sha256_final(&s, h);
  sodium_bin2hex(out, 65, h, sizeof h);
}

/* The state key, checked and loaded; the derived keys on pages of their
 * own; from here on this process is not dumpable. */
static int state_keys(struct gw_state *st, struct cap_error *err)
{
  unsigned char key[GW_KEY_BYTES];
  int r = gw_statedir_load_key(st->dirfd, st->dir, key, err);
  if (r < 0)
    return r;
  cap_secret_hold();
  st->keys = cap_secret_alloc(sizeof *st->keys);
  crypto_kdf_derive_from_key(st->keys->cred, sizeof st->keys->cred, 1, "capsule_", key);
  crypto_kdf_derive_from_key(st->keys->audit, sizeof st->keys->audit, 2, "capsule_", key);
  cap_hmac_sha256_init(&st->keys->audit_mac, st->keys->audit, sizeof st->keys->audit);
  sodium_memzero(key, sizeof key);
  return 0;
}

/* A PostgreSQL state records its key's fingerprint (a key derived from
 * it, hashed): a gateway holding another key is refused before it seals
 * or chains anything under it. And its random id, which names this
 * host's high-water mark of it. */
static int meta_once(struct gw_state *st, const char *key, const char *value, char out[65],
                     struct cap_error *err)
{
  struct gw_stmt *s =
      gw_state_prep(st, "INSERT OR IGNORE INTO meta VALUES (?, ?)", key, value, NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  gw_stmt_finalize(s);
  s = gw_state_prep(st, "SELECT value FROM meta WHERE key = ?", key, NULL);
  if (rc == GW_DB_DONE)
    rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  if (rc == GW_DB_ROW)
    snprintf(out, 65, "%s", gw_stmt_text(s, 0));
  gw_stmt_finalize(s);
  return rc == GW_DB_ROW ? 0 : gw_state_db_error(st, err, "cannot read the state's identity");
}

static int check_identity(struct gw_state *st, struct cap_error *err)
{
  char fp[65], have[65], id[65], rnd[8], hex[17];
  gw_sha256_hex(st->keys->audit, sizeof st->keys->audit, fp);
  randombytes_buf(rnd, sizeof rnd);
  sodium_bin2hex(hex, sizeof hex, (unsigned char *)rnd, sizeof rnd);
  int r = meta_once(st, "key_fingerprint", fp, have, err);
  if (r == 0 && strcmp(have, fp) != 0)
    r = cap_error_set(err, EKEYREJECTED,
                      "state %s was made with another state key (its fingerprint %.16s..., this "
                      "key's %.16s...): refusing it; give this gateway the key the others use "
                      "(CAPSULE_STATE_KEY or CAPSULE_STATE_KEY_FILE)",
                      gw_state_where(st), have, fp);
  if (r == 0)
    r = meta_once(st, "state_id", hex, id, err);
  /* it names a file here: the 16 hex digits capsule wrote, nothing else */
  if (r == 0 && (strlen(id) != 16 || strspn(id, "0123456789abcdef") != 16))
    r = cap_error_set(err, EINVAL,
                      "state %s: its state_id (table meta) is not the 16 hex digits capsule "
                      "writes: the row was edited; refusing it",
                      gw_state_where(st));
  if (r == 0)
    snprintf(st->hwm_name, sizeof st->hwm_name, "audit-hwm-%.16s", id);
  return r;
}

static int state_db(struct gw_state *st, struct cap_error *err)
{
  int r;
  if (st->url) {
    if ((r = gw_db_open_pg(st->url, &st->db, err)) < 0)
      return r;
  } else {
    _cleanup_free_ char *path = cap_xasprintf("%s/state.db", st->dir);
    if (gw_db_open_sqlite(path, &st->db, err) < 0) {
      cap_error_clear(err);
      return gw_state_db_error(st, err, "cannot open");
    }
  }
  r = migrate(st, err);
  if (r == 0 && st->url)
    r = check_identity(st, err);
  if (r == 0 && st->url)
    r = gw_approvals_prepare(st, err);
  return r;
}

/* A process's threads recover in turn: a marker's and a spool file's
 * locks are the process's (fcntl), so two threads opening the state at
 * once (the warm Selu process's pooled connections after a restart)
 * could each take the same abandoned marker or spool file and record it
 * twice. In turn, the second finds it recorded and gone. A child forked
 * meanwhile gets the mutex unlocked. */
static struct cap_fork_mutex recover_mu = CAP_FORK_MUTEX_INIT;

/* (state.h) What cannot be stored stays for the next open. */
void gw_state_recover(struct gw_state *st)
{
  cap_fork_mutex_lock(&recover_mu);
  /* a capsule killed mid-call left its call in flight: its record now */
  size_t interrupted = 0;
  struct cap_error ignored = {0};
  gw_audit_recover_interrupted(st, &interrupted, &ignored);
  cap_error_clear(&ignored);
  /* a warm server's keeper that ended between calls left what its proxy
   * decided since its last call: stored now, with no call */
  size_t spooled = 0;
  gw_egress_spool_recover(st, &spooled, &ignored);
  cap_error_clear(&ignored);
  cap_fork_mutex_unlock(&recover_mu);
}

bool gw_state_shared(const struct gw_state *st) { return st->url != NULL; }

int gw_state_open(const char *dir, struct gw_state **ret, struct cap_error *err)
{
  if (sodium_init() < 0)
    return cap_error_set(err, EIO, "libsodium cannot initialise");
  struct gw_state *st = cap_xcalloc(1, sizeof *st);
  /* a database's URL: this host's own directory beside it */
  _cleanup_free_ char *local = gw_db_is_url(dir) ? gw_state_default_dir() : NULL;
  const char *url = local ? dir : gw_state_database();
  if (local)
    dir = local;
  st->url = url ? cap_xstrdup(url) : NULL;
  st->dir = cap_xstrdup(dir);
  snprintf(st->hwm_name, sizeof st->hwm_name, "audit-hwm");
  st->dirfd = gw_statedir_open(dir, err);
  st->dir_sb_ok = st->dirfd >= 0 && fstat(st->dirfd, &st->dir_sb) == 0;
  int r = st->dirfd < 0 ? st->dirfd : state_keys(st, err);
  if (r == 0)
    r = state_db(st, err);
  /* each gateway's own high-water mark, from the log as it finds it */
  if (r == 0 && st->url)
    r = gw_audit_init_mark(st, err);
  if (r < 0) {
    gw_state_close(st);
    return r;
  }
  gw_state_recover(st);
  gw_state_remember_dir(dir); /* masked in every later sandbox, whichever state it uses */
  *ret = st;
  return 0;
}

int gw_state_take_migrated_shared(struct gw_state *st, size_t *n, struct cap_error *err)
{
  *n = 0;
  struct gw_stmt *s =
      gw_state_prep(st, "DELETE FROM meta WHERE key = 'migrated_shared' RETURNING value", NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  if (rc == GW_DB_ROW) {
    *n = (size_t)gw_stmt_int64(s, 0);
    rc = gw_stmt_step(s);
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot read the state's notices");
}

void gw_state_close(struct gw_state *st)
{
  if (!st)
    return;
  if (st->dirfd >= 0)
    gw_hwm_sync(st); /* the group commit's last batch */
  gw_hwm_forget(st);
  gw_db_close(st->db);
  free(st->url);
  cap_secret_free(st->keys, sizeof *st->keys);
  gw_audit_seen_free(st);
  gw_access_cache_free(st);
  gw_audit_group_free(st);
  gw_state_cache_free(st);
  if (st->dirfd >= 0)
    close(st->dirfd);
  free(st->dir);
  free(st);
}

/* Prepares sql and binds the text arguments (NULL ends them). */
struct gw_stmt *gw_state_prep(struct gw_state *st, const char *sql, ...)
{
  struct gw_stmt *s = gw_db_prepare(st->db, sql);
  if (!s)
    return NULL;
  va_list ap;
  va_start(ap, sql);
  int i = 1;
  for (const char *a; (a = va_arg(ap, const char *)) != NULL; i++)
    gw_stmt_bind_text(s, i, a);
  va_end(ap);
  return s;
}

/* The database a URL in --state or CAPSULE_STATE names, for every later
 * gw_state_open in this process and its children (the directory given
 * to gw_state_open is then this host's own: keys, marks, markers). */
static char *state_database;

void gw_state_use_database(const char *url)
{
  free(state_database);
  state_database = url ? cap_xstrdup(url) : NULL;
}

const char *gw_state_database(void) { return state_database; }

const char *gw_state_where(const struct gw_state *st)
{
  static __thread char where[512];
  if (!st->url) {
    snprintf(where, sizeof where, "%s/state.db", st->dir);
    return where;
  }
  gw_db_url_redact(st->url, where, sizeof where);
  return where;
}

/* ---- policies ---- */

static const char *const policy_names[] = {"allow", "ask", "block"};

static int policy_from(const char *s)
{
  for (int i = 0; i < 3; i++)
    if (strcmp(s, policy_names[i]) == 0)
      return i;
  return CAP_POLICY_BLOCK;
}

int gw_policy_set(struct gw_state *st, const char *cap, const char *tool, const char *user,
                  enum cap_policy policy, struct cap_error *err)
{
  struct gw_stmt *s =
      gw_state_prep(st,
                    "INSERT INTO policies VALUES (?, ?, ?, ?) ON CONFLICT"
                    " (capability, tool, user) DO UPDATE SET decision = excluded.decision",
                    cap, tool, user ? user : "", policy_names[policy], NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot store the policy");
}

int gw_policy_rm(struct gw_state *st, const char *cap, const char *tool, const char *user,
                 bool *found, struct cap_error *err)
{
  struct gw_stmt *s = gw_state_prep(
      st, "DELETE FROM policies WHERE capability = ? AND tool = ? AND user = ? RETURNING 1", cap,
      tool, user ? user : "", NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  *found = rc == GW_DB_ROW;
  if (rc == GW_DB_ROW)
    rc = gw_stmt_step(s);
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot remove the policy");
}

int gw_policy_get(struct gw_state *st, const char *cap, const char *tool, const char *user,
                  enum cap_policy *policy, bool *found, struct cap_error *err)
{
  /* as last read while nothing changed since (state_cache.c) */
  struct cap_buf key = {0};
  gw_state_cache_key(&key, "policy", (const char *[]){cap, tool, user}, 3);
  char *const *kept;
  size_t n;
  if (gw_state_cache_get(st, key.data, &kept, &n)) {
    cap_buf_free(&key);
    if ((*found = n == 1))
      *policy = (enum cap_policy)policy_from(kept[0]);
    return 0;
  }
  struct gw_stmt *s = gw_state_prep(
      st, "SELECT decision FROM policies WHERE capability = ? AND tool = ? AND user = ?", cap, tool,
      user ? user : "", NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  *found = rc == GW_DB_ROW;
  const char *decision = *found ? (const char *)gw_stmt_text(s, 0) : NULL;
  if (*found)
    *policy = (enum cap_policy)policy_from(decision);
  if (rc == GW_DB_ROW || rc == GW_DB_DONE)
    gw_state_cache_put(st, key.data, &decision, *found ? 1 : 0);
  cap_buf_free(&key);
  gw_stmt_finalize(s);
  return rc == GW_DB_ROW || rc == GW_DB_DONE
             ? 0
             : gw_state_db_error(st, err, "cannot read the policies");
}

int gw_effective_policy(struct gw_state *st, const char *cap, const struct cap_tool *tool,
                        const char *user, enum cap_policy *policy, const char **source,
                        struct cap_error *err)
{
  bool found = false;
  int r = 0;
  if (user && *user) {
    r = gw_policy_get(st, cap, tool->name, user, policy, &found, err);
    if (r < 0 || found) {
      *source = "user";
      return r;
    }
  }
  r = gw_policy_get(st, cap, tool->name, "", policy, &found, err);
  if (r < 0 || found) {
    *source = "operator";
    return r;
  }
  *policy = tool->policy; /* the manifest's recommendation, or block */
  *source = cap_policy_source_name(tool->policy_source);
  return 0;
}

int gw_policy_list(struct gw_state *st, gw_policy_fn fn, void *arg, struct cap_error *err)
{
  struct gw_stmt *s = gw_state_prep(
      st, "SELECT capability, tool, user, decision FROM policies ORDER BY 1, 2, 3", NULL);
  int rc = GW_DB_ERROR;
  while (s && (rc = gw_stmt_step(s)) == GW_DB_ROW)
    fn(arg, (const char *)gw_stmt_text(s, 0), (const char *)gw_stmt_text(s, 1),
       (const char *)gw_stmt_text(s, 2),
       (enum cap_policy)policy_from((const char *)gw_stmt_text(s, 3)));
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot read the policies");
}

/* ---- credentials ---- */

static const char *scope_name(enum cap_secret_scope scope)
{
  return scope == CAP_SCOPE_USER ? "user" : "system";
}

/* The row's key: the capability ('' shared), name, scope and user. */
struct cred_row {
  const char *cap, *name, *scope, *user;
};

static struct cred_row cred_row(const char *cap, const char *name, enum cap_secret_scope scope,
                                const char *user)
{
  return (struct cred_row){cap ? cap : "", name, scope_name(scope),
                           scope == CAP_SCOPE_USER && user ? user : ""};
}

/* What a sealed value belongs to: name \0 scope \0 user for a shared row
 * (as before capabilities), capability \0 name \0 scope \0 user otherwise
 * (one field more, so the two never coincide). */
static size_t cred_ad(char *out, size_t size, const struct cred_row *k)
{
  int n = *k->cap
              ? snprintf(out, size, "%s%c%s%c%s%c%s", k->cap, 0, k->name, 0, k->scope, 0, k->user)
              : snprintf(out, size, "%s%c%s%c%s", k->name, 0, k->scope, 0, k->user);
  return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

int gw_cred_set(struct gw_state *st, const char *cap, const char *name, enum cap_secret_scope scope,
                const char *user, const char *value, size_t len, struct cap_error *err)
{
  struct cred_row k = cred_row(cap, name, scope, user);
  char ad[1024];
  size_t adlen = cred_ad(ad, sizeof ad, &k);
  if (!adlen)
    return cap_error_set(err, EINVAL, "capability, credential name or user is too long");
  unsigned char nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
  randombytes_buf(nonce, sizeof nonce);
  size_t clen = len + crypto_aead_xchacha20poly1305_ietf_ABYTES;
  unsigned char *sealed = cap_xmalloc(clen);
  unsigned long long out_len = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(sealed, &out_len, (const unsigned char *)value, len,
                                             (const unsigned char *)ad, adlen, NULL, nonce,
                                             st->keys->cred);
  char when[32];
  gw_state_now(when);
  struct gw_stmt *s =
      gw_state_prep(st,
                    "INSERT INTO credentials VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT"
                    " (capability, name, scope, user) DO UPDATE SET nonce = excluded.nonce,"
                    " sealed = excluded.sealed, updated = excluded.updated",
                    k.cap, k.name, k.scope, k.user, NULL);
  int rc = GW_DB_ERROR;
  if (s) {
    gw_stmt_bind_blob(s, 5, nonce, sizeof nonce);
    gw_stmt_bind_blob(s, 6, sealed, (int)out_len);
    gw_stmt_bind_text(s, 7, when);
    rc = gw_stmt_step(s);
  }
  gw_stmt_finalize(s);
  free(sealed);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot store the credential");
}

static int cred_unseal(struct gw_state *st, struct gw_stmt *s, const struct cred_row *k,
                       char **value, struct cap_error *err)
{
  const unsigned char *nonce = gw_stmt_blob(s, 0);
  int nlen = gw_stmt_bytes(s, 0);
  const unsigned char *sealed = gw_stmt_blob(s, 1);
  int slen = gw_stmt_bytes(s, 1);
  char ad[1024];
  size_t adlen = cred_ad(ad, sizeof ad, k);
  char *plain = cap_xmalloc((size_t)slen + 1);
  unsigned long long plen = 0;
  if (nlen != crypto_aead_xchacha20poly1305_ietf_NPUBBYTES ||
      slen < (int)crypto_aead_xchacha20poly1305_ietf_ABYTES ||
      crypto_aead_xchacha20poly1305_ietf_decrypt(
          (unsigned char *)plain, &plen, NULL, sealed, (unsigned long long)slen,
          (const unsigned char *)ad, adlen, nonce, st->keys->cred) != 0) {
    free(plain);
    return cap_error_set(err, EBADMSG,
                         "credential \"%s\" (%s%s, %s) cannot be unsealed: the state key is not "
                         "the one it was stored with, or the row was tampered with",
                         k->name, *k->cap ? "of " : "shared", k->cap, k->scope);
  }
  plain[plen] = '\0';
  *value = plain;
  return 0;
}

int gw_cred_get(struct gw_state *st, const char *cap, const char *name, enum cap_secret_scope scope,
                const char *user, char **value, bool *found, struct cap_error *err)
{
  struct cred_row k = cred_row(cap, name, scope, user);
  *found = false;
  *value = NULL;
  struct gw_stmt *s = gw_state_prep(st,
                                    "SELECT nonce, sealed FROM credentials WHERE capability = ?"
                                    " AND name = ? AND scope = ? AND user = ?",
                                    k.cap, k.name, k.scope, k.user, NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  int r = 0;
  if (rc == GW_DB_ROW)
    *found = (r = cred_unseal(st, s, &k, value, err)) == 0;
  else if (rc != GW_DB_DONE)
    r = gw_state_db_error(st, err, "cannot read the credentials");
  gw_stmt_finalize(s);
  return r;
}

int gw_cred_lookup(struct gw_state *st, const char *cap, const char *name, const char *user,
                   char **value, bool *found, struct cap_error *err)
{
  const struct {
    bool shared;
    enum cap_secret_scope scope;
  } order[] = {{false, CAP_SCOPE_USER},
               {false, CAP_SCOPE_SYSTEM},
               {true, CAP_SCOPE_USER},
               {true, CAP_SCOPE_SYSTEM}};
  *found = false;
  *value = NULL;
  for (size_t i = 0; i < ARRAY_SIZE(order) && !*found; i++) {
    if (order[i].scope == CAP_SCOPE_USER && (!user || !*user))
      continue;
    int r = gw_cred_get(st, order[i].shared ? NULL : cap, name, order[i].scope, user, value, found,
                        err);
    if (r < 0)
      return r;
  }
  return 0;
}

void gw_secret_free(char *value)
{
  if (!value)
    return;
  sodium_memzero(value, strlen(value));
  free(value);
}

int gw_cred_rm(struct gw_state *st, const char *cap, const char *name, enum cap_secret_scope scope,
               const char *user, bool *found, struct cap_error *err)
{
  struct cred_row k = cred_row(cap, name, scope, user);
  struct gw_stmt *s = gw_state_prep(st,
                                    "DELETE FROM credentials WHERE capability = ? AND name = ?"
                                    " AND scope = ? AND user = ?",
                                    k.cap, k.name, k.scope, k.user, NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  *found = rc == GW_DB_DONE && gw_db_changes(st->db) > 0;
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot remove the credential");
}

int gw_cred_list(struct gw_state *st, gw_cred_fn fn, void *arg, struct cap_error *err)
{
  struct gw_stmt *s = gw_state_prep(
      st, "SELECT capability, name, scope, user, updated FROM credentials ORDER BY 1, 2, 3, 4",
      NULL);
  int rc = GW_DB_ERROR;
  while (s && (rc = gw_stmt_step(s)) == GW_DB_ROW) {
    const char *cap = (const char *)gw_stmt_text(s, 0);
    fn(arg, *cap ? cap : NULL, (const char *)gw_stmt_text(s, 1),
       strcmp((const char *)gw_stmt_text(s, 2), "user") == 0 ? CAP_SCOPE_USER : CAP_SCOPE_SYSTEM,
       (const char *)gw_stmt_text(s, 3), (const char *)gw_stmt_text(s, 4));
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot read the credentials");
}

/* ---- for the modules that keep their own tables here ---- */

struct gw_db *gw_state_db(struct gw_state *st) { return st->db; }

int gw_state_listener(struct gw_state *st, struct gw_db **ret, struct cap_error *err)
{
  if (!st->url)
    return -ENOTSUP;
  return gw_db_open_pg(st->url, ret, err);
}
