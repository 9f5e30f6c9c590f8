/* The audit log: a chain of records, each HMAC-SHA-256 (under a key
 * derived from the state key) over the previous hash and the record; the
 * chain's head MACed in meta; and a high-water mark outside the database
 * (DIR/audit-hwm: record count and head hash, MACed) so that deleting,
 * truncating or rolling back the database shows as a gap. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/cleanup.h"
#include "gateway/state.h"
#include "gateway/state_int.h"

/* ---- audit ---- */

/* What a record's MAC covers: prev and every field, each length-prefixed,
 * appended to b in one piece (no printf: the dashboard builds one per
 * record shown). */
void gw_audit_mac_input(const struct gw_audit_record *r, struct cap_buf *b)
{
  static const char tag[] = "capsule-audit-v1 ";
  const char *fields[] = {r->time,     r->user,    r->capability,  r->tool, r->args_hash,
                          r->decision, r->outcome, r->result_hash, r->prev};
  enum { N = sizeof fields / sizeof fields[0] };
  size_t lens[N], total = sizeof tag - 1 + 2 * 22;
  for (size_t i = 0; i < N; i++)
    total += (lens[i] = strlen(fields[i])) + 22;
  cap_buf_reserve(b, total);
  char *p = b->data + b->len;
  memcpy(p, tag, sizeof tag - 1);
  p += sizeof tag - 1;
  p += cap_fmt_i64(p, r->seq);
  *p++ = ' ';
  p += cap_fmt_i64(p, r->duration_ms);
  for (size_t i = 0; i < N; i++) {
    *p++ = ' ';
    p += cap_fmt_i64(p, (int64_t)lens[i]);
    *p++ = ':';
    memcpy(p, fields[i], lens[i]);
    p += lens[i];
  }
  b->len = (size_t)(p - b->data);
  b->data[b->len] = '\0';
}

/* HMAC-SHA-256 under the audit key, from its states after the key's
 * blocks (made once at open), on the CPU's SHA extensions where it has
 * them (core/sha256.h): the same MAC as libsodium's, several times as fast. */
void gw_audit_mac_bytes(const struct gw_state *st, const void *msg, size_t len, char out[65])
{
  unsigned char mac[32];
  cap_hmac_sha256(&st->keys->audit_mac, msg, len, mac);
  sodium_bin2hex(out, 65, mac, sizeof mac);
}

void gw_audit_mac(const struct gw_state *st, const struct gw_audit_record *r, char out[65])
{
  struct cap_buf b = {0};
  gw_audit_mac_input(r, &b);
  gw_audit_mac_bytes(st, b.data, b.len, out);
  cap_buf_free(&b);
}

/* "seq hash mac": the chain's head, MACed so it cannot be rolled back to an
 * earlier record without the key */
static void head_text(const struct gw_state *st, int64_t seq, const char *hash, char *out,
                      size_t size)
{
  char body[128];
  snprintf(body, sizeof body, "capsule-audit-head-v1 %lld %s", (long long)seq, hash);
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256(mac, (const unsigned char *)body, strlen(body), st->keys->audit);
  char hex[65];
  sodium_bin2hex(hex, sizeof hex, mac, sizeof mac);
  snprintf(out, size, "%lld %s %s", (long long)seq, hash, hex);
}

static int advance_mark(struct gw_state *st, const struct gw_audit_record *rec,
                        struct cap_error *err);

