/* audit, audit verify: the audit log for people and as JSON, and its
 * chain checked (docs/gateway.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/gateway.h"
#include "cli/listing.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "core/escape.h"
#include "core/json.h"
#include "gateway/state.h"

struct audit_print {
  bool json, follow;
  struct cli_listing l; /* --json without --follow: the array */
  int64_t last;         /* the last record seen, printed or not */
  char since[32];       /* records from this time on ("" all), as stored: RFC 3339 UTC */
  int64_t skip;         /* records to pass over first (--tail) */
  bool count_only;      /* the first pass of --tail: count, print nothing */
  int64_t matched;
};

/* --since as the time of a record (UTC, milliseconds), so that records
 * compare as text: "10m", "2h", "1d", "30s" back from now, or RFC 3339
 * (a date, or a date and time with Z or an offset). -1 when not one. */
static int since_time(const char *s, char out[32])
{
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
  char *end;
  unsigned long long n = strtoull(s, &end, 10);
  static const char units[] = "smhd";
  static const int64_t unit_ms[] = {1000, 60000, 3600000, 86400000};
  const char *u = end != s && *end && !end[1] ? strchr(units, *end) : NULL;
  if (u && n <= 100000ull * 365) {
    ms -= (int64_t)n * unit_ms[u - units];
  } else {
    struct tm tm = {0};
    int frac_ms = 0, consumed = 0;
    char sep = 'T';
    if (sscanf(s, "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &consumed) != 3)
      return -1;
    const char *p = s + consumed;
    bool date_only = !*p;
    if (*p &&
        (sscanf(p, "%c%2d:%2d:%2d%n", &sep, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 4 ||
         (sep != 'T' && sep != 't' && sep != ' ')))
      return -1;
    p += *p ? consumed : 0;
    if (*p == '.') { /* fractions of a second: the first three digits count */
      int digits = 0;
      for (p++; *p >= '0' && *p <= '9'; p++, digits++)
        if (digits < 3)
          frac_ms = frac_ms * 10 + (*p - '0');
      for (; digits > 0 && digits < 3; digits++)
        frac_ms *= 10;
    }
    int offset_min = 0, oh = 0, om = 0;
    if ((*p == '+' || *p == '-') && sscanf(p + 1, "%2d:%2d%n", &oh, &om, &consumed) == 2 &&
        !p[1 + consumed] && oh < 24 && om < 60)
      offset_min = (*p == '-' ? -1 : 1) * (oh * 60 + om);
    else if (!date_only && !((*p == 'Z' || *p == 'z') && !p[1]))
      return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    if (tm.tm_year < 0 || tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
        tm.tm_hour < 0 || tm.tm_hour > 23 || tm.tm_min < 0 || tm.tm_min > 59 || tm.tm_sec < 0 ||
        tm.tm_sec > 60 || oh < 0 || om < 0)
      return -1;
    ms = ((int64_t)timegm(&tm) - offset_min * 60) * 1000 + frac_ms;
  }
  if (ms < 0) /* before 1970: every record is after it */
    ms = 0;
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  size_t len = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out + len, 32 - len, ".%03dZ", (int)(ms % 1000));
  return 0;
}

/* One record as stored, every field (the hashes too). */
static void audit_record_json(struct cap_jw *w, const struct gw_audit_record *r)
{
  cap_jw_begin_object(w);
  cap_jw_key(w, "seq");
  cap_jw_int(w, r->seq);
  const char *keys[] = {"time", "user", "capability", "tool", "args_sha256", "decision"};
  const char *values[] = {r->time, r->user, r->capability, r->tool, r->args_hash, r->decision};
  for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
    cap_jw_key(w, keys[i]);
    cap_jw_string(w, values[i]);
  }
  cap_jw_key(w, "duration_ms");
  cap_jw_int(w, r->duration_ms);
  cap_jw_key(w, "outcome");
  cap_jw_string(w, r->outcome);
  cap_jw_key(w, "result_sha256");
  cap_jw_string_or_null(w, r->result_hash[0] ? r->result_hash : NULL);
  cap_jw_key(w, "prev");
  cap_jw_string(w, r->prev);
  cap_jw_key(w, "hash");
  cap_jw_string(w, r->hash);
  cap_jw_end_object(w);
}

static void print_record(void *arg, const struct gw_audit_record *r)
{
  struct audit_print *ap = arg;
  ap->last = r->seq;
  if (ap->since[0] && strcmp(r->time, ap->since) < 0)
    return;
  ap->matched++;
  if (ap->count_only || ap->skip-- > 0)
    return;
  ap->l.n++;
  if (ap->json && !ap->follow) {
    audit_record_json(&ap->l.w, r);
    return;
  }
  struct cap_buf b = {0};
  if (ap->json) { /* --follow: an array never ends, so one object a line */
    struct cap_jw w;
    cap_jw_init(&w, &b, false);
    audit_record_json(&w, r);
  } else { /* a tool's name or error text must not move the terminal or forge lines */
    const char *parts[] = {r->time, " ",     r->user, " ",        r->capability,
                           ".",     r->tool, " ",     r->decision};
    cap_buf_printf(&b, "%lld ", (long long)r->seq);
    for (size_t i = 0; i < ARRAY_SIZE(parts); i++)
      cap_escape_text(&b, parts[i], strlen(parts[i]));
    cap_buf_printf(&b, " %lldms ", (long long)r->duration_ms);
    cap_escape_text(&b, r->outcome, strlen(r->outcome));
  }
  printf("%s\n", b.data);
  cap_buf_free(&b);
}

static void count_record(void *arg, const struct gw_audit_record *r) { print_record(arg, r); }

/* The records --since and --tail select (all without them; none with
 * --follow alone: it starts at the end), then with --follow the new ones
 * as they come. */
static int print_audit(struct gw_state *st, const struct common *o, const char *since,
                       struct cap_error *err)
{
  struct audit_print ap = {.json = o->json, .follow = o->follow};
  snprintf(ap.since, sizeof ap.since, "%s", since);
  /* the first pass counts what matches: where --tail starts, where the log ends */
  ap.count_only = true;
  int r = gw_audit_each(st, 0, count_record, &ap, err);
  ap.count_only = false;
  bool from_end = o->follow && !o->since && o->tail < 0;
  ap.skip = o->tail >= 0 && ap.matched > o->tail ? ap.matched - o->tail : 0;
  cli_listing_begin(&ap.l, o->json && !o->follow);
  int64_t end = ap.last;
  if (r == 0 && !from_end) {
    ap.matched = 0;
    r = gw_audit_each(st, 0, print_record, &ap, err);
    /* records appended between the passes come with --follow */
    end = ap.last;
  }
  fflush(stdout);
  ap.last = end;
  ap.skip = 0;
  while (r == 0 && o->follow) {
    sleep(1);
    r = gw_audit_each(st, ap.last, print_record, &ap, err);
    fflush(stdout);
  }
  cli_listing_end(&ap.l, r == 0);
  return r;
}

int cmd_audit(int argc, char **argv)
{
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
    if (!strncmp(argv[i], "--format", 8)) /* export|verify --format covenant */
      return cmd_audit_format(argc, argv);
  struct common o = {0};
  int r = parse_common("audit", argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  bool verify = optind < argc && strcmp(argv[optind], "verify") == 0;
  if (optind + verify != argc)
    return cli_usage_error("audit",
                           "audit [--json] [--since TIME] [--tail N] [--follow], or audit verify");
  char since[32] = "";
  if (o.since && since_time(o.since, since) < 0)
    return cli_usage_error("audit",
                           "--since takes a time in RFC 3339 (2026-11-25T18:00:00Z, "
                           "2026-11-25T19:00:00+01:00, 2026-11-25) or a span back from now "
                           "(30s, 10m, 2h, 1d), not '%s'",
                           o.since);
  struct gw_state *st = NULL;
  if ((r = open_state(&o, &st)))
    return r;
  struct cap_error err = {0};
  if (verify) {
    size_t n = 0;
    r = gw_audit_verify(st, &n, &err);
    if (r < 0)
      cli_error("audit verify", err.message);
    else
      printf("audit log verified: %zu records, chain and head intact\n", n);
  } else {
    r = print_audit(st, &o, since, &err);
    if (r < 0)
      cli_error("audit", err.message);
  }
  cap_error_clear(&err);
  gw_state_close(st);
  return r < 0 ? CLI_EXIT_INVALID : CLI_EXIT_OK;
}
