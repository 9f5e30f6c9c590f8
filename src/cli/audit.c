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
  int64_t last;
};

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

int cmd_audit(int argc, char **argv)
{
  struct common o = {0};
  int r = parse_common("audit", argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  bool verify = optind < argc && strcmp(argv[optind], "verify") == 0;
  if (optind + verify != argc)
    return cli_usage_error("audit", "audit [--json] [--follow], or audit verify");
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
    struct audit_print ap = {.json = o.json, .follow = o.follow};
    cli_listing_begin(&ap.l, o.json && !o.follow);
    r = gw_audit_each(st, 0, print_record, &ap, &err);
    fflush(stdout);
    while (r == 0 && o.follow) {
      sleep(1);
      r = gw_audit_each(st, ap.last, print_record, &ap, &err);
      fflush(stdout);
    }
    cli_listing_end(&ap.l, r == 0);
    if (r < 0)
      cli_error("audit", err.message);
  }
  cap_error_clear(&err);
  gw_state_close(st);
  return r < 0 ? CLI_EXIT_INVALID : CLI_EXIT_OK;
}
