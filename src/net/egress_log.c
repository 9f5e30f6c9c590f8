/* The egress log: one JSON line per decision, bounded whatever the tool
 * does. A denial repeating the one before (same kind, host, port, method
 * and reason; any path) within COALESCE_MS is counted, not written, and one
 * "suppressed" line says how many followed; lines beyond a token bucket
 * (LOG_RATE a second after a burst of LOG_BURST) are dropped and counted
 * the same way; the file takes at most LOG_MAX_BYTES from one run, and a
 * last line says so. Every string the tool chose is escaped to printable
 * UTF-8 first (clean_text), so each line is valid JSON and nothing in it
 * moves a terminal's cursor or reorders text (bidi overrides). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/buf.h"
#include "core/escape.h"
#include "core/json.h"
#include "net/proxy_internal.h"

#define LOG_RATE 50                /* lines a second, sustained */
#define LOG_BURST 500              /* lines at once */
#define LOG_MAX_BYTES (64ll << 20) /* one run's share of the file */
#define COALESCE_MS 10000          /* a repeat run is reported at least this often */
#define FIELD_MAX 1024             /* bytes of one string kept (paths) */

/* s as printable text (core/escape.h: a backslash doubled, controls,
 * invisible and direction characters and bytes that are not UTF-8 as
 * escapes); at most FIELD_MAX bytes of s, then how many more there were. */
static void clean_text(const char *s, struct cap_buf *out)
{
  size_t n = strlen(s), keep = n > FIELD_MAX ? FIELD_MAX : n;
  cap_escape_text(out, s, keep);
  if (n > keep)
    cap_buf_printf(out, "...(%zu more bytes)", n - keep);
}

static void put_clean(struct cap_jw *w, const char *key, const char *s)
{
  cap_jw_key(w, key);
  if (!s) {
    cap_jw_null(w);
    return;
  }
  struct cap_buf b = {0};
  clean_text(s, &b);
  cap_jw_string_n(w, b.data ? b.data : "", b.len);
  cap_buf_free(&b);
}

/* One line into px's file (locked), unless the run's share is used up. */
static void write_line(struct proxy *px, struct cap_buf *line)
{
  struct egress_log *lg = &px->log;
  if (lg->capped || !px->opt.log)
    return;
  static const char capped[] =
      "{\"decision\":\"capped\",\"reason\":\"the egress log reached this run's cap of 64 MiB; "
      "later decisions are not logged\"}\n";
  if (lg->bytes + (long long)line->len + (long long)sizeof capped > LOG_MAX_BYTES) {
    lg->capped = true;
    fputs(capped, px->opt.log);
  } else {
    fwrite(line->data, 1, line->len, px->opt.log);
    lg->bytes += (long long)line->len;
  }
  fflush(px->opt.log);
}

/* The line for a decision: ev's fields (or nulls), a count when it sums
 * up suppressed ones. */
static void format_line(const struct event *ev, const char *decision, const char *why,
                        long long count, struct cap_buf *b)
{
  struct cap_jw w;
  cap_jw_init(&w, b, false);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  char when[40];
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  size_t n = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(when + n, sizeof when - n, ".%03ldZ", ts.tv_nsec / 1000000);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "time");
  cap_jw_string(&w, when);
  cap_jw_key(&w, "decision");
  cap_jw_string(&w, decision);
  cap_jw_key(&w, "kind");
  cap_jw_string_or_null(&w, ev->kind);
  put_clean(&w, "host", ev->host);
  cap_jw_key(&w, "port");
  cap_jw_int(&w, ev->port);
  put_clean(&w, "method", ev->method);
  put_clean(&w, "path", ev->path);
  put_clean(&w, "credential", ev->route);
  put_clean(&w, "reason", why);
  if (count) {
    cap_jw_key(&w, "count");
    cap_jw_int(&w, count);
  }
  cap_jw_key(&w, "bytes_up");
  cap_jw_int(&w, ev->bytes_up);
  cap_jw_key(&w, "bytes_down");
  cap_jw_int(&w, ev->bytes_down);
  cap_jw_end_object(&w);
  cap_buf_putc(b, '\n');
}

