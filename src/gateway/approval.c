#include "gateway/approval.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "core/text.h"
#include "gateway/state_int.h"

static const char table_sql[] =
    "CREATE TABLE IF NOT EXISTS approval_requests (id TEXT PRIMARY KEY,"
    " capability TEXT NOT NULL, tool TEXT NOT NULL, user TEXT NOT NULL, asked_by TEXT NOT NULL,"
    " args TEXT NOT NULL, args_hash TEXT NOT NULL, binding TEXT NOT NULL,"
    " created_ms INTEGER NOT NULL, ttl_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL,"
    " status TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS approval_requests_call ON approval_requests"
    " (capability, tool, user, args_hash);";

static const char *const status_names[] = {"none", "pending", "approved", "denied",
                                           "used", "expired", "void"};

const char *gw_approval_status_name(enum gw_approval_status s)
{
  return s <= GW_APPROVAL_VOID ? status_names[s] : "none";
}

static enum gw_approval_status status_from(const char *s)
{
  for (size_t i = 0; s && i < sizeof status_names / sizeof status_names[0]; i++)
    if (strcmp(s, status_names[i]) == 0)
      return (enum gw_approval_status)i;
  return GW_APPROVAL_NONE;
}

static int db_fail(struct gw_db *db, struct cap_error *err, const char *what)
{
  return cap_error_set(err, EIO, "state database: %s: %s", what, gw_db_errmsg(db));
}

/* The table, made on first use (older state directories lack it). */
static struct gw_db *approvals_db(struct gw_state *st, struct cap_error *err)
{
  struct gw_db *db = gw_state_db(st);
  /* PostgreSQL: made once at open, under the writers' lock (two
   * gateways creating it at once would collide) */
  if (gw_db_kind(db) == GW_DB_SQLITE && gw_db_exec(db, table_sql) != GW_DB_OK) {
    db_fail(db, err, "cannot prepare the approvals table");
    return NULL;
  }
  return db;
}

int gw_approvals_prepare(struct gw_state *st, struct cap_error *err)
{
  struct gw_db *db = gw_state_db(st);
  if (gw_db_exec(db, "BEGIN IMMEDIATE") != GW_DB_OK)
    return db_fail(db, err, "cannot prepare the approvals table");
  if (gw_db_exec(db, table_sql) != GW_DB_OK || gw_db_exec(db, "COMMIT") != GW_DB_OK) {
    int r = db_fail(db, err, "cannot prepare the approvals table");
    gw_db_exec(db, "ROLLBACK");
    return r;
  }
  return 0;
}

/* Prepares sql and binds the text arguments (NULL ends them). */
static struct gw_stmt *prep(struct gw_db *db, const char *sql, int n, const char *const *texts)
{
  struct gw_stmt *s = gw_db_prepare(db, sql);
  if (!s)
    return NULL;
  for (int i = 0; i < n; i++)
    gw_stmt_bind_text(s, i + 1, texts[i]);
  return s;
}

static void gw_stmt_finalizep(struct gw_stmt **s) { gw_stmt_finalize(*s); }
#define _cleanup_stmt_ _cleanup_(gw_stmt_finalizep)

static const char columns[] = "id, capability, tool, user, asked_by, args, args_hash, binding,"
                              " created_ms, ttl_ms, expires_ms, status";

static char *column_dup(struct gw_stmt *s, int i)
{
  const char *v = (const char *)gw_stmt_text(s, i);
  return cap_xstrdup(v ? v : "");
}

static void row_approval(struct gw_stmt *s, struct gw_approval *a)
{
  const char *id = (const char *)gw_stmt_text(s, 0);
  snprintf(a->id, sizeof a->id, "%s", id ? id : "");
  a->capability = column_dup(s, 1);
  a->tool = column_dup(s, 2);
  a->user = column_dup(s, 3);
  a->asked_by = column_dup(s, 4);
  a->args = column_dup(s, 5);
  a->args_hash = column_dup(s, 6);
  a->binding = column_dup(s, 7);
  a->created_ms = gw_stmt_int64(s, 8);
  a->ttl_ms = gw_stmt_int64(s, 9);
  a->expires_ms = gw_stmt_int64(s, 10);
  a->status = status_from((const char *)gw_stmt_text(s, 11));
}

