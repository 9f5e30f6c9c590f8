/* `capsule state migrate --from DIR --to URL`: an SQLite state moved into
 * PostgreSQL (gateway/state.h, gw_state_migrate), verified. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "gateway/state.h"

static const char state_help[] =
    "usage: capsule state migrate --from DIR --to postgres://...\n"
    "\n"
    "Copies the SQLite state in DIR (policies, sealed credentials, approvals,\n"
    "trigger state, budgets, tokens, the audit chain) into an empty PostgreSQL\n"
    "database, in one transaction, under DIR's state key (CAPSULE_STATE_KEY or\n"
    "CAPSULE_STATE_KEY_FILE, else DIR/key: give the gateways that key), then\n"
    "verifies it: every table's rows agree on both sides and the copied audit\n"
    "chain verifies. DIR is left as it was.\n"
    "\n"
    "      --from DIR    the SQLite state directory\n"
    "      --to URL      the database (postgres:// or postgresql://, libpq's URI)\n"
    "\n"
    "exit status: 0 copied and verified, 1 not (nothing is kept of a failed copy),\n"
    "2 usage\n";

static void table_line(void *arg, const char *table, int64_t rows)
{
  printf("  %-20s %" PRId64 " rows\n", table, rows);
}

int cmd_state(int argc, char **argv)
{
  if (argc < 2 || strcmp(argv[1], "migrate") != 0) {
    if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
      fputs(state_help, stdout);
      return CLI_EXIT_OK;
    }
    return cli_usage_error("state", "the verb is `state migrate --from DIR --to URL`");
  }
  static const struct option opts[] = {{"from", required_argument, NULL, 'f'},
                                       {"to", required_argument, NULL, 't'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *from = NULL, *to = NULL;
  int c;
  optind = 1;
  while ((c = getopt_long(argc - 1, argv + 1, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'f': from = optarg; break;
    case 't': to = optarg; break;
    case 'h': fputs(state_help, stdout); return CLI_EXIT_OK;
    default: return cli_option_error("state migrate", argv + 1, "h");
    }
  }
  if (!from || !to || optind != argc - 1)
    return cli_usage_error("state migrate", "give --from DIR and --to URL, and nothing else");
  struct cap_error err = {0};
  size_t records = 0;
  printf("copying %s into the database:\n", from);
  if (gw_state_migrate(from, to, table_line, NULL, &records, &err) < 0) {
    cli_error("state migrate", err.message);
    cap_error_clear(&err);
    return CLI_EXIT_INVALID;
  }
  printf("copied and verified: every table agrees; the audit chain verifies (%zu records)\n",
         records);
  return CLI_EXIT_OK;
}