static const char *const decision_names[] = {"allow", "deny", "suppressed"};

/* s escaped as the log writes it (NULL stays NULL). */
static char *cleaned(const char *s)
{
  if (!s)
    return NULL;
  struct cap_buf b = {0};
  clean_text(s, &b);
  cap_buf_putc(&b, '\0');
  return b.data;
}

/* The decision handed to the sink, its strings escaped (locked). */
static void to_sink(struct proxy *px, const struct event *ev, enum proxy_decision d,
                    const char *why, long long count)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  char *host = cleaned(ev->host), *method = cleaned(ev->method), *path = cleaned(ev->path),
       *route = cleaned(ev->route), *reason = cleaned(why);
  struct proxy_egress_event out = {
      .decision = d,
      .time_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000,
      .kind = ev->kind,
      .host = host,
      .port = ev->port,
      .method = method,
      .path = path,
      .credential = route,
      .reason = reason,
      .count = count,
      .bytes_up = ev->bytes_up,
      .bytes_down = ev->bytes_down,
  };
  px->opt.sink->event(px->opt.sink->arg, &out);
  free(host);
  free(method);
  free(path);
  free(route);
  free(reason);
}

/* One decision to the file and to the sink (locked). */
static void emit(struct proxy *px, const struct event *ev, enum proxy_decision d, const char *why,
                 long long count)
{
  if (px->opt.log) {
    struct cap_buf b = {0};
    format_line(ev, decision_names[d], why, count, &b);
    write_line(px, &b);
    cap_buf_free(&b);
  }
  if (px->opt.sink)
    to_sink(px, ev, d, why, count);
}

/* Whether the token bucket has a line to spend now (locked). */
static bool take_token(struct egress_log *lg, int64_t now)
{
  if (!lg->refilled_ms) {
    lg->tokens = LOG_BURST;
    lg->refilled_ms = now;
  }
  lg->tokens += (double)(now - lg->refilled_ms) * LOG_RATE / 1000.0;
  if (lg->tokens > LOG_BURST)
    lg->tokens = LOG_BURST;
  lg->refilled_ms = now;
  if (lg->tokens < 1)
    return false;
  lg->tokens--;
  return true;
}

/* The summaries owed (locked): repeats of the last denial, lines the rate
 * limit dropped. force: at the end, whatever the bucket holds. */
static void flush_counts(struct proxy *px, int64_t now, bool force)
{
  struct egress_log *lg = &px->log;
  if (lg->repeats && (force || take_token(lg, now))) {
    struct event ev = {.kind = lg->last.kind,
                       .host = lg->last_host,
                       .port = lg->last.port,
                       .method = lg->last_method};
    char *why = cap_xasprintf("%lld more denials of %s %s:%u suppressed: %s", lg->repeats,
                              ev.method ? ev.method : "CONNECT", ev.host ? ev.host : "?", ev.port,
                              lg->last_reason);
    emit(px, &ev, PROXY_SUPPRESSED, why, lg->repeats);
    if (px->opt.verbose)
      fprintf(stderr, "capsule: egress: %lld more denials of the one above suppressed\n",
              lg->repeats);
    free(why);
  } else if (lg->repeats) {
    lg->dropped += lg->repeats;
  }
  lg->repeats = 0;
  lg->repeat_since_ms = now;
  if (lg->dropped && (force || take_token(lg, now))) {
    struct event ev = {0};
    char *why = cap_xasprintf("%lld log lines dropped by the rate limit (%d a second after a "
                              "burst of %d)",
                              lg->dropped, LOG_RATE, LOG_BURST);
    emit(px, &ev, PROXY_SUPPRESSED, why, lg->dropped);
    free(why);
    lg->dropped = 0;
  }
}

