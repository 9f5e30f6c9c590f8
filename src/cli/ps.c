/* capsule ps, capsule stop: the warm instances a state directory's keepers
 * hold (gateway/instance.h). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/gateway.h"
#include "cli/listing.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "gateway/approval.h"
#include "gateway/instance.h"
#include "gateway/state.h"

#define STOP_WAIT_MS 10000

static const char ps_help[] =
    "usage: capsule ps [--state DIR] [--json]\n"
    "\n"
    "Lists the warm instances of Selu capabilities that the keepers of the state\n"
    "directory hold: the capability, the keeper's pid, the server's state\n"
    "(starting, serving, stopping), the contract it speaks (Capability, the Selu\n"
    "orchestrator's, or CapabilityService, the seed's), leases held (calls in\n"
    "progress) of the most allowed at once, how long it has been idle, and when\n"
    "it started.\n"
    "\n"
    "      --json        an array of objects (capability, pid, state, protocol,\n"
    "                    leases, idle, started)\n"
    "      --state DIR   capsule's state (default $CAPSULE_STATE, else\n"
    "                    $XDG_STATE_HOME/capsule or ~/.local/state/capsule)\n"
    "  -h, --help        this text\n";

static const char stop_help[] =
    "usage: capsule stop [--state DIR] CAPABILITY\n"
    "\n"
    "Stops the warm instances of CAPABILITY: its keeper stops the server (calls\n"
    "in progress fail) and exits; the next call starts a new one. Exits 0 once\n"
    "they are gone, 1 when there is none or one did not exit within 10 s. What\n"
    "their egress proxies decided since their last call is then stored in the\n"
    "state's egress log, with no call.\n"
    "Refused inside a capsule sandbox (exit 4), like approve.\n"
    "\n"
    "      --state DIR   capsule's state (default $CAPSULE_STATE, else\n"
    "                    $XDG_STATE_HOME/capsule or ~/.local/state/capsule)\n"
    "  -h, --help        this text\n";

struct ps_args {
  const char *state;
  bool json;
};

/* Parses --state, --json, --help; positional arguments stay at optind.
 * Returns 0, -1 after --help, or an exit status. */
static int ps_parse(const char *verb, const char *help, int argc, char **argv, struct ps_args *a)
{
  enum { OPT_STATE = 256, OPT_JSON };
  static const struct option options[] = {{"state", required_argument, NULL, OPT_STATE},
                                          {"json", no_argument, NULL, OPT_JSON},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    switch (c) {
    case OPT_STATE: a->state = optarg; break;
    case OPT_JSON: a->json = true; break;
    case 'h': fputs(help, stdout); return -1;
    default: return cli_option_error(verb, argv, "h");
    }
  }
  a->state = cli_default(a->state, "CAPSULE_STATE");
  return 0;
}

/* STATE/run, where the keepers' sockets and status files are. */
static char *run_dir_of(const struct ps_args *a)
{
  _cleanup_free_ char *dflt = a->state ? NULL : gw_state_default_dir();
  return cap_xasprintf("%s/run", a->state ? a->state : dflt);
}

static int list_instances(const char *verb, const struct ps_args *a, struct gw_instance_info **list,
                          size_t *n)
{
  _cleanup_free_ char *run = run_dir_of(a);
  struct cap_error err = {0};
  if (gw_instance_list(run, list, n, &err) < 0) {
    cli_error(verb, err.message);
    cap_error_clear(&err);
    return CLI_EXIT_INVALID;
  }
  return 0;
}

int cmd_ps(int argc, char **argv)
{
  struct ps_args a = {0};
  int r = ps_parse("ps", ps_help, argc, argv, &a);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  if (optind < argc)
    return cli_usage_error("ps", "takes no arguments ('%s')", argv[optind]);
  struct gw_instance_info *list = NULL;
  size_t n = 0;
  if ((r = list_instances("ps", &a, &list, &n)))
    return r;
  static const struct cli_column cols[] = {
      {"capability", 24, NULL}, {"pid", 8, NULL}, {"state", 9, NULL},   {"protocol", 18, "-"},
      {"leases", 7, NULL},      {"idle", 8, "-"}, {"started", 0, NULL},
  };
  struct cli_listing l;
  cli_listing_begin(&l, a.json);
  if (!a.json) {
    const char *const head[] = {"CAPABILITY", "PID",  "STATE",  "PROTOCOL",
                                "LEASES",     "IDLE", "STARTED"};
    cli_listing_row(&l, cols, head, 7);
  }
  uint64_t now = cap_now_ms(CLOCK_REALTIME);
  for (size_t i = 0; i < n; i++) {
    const struct gw_instance_info *in = &list[i];
    char pid[16], leases[32], idle[32], started[32];
    snprintf(pid, sizeof pid, "%d", in->pid);
    snprintf(leases, sizeof leases, "%u/%u", in->leases, in->max_leases);
    bool is_idle = in->idle_since_ms && in->state == GW_INSTANCE_SERVING;
    snprintf(idle, sizeof idle, "%llus",
             (unsigned long long)(now > in->idle_since_ms ? now - in->idle_since_ms : 0) / 1000);
    time_t t = (time_t)(in->started_ms / 1000);
    struct tm tm;
    strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    const char *const row[] = {in->capability,
                               pid,
                               gw_instance_state_name(in->state),
                               in->protocol[0] ? in->protocol : NULL,
                               leases,
                               is_idle ? idle : NULL,
                               started};
    cli_listing_row(&l, cols, row, 7);
  }
  cli_listing_end(&l, true);
  free(list);
  return CLI_EXIT_OK;
}

static void stopped_one(void *ctx, const struct gw_instance_info *inst,
                        const struct cap_error *failed)
{
  int *status = ctx;
  if (failed) {
    cli_error("stop", failed->message);
    *status = CLI_EXIT_INVALID;
  } else {
    printf("stopped %s (keeper pid %d)\n", inst->capability, inst->pid);
  }
}

int cmd_stop(int argc, char **argv)
{
  struct ps_args a = {0};
  int r = ps_parse("stop", stop_help, argc, argv, &a);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  if (argc - optind != 1)
    return cli_usage_error("stop", "takes one CAPABILITY");
  const char *cap = argv[optind];
  if ((r = require_operator("stop", "stopping an instance")))
    return r;
  _cleanup_free_ char *dflt = a.state ? NULL : gw_state_default_dir();
  int status = CLI_EXIT_OK;
  struct cap_error err = {0};
  long found =
      gw_instances_stop(a.state ? a.state : dflt, cap, STOP_WAIT_MS, stopped_one, &status, &err);
  if (found < 0) {
    cli_error("stop", err.message);
    cap_error_clear(&err);
    return CLI_EXIT_INVALID;
  }
  if (!found) {
    fprintf(stderr, "capsule stop: no running instance of %s (see capsule ps)\n", cap);
    return CLI_EXIT_INVALID;
  }
  return status;
}