void gw_approval_clear(struct gw_approval *a)
{
  free(a->capability);
  free(a->tool);
  free(a->user);
  free(a->asked_by);
  free(a->args);
  free(a->args_hash);
  free(a->binding);
  *a = (struct gw_approval){0};
}

bool gw_approval_id_valid(const char *id)
{
  size_t n = 0;
  for (; id[n]; n++)
    if (!((id[n] >= '0' && id[n] <= '9') || (id[n] >= 'a' && id[n] <= 'f')))
      return false;
  return n == 8;
}

static int set_status(struct gw_db *db, const char *id, enum gw_approval_status status,
                      int64_t expires_ms)
{
  const char *texts[] = {gw_approval_status_name(status), id};
  _cleanup_stmt_ struct gw_stmt *s =
      prep(db,
           "UPDATE approval_requests SET status = ?1, expires_ms = coalesce(?3, expires_ms)"
           " WHERE id = ?2",
           2, texts);
  if (!s)
    return GW_DB_ERROR;
  if (expires_ms)
    gw_stmt_bind_int64(s, 3, expires_ms);
  return gw_stmt_step(s) == GW_DB_DONE ? GW_DB_OK : GW_DB_ERROR;
}

/* Inside BEGIN IMMEDIATE ... COMMIT, rolled back when fn fails. */
static int in_transaction(struct gw_db *db, int (*fn)(struct gw_db *, void *), void *arg,
                          struct cap_error *err)
{
  if (gw_db_exec(db, "BEGIN IMMEDIATE") != GW_DB_OK)
    return db_fail(db, err, "cannot read the approvals");
  if (fn(db, arg) != GW_DB_OK || gw_db_exec(db, "COMMIT") != GW_DB_OK) {
    int r = db_fail(db, err, "cannot update the approvals");
    gw_db_exec(db, "ROLLBACK");
    return r;
  }
  return 0;
}

struct take {
  const struct gw_approval_call *call;
  enum gw_approval_status status, lapsed;
  char *id, *lapsed_id;
};

static int take_in(struct gw_db *db, void *arg)
{
  struct take *t = arg;
  const struct gw_approval_call *c = t->call;
  const char *texts[] = {c->capability, c->tool, c->user, c->args_hash};
  _cleanup_stmt_ struct gw_stmt *s =
      prep(db,
           "SELECT id, status, expires_ms, binding FROM approval_requests WHERE capability = ?"
           " AND tool = ? AND user = ? AND args_hash = ? AND status IN ('pending', 'approved',"
           " 'denied') ORDER BY created_ms DESC, rowid DESC LIMIT 1",
           4, texts);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  if (rc == GW_DB_DONE)
    return GW_DB_OK;
  if (rc != GW_DB_ROW)
    return GW_DB_ERROR;
  snprintf(t->id, 9, "%s", (const char *)gw_stmt_text(s, 0));
  enum gw_approval_status status = status_from((const char *)gw_stmt_text(s, 1));
  int64_t expires = gw_stmt_int64(s, 2);
  const char *binding = (const char *)gw_stmt_text(s, 3);
  bool expired = expires <= (int64_t)cap_now_ms(CLOCK_REALTIME);
  if (expired || strcmp(binding ? binding : "", c->binding) != 0) {
    t->lapsed = expired ? GW_APPROVAL_EXPIRED : GW_APPROVAL_VOID;
    snprintf(t->lapsed_id, 9, "%s", t->id);
    t->id[0] = '\0';
    return set_status(db, t->lapsed_id, t->lapsed, 0);
  }
  t->status = status;
  if (status == GW_APPROVAL_PENDING)
    return GW_DB_OK;
  return set_status(db, t->id, GW_APPROVAL_USED, 0); /* one call each */
}

int gw_approval_take(struct gw_state *st, const struct gw_approval_call *call,
                     enum gw_approval_status *status, char id[9], enum gw_approval_status *lapsed,
                     char lapsed_id[9], struct cap_error *err)
{
  id[0] = lapsed_id[0] = '\0';
  struct take t = {.call = call, .id = id, .lapsed_id = lapsed_id};
  struct gw_db *db = approvals_db(st, err);
  int r = db ? in_transaction(db, take_in, &t, err) : -EIO;
  *status = r == 0 ? t.status : GW_APPROVAL_NONE;
  *lapsed = r == 0 ? t.lapsed : GW_APPROVAL_NONE;
  return r;
}