/* The last record (seq 0 and a zero hash when the log is empty). */
static int last_record(struct gw_state *st, struct gw_hwm *out, struct cap_error *err)
{
  struct gw_stmt *s =
      gw_state_prep(st, "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1", NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  out->seq = 0;
  snprintf(out->hash, sizeof out->hash, "%064d", 0);
  if (rc == GW_DB_ROW) {
    out->seq = gw_stmt_int64(s, 0);
    snprintf(out->hash, sizeof out->hash, "%s", (const char *)gw_stmt_text(s, 1));
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_ROW || rc == GW_DB_DONE
             ? 0
             : gw_state_db_error(st, err, "cannot read the audit log");
}

/* After a connection lost around a COMMIT: whether the record is in (the
 * connection is made again for the question; false when it cannot be). */
static bool landed(struct gw_state *st, const struct gw_audit_record *r)
{
  char seq[24];
  snprintf(seq, sizeof seq, "%lld", (long long)r->seq);
  struct gw_stmt *s =
      gw_state_prep(st, "SELECT 1 FROM audit WHERE seq = ? AND hash = ?", seq, r->hash, NULL);
  bool in = s && gw_stmt_step(s) == GW_DB_ROW;
  gw_stmt_finalize(s);
  return in;
}

int gw_audit_append(struct gw_state *st, struct gw_audit_record *r, struct cap_error *err)
{
  if (gw_db_exec(st->db, "BEGIN IMMEDIATE") != GW_DB_OK)
    return gw_state_db_error(st, err, "cannot append to the audit log");
  struct gw_hwm last;
  int rc = last_record(st, &last, err) == 0 ? GW_DB_DONE : GW_DB_ERROR;
  r->seq = last.seq + 1;
  snprintf(r->prev, sizeof r->prev, "%s", last.hash);
  gw_state_now(r->time);
  gw_audit_mac(st, r, r->hash);
  char seq[24], dur[24], head[256];
  snprintf(seq, sizeof seq, "%lld", (long long)r->seq);
  snprintf(dur, sizeof dur, "%lld", (long long)r->duration_ms);
  head_text(st, r->seq, r->hash, head, sizeof head);
  struct gw_stmt *ins = NULL, *h = NULL;
  if (rc == GW_DB_DONE) {
    ins = gw_state_prep(st, "INSERT INTO audit VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", seq,
                        r->time, r->user, r->capability, r->tool, r->args_hash, r->decision, dur,
                        r->outcome, r->result_hash, r->prev, r->hash, NULL);
    h = gw_state_prep(st,
                      "INSERT INTO meta VALUES ('audit_head', ?) ON CONFLICT (key)"
                      " DO UPDATE SET value = excluded.value",
                      head, NULL);
    rc = ins && h && gw_stmt_step(ins) == GW_DB_DONE && gw_stmt_step(h) == GW_DB_DONE ? GW_DB_DONE
                                                                                      : GW_DB_ERROR;
  }
  gw_stmt_finalize(ins);
  gw_stmt_finalize(h);
  if (rc != GW_DB_DONE || gw_db_exec(st->db, "COMMIT") != GW_DB_OK) {
    cap_error_clear(err);
    bool lost = gw_db_fault(st->db) == GW_DB_FAULT_CONNECTION;
    int e = gw_state_db_error(st, err, "cannot append to the audit log");
    gw_db_exec(st->db, "ROLLBACK");
    if (!lost || !landed(st, r))
      return e;
    cap_error_clear(err); /* the server committed it and went away before saying so */
  }
  /* PostgreSQL: a dashboard following the log (LISTEN) sees it now; best
   * effort, outside the writers' lock (a no-op on SQLite) */
  gw_db_notify(st->db, GW_AUDIT_CHANNEL, seq);
  return advance_mark(st, r, err);
}

int gw_audit_change(struct gw_state *st, const char *kind, const char *who, const char *capability,
                    const char *tool, const char *what, struct cap_error *err)
{
  struct gw_audit_record r = {.user = who,
                              .capability = capability ? capability : "",
                              .tool = tool ? tool : "",
                              .decision = kind,
                              .outcome = what};
  return gw_audit_append(st, &r, err);
}

static void row_record(struct gw_stmt *s, struct gw_audit_record *r)
{
  r->seq = gw_stmt_int64(s, 0);
  snprintf(r->time, sizeof r->time, "%s", (const char *)gw_stmt_text(s, 1));
  r->user = (const char *)gw_stmt_text(s, 2);
  r->capability = (const char *)gw_stmt_text(s, 3);
  r->tool = (const char *)gw_stmt_text(s, 4);
  snprintf(r->args_hash, sizeof r->args_hash, "%s", (const char *)gw_stmt_text(s, 5));
  r->decision = (const char *)gw_stmt_text(s, 6);
  r->duration_ms = gw_stmt_int64(s, 7);
  r->outcome = (const char *)gw_stmt_text(s, 8);
  snprintf(r->result_hash, sizeof r->result_hash, "%s", (const char *)gw_stmt_text(s, 9));
  snprintf(r->prev, sizeof r->prev, "%s", (const char *)gw_stmt_text(s, 10));
  snprintf(r->hash, sizeof r->hash, "%s", (const char *)gw_stmt_text(s, 11));
}

int gw_audit_each(struct gw_state *st, int64_t after, gw_audit_fn fn, void *arg,
                  struct cap_error *err)
{
  struct gw_stmt *s = gw_state_prep(st, "SELECT * FROM audit WHERE seq > ? ORDER BY seq", NULL);
  int rc = GW_DB_ERROR;
  if (s) {
    gw_stmt_bind_int64(s, 1, after);
    while ((rc = gw_stmt_step(s)) == GW_DB_ROW) {
      struct gw_audit_record r;
      row_record(s, &r);
      fn(arg, &r);
    }
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : gw_state_db_error(st, err, "cannot read the audit log");
}

/* The chain in order: *n records, prev the last one's hash. */
static int walk_chain(struct gw_state *st, size_t *n, char prev[65], struct cap_error *err)
{
  struct gw_stmt *s = gw_state_prep(st, "SELECT * FROM audit ORDER BY seq", NULL);
  int rc = GW_DB_ERROR, r = 0;
  snprintf(prev, 65, "%064d", 0);
  int64_t expect = 1;
  while (s && r == 0 && (rc = gw_stmt_step(s)) == GW_DB_ROW) {
    struct gw_audit_record rec;
    row_record(s, &rec);
    char mac[65];
    gw_audit_mac(st, &rec, mac);
    if (rec.seq != expect)
      r = cap_error_set(err, EBADMSG,
                        "audit record %lld follows %lld: records were dropped or reordered",
                        (long long)rec.seq, (long long)(expect - 1));
    else if (strcmp(rec.prev, prev) != 0)
      r = cap_error_set(err, EBADMSG,
                        "audit record %lld does not follow the record before it: the chain was "
                        "reordered or a record was replaced",
                        (long long)rec.seq);
    else if (sodium_memcmp(mac, rec.hash, 64) != 0)
      r = cap_error_set(err, EBADMSG,
                        "audit record %lld was edited: its hash does not match its contents",
                        (long long)rec.seq);
    snprintf(prev, 65, "%s", rec.hash);
    expect++;
    (*n)++;
  }
  gw_stmt_finalize(s);
  if (r == 0 && rc != GW_DB_DONE)
    r = gw_state_db_error(st, err, "cannot read the audit log");
  return r;
}

/* The head kept in meta, inside the database. */
static int check_head(struct gw_state *st, size_t n, const char *last, struct cap_error *err)
{
  struct gw_stmt *h = gw_state_prep(st, "SELECT value FROM meta WHERE key = 'audit_head'", NULL);
  int hr = h ? gw_stmt_step(h) : GW_DB_ERROR, r = 0;
  char want[256];
  head_text(st, (int64_t)n, last, want, sizeof want);
  if (hr == GW_DB_ROW) {
    const char *have = (const char *)gw_stmt_text(h, 0);
    if (strcmp(have, want) != 0)
      r = cap_error_set(err, EBADMSG,
                        "the audit log ends at record %zu but its recorded head says otherwise: "
                        "records were dropped from the end, or the head was forged",
                        n);
  } else if (hr == GW_DB_DONE && n > 0) {
    r = cap_error_set(err, EBADMSG, "the audit log's head record is missing");
  } else if (hr != GW_DB_DONE) {
    r = gw_state_db_error(st, err, "cannot read the audit log's head");
  }
  gw_stmt_finalize(h);
  return r;
}

/* The hash of record seq into out ("" when there is none). */
static int record_hash(struct gw_state *st, int64_t seq, char out[65], struct cap_error *err)
{
  struct gw_stmt *s = gw_state_prep(st, "SELECT hash FROM audit WHERE seq = ?", NULL);
  int rc = GW_DB_ERROR;
  out[0] = '\0';
  if (s) {
    gw_stmt_bind_int64(s, 1, seq);
    if ((rc = gw_stmt_step(s)) == GW_DB_ROW)
      snprintf(out, 65, "%s", (const char *)gw_stmt_text(s, 0));
  }
  gw_stmt_finalize(s);
  return rc == GW_DB_ROW || rc == GW_DB_DONE
             ? 0
             : gw_state_db_error(st, err, "cannot read the audit log");
}

/* The mark outside the database against the log inside it: fewer records
 * than capsule wrote, or a different record where the mark's head was,
 * is a gap (deletion, truncation, or an older state.db restored). */
static int check_mark(struct gw_state *st, const struct gw_hwm *mark, enum gw_hwm_status status,
                      size_t n, struct cap_error *err)
{
  if (status == GW_HWM_MISSING)
    return cap_error_set(err, EBADMSG,
                         "gap: the audit high-water mark %s/%s is missing (capsule keeps "
                         "it with every record): it was deleted, so truncation or a restored "
                         "state.db cannot be ruled out",
                         st->dir, st->hwm_name);
  if (status == GW_HWM_FORGED)
    return cap_error_set(err, EBADMSG,
                         "gap: the audit high-water mark %s/%s does not verify under the "
                         "state key: it was edited or replaced",
                         st->dir, st->hwm_name);
  if (mark->seq > (int64_t)n)
    return cap_error_set(err, EBADMSG,
                         "gap: the audit log holds %zu records but capsule wrote %lld (records "
                         "%zu to %lld are gone): records were deleted or truncated, or an older "
                         "state.db was restored",
                         n, (long long)mark->seq, n + 1, (long long)mark->seq);
  char have[65];
  int r = mark->seq > 0 ? record_hash(st, mark->seq, have, err) : 0;
  if (r == 0 && mark->seq > 0 && strcmp(have, mark->hash) != 0)
    r = cap_error_set(err, EBADMSG,
                      "gap: audit record %lld is not the one capsule wrote: an older state.db "
                      "was restored and written to since (the records after its copy are gone)",
                      (long long)mark->seq);
  return r;
}

int gw_audit_verify(struct gw_state *st, size_t *n, struct cap_error *err)
{
  *n = 0;
  /* the mark first: it is written after its record commits, so the
   * snapshot read next holds at least what it names */
  struct gw_hwm mark;
  enum gw_hwm_status status;
  int r = gw_hwm_read(st, &mark, &status, err);
  /* the mark moves in place: a read that met a write half done is read
   * again (a forged mark stays forged) */
  for (int i = 0; r == 0 && status == GW_HWM_FORGED && i < 3; i++) {
    nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
    r = gw_hwm_read(st, &mark, &status, err);
  }
  if (r < 0)
    return r;
  /* one snapshot: appends by other processes do not tear the walk */
  if (gw_db_exec(st->db, "BEGIN") != GW_DB_OK)
    return gw_state_db_error(st, err, "cannot read the audit log");
  char last[65];
  r = walk_chain(st, n, last, err);
  if (r == 0) /* the mark first: it names a gap by its size */
    r = check_mark(st, &mark, status, *n, err);
  if (r == 0)
    r = check_head(st, *n, last, err);
  gw_db_exec(st->db, "COMMIT");
  return r;
}

int gw_audit_init_mark(struct gw_state *st, struct cap_error *err)
{
  if (st->url && strcmp(st->hwm_name, "audit-hwm") == 0)
    return 0; /* a database's migration: its mark is named once its id is read */
  struct gw_hwm mark;
  int r = last_record(st, &mark, err);
  return r < 0 ? r : gw_hwm_write(st, &mark, true, err);
}

/* Moves the mark to a newly committed record. A mark that is missing,
 * does not verify, is ahead, or names a record the log no longer holds is
 * left as it is: it is the evidence verify reports. */
static int advance_mark(struct gw_state *st, const struct gw_audit_record *rec,
                        struct cap_error *err)
{
  _cleanup_close_ int lock = gw_hwm_lock(st, err);
  if (lock < 0)
    return lock;
  struct gw_hwm mark;
  enum gw_hwm_status status;
  int r = gw_hwm_read(st, &mark, &status, err);
  if (r < 0 || status != GW_HWM_OK || mark.seq >= rec->seq)
    return r;
  char have[65] = "";
  if (mark.seq > 0 && ((r = record_hash(st, mark.seq, have, err)) < 0 || strcmp(have, mark.hash)))
    return r;
  struct gw_hwm next = {.seq = rec->seq};
  snprintf(next.hash, sizeof next.hash, "%s", rec->hash);
  return gw_hwm_advance(st, &next, err);
}

/* ---- calls in flight ----
 * A call is recorded as in flight before it runs: a marker file
 * STATE/run/calls/<random>, holding the audit record's fields (NUL
 * separated), the start time and the pid, write-locked for the call's
 * life. The lock goes with the process: a capsule killed mid-call leaves
 * a marker whose lock is free, and the next process that opens the state
 * turns it into one audit record with outcome "interrupted". A POSIX
 * record lock (fcntl F_SETLK), not flock: it belongs to the process, so
 * the sandbox's pid 1 or a warm instance's keeper forked during the call
 * does not hold it on after capsule is gone. Within one process such a
 * lock never conflicts, so a process skips the markers with its own pid. */

#define INFLIGHT_DIR "run/calls"

/* The markers this process holds (begun, not yet finished or ended). Its
 * own recovery never opens them: closing any descriptor of a file drops
 * every POSIX lock the process holds on it, and the marker would then look
 * abandoned to every other capsule while its call or run goes on (a run
 * opens its state mid-run to read a credential). */
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static char **own_names;
static size_t n_own;

static void own_marker(const char *name, bool held)
{
  pthread_mutex_lock(&own_lock);
  if (held) {
    own_names = cap_xrealloc(own_names, (n_own + 1) * sizeof *own_names);
    own_names[n_own++] = cap_xstrdup(name);
  }
  for (size_t i = 0; !held && i < n_own; i++)
    if (strcmp(own_names[i], name) == 0) {
      free(own_names[i]);
      own_names[i] = own_names[--n_own];
      break;
    }
  pthread_mutex_unlock(&own_lock);
}

static bool own_marker_has(const char *name)
{
  bool found = false;
  pthread_mutex_lock(&own_lock);
  for (size_t i = 0; i < n_own && !found; i++)
    found = strcmp(own_names[i], name) == 0;
  pthread_mutex_unlock(&own_lock);
  return found;
}

/* The whole file write-locked by this process; wait or not. */
static int lock_marker(int fd, bool wait)
{
  struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  return fcntl(fd, wait ? F_SETLKW : F_SETLK, &l) < 0 ? -errno : 0;
}

static int inflight_dir(int statefd)
{
  mkdirat(statefd, "run", 0700);
  mkdirat(statefd, INFLIGHT_DIR, 0700);
  return openat(statefd, INFLIGHT_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
}

/* The marker's fields, NUL-separated: a tag, user, capability, tool,
 * arguments' hash, decision, start (ms), pid; a finished one
 * (gw_inflight_finish) adds outcome, duration (ms) and the result's hash. */
static int inflight_write(int fd, const struct gw_audit_record *rec, uint64_t start_ms,
                          bool finished)
{
  struct cap_buf b = {0};
  const char *fields[] = {rec->user, rec->capability, rec->tool, rec->args_hash, rec->decision};
  cap_buf_puts(&b, "capsule-inflight-v1");
  for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
    cap_buf_putc(&b, '\0');
    cap_buf_puts(&b, fields[i]);
  }
  cap_buf_printf(&b, "%c%llu%c%d", '\0', (unsigned long long)start_ms, '\0', (int)getpid());
  cap_buf_putc(&b, '\0');
  if (finished)
    cap_buf_printf(&b, "%s%c%lld%c%s%c", rec->outcome ? rec->outcome : "ok", '\0',
                   (long long)rec->duration_ms, '\0', rec->result_hash, '\0');
  /* over the old text, then cut: a kill in between leaves the new fields
   * first, never an empty marker */
  int r = pwrite(fd, b.data, b.len, 0) == (ssize_t)b.len && ftruncate(fd, (off_t)b.len) == 0
              ? 0
              : -errno;
  cap_buf_free(&b);
  return r;
}

static int inflight_begin(int statefd, const char *statedir, const struct gw_audit_record *r,
                          struct gw_inflight *m, struct cap_error *err)
{
  *m = (struct gw_inflight){.fd = -1};
  _cleanup_close_ int dir = inflight_dir(statefd);
  if (dir < 0)
    return cap_error_errno(err, errno, "cannot create %s/" INFLIGHT_DIR, statedir);
  unsigned char rnd[12];
  randombytes_buf(rnd, sizeof rnd);
  char name[32], tmp[40];
  sodium_bin2hex(name, sizeof name, rnd, sizeof rnd);
  snprintf(tmp, sizeof tmp, ".%s", name);
  own_marker(name, true);
  /* locked before it has its name: a marker under its name is always
   * either locked by its call or abandoned */
  int fd = openat(dir, tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    own_marker(name, false);
    return cap_error_errno(err, errno, "cannot record the call as in flight");
  }
  m->start_ms = cap_now_ms(CLOCK_REALTIME);
  int e = lock_marker(fd, true);
  if (e == 0)
    e = inflight_write(fd, r, m->start_ms, false);
  if (e == 0 && renameat(dir, tmp, dir, name) < 0)
    e = -errno;
  if (e < 0) {
    unlinkat(dir, tmp, 0);
    close(fd);
    own_marker(name, false);
    return cap_error_errno(err, -e, "cannot record the call as in flight");
  }
  m->fd = fd;
  m->name = cap_xstrdup(name);
  m->dirfd = fcntl(statefd, F_DUPFD_CLOEXEC, 0); /* dup() would drop O_CLOEXEC: the tool */
  return 0;
}

int gw_inflight_begin(struct gw_state *st, const struct gw_audit_record *r, struct gw_inflight *m,
                      struct cap_error *err)
{
  return inflight_begin(st->dirfd, st->dir, r, m, err);
}

int gw_inflight_begin_at(int statefd, const char *dir, const struct gw_audit_record *r,
                         struct gw_inflight *m, struct cap_error *err)
{
  return inflight_begin(statefd, dir, r, m, err);
}

void gw_inflight_update(struct gw_inflight *m, const struct gw_audit_record *r)
{
  if (m->fd >= 0)
    inflight_write(m->fd, r, m->start_ms, false);
}

/* Finished markers wait for a state open; more than this many and the
 * run that finishes one opens the state itself (a host that only runs
 * `capsule run` would otherwise gather them without end). */
#define FINISHED_MARKERS_MAX 64

static void flush_when_many(int dirfd, const char *statedir)
{
  _cleanup_close_ int dfd = openat(dirfd, INFLIGHT_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
  if (!d)
    return;
  dfd = -1;
  size_t k = 0;
  while (readdir(d) && k <= FINISHED_MARKERS_MAX + 2)
    k++;
  closedir(d);
  struct gw_state *st = NULL;
  struct cap_error err = {0};
  if (k > FINISHED_MARKERS_MAX + 2 && gw_state_open(statedir, &st, &err) == 0)
    gw_state_close(st); /* its open recorded them */
  cap_error_clear(&err);
}

void gw_inflight_finish(struct gw_inflight *m, const struct gw_audit_record *r,
                        const char *statedir)
{
  if (m->fd < 0)
    return;
  struct gw_audit_record done = *r;
  uint64_t now = cap_now_ms(CLOCK_REALTIME);
  done.duration_ms = now > m->start_ms ? (int64_t)(now - m->start_ms) : 0;
  inflight_write(m->fd, &done, m->start_ms, true);
  close(m->fd); /* the lock goes with it: the next gw_state_open records it */
  own_marker(m->name, false);
  if (statedir)
    flush_when_many(m->dirfd, statedir);
  close(m->dirfd);
  free(m->name);
  *m = (struct gw_inflight){.fd = -1};
}

void gw_inflight_keep(struct gw_inflight *m, const struct gw_audit_record *r)
{
  gw_inflight_finish(m, r, NULL);
}

void gw_inflight_end(struct gw_inflight *m)
{
  if (m->fd < 0)
    return;
  _cleanup_free_ char *path = cap_xasprintf(INFLIGHT_DIR "/%s", m->name);
  unlinkat(m->dirfd, path, 0); /* before the lock goes: no one takes it for abandoned */
  close(m->fd);
  own_marker(m->name, false);
  close(m->dirfd);
  free(m->name);
  *m = (struct gw_inflight){.fd = -1};
}

/* An abandoned marker's record: fields as the call last wrote them.
 * Returns 1 for a marker of this process's own (a call still running). */
static int inflight_record(struct gw_state *st, int fd, struct cap_error *err)
{
  char buf[8192];
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0)
    return 0; /* killed before it wrote: nothing to say about it */
  buf[n] = '\0';
  const char *f[11] = {0};
  size_t k = 0;
  for (char *p = buf; p < buf + n && k < ARRAY_SIZE(f); p += strlen(p) + 1)
    f[k++] = p;
  if (k < 8 || strcmp(f[0], "capsule-inflight-v1") != 0)
    return 0;
  bool finished = k == 11;
  if (!finished && strtol(f[7], NULL, 10) == (long)getpid())
    return 1;
  uint64_t start = strtoull(f[6], NULL, 10), now = cap_now_ms(CLOCK_REALTIME);
  struct gw_audit_record rec = {.user = f[1],
                                .capability = f[2],
                                .tool = f[3],
                                .decision = f[5],
                                .outcome = finished ? f[8] : "interrupted",
                                .duration_ms = finished      ? strtoll(f[9], NULL, 10)
                                               : now > start ? (int64_t)(now - start)
                                                             : 0};
  snprintf(rec.args_hash, sizeof rec.args_hash, "%s", f[4]);
  /* a run's user, "#UID" (a user name never starts with '#'): its name */
  char *end = NULL;
  unsigned long uid = f[1][0] == '#' ? strtoul(f[1] + 1, &end, 10) : 0;
  struct passwd *pw = end && end != f[1] + 1 && !*end ? getpwuid((uid_t)uid) : NULL;
  if (pw)
    rec.user = pw->pw_name;
  if (finished)
    snprintf(rec.result_hash, sizeof rec.result_hash, "%s", f[10]);
  return gw_audit_append(st, &rec, err);
}

/* One marker: when its lock is free and it is still the file under its
 * name (another process may have recorded and removed it), its record. */
static int recover_one(struct gw_state *st, int dir, const char *name, size_t *n,
                       struct cap_error *err)
{
  _cleanup_close_ int fd = openat(dir, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 || lock_marker(fd, false) < 0)
    return 0; /* gone, or its call is still running */
  struct stat a, b;
  if (fstat(fd, &a) < 0 || fstatat(dir, name, &b, AT_SYMLINK_NOFOLLOW) < 0 ||
      a.st_ino != b.st_ino || a.st_dev != b.st_dev)
    return 0;
  int r = inflight_record(st, fd, err);
  if (r == 0) {
    unlinkat(dir, name, 0);
    (*n)++;
  }
  return r < 0 ? r : 0;
}

/* A dot name is a marker still being made, or one whose capsule was
 * killed before its call began (nothing ran: no record). Removed once its
 * lock is free and it is older than any making takes. */
#define UNNAMED_MARKER_AGE_S 600
static void drop_unnamed(int dir, const char *name)
{
  _cleanup_close_ int fd = openat(dir, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  struct stat sb;
  if (fd >= 0 && lock_marker(fd, false) == 0 && fstat(fd, &sb) == 0 &&
      sb.st_mtime + UNNAMED_MARKER_AGE_S < time(NULL))
    unlinkat(dir, name, 0);
}

struct marker_name {
  struct timespec mtime;
  char *name;
};

static int marker_cmp(const void *a, const void *b)
{
  const struct timespec *x = &((const struct marker_name *)a)->mtime;
  const struct timespec *y = &((const struct marker_name *)b)->mtime;
  if (x->tv_sec != y->tv_sec)
    return x->tv_sec < y->tv_sec ? -1 : 1;
  return (x->tv_nsec > y->tv_nsec) - (x->tv_nsec < y->tv_nsec);
}

int gw_audit_recover_interrupted(struct gw_state *st, size_t *n, struct cap_error *err)
{
  *n = 0;
  int dfd = openat(st->dirfd, INFLIGHT_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dfd < 0)
    return errno == ENOENT ? 0
                           : cap_error_errno(err, errno, "cannot read %s/" INFLIGHT_DIR, st->dir);
  DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return cap_error_errno(err, errno, "cannot read %s/" INFLIGHT_DIR, st->dir);
  }
  /* in the order they were last written (a finished run's marker: when it
   * ended), so the records follow one another as the calls did */
  struct marker_name *v = NULL;
  size_t k = 0, cap = 0;
  struct dirent *e;
  struct stat sb;
  while ((e = readdir(d))) {
    if (own_marker_has(e->d_name + (e->d_name[0] == '.')))
      continue; /* this process's: opening it would drop its lock */
    if (e->d_name[0] == '.') {
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
        drop_unnamed(dirfd(d), e->d_name);
      continue;
    }
    if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
      continue;
    if (k == cap)
      v = cap_xrealloc(v, (cap = cap ? 2 * cap : 16) * sizeof *v);
    v[k++] = (struct marker_name){.mtime = sb.st_mtim, .name = cap_xstrdup(e->d_name)};
  }
  if (k) /* qsort takes no NULL, even for none */
    qsort(v, k, sizeof *v, marker_cmp);
  int r = 0;
  for (size_t i = 0; i < k; i++) {
    if (r == 0)
      r = recover_one(st, dirfd(d), v[i].name, n, err);
    free(v[i].name);
  }
  free(v);
  closedir(d);
  return r;
}
