/* The egress log's batch and its writer (egress_store.h). */
#include "gateway/egress_store.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "gateway/state_int.h"

const char *gw_egress_decision_name(enum proxy_decision d)
{
  static const char *const names[] = {"allow", "deny", "suppressed"};
  return names[d];
}

static char *dup_or_null(const char *s) { return s ? cap_xstrdup(s) : NULL; }

/* The sink's function: a copy of ev in the batch (the proxy's thread). */
static void batch_event(void *arg, const struct proxy_egress_event *ev)
{
  struct gw_egress_batch *b = arg;
  pthread_mutex_lock(&b->lock);
  if (b->n == GW_EGRESS_BATCH_MAX) {
    b->over += ev->count ? ev->count : 1;
    pthread_mutex_unlock(&b->lock);
    return;
  }
  if (b->n == b->cap) {
    b->cap = b->cap ? b->cap * 2 : 16;
    b->rows = cap_xrealloc(b->rows, b->cap * sizeof *b->rows);
  }
  b->rows[b->n++] = (struct gw_egress_row){
      .time_ms = ev->time_ms,
      .decision = ev->decision,
      .kind = dup_or_null(ev->kind),
      .host = dup_or_null(ev->host),
      .method = dup_or_null(ev->method),
      .path = dup_or_null(ev->path),
      .credential = dup_or_null(ev->credential),
      .reason = dup_or_null(ev->reason),
      .port = ev->port,
      .count = ev->count,
      .bytes_up = ev->bytes_up,
      .bytes_down = ev->bytes_down,
  };
  pthread_mutex_unlock(&b->lock);
}

struct gw_egress_batch *gw_egress_batch_of(const struct proxy_egress_sink *s)
{
  return s && s->event == batch_event ? s->arg : NULL;
}

void gw_egress_batch_add(struct gw_egress_batch *b, const struct gw_egress_row *r, long long over)
{
  pthread_mutex_lock(&b->lock);
  b->over += over;
  if (r && b->n == b->cap) {
    b->cap = b->cap ? b->cap * 2 : 16;
    b->rows = cap_xrealloc(b->rows, b->cap * sizeof *b->rows);
  }
  if (r)
    b->rows[b->n++] = *r;
  pthread_mutex_unlock(&b->lock);
}

static void clear_rows(struct gw_egress_batch *b);

void gw_egress_batch_take(struct gw_egress_batch *b, struct gw_egress_batch *into)
{
  pthread_mutex_lock(&b->lock);
  struct gw_egress_row *rows = b->rows;
  size_t n = b->n;
  long long over = b->over;
  b->rows = NULL;
  b->n = b->cap = 0;
  b->over = 0;
  pthread_mutex_unlock(&b->lock);
  for (size_t i = 0; i < n; i++) {
    pthread_mutex_lock(&into->lock);
    bool room = into->n < GW_EGRESS_BATCH_MAX;
    pthread_mutex_unlock(&into->lock);
    if (room) {
      gw_egress_batch_add(into, &rows[i], 0); /* its strings now into's */
      continue;
    }
    over += rows[i].count ? rows[i].count : 1; /* past into's bound, as the sink counts */
    struct gw_egress_batch one = {.rows = &rows[i], .n = 1};
    clear_rows(&one);
  }
  if (over)
    gw_egress_batch_add(into, NULL, over);
  free(rows);
}

void gw_egress_batch_init(struct gw_egress_batch *b)
{
  *b = (struct gw_egress_batch){.sink = {.event = batch_event, .arg = b}};
  pthread_mutex_init(&b->lock, NULL);
}

void gw_egress_row_free(struct gw_egress_row *r)
{
  free(r->kind);
  free(r->host);
  free(r->method);
  free(r->path);
  free(r->credential);
  free(r->reason);
}

static void clear_rows(struct gw_egress_batch *b)
{
  for (size_t i = 0; i < b->n; i++)
    gw_egress_row_free(&b->rows[i]);
  b->n = 0;
  b->over = 0;
}

void gw_egress_batch_free(struct gw_egress_batch *b)
{
  if (!b->sink.event)
    return; /* never initialised */
  clear_rows(b);
  free(b->rows);
  b->rows = NULL;
  b->cap = 0;
  pthread_mutex_destroy(&b->lock);
  b->sink.event = NULL;
}