/* Who is asking, as the operator will see it. */
static char *asker(void)
{
  uid_t uid = getuid();
  struct passwd *pw = getpwuid(uid);
  return cap_xasprintf("uid %u (%s)", (unsigned)uid, pw && pw->pw_name ? pw->pw_name : "?");
}

int gw_approval_create(struct gw_state *st, const struct gw_approval_call *call, char id[9],
                       struct cap_error *err)
{
  struct gw_db *db = approvals_db(st, err);
  if (!db)
    return -EIO;
  _cleanup_free_ char *who = asker();
  int64_t ttl = call->ttl_ms > 0 ? call->ttl_ms : GW_APPROVAL_TTL_MS_DEFAULT,
          now = (int64_t)cap_now_ms(CLOCK_REALTIME);
  for (int attempt = 0; attempt < 16; attempt++) {
    unsigned char b[4];
    if (getrandom(b, sizeof b, 0) != sizeof b)
      return cap_error_errno(err, errno, "cannot draw an approval id");
    snprintf(id, 9, "%02x%02x%02x%02x", b[0], b[1], b[2], b[3]);
    const char *texts[] = {id,  call->capability, call->tool,      call->user,
                           who, call->args,       call->args_hash, call->binding};
    _cleanup_stmt_ struct gw_stmt *s =
        prep(db,
             "INSERT INTO approval_requests (id, capability, tool, user, asked_by, args,"
             " args_hash, binding, created_ms, ttl_ms, expires_ms, status)"
             " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending')",
             8, texts);
    if (!s)
      break;
    gw_stmt_bind_int64(s, 9, now);
    gw_stmt_bind_int64(s, 10, ttl);
    gw_stmt_bind_int64(s, 11, now + ttl);
    int rc = gw_stmt_step(s);
    if (rc == GW_DB_DONE) { /* a dashboard following the approvals (LISTEN) sees it now */
      gw_db_notify(db, GW_APPROVAL_CHANNEL, id);
      return 0;
    }
    if (rc != GW_DB_CONSTRAINT)
      break; /* else the id is taken: draw another */
  }
  return db_fail(db, err, "cannot record the approval request");
}

struct resolve {
  const char *id;
  bool approve;
  enum gw_approval_status was;
  struct gw_approval *out;
};

static int resolve_in(struct gw_db *db, void *arg)
{
  struct resolve *r = arg;
  _cleanup_free_ char *sql =
      cap_xasprintf("SELECT %s FROM approval_requests WHERE id = ?", columns);
  _cleanup_stmt_ struct gw_stmt *s = prep(db, sql, 1, &r->id);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  if (rc == GW_DB_DONE)
    return GW_DB_OK;
  if (rc != GW_DB_ROW)
    return GW_DB_ERROR;
  row_approval(s, r->out);
  r->was = r->out->status;
  int64_t now = (int64_t)cap_now_ms(CLOCK_REALTIME);
  if (r->out->status != GW_APPROVAL_PENDING)
    return GW_DB_OK;
  if (r->out->expires_ms <= now) {
    r->was = GW_APPROVAL_EXPIRED; /* it lapsed before this decision */
    r->out->status = GW_APPROVAL_EXPIRED;
    return set_status(db, r->id, GW_APPROVAL_EXPIRED, 0);
  }
  /* an approved call must run within its time to live, from now */
  r->out->status = r->approve ? GW_APPROVAL_APPROVED : GW_APPROVAL_DENIED;
  r->out->expires_ms = now + r->out->ttl_ms;
  return set_status(db, r->id, r->out->status, r->out->expires_ms);
}