/* Whether this denial repeats the last one written (locked). */
static bool repeats_last(const struct egress_log *lg, const struct event *ev, const char *why)
{
  return lg->has_last && lg->last.kind == ev->kind && lg->last.port == ev->port &&
         strcmp(lg->last_host, ev->host ? ev->host : "") == 0 &&
         strcmp(lg->last_method, ev->method ? ev->method : "") == 0 &&
         strcmp(lg->last_reason, why) == 0;
}

/* Makes ev the denial later ones are compared with (NULL: none). */
static void set_last(struct egress_log *lg, const struct event *ev, const char *why)
{
  free(lg->last_host);
  free(lg->last_method);
  free(lg->last_reason);
  lg->last_host = lg->last_method = lg->last_reason = NULL;
  lg->has_last = ev != NULL;
  if (!ev)
    return;
  lg->last = (struct event){.kind = ev->kind, .port = ev->port};
  lg->last_host = cap_xstrdup(ev->host ? ev->host : "");
  lg->last_method = cap_xstrdup(ev->method ? ev->method : "");
  lg->last_reason = cap_xstrdup(why);
}

static void print_denial(const struct event *ev, const char *why)
{
  struct cap_buf b = {0};
  clean_text(ev->method ? ev->method : "CONNECT", &b);
  cap_buf_putc(&b, ' ');
  clean_text(ev->host ? ev->host : "?", &b);
  cap_buf_printf(&b, ":%u", ev->port);
  if (ev->path) {
    cap_buf_putc(&b, ' ');
    clean_text(ev->path, &b);
  }
  cap_buf_puts(&b, ": ");
  clean_text(why, &b);
  fprintf(stderr, "capsule: egress denied: %.*s\n", (int)b.len, b.data);
  cap_buf_free(&b);
}

void proxy_log_event(struct proxy *px, const struct event *ev, bool allowed, const char *why)
{
  if (!px->opt.log && !px->opt.verbose && !px->opt.sink)
    return;
  pthread_mutex_lock(&px->log_lock);
  struct egress_log *lg = &px->log;
  int64_t now = (int64_t)cap_now_ms(CLOCK_MONOTONIC);
  if (!allowed && repeats_last(lg, ev, why)) {
    lg->repeats++;
    if (now - lg->repeat_since_ms >= COALESCE_MS)
      flush_counts(px, now, false); /* a long run shows up as it goes */
    pthread_mutex_unlock(&px->log_lock);
    return;
  }
  flush_counts(px, now, false); /* the previous run of repeats ends here */
  set_last(lg, allowed ? NULL : ev, why);
  if (!take_token(lg, now)) {
    lg->dropped++;
  } else {
    if (px->opt.verbose && !allowed)
      print_denial(ev, why);
    emit(px, ev, allowed ? PROXY_ALLOW : PROXY_DENY, why, 0);
  }
  pthread_mutex_unlock(&px->log_lock);
}

void proxy_log_flush(struct proxy *px)
{
  pthread_mutex_lock(&px->log_lock);
  flush_counts(px, (int64_t)cap_now_ms(CLOCK_MONOTONIC), true);
  set_last(&px->log, NULL, NULL);
  pthread_mutex_unlock(&px->log_lock);
}

void proxy_respond(struct stream *s, const char *status, const char *why)
{
  char buf[768];
  int n = snprintf(buf, sizeof buf,
                   "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                   "Connection: close\r\n\r\ncapsule: %s\n",
                   status, strlen(why) + 10, why);
  if (n > 0)
    proxy_stream_write(s, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* Denies: the answer to the tool, the log line. */
void proxy_deny(struct proxy *px, struct stream *s, struct event *ev, const char *status,
                const char *why)
{
  proxy_log_event(px, ev, false, why);
  proxy_respond(s, status, why);
}
