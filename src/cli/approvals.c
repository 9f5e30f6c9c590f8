/* approvals, approve, deny: the pending approvals, and the operator's
 * decision on one (docs/gateway.md). */
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
#include "gateway/approval.h"
#include "gateway/state.h"

static void utc_time(int64_t ms, char out[32])
{
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* One approval, for people: what would run, for whom, who asked, until when. */
static void describe_approval(FILE *f, const struct gw_approval *a)
{
  char expires[32];
  utc_time(a->expires_ms, expires);
  cap_escape_fput(f, a->capability, 200);
  fputc('.', f);
  cap_escape_fput(f, a->tool, 200);
  fputs(" for user ", f);
  cap_escape_fput(f, a->user, 200);
  fputs(", asked by ", f);
  cap_escape_fput(f, a->asked_by, 200);
  fprintf(f, ", valid until %s\n  arguments: ", expires);
  /* all of them, as capsule writes JSON: nothing hidden past a cut or
   * behind whitespace */
  char *args = cap_json_canonical(a->args, strlen(a->args));
  cap_escape_fput(f, args ? args : a->args, SIZE_MAX);
  free(args);
  fputc('\n', f);
}

static void approval_json(struct cap_jw *w, const struct gw_approval *a)
{
  char created[32], expires[32];
  utc_time(a->created_ms, created);
  utc_time(a->expires_ms, expires);
  cap_jw_begin_object(w);
  const char *keys[] = {"id",       "capability", "tool",    "user",
                        "asked_by", "created",    "expires", "arguments"};
  const char *values[] = {a->id,       a->capability, a->tool, a->user,
                          a->asked_by, created,       expires, a->args};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    cap_jw_key(w, keys[i]);
    cap_jw_string(w, values[i]);
  }
  cap_jw_end_object(w);
}

static void print_approval(void *arg, const struct gw_approval *a)
{
  struct cli_listing *l = arg;
  l->n++;
  if (l->json) {
    approval_json(&l->w, a);
    return;
  }
  cap_escape_fput(stdout, a->id, 64);
  fputs("  ", stdout);
  describe_approval(stdout, a);
}

int cmd_approvals(int argc, char **argv)
{
  struct common o = {0};
  int r = parse_common("approvals", argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  if (optind != argc)
    return cli_usage_error("approvals",
                           "approvals takes no arguments, only [--json] [--state DIR]");
  struct gw_state *st = NULL;
  if ((r = open_state(&o, &st)))
    return r;
  struct cli_listing l;
  cli_listing_begin(&l, o.json);
  struct cap_error err = {0};
  r = gw_approval_list_pending(st, print_approval, &l, &err);
  if (!o.json && r == 0 && l.n == 0)
    printf("no pending approvals\n");
  cli_listing_end(&l, r == 0);
  if (r < 0)
    cli_error("approvals", err.message);
  cap_error_clear(&err);
  gw_state_close(st);
  return r < 0 ? CLI_EXIT_INVALID : CLI_EXIT_OK;
}

static int resolve_approval(const char *verb, int argc, char **argv, bool approve)
{
  struct common o = {0};
  int r = parse_common(verb, argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  const char *id = optind < argc ? argv[optind] : "";
  if (optind + 1 != argc || !gw_approval_id_valid(id))
    return cli_usage_error(verb, "give the approval's id (8 hex digits), as `capsule call` and "
                                 "`capsule approvals` print it");
  if ((r = require_operator(verb, verb)))
    return r;
  enum gw_approval_status was = GW_APPROVAL_NONE;
  struct gw_approval a = {0};
  _cleanup_free_ char *audit_error = NULL;
  /* a running serve decides it on its state connection, as alone */
  int via = cli_approve_via_serve(&o, verb, id, approve, &was, &a, &audit_error);
  if (via < 0)
    return CLI_EXIT_INVALID;
  struct gw_state *st = NULL;
  if (!via && (r = open_state(&o, &st)))
    return r;
  struct cap_error err = {0};
  r = via ? 0 : gw_approval_resolve(st, id, approve, &was, &a, &err);
  bool done = r == 0 && was == GW_APPROVAL_PENDING;
  if (r < 0)
    cli_error(verb, err.message);
  else if (was == GW_APPROVAL_NONE)
    fprintf(stderr, "capsule %s: no approval %s; `capsule approvals` lists the pending ones\n",
            verb, id);
  else if (!done)
    fprintf(stderr, "capsule %s: approval %s is %s, not pending; nothing changed\n", verb, id,
            gw_approval_status_name(was));
  else {
    printf("%s %s: ", approve ? "approved" : "denied", id);
    describe_approval(stdout, &a);
    printf("repeat the call to %s\n", approve ? "run it (once)" : "see it refused");
    _cleanup_free_ char *what = cap_xasprintf("approval %s for user %s", id, a.user);
    if (via && audit_error) {
      fprintf(stderr, "capsule: the change was made but cannot be audited: %s\n", audit_error);
      done = false;
    } else if (!via && audit_change(st, &o, verb, a.capability, a.tool, what))
      done = false;
  }
  gw_approval_clear(&a);
  cap_error_clear(&err);
  gw_state_close(st);
  return done ? CLI_EXIT_OK : CLI_EXIT_INVALID;
}

int cmd_approve(int argc, char **argv) { return resolve_approval("approve", argc, argv, true); }
int cmd_deny(int argc, char **argv) { return resolve_approval("deny", argc, argv, false); }