int gw_approval_resolve(struct gw_state *st, const char *id, bool approve,
                        enum gw_approval_status *was, struct gw_approval *out,
                        struct cap_error *err)
{
  *out = (struct gw_approval){0};
  struct resolve r = {.id = id, .approve = approve, .out = out};
  struct gw_db *db = approvals_db(st, err);
  int rc = db ? in_transaction(db, resolve_in, &r, err) : -EIO;
  *was = rc == 0 ? r.was : GW_APPROVAL_NONE;
  if (*was == GW_APPROVAL_NONE)
    gw_approval_clear(out);
  /* calls waiting on other gateways (gw_approval_wait) wake now; one
   * that misses it finds the decision at its next look */
  if (rc == 0 && *was == GW_APPROVAL_PENDING)
    gw_db_notify(db, GW_APPROVAL_CHANNEL, id);
  return rc;
}

/* The status of approval id now (GW_APPROVAL_NONE: no such one). */
static int status_of(struct gw_db *db, const char *id, enum gw_approval_status *status,
                     struct cap_error *err)
{
  _cleanup_stmt_ struct gw_stmt *s =
      prep(db, "SELECT status, expires_ms FROM approval_requests WHERE id = ?", 1, &id);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  *status = GW_APPROVAL_NONE;
  if (rc == GW_DB_ROW) {
    *status = status_from(gw_stmt_text(s, 0));
    if (*status == GW_APPROVAL_PENDING &&
        gw_stmt_int64(s, 1) <= (int64_t)cap_now_ms(CLOCK_REALTIME))
      *status = GW_APPROVAL_EXPIRED;
  }
  return rc == GW_DB_ROW || rc == GW_DB_DONE ? 0 : db_fail(db, err, "cannot read the approvals");
}

#define WAIT_SLICE_MS 1000 /* a missed notification costs at most this */

int gw_approval_wait(struct gw_state *st, const char *id, int64_t timeout_ms,
                     enum gw_approval_status *status, struct cap_error *err)
{
  struct gw_db *db = approvals_db(st, err);
  if (!db)
    return -EIO;
  bool notified = gw_db_kind(db) == GW_DB_POSTGRES;
  /* listening before the first look: a decision between the two is not lost */
  if (notified && gw_db_wait_notify(db, GW_APPROVAL_CHANNEL, 0) < 0)
    notified = false;
  uint64_t end = cap_now_ms(CLOCK_MONOTONIC) + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
  for (;;) {
    int r = status_of(db, id, status, err);
    if (r < 0 || *status != GW_APPROVAL_PENDING)
      return r;
    uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
    if (now >= end)
      return 0;
    int slice = (int)(end - now < WAIT_SLICE_MS ? end - now : WAIT_SLICE_MS);
    if (!notified || gw_db_wait_notify(db, GW_APPROVAL_CHANNEL, slice) < 0) {
      notified = false; /* polling from here on */
      struct timespec ts = {.tv_sec = 0, .tv_nsec = (slice < 200 ? slice : 200) * 1000000L};
      nanosleep(&ts, NULL);
    }
  }
}

int gw_approval_list_pending(struct gw_state *st, gw_approval_fn fn, void *arg,
                             struct cap_error *err)
{
  struct gw_db *db = approvals_db(st, err);
  if (!db)
    return -EIO;
  _cleanup_free_ char *sql =
      cap_xasprintf("SELECT %s FROM approval_requests WHERE status = 'pending' AND expires_ms > ?"
                    " ORDER BY created_ms, rowid",
                    columns);
  _cleanup_stmt_ struct gw_stmt *s = prep(db, sql, 0, NULL);
  if (!s)
    return db_fail(db, err, "cannot read the approvals");
  gw_stmt_bind_int64(s, 1, (int64_t)cap_now_ms(CLOCK_REALTIME));
  int rc;
  while ((rc = gw_stmt_step(s)) == GW_DB_ROW) {
    struct gw_approval a = {0};
    row_approval(s, &a);
    fn(arg, &a);
    gw_approval_clear(&a);
  }
  return rc == GW_DB_DONE ? 0 : db_fail(db, err, "cannot read the approvals");
}

int gw_approval_void_for(struct gw_state *st, const char *cap, const char *tool,
                         struct cap_error *err)
{
  struct gw_db *db = approvals_db(st, err);
  if (!db)
    return -EIO;
  const char *texts[] = {cap, tool};
  _cleanup_stmt_ struct gw_stmt *s =
      prep(db,
           "UPDATE approval_requests SET status = 'void' WHERE capability = ? AND tool = ?"
           " AND status IN ('pending', 'approved')",
           2, texts);
  if (!s || gw_stmt_step(s) != GW_DB_DONE)
    return db_fail(db, err, "cannot update the approvals");
  return 0;
}

