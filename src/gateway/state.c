#include "gateway/state.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"

struct gw_state {
  sqlite3 *db;
  char *dir;
  unsigned char cred_key[crypto_aead_xchacha20poly1305_ietf_KEYBYTES];
  unsigned char audit_key[crypto_auth_hmacsha256_KEYBYTES];
};

static const char schema_sql[] =
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

static int db_error(struct gw_state *st, struct cap_error *err, const char *what)
{
  int code = sqlite3_errcode(st->db);
  const char *hint = "";
  if (code == SQLITE_FULL)
    hint = " (the disk is full)";
  else if (code == SQLITE_READONLY || code == SQLITE_CANTOPEN || code == SQLITE_PERM)
    hint = " (is the state directory writable? choose another with --state DIR)";
  else if (code == SQLITE_BUSY)
    hint = " (another capsule holds the state database; try again)";
  return cap_error_set(err, EIO, "state %s/state.db: %s: %s%s", st->dir, what,
                       sqlite3_errmsg(st->db), hint);
}

static void now_rfc3339(char out[32])
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
  unsigned char h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(h, data, len);
  sodium_bin2hex(out, 65, h, sizeof h);
}

char *gw_state_default_dir(void)
{
  const char *x = getenv("XDG_STATE_HOME");
  if (x && *x == '/')
    return cap_xasprintf("%s/capsule", x);
  const char *home = getenv("HOME");
  return cap_xasprintf("%s/.local/state/capsule", home && *home ? home : "/");
}

static int mkdir_parents(const char *dir, struct cap_error *err)
{
  _cleanup_free_ char *p = cap_xstrdup(dir);
  for (char *s = p + 1; *s; s++) {
    if (*s != '/')
      continue;
    *s = '\0';
    if (mkdir(p, 0700) < 0 && errno != EEXIST)
      return cap_error_errno(err, errno, "cannot create the state directory %s", p);
    *s = '/';
  }
  if (mkdir(p, 0700) < 0 && errno != EEXIST)
    return cap_error_errno(err, errno, "cannot create the state directory %s", p);
  return 0;
}

/* The state key: CAPSULE_STATE_KEY (64 hex digits), else STATE/key, made
 * with 0600 on first use. */
static int load_key(const char *dir, unsigned char key[32], struct cap_error *err)
{
  const char *env = getenv("CAPSULE_STATE_KEY");
  if (env && *env) {
    size_t n = 0;
    if (sodium_hex2bin(key, 32, env, strlen(env), NULL, &n, NULL) != 0 || n != 32)
      return cap_error_set(err, EINVAL, "CAPSULE_STATE_KEY must be 64 hex digits (32 bytes)");
    return 0;
  }
  _cleanup_free_ char *path = cap_xasprintf("%s/key", dir);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) {
    struct stat sb;
    ssize_t got = read(fd, key, 32);
    int ok = fstat(fd, &sb) == 0;
    close(fd);
    if (got != 32)
      return cap_error_set(err, EINVAL, "%s does not hold a 32-byte key", path);
    if (ok && (sb.st_mode & 077))
      return cap_error_set(err, EPERM, "%s is readable by others (mode %o); chmod 600 it", path,
                           (unsigned)(sb.st_mode & 0777));
    return 0;
  }
  if (errno != ENOENT)
    return cap_error_errno(err, errno, "cannot read %s", path);
  randombytes_buf(key, 32);
  _cleanup_free_ char *tmp = cap_xasprintf("%s/key.%d", dir, (int)getpid());
  fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return cap_error_errno(err, errno, "cannot create %s", path);
  bool ok = write(fd, key, 32) == 32 && fsync(fd) == 0;
  close(fd);
  /* link, not rename: when two processes race, the first key wins */
  if (!ok || (link(tmp, path) < 0 && errno != EEXIST)) {
    int e = errno;
    unlink(tmp);
    return cap_error_errno(err, e ? e : EIO, "cannot write %s", path);
  }
  unlink(tmp);
  return load_key(dir, key, err);
}