/* ---- a batch between processes ---- */

void gw_egress_row_encode(const struct gw_egress_row *r, struct cap_buf *out)
{
  int64_t nums[6] = {r->time_ms, r->decision, r->port, r->count, r->bytes_up, r->bytes_down};
  cap_buf_append(out, (const char *)nums, sizeof nums);
  const char *texts[] = {r->kind, r->host, r->method, r->path, r->credential, r->reason};
  for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++)
    cap_buf_put_text(out, texts[k]);
}

bool gw_egress_row_decode(struct gw_egress_row *r, const char **p, const char *end)
{
  int64_t nums[6];
  if ((size_t)(end - *p) < sizeof nums)
    return false;
  memcpy(nums, *p, sizeof nums);
  *p += sizeof nums;
  *r = (struct gw_egress_row){.time_ms = nums[0],
                              .decision = (enum proxy_decision)nums[1],
                              .port = (unsigned)nums[2],
                              .count = nums[3],
                              .bytes_up = nums[4],
                              .bytes_down = nums[5]};
  char **texts[] = {&r->kind, &r->host, &r->method, &r->path, &r->credential, &r->reason};
  bool ok = nums[1] >= PROXY_ALLOW && nums[1] <= PROXY_SUPPRESSED;
  for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++)
    ok = ok && cap_buf_get_text(p, end, texts[k]);
  if (!ok) {
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++)
      free(*texts[k]);
    *r = (struct gw_egress_row){0};
  }
  return ok;
}

void gw_egress_batch_encode(struct gw_egress_batch *b, struct cap_buf *out)
{
  if (b)
    pthread_mutex_lock(&b->lock);
  int64_t head[2] = {b ? (int64_t)b->n : 0, b ? b->over : 0};
  cap_buf_append(out, (const char *)head, sizeof head);
  for (size_t i = 0; b && i < b->n; i++)
    gw_egress_row_encode(&b->rows[i], out);
  if (b)
    pthread_mutex_unlock(&b->lock);
}

bool gw_egress_batch_decode(struct gw_egress_batch *b, const char **p, const char *end)
{
  int64_t head[2];
  if ((size_t)(end - *p) < sizeof head)
    return false;
  memcpy(head, *p, sizeof head);
  *p += sizeof head;
  if (head[0] < 0 || head[0] > GW_EGRESS_BATCH_MAX || head[1] < 0)
    return false;
  if (b && head[1])
    gw_egress_batch_add(b, NULL, head[1]);
  for (int64_t i = 0; i < head[0]; i++) {
    struct gw_egress_row r;
    if (!gw_egress_row_decode(&r, p, end))
      return false;
    if (b) {
      gw_egress_batch_add(b, &r, 0);
      continue;
    }
    struct gw_egress_batch one = {.rows = &r, .n = 1};
    clear_rows(&one);
  }
  return true;
}

static void text_or_null(struct gw_stmt *s, int i, const char *v)
{
  if (v)
    gw_stmt_bind_text(s, i, v);
}

static void format_time(int64_t ms, char out[32])
{
  time_t sec = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&sec, &tm);
  size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out + n, 32 - n, ".%03dZ", (int)(ms % 1000));
}

/* One row through the prepared INSERT. */
static int insert_row(struct gw_stmt *s, const struct gw_egress_row *r, const char *capability,
                      const char *user, int64_t call_seq)
{
  char when[32];
  format_time(r->time_ms, when);
  gw_stmt_bind_text(s, 1, when);
  gw_stmt_bind_text(s, 2, capability);
  gw_stmt_bind_text(s, 3, user);
  if (call_seq > 0)
    gw_stmt_bind_int64(s, 4, call_seq);
  gw_stmt_bind_text(s, 5, gw_egress_decision_name(r->decision));
  text_or_null(s, 6, r->kind);
  text_or_null(s, 7, r->host);
  gw_stmt_bind_int64(s, 8, r->port);
  text_or_null(s, 9, r->method);
  text_or_null(s, 10, r->path);
  text_or_null(s, 11, r->credential);
  text_or_null(s, 12, r->reason);
  gw_stmt_bind_int64(s, 13, r->count);
  gw_stmt_bind_int64(s, 14, r->bytes_up);
  gw_stmt_bind_int64(s, 15, r->bytes_down);
  int rc = gw_stmt_step(s);
  return rc == GW_DB_DONE ? 0 : -1;
}