/* ---- who may decide ---- */

/* The initial namespaces' inode numbers (PROC_USER_INIT_INO,
 * PROC_UTS_INIT_INO in the kernel's proc_ns.h). */
#define INIT_USER_NS_INO 0xEFFFFFFDu
#define INIT_UTS_NS_INO 0xEFFFFFFEu

/* True when /proc/self/ns/NAME is not the initial namespace (or cannot be
 * read, which a sandbox can arrange and a host's shell does not). */
static bool namespace_is_not_initial(const char *name, unsigned long initial)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/self/ns/%s", name);
  struct stat sb;
  return stat(path, &sb) != 0 || sb.st_ino != initial;
}

int gw_require_operator(const char *what, struct cap_error *err)
{
  const char *marker = getenv("CAPSULE_SANDBOX");
  if (marker && *marker)
    return cap_error_set(err, EPERM,
                         "%s refused: this process runs inside a capsule sandbox "
                         "(CAPSULE_SANDBOX is set); approvals and policy come from the operator",
                         what);
  struct utsname u;
  bool capsule_host = uname(&u) == 0 && strcmp(u.nodename, "capsule") == 0;
  if (capsule_host && namespace_is_not_initial("uts", INIT_UTS_NS_INO) &&
      namespace_is_not_initial("user", INIT_USER_NS_INO) &&
      prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 && prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 2)
    return cap_error_set(err, EPERM,
                         "%s refused: this process runs inside a capsule sandbox (its own user "
                         "and UTS namespaces, hostname \"capsule\", no_new_privs and a seccomp "
                         "filter); approvals and policy come from the operator",
                         what);
  return 0;
}

/* /proc/PID/FILE read whole (at most max bytes); NULL when it cannot be */
static char *proc_file(pid_t pid, const char *file, size_t max, size_t *len)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
  char *text = NULL;
  struct cap_error err = {0};
  if (cap_read_file(path, max, &text, len, &err) < 0) {
    cap_error_clear(&err);
    return NULL;
  }
  return text;
}

/* The value of "NAME:\t..." in /proc/PID/status text, or -1 */
static long status_field(const char *status, const char *name)
{
  size_t n = strlen(name);
  for (const char *p = status; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (strncmp(p, name, n) == 0 && p[n] == ':')
      return strtol(p + n + 1, NULL, 10);
  return -1;
}

/* Whether pid's namespace NAME is another than this process's (or cannot
 * be told) */
static bool other_namespace(pid_t pid, const char *name)
{
  char path[64], self[64];
  snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)pid, name);
  snprintf(self, sizeof self, "/proc/self/ns/%s", name);
  struct stat a, b;
  return stat(path, &a) != 0 || stat(self, &b) != 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev;
}

int gw_require_operator_peer(pid_t pid, const char *what, struct cap_error *err)
{
  size_t len = 0;
  _cleanup_free_ char *env = proc_file(pid, "environ", 1u << 20, &len);
  for (size_t i = 0; env && i < len; i += strlen(env + i) + 1)
    if (strncmp(env + i, "CAPSULE_SANDBOX=", 16) == 0 && env[i + 16])
      return cap_error_set(err, EPERM,
                           "%s refused: the process asking (pid %d) runs inside a capsule sandbox "
                           "(CAPSULE_SANDBOX is set); approvals and policy come from the operator",
                           what, (int)pid);
  _cleanup_free_ char *status = proc_file(pid, "status", 1u << 16, &len);
  if (!status)
    return cap_error_set(err, EPERM, "%s refused: the process asking (pid %d) cannot be checked",
                         what, (int)pid);
  if (status_field(status, "NoNewPrivs") == 1 && status_field(status, "Seccomp") == 2 &&
      other_namespace(pid, "user") && other_namespace(pid, "uts"))
    return cap_error_set(err, EPERM,
                         "%s refused: the process asking (pid %d) runs in a sandbox (its own "
                         "user and UTS namespaces, no_new_privs and a seccomp filter); approvals "
                         "and policy come from the operator",
                         what, (int)pid);
  return 0;
}