int gw_state_open(const char *dir, struct gw_state **ret, struct cap_error *err)
{
  if (sodium_init() < 0)
    return cap_error_set(err, EIO, "libsodium cannot initialise");
  int r = mkdir_parents(dir, err);
  if (r < 0)
    return r;
  unsigned char key[32];
  r = load_key(dir, key, err);
  if (r < 0)
    return r;
  gw_state_remember_dir(dir); /* masked in every later sandbox, whichever state it uses */
  struct gw_state *st = cap_xcalloc(1, sizeof *st);
  st->dir = cap_xstrdup(dir);
  crypto_kdf_derive_from_key(st->cred_key, sizeof st->cred_key, 1, "capsule_", key);
  crypto_kdf_derive_from_key(st->audit_key, sizeof st->audit_key, 2, "capsule_", key);
  sodium_memzero(key, sizeof key);
  _cleanup_free_ char *path = cap_xasprintf("%s/state.db", dir);
  if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      NULL) != SQLITE_OK) {
    r = db_error(st, err, "cannot open");
    gw_state_close(st);
    return r;
  }
  sqlite3_busy_timeout(st->db, 15000);
  char *msg = NULL;
  if (sqlite3_exec(st->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", NULL, NULL,
                   &msg) != SQLITE_OK ||
      sqlite3_exec(st->db, schema_sql, NULL, NULL, &msg) != SQLITE_OK) {
    sqlite3_free(msg);
    r = db_error(st, err, "cannot prepare its tables");
    gw_state_close(st);
    return r;
  }
  *ret = st;
  return 0;
}

void gw_state_close(struct gw_state *st)
{
  if (!st)
    return;
  sqlite3_close(st->db);
  sodium_memzero(st->cred_key, sizeof st->cred_key);
  sodium_memzero(st->audit_key, sizeof st->audit_key);
  free(st->dir);
  free(st);
}

/* Prepares sql and binds the text arguments (NULL ends them). */
static sqlite3_stmt *prep(struct gw_state *st, const char *sql, ...)
{
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK)
    return NULL;
  va_list ap;
  va_start(ap, sql);
  int i = 1;
  for (const char *a; (a = va_arg(ap, const char *)) != NULL; i++)
    sqlite3_bind_text(s, i, a, -1, SQLITE_TRANSIENT);
  va_end(ap);
  return s;
}

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
  sqlite3_stmt *s = prep(st, "INSERT OR REPLACE INTO policies VALUES (?, ?, ?, ?)", cap, tool,
                         user ? user : "", policy_names[policy], NULL);
  int rc = s ? sqlite3_step(s) : SQLITE_ERROR;
  sqlite3_finalize(s);
  return rc == SQLITE_DONE ? 0 : db_error(st, err, "cannot store the policy");
}