static int insert_rows(struct gw_state *st, struct gw_egress_batch *b, const char *capability,
                       const char *user, int64_t call_seq)
{
  static const char sql[] =
      "INSERT INTO egress (time, capability, user, call_seq, decision, kind, host, port, method,"
      " path, credential, reason, count, bytes_up, bytes_down)"
      " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
  int r = 0;
  for (size_t i = 0; r == 0 && i < b->n; i++) {
    /* a statement per row: binding NULL is leaving a value unbound */
    struct gw_stmt *s = gw_db_prepare(st->db, sql);
    r = s ? insert_row(s, &b->rows[i], capability, user, call_seq) : -1;
    gw_stmt_finalize(s);
  }
  return r;
}

bool gw_egress_batch_pending(struct gw_egress_batch *b)
{
  pthread_mutex_lock(&b->lock);
  bool pending = b->n || b->over;
  pthread_mutex_unlock(&b->lock);
  return pending;
}

/* claim (NULL: none) in the meta table, in the rows' transaction: 1 when
 * it is there already (the rows were stored then; nothing written) */
static int claim_taken(struct gw_state *st, const char *claim)
{
  struct gw_stmt *s = gw_state_prep(st, "SELECT 1 FROM meta WHERE key = ?", claim, NULL);
  int rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  gw_stmt_finalize(s);
  if (rc == GW_DB_ROW)
    return 1;
  if (rc != GW_DB_DONE)
    return -1;
  s = gw_state_prep(st, "INSERT INTO meta (key, value) VALUES (?, 'egress')", claim, NULL);
  rc = s ? gw_stmt_step(s) : GW_DB_ERROR;
  gw_stmt_finalize(s);
  return rc == GW_DB_DONE ? 0 : -1;
}

static int egress_write(struct gw_state *st, struct gw_egress_batch *b, const char *capability,
                        const char *user, int64_t call_seq, const char *claim,
                        struct cap_error *err)
{
  pthread_mutex_lock(&b->lock);
  if (b->over) { /* the rows past the bound, as one */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    b->rows = cap_xrealloc(b->rows, (b->n + 1) * sizeof *b->rows);
    b->rows[b->n++] = (struct gw_egress_row){
        .time_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000,
        .decision = PROXY_SUPPRESSED,
        .reason = claim ? cap_xasprintf("%lld decisions past the bound of this batch were not "
                                        "stored",
                                        b->over)
                        : cap_xasprintf("%lld decisions past this call's %d rows were not stored",
                                        b->over, GW_EGRESS_BATCH_MAX),
        .count = b->over};
    b->cap = b->n;
  }
  int r = 0, taken = 0;
  if (b->n) {
    if (gw_db_exec(st->db, "BEGIN") != GW_DB_OK)
      r = -1;
    if (r == 0 && claim)
      r = taken = claim_taken(st, claim);
    if (r == 0)
      r = insert_rows(st, b, capability, user, call_seq);
    if (r >= 0 && gw_db_exec(st->db, "COMMIT") != GW_DB_OK)
      r = -1;
    if (r < 0) {
      r = gw_state_db_error(st, err, "cannot store the call's egress log");
      gw_db_exec(st->db, "ROLLBACK");
    }
  }
  clear_rows(b);
  pthread_mutex_unlock(&b->lock);
  return r < 0 ? r : taken;
}

int gw_egress_write(struct gw_state *st, struct gw_egress_batch *b, const char *capability,
                    const char *user, int64_t call_seq, struct cap_error *err)
{
  return egress_write(st, b, capability, user, call_seq, NULL, err);
}

int gw_egress_write_claimed(struct gw_state *st, struct gw_egress_batch *b, const char *capability,
                            const char *user, const char *claim, struct cap_error *err)
{
  return egress_write(st, b, capability, user, 0, claim, err);
}
