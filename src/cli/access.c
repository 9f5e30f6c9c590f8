/* access issue|list|revoke: the bearer tokens of `capsule serve`'s network
 * front doors (gateway/access.h). Issuing and revoking are the
 * operator's (refused inside a sandbox) and audited like policy changes. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/gateway.h"
#include "cli/listing.h"
#include "core/cleanup.h"
#include "gateway/access.h"
#include "gateway/approval.h"

static const struct cli_column columns[] = {
    {"name", 20, NULL}, {"user", 16, NULL}, {"operator", 9, NULL}, {"created", 0, NULL}};

static void list_row(void *arg, const struct gw_access *a)
{
  const char *values[] = {a->name, a->user, a->operator_ ? "yes" : "no", a->created};
  cli_listing_row(arg, columns, values, ARRAY_SIZE(columns));
}

static int access_list(struct gw_state *st, const struct common *o)
{
  struct cli_listing l;
  cli_listing_begin(&l, o->json);
  struct cap_error err = {0};
  int r = gw_access_list(st, list_row, &l, &err);
  cli_listing_end(&l, r == 0);
  if (r < 0) {
    cli_error("access list", err.message);
    cap_error_clear(&err);
    return CLI_EXIT_INVALID;
  }
  if (!o->json && l.n == 0)
    printf("no access tokens; `capsule access issue NAME` makes one\n");
  return CLI_EXIT_OK;
}

static int access_issue(struct gw_state *st, const struct common *o, const char *name)
{
  char token[GW_ACCESS_TOKEN_LEN + 1];
  struct cap_error err = {0};
  if (gw_access_issue(st, name, o->user, o->operator_, token, &err) < 0) {
    cli_error("access issue", err.message);
    cap_error_clear(&err);
    return CLI_EXIT_INVALID;
  }
  _cleanup_free_ char *what = cap_xasprintf("access %s issued for user %s%s", name, o->user,
                                            o->operator_ ? " (operator)" : "");
  int ar = audit_change(st, o, "access-issue", "(access)", name, what);
  printf("%s\n", token);
  fprintf(stderr,
          "capsule: %s; the token above is shown once (clients send it as `Authorization: "
          "Bearer TOKEN`)\n",
          what);
  return ar;
}

static int access_revoke(struct gw_state *st, const struct common *o, const char *name)
{
  bool found = false;
  struct cap_error err = {0};
  if (gw_access_revoke(st, name, &found, &err) < 0) {
    cli_error("access revoke", err.message);
    cap_error_clear(&err);
    return CLI_EXIT_INVALID;
  }
  if (!found) {
    fprintf(stderr, "capsule access revoke: no access named %s (`capsule access list`)\n", name);
    return CLI_EXIT_INVALID;
  }
  _cleanup_free_ char *what = cap_xasprintf("access %s revoked", name);
  printf("%s\n", what);
  return audit_change(st, o, "access-revoke", "(access)", name, what);
}

int cmd_access(int argc, char **argv)
{
  struct common o = {0};
  int r = parse_common("access", argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  int rest = argc - optind;
  const char *sub = rest > 0 ? argv[optind] : "";
  bool list = strcmp(sub, "list") == 0;
  if (!list && strcmp(sub, "issue") && strcmp(sub, "revoke"))
    return cli_usage_error("access", "give issue NAME, list or revoke NAME");
  if (rest != (list ? 1 : 2))
    return cli_usage_error("access", list ? "list takes no arguments" : "%s takes one NAME", sub);
  if ((o.operator_ || o.user_given) && strcmp(sub, "issue"))
    return cli_usage_error("access", "--operator and --user belong to issue");
  if (!list && (r = require_operator("access", "access tokens")))
    return r;
  struct gw_state *st = NULL;
  if ((r = open_state(&o, &st)))
    return r;
  if (list)
    r = access_list(st, &o);
  else if (strcmp(sub, "issue") == 0)
    r = access_issue(st, &o, argv[optind + 1]);
  else
    r = access_revoke(st, &o, argv[optind + 1]);
  gw_state_close(st);
  return r;
}