int gw_policy_get(struct gw_state *st, const char *cap, const char *tool, const char *user,
                  enum cap_policy *policy, bool *found, struct cap_error *err)
{
  sqlite3_stmt *s = prep(st, "SELECT decision FROM policies WHERE capability = ? AND tool = ? AND user = ?",
                         cap, tool, user ? user : "", NULL);
  int rc = s ? sqlite3_step(s) : SQLITE_ERROR;
  *found = rc == SQLITE_ROW;
  if (*found)
    *policy = (enum cap_policy)policy_from((const char *)sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : db_error(st, err, "cannot read the policies");
}

int gw_policy_list(struct gw_state *st, gw_policy_fn fn, void *arg, struct cap_error *err)
{
  sqlite3_stmt *s = prep(st, "SELECT capability, tool, user, decision FROM policies ORDER BY 1, 2, 3", NULL);
  int rc = SQLITE_ERROR;
  while (s && (rc = sqlite3_step(s)) == SQLITE_ROW)
    fn(arg, (const char *)sqlite3_column_text(s, 0), (const char *)sqlite3_column_text(s, 1),
       (const char *)sqlite3_column_text(s, 2),
       (enum cap_policy)policy_from((const char *)sqlite3_column_text(s, 3)));
  sqlite3_finalize(s);
  return rc == SQLITE_DONE ? 0 : db_error(st, err, "cannot read the policies");
}

/* ---- credentials ---- */

static const char *scope_name(enum cap_secret_scope scope)
{
  return scope == CAP_SCOPE_USER ? "user" : "system";
}

/* name \0 scope \0 user: what a sealed value belongs to */
static size_t cred_ad(char *out, size_t size, const char *name, enum cap_secret_scope scope,
                      const char *user)
{
  int n = snprintf(out, size, "%s%c%s%c%s", name, 0, scope_name(scope), 0, user);
  return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

int gw_cred_set(struct gw_state *st, const char *name, enum cap_secret_scope scope,
                const char *user, const char *value, size_t len, struct cap_error *err)
{
  const char *u = scope == CAP_SCOPE_USER && user ? user : "";
  char ad[768];
  size_t adlen = cred_ad(ad, sizeof ad, name, scope, u);
  if (!adlen)
    return cap_error_set(err, EINVAL, "credential name or user is too long");
  unsigned char nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
  randombytes_buf(nonce, sizeof nonce);
  size_t clen = len + crypto_aead_xchacha20poly1305_ietf_ABYTES;
  unsigned char *sealed = cap_xmalloc(clen);
  unsigned long long out_len = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(sealed, &out_len, (const unsigned char *)value, len,
                                             (const unsigned char *)ad, adlen, NULL, nonce,
                                             st->cred_key);
  char when[32];
  now_rfc3339(when);
  sqlite3_stmt *s = prep(st, "INSERT OR REPLACE INTO credentials VALUES (?, ?, ?, ?, ?, ?)", name,
                         scope_name(scope), u, NULL);
  int rc = SQLITE_ERROR;
  if (s) {
    sqlite3_bind_blob(s, 4, nonce, sizeof nonce, SQLITE_TRANSIENT);
    sqlite3_bind_blob(s, 5, sealed, (int)out_len, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 6, when, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(s);
  }
  sqlite3_finalize(s);
  free(sealed);
  return rc == SQLITE_DONE ? 0 : db_error(st, err, "cannot store the credential");
}

int gw_cred_get(struct gw_state *st, const char *name, enum cap_secret_scope scope,
                const char *user, char **value, bool *found, struct cap_error *err)
{
  const char *u = scope == CAP_SCOPE_USER && user ? user : "";
  *found = false;
  *value = NULL;
  sqlite3_stmt *s = prep(st, "SELECT nonce, sealed FROM credentials WHERE name = ? AND scope = ? AND user = ?",
                         name, scope_name(scope), u, NULL);
  int rc = s ? sqlite3_step(s) : SQLITE_ERROR;
  int r = 0;
  if (rc == SQLITE_ROW) {
    const unsigned char *nonce = sqlite3_column_blob(s, 0);
    int nlen = sqlite3_column_bytes(s, 0);
    const unsigned char *sealed = sqlite3_column_blob(s, 1);
    int slen = sqlite3_column_bytes(s, 1);
    char ad[768];
    size_t adlen = cred_ad(ad, sizeof ad, name, scope, u);
    char *plain = cap_xmalloc((size_t)slen + 1);
    unsigned long long plen = 0;
    if (nlen != crypto_aead_xchacha20poly1305_ietf_NPUBBYTES ||
        slen < (int)crypto_aead_xchacha20poly1305_ietf_ABYTES ||
        crypto_aead_xchacha20poly1305_ietf_decrypt((unsigned char *)plain, &plen, NULL, sealed,
                                                   (unsigned long long)slen,
                                                   (const unsigned char *)ad, adlen, nonce,
                                                   st->cred_key) != 0) {
      free(plain);
      r = cap_error_set(err, EBADMSG,
                        "credential \"%s\" (%s) cannot be unsealed: the state key is not the one "
                        "it was stored with, or the row was tampered with",
                        name, scope_name(scope));
    } else {
      plain[plen] = '\0';
      *value = plain;
      *found = true;
    }
  } else if (rc != SQLITE_DONE) {
    r = db_error(st, err, "cannot read the credentials");
  }
  sqlite3_finalize(s);
  return r;
}

void gw_secret_free(char *value)
{
  if (!value)
    return;
  sodium_memzero(value, strlen(value));
  free(value);
}

int gw_cred_rm(struct gw_state *st, const char *name, enum cap_secret_scope scope,
               const char *user, bool *found, struct cap_error *err)
{
  sqlite3_stmt *s = prep(st, "DELETE FROM credentials WHERE name = ? AND scope = ? AND user = ?", name,
                         scope_name(scope), scope == CAP_SCOPE_USER && user ? user : "", NULL);
  int rc = s ? sqlite3_step(s) : SQLITE_ERROR;
  *found = rc == SQLITE_DONE && sqlite3_changes(st->db) > 0;
  sqlite3_finalize(s);
  return rc == SQLITE_DONE ? 0 : db_error(st, err, "cannot remove the credential");
}

int gw_cred_list(struct gw_state *st, gw_cred_fn fn, void *arg, struct cap_error *err)
{
  sqlite3_stmt *s = prep(st, "SELECT name, scope, user, updated FROM credentials ORDER BY 1, 2, 3", NULL);
  int rc = SQLITE_ERROR;
  while (s && (rc = sqlite3_step(s)) == SQLITE_ROW)
    fn(arg, (const char *)sqlite3_column_text(s, 0),
       strcmp((const char *)sqlite3_column_text(s, 1), "user") == 0 ? CAP_SCOPE_USER : CAP_SCOPE_SYSTEM,
       (const char *)sqlite3_column_text(s, 2), (const char *)sqlite3_column_text(s, 3));
  sqlite3_finalize(s);
  return rc == SQLITE_DONE ? 0 : db_error(st, err, "cannot read the credentials");
}

/* ---- approvals ---- */

int gw_approval_take(struct gw_state *st, const char *cap, const char *tool, const char *user,
                     const char *args_hash, enum gw_approval *status, int64_t *id,
                     struct cap_error *err)
{
  *status = GW_APPROVAL_NONE;
  *id = 0;
  if (sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
    return db_error(st, err, "cannot read the approvals");
  sqlite3_stmt *s = prep(st,
                         "SELECT id, status FROM approvals WHERE capability = ? AND tool = ? AND user = ?"
                         " AND args_hash = ? AND status != 'used' ORDER BY id DESC LIMIT 1",
                         cap, tool, user, args_hash, NULL);
  int rc = s ? sqlite3_step(s) : SQLITE_ERROR;
  if (rc == SQLITE_ROW) {
    *id = sqlite3_column_int64(s, 0);
    const char *v = (const char *)sqlite3_column_text(s, 1);
    *status = strcmp(v, "approved") == 0  ? GW_APPROVAL_APPROVED
              : strcmp(v, "denied") == 0 ? GW_APPROVAL_DENIED
                                          : GW_APPROVAL_PENDING;
  }
  sqlite3_finalize(s);
  if (rc == SQLITE_ROW && *status != GW_APPROVAL_PENDING) { /* one call each */
    sqlite3_stmt *u = prep(st, "UPDATE approvals SET status = 'used' WHERE id = ?", NULL);
    if (u) {
      sqlite3_bind_int64(u, 1, *id);
      rc = sqlite3_step(u) == SQLITE_DONE ? SQLITE_ROW : SQLITE_ERROR;
    } else {
      rc = SQLITE_ERROR;
    }
    sqlite3_finalize(u);
  }
  if ((rc != SQLITE_ROW && rc != SQLITE_DONE) ||
      sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
    int r = db_error(st, err, "cannot update the approvals");
    sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    return r;
  }
  return 0;
}

int gw_approval_create(struct gw_state *st, const char *cap, const char *tool, const char *user,
                       const char *args_hash, const char *args, int64_t *id,
                       struct cap_error *err)
{
  char when[32];
  now_rfc3339(when);
  sqlite3_stmt *s = prep(st,
                         "INSERT INTO approvals (capability, tool, user, args_hash, args, created, status)"
                         " VALUES (?, ?, ?, ?, ?, ?, 'pending')",
                         cap, tool, user, args_hash, args, when, NULL);
  int rc = s ? sqlite3_step(s) : SQLITE_ERROR;
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE)
    return db_error(st, err, "cannot record the approval request");
  *id = sqlite3_last_insert_rowid(st->db);
  return 0;
}

int gw_approval_resolve(struct gw_state *st, int64_t id, bool approve, bool *found,
                        struct cap_error *err)
{
  sqlite3_stmt *s = prep(st, "UPDATE approvals SET status = ? WHERE id = ? AND status = 'pending'",
                         approve ? "approved" : "denied", NULL);
  int rc = SQLITE_ERROR;
  if (s) {
    sqlite3_bind_int64(s, 2, id);
    rc = sqlite3_step(s);
  }
  *found = rc == SQLITE_DONE && sqlite3_changes(st->db) > 0;
  sqlite3_finalize(s);
  return rc == SQLITE_DONE ? 0 : db_error(st, err, "cannot update the approval");
}

/* ---- audit ---- */

/* HMAC-SHA-256 over prev and every field, each length-prefixed. */
static void audit_mac(const struct gw_state *st, const struct gw_audit_record *r, char out[65])
{
  struct cap_buf b = {0};
  const char *fields[] = {r->time, r->user, r->capability, r->tool, r->args_hash, r->decision,
                          r->outcome, r->result_hash, r->prev};
  cap_buf_printf(&b, "capsule-audit-v1 %lld %lld", (long long)r->seq, (long long)r->duration_ms);
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    cap_buf_printf(&b, " %zu:%s", strlen(fields[i]), fields[i]);
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256(mac, (const unsigned char *)b.data, b.len, st->audit_key);
  sodium_bin2hex(out, 65, mac, sizeof mac);
  cap_buf_free(&b);
}

/* "seq hash mac": the chain's head, MACed so it cannot be rolled back to an
 * earlier record without the key */
static void head_text(const struct gw_state *st, int64_t seq, const char *hash, char *out, size_t size)
{
  char body[128];
  snprintf(body, sizeof body, "capsule-audit-head-v1 %lld %s", (long long)seq, hash);
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256(mac, (const unsigned char *)body, strlen(body), st->audit_key);
  char hex[65];
  sodium_bin2hex(hex, sizeof hex, mac, sizeof mac);
  snprintf(out, size, "%lld %s %s", (long long)seq, hash, hex);
}

int gw_audit_append(struct gw_state *st, struct gw_audit_record *r, struct cap_error *err)
{
  if (sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
    return db_error(st, err, "cannot append to the audit log");
  sqlite3_stmt *s = prep(st, "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1", NULL);
  int rc = s ? sqlite3_step(s) : SQLITE_ERROR;
  r->seq = 1;
  snprintf(r->prev, sizeof r->prev, "%064d", 0);
  if (rc == SQLITE_ROW) {
    r->seq = sqlite3_column_int64(s, 0) + 1;
    snprintf(r->prev, sizeof r->prev, "%s", (const char *)sqlite3_column_text(s, 1));
  }
  sqlite3_finalize(s);
  now_rfc3339(r->time);
  audit_mac(st, r, r->hash);
  char seq[24], dur[24], head[256];
  snprintf(seq, sizeof seq, "%lld", (long long)r->seq);
  snprintf(dur, sizeof dur, "%lld", (long long)r->duration_ms);
  head_text(st, r->seq, r->hash, head, sizeof head);
  sqlite3_stmt *ins = NULL, *h = NULL;
  if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
    ins = prep(st, "INSERT INTO audit VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", seq, r->time,
               r->user, r->capability, r->tool, r->args_hash, r->decision, dur, r->outcome,
               r->result_hash, r->prev, r->hash, NULL);
    h = prep(st, "INSERT OR REPLACE INTO meta VALUES ('audit_head', ?)", head, NULL);
    rc = ins && h && sqlite3_step(ins) == SQLITE_DONE && sqlite3_step(h) == SQLITE_DONE
             ? SQLITE_DONE
             : SQLITE_ERROR;
  }
  sqlite3_finalize(ins);
  sqlite3_finalize(h);
  if (rc != SQLITE_DONE || sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
    int e = db_error(st, err, "cannot append to the audit log");
    sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    return e;
  }
  return 0;
}

static void row_record(sqlite3_stmt *s, struct gw_audit_record *r)
{
  r->seq = sqlite3_column_int64(s, 0);
  snprintf(r->time, sizeof r->time, "%s", (const char *)sqlite3_column_text(s, 1));
  r->user = (const char *)sqlite3_column_text(s, 2);
  r->capability = (const char *)sqlite3_column_text(s, 3);
  r->tool = (const char *)sqlite3_column_text(s, 4);
  snprintf(r->args_hash, sizeof r->args_hash, "%s", (const char *)sqlite3_column_text(s, 5));
  r->decision = (const char *)sqlite3_column_text(s, 6);
  r->duration_ms = sqlite3_column_int64(s, 7);
  r->outcome = (const char *)sqlite3_column_text(s, 8);
  snprintf(r->result_hash, sizeof r->result_hash, "%s", (const char *)sqlite3_column_text(s, 9));
  snprintf(r->prev, sizeof r->prev, "%s", (const char *)sqlite3_column_text(s, 10));
  snprintf(r->hash, sizeof r->hash, "%s", (const char *)sqlite3_column_text(s, 11));
}

int gw_audit_each(struct gw_state *st, int64_t after, gw_audit_fn fn, void *arg,
                  struct cap_error *err)
{
  sqlite3_stmt *s = prep(st, "SELECT * FROM audit WHERE seq > ? ORDER BY seq", NULL);
  int rc = SQLITE_ERROR;
  if (s) {
    sqlite3_bind_int64(s, 1, after);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      struct gw_audit_record r;
      row_record(s, &r);
      fn(arg, &r);
    }
  }
  sqlite3_finalize(s);
  return rc == SQLITE_DONE ? 0 : db_error(st, err, "cannot read the audit log");
}

int gw_audit_verify(struct gw_state *st, size_t *n, struct cap_error *err)
{
  *n = 0;
  /* one snapshot: appends by other processes do not tear the walk */
  if (sqlite3_exec(st->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
    return db_error(st, err, "cannot read the audit log");
  sqlite3_stmt *s = prep(st, "SELECT * FROM audit ORDER BY seq", NULL);
  int rc = SQLITE_ERROR, r = 0;
  char prev[65];
  snprintf(prev, sizeof prev, "%064d", 0);
  int64_t expect = 1;
  while (s && r == 0 && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    struct gw_audit_record rec;
    row_record(s, &rec);
    char mac[65];
    audit_mac(st, &rec, mac);
    if (rec.seq != expect)
      r = cap_error_set(err, EBADMSG, "audit record %lld follows %lld: records were dropped or reordered",
                        (long long)rec.seq, (long long)(expect - 1));
    else if (strcmp(rec.prev, prev) != 0)
      r = cap_error_set(err, EBADMSG,
                        "audit record %lld does not follow the record before it: the chain was "
                        "reordered or a record was replaced",
                        (long long)rec.seq);
    else if (sodium_memcmp(mac, rec.hash, 64) != 0)
      r = cap_error_set(err, EBADMSG, "audit record %lld was edited: its hash does not match its contents",
                        (long long)rec.seq);
    snprintf(prev, sizeof prev, "%s", rec.hash);
    expect++;
    (*n)++;
  }
  sqlite3_finalize(s);
  if (r == 0 && rc != SQLITE_DONE)
    r = db_error(st, err, "cannot read the audit log");
  if (r == 0) {
    sqlite3_stmt *h = prep(st, "SELECT value FROM meta WHERE key = 'audit_head'", NULL);
    int hr = h ? sqlite3_step(h) : SQLITE_ERROR;
    char want[256];
    head_text(st, expect - 1, prev, want, sizeof want);
    if (hr == SQLITE_ROW) {
      const char *have = (const char *)sqlite3_column_text(h, 0);
      if (strcmp(have, want) != 0)
        r = cap_error_set(err, EBADMSG,
                          "the audit log ends at record %lld but its recorded head says otherwise: "
                          "records were dropped from the end, or the head was forged",
                          (long long)(expect - 1));
    } else if (hr == SQLITE_DONE && expect > 1) {
      r = cap_error_set(err, EBADMSG, "the audit log's head record is missing");
    } else if (hr != SQLITE_DONE) {
      r = db_error(st, err, "cannot read the audit log's head");
    }
    sqlite3_finalize(h);
  }
  sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
  return r;
}
