/* Covenant's verbs: token (capability tokens and trust roots), budget
 * (per-agent buckets) and dispatch (routing an intent to an agent and
 * running it as its issuer). Only this file prints for them. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/covenant.h"
#include "cli/gateway.h"
#include "cli/listing.h"
#include "core/base58.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/text.h"
#include "gateway/budget.h"
#include "gateway/call.h"
#include "gateway/covenant_audit.h"
#include "gateway/registry.h"
#include "gateway/router.h"
#include "gateway/tokens.h"

static const struct option cov_options[] = {
    {"caps", required_argument, NULL, O_CAPS},
    {"state", required_argument, NULL, O_STATE},
    {"json", no_argument, NULL, O_JSON},
    {"scope", required_argument, NULL, O_SCOPE},
    {"expires", required_argument, NULL, O_EXPIRES},
    {"issuer", required_argument, NULL, O_ISSUER},
    {"agent", required_argument, NULL, O_AGENT},
    {"priority", required_argument, NULL, O_PRIORITY},
    {"parent", required_argument, NULL, O_PARENT},
    {"timeout", required_argument, NULL, O_TIMEOUT},
    {"user", required_argument, NULL, O_USER},
    {"format", required_argument, NULL, O_FORMAT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static const char budget_help[] =
    "usage: capsule budget show [AGENT] [--json] | set AGENT CREDITS\n"
    "\n"
    "Covenant budgets: settlement.budget_credits_per_hour as a token bucket per\n"
    "agent, refilled continuously; each run spends one credit per started CPU\n"
    "second its sandbox used (at least one); an empty bucket refuses dispatches.\n"
    "`set` sets the credits left (at most the hourly capacity).\n"
    "\n"
    "      --caps DIR    the capabilities directory\n"
    "      --state DIR   capsule's state\n"
    "      --json        show: an array of objects\n"
    "  -h, --help        this text\n"
    "\n"
    "exit status: 0 ok, 1 invalid input, 2 usage, 4 refused inside a sandbox\n";

static const char dispatch_help[] =
    "usage: capsule dispatch [--agent ID] [--issuer KEYFILE] [--priority P]\n"
    "                        [--parent ID] [--caps DIR] [--state DIR] [--json] TEXT\n"
    "\n"
    "Routes the intent TEXT to a Covenant agent as Covenant's router scores it (its\n"
    "actions' keywords in the text; ties to the agent first by id) and runs it with\n"
    "the request line {id, text, issuer {display, pubkey}, issued_at, priority,\n"
    "parent}. The issuer (the local issuer key, or KEYFILE's) must hold a token for\n"
    "every action in the agent's capabilities.required; its budget must not be\n"
    "spent; the dispatch tool's policy applies as for `call`.\n"
    "\n"
    "      --agent ID    skip routing\n"
    "      --issuer F    an Ed25519 private key file (seed or secret key; raw, hex or\n"
    "                    base58)\n"
    "      --priority P  low, normal (default) or high\n"
    "      --caps DIR    the agents (default $COVENANT_HOME when set, else\n"
    "                    $CAPSULE_CAPS or ./capabilities)\n"
    "      --timeout S   wall-clock limit in seconds\n"
    "      --state DIR   capsule's state\n"
    "  -h, --help        this text\n"
    "\n"
    "exit status: 0 ok, 1 failed or no agent matches, 2 usage, 3 host cannot enforce,\n"
    "4 denied (policy, a missing capability token, a spent budget)\n";

int cov_parse(const char *verb, const char *help, int argc, char **argv, struct cov_opts *o)
{
  int ch;
  while ((ch = getopt_long(argc, argv, "h", cov_options, NULL)) != -1) {
    switch (ch) {
    case O_CAPS:
      o->c.caps = optarg;
      o->caps_given = true;
      break;
    case O_STATE: o->c.state = optarg; break;
    case O_JSON: o->c.json = true; break;
    case O_SCOPE: o->scope = optarg; break;
    case O_EXPIRES: o->expires = optarg; break;
    case O_ISSUER: o->issuer = optarg; break;
    case O_AGENT: o->agent = optarg; break;
    case O_PRIORITY: o->priority = optarg; break;
    case O_PARENT: o->parent = optarg; break;
    case O_FORMAT: o->format = optarg; break;
    case O_USER:
      o->c.user = optarg;
      o->c.user_given = true;
      break;
    case O_TIMEOUT: {
      char *end;
      unsigned long long v = strtoull(optarg, &end, 10);
      if (*end || !v || v > 31536000)
        return cli_usage_error(verb, "--timeout takes seconds from 1 to 31536000, not '%s'",
                               optarg);
      o->c.timeout_s = v;
      break;
    }
    case 'h': fputs(help, stdout); return -1;
    default: return cli_option_error(verb, argv, "h");
    }
  }
  /* Covenant's agents under $COVENANT_HOME unless --caps names others */
  const char *home = getenv("COVENANT_HOME");
  if (!o->caps_given && home && *home)
    o->c.caps = home;
  o->c.caps = cli_default(o->c.caps, "CAPSULE_CAPS");
  o->c.state = cli_default(o->c.state, "CAPSULE_STATE");
  const char *login = cli_login_name();
  if (!o->c.user)
    o->c.user = login;
  o->c.login = login;
  return 0;
}

int cov_fail(const char *verb, struct cap_error *err, int code)
{
  cli_error(verb, err->message);
  cap_error_clear(err);
  return code;
}

/* ---- budget ---- */

static const struct cli_column budget_cols[] = {
    {"agent", 20, NULL},
    {"credits_per_hour", 18, NULL},
    {"credits_left", 14, NULL},
    {"next_credit_ms", 0, NULL},
};

/* The Covenant agent named id, or NULL after saying why. */
static const struct cap_spec *agent_named(const char *verb, const struct gw_registry *reg,
                                          const char *id)
{
  const struct cap_spec *spec = gw_registry_find(reg, id);
  if (!spec || spec->format != CAP_FORMAT_COVENANT)
    fprintf(stderr, "capsule %s: no Covenant agent \"%s\" in %s; `capsule list` shows them\n", verb,
            id, reg->dir);
  return spec && spec->format == CAP_FORMAT_COVENANT ? spec : NULL;
}

static int budget_row(struct gw_state *st, struct cli_listing *l, const struct cap_spec *spec)
{
  uint64_t now = cap_now_ms(CLOCK_REALTIME);
  char cap[24], left[24] = "-", next[32] = "-";
  snprintf(cap, sizeof cap, "%" PRIu64, spec->budget_credits_per_hour);
  if (spec->budget_credits_per_hour) {
    struct gw_bucket b;
    struct cap_error err = {0};
    if (gw_budget_get(st, spec->id, spec->budget_credits_per_hour, now, &b, &err) < 0)
      return cov_fail("budget show", &err, CLI_EXIT_INVALID);
    snprintf(left, sizeof left, "%" PRIu64, b.tokens);
    uint64_t eta = gw_budget_refill_eta(&b, b.tokens + 1, now);
    if (b.tokens < b.capacity)
      snprintf(next, sizeof next, "%" PRIu64, eta - now);
  }
  const char *values[] = {spec->id, spec->budget_credits_per_hour ? cap : "0 (not enforced)",
                          spec->budget_credits_per_hour ? left : NULL,
                          spec->budget_credits_per_hour ? next : NULL};
  cli_listing_row(l, budget_cols, values, 4);
  return 0;
}

static int budget_show(struct gw_state *st, const struct cov_opts *o, const struct gw_registry *reg,
                       const char *id)
{
  const struct cap_spec *one = id ? agent_named("budget show", reg, id) : NULL;
  if (id && !one)
    return CLI_EXIT_INVALID;
  struct cli_listing l;
  cli_listing_begin(&l, o->c.json);
  int r = 0;
  for (size_t i = 0; r == 0 && i < reg->n; i++)
    if ((!one || reg->caps[i] == one) && reg->caps[i]->format == CAP_FORMAT_COVENANT)
      r = budget_row(st, &l, reg->caps[i]);
  cli_listing_end(&l, r == 0);
  return r;
}

static int budget_set(struct gw_state *st, const struct cov_opts *o, const struct gw_registry *reg,
                      const char *id, const char *credits)
{
  const struct cap_spec *spec = agent_named("budget set", reg, id);
  if (!spec)
    return CLI_EXIT_INVALID;
  char *end;
  unsigned long long v = strtoull(credits, &end, 10);
  if (*end || !*credits || *credits == '-' || v > INT64_MAX)
    return cli_usage_error("budget set", "CREDITS is a whole number of credits, not '%s'", credits);
  if (!spec->budget_credits_per_hour) {
    fprintf(stderr,
            "capsule budget set: agent %s's settlement.budget_credits_per_hour is 0: its budget "
            "is not enforced (set it in its agent.toml first)\n",
            id);
    return CLI_EXIT_INVALID;
  }
  int r = require_operator("budget", "setting a budget");
  if (r)
    return r;
  struct gw_bucket b;
  struct cap_error err = {0};
  if (gw_budget_set(st, id, spec->budget_credits_per_hour, v, cap_now_ms(CLOCK_REALTIME), &b,
                    &err) < 0)
    return cov_fail("budget set", &err, CLI_EXIT_INVALID);
  _cleanup_free_ char *what =
      cap_xasprintf("%" PRIu64 " of %" PRIu64 " credits left", b.tokens, b.capacity);
  printf("agent %s: %s\n", id, what);
  return audit_change(st, &o->c, "budget-set", id, "dispatch", what);
}

static int cmd_budget(int argc, char **argv)
{
  struct cov_opts o = {0};
  int r = cov_parse("budget", budget_help, argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  int n = optind < argc ? argc - optind - 1 : -1;
  const char *sub = n >= 0 ? argv[optind] : "";
  if (!((!strcmp(sub, "show") && n <= 1) || (!strcmp(sub, "set") && n == 2)))
    return cli_usage_error("budget", "give show [AGENT] or set AGENT CREDITS");
  struct gw_registry reg;
  bool bad;
  if ((r = load_registry(&o.c, &reg, &bad)))
    return r;
  struct gw_state *st = NULL;
  if ((r = open_state(&o.c, &st)) == 0) {
    r = !strcmp(sub, "show") ? budget_show(st, &o, &reg, n ? argv[optind + 1] : NULL)
                             : budget_set(st, &o, &reg, argv[optind + 1], argv[optind + 2]);
    gw_state_close(st);
  }
  gw_registry_free(&reg);
  return r;
}

/* ---- dispatch ---- */

/* The issuer: KEYFILE's key, else the local issuer's. */
static int issuer_of(struct gw_state *st, const struct cov_opts *o, struct gw_issuer *is)
{
  struct cap_error err = {0};
  unsigned char sk[64];
  bool made;
  int r = o->issuer ? gw_key_file_read(o->issuer, is->pubkey, sk, &err)
                    : gw_issuer_key(st, is->pubkey, NULL, &made, &err);
  sodium_memzero(sk, sizeof sk);
  is->local = !o->issuer;
  return r < 0 ? cov_fail("dispatch", &err, CLI_EXIT_INVALID) : 0;
}

/* The dispatch tool's arguments: {"text", "priority"?, "parent"?}. */
static char *dispatch_args(const struct cov_opts *o, const char *text)
{
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "text");
  cap_jw_string(&w, text);
  if (o->priority) {
    cap_jw_key(&w, "priority");
    cap_jw_string(&w, o->priority);
  }
  if (o->parent) {
    cap_jw_key(&w, "parent");
    cap_jw_string(&w, o->parent);
  }
  cap_jw_end_object(&w);
  return cap_buf_steal(&b);
}

/* --agent's id, checked, or the routed agent's; NULL after saying why
 * (and auditing a refused id). */
static const char *choose_agent(struct gw_state *st, const struct cov_opts *o,
                                const struct gw_registry *reg, const char *text)
{
  if (o->agent && strchr(o->agent, '@')) {
    _cleanup_free_ char *what = cap_xasprintf("refused: agent id \"%s\" contains '@'", o->agent);
    audit_change(st, &o->c, "dispatch-refused", "", "dispatch", what);
    fprintf(stderr,
            "capsule dispatch: --agent \"%s\": an agent id never contains '@' (Covenant "
            "reserves it for the display <id>@agent); give the id alone\n",
            o->agent);
    return NULL;
  }
  if (o->agent)
    return o->agent;
  unsigned score = 0;
  const struct cap_spec *spec = gw_route(reg, text, &score);
  if (!spec) {
    fprintf(stderr,
            "capsule dispatch: no agent in %s matches the intent (none of their capabilities' "
            "keywords is in the text); name one with --agent ID\n",
            reg->dir);
    return NULL;
  }
  fprintf(stderr, "capsule dispatch: routed to %s (score %u)\n", spec->id, score);
  return spec->id;
}

static int cmd_dispatch(int argc, char **argv)
{
  struct cov_opts o = {0};
  int r = cov_parse("dispatch", dispatch_help, argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  if (argc - optind != 1)
    return cli_usage_error("dispatch", "give the intent TEXT (one argument)");
  if (o.priority && strcmp(o.priority, "low") && strcmp(o.priority, "normal") &&
      strcmp(o.priority, "high"))
    return cli_usage_error("dispatch", "--priority takes low, normal or high, not '%s'",
                           o.priority);
  const char *text = argv[optind];
  struct gw_registry reg;
  bool bad;
  if ((r = load_registry(&o.c, &reg, &bad)))
    return r;
  struct gw_state *st = NULL;
  if ((r = open_state(&o.c, &st))) {
    gw_registry_free(&reg);
    return r;
  }
  _cleanup_free_ char *display = cap_xasprintf("%s@local", o.c.user);
  struct gw_issuer issuer = {.display = display};
  const char *agent = NULL;
  r = issuer_of(st, &o, &issuer);
  if (r == 0 && !(agent = choose_agent(st, &o, &reg, text)))
    r = CLI_EXIT_INVALID;
  if (r == 0) {
    _cleanup_free_ char *args = dispatch_args(&o, text);
    r = cli_call_run("dispatch", &o.c, &reg, st, agent, "dispatch", args, strlen(args), &issuer);
  }
  gw_state_close(st);
  gw_registry_free(&reg);
  return r;
}

/* ---- audit export|verify --format covenant ---- */

static const char audit_format_help[] =
    "usage: capsule audit export --format covenant DIR [--state DIR]\n"
    "       capsule audit verify --format covenant DIR\n"
    "\n"
    "`export` writes the audit log as Covenant's DIR/events.jsonl and\n"
    "DIR/events.chain.jsonl (a SHA-256 chain from 64 zeros); records with a Covenant\n"
    "kind (dispatches, capability checks, token grants and revocations, spent\n"
    "budgets) are exported, the rest left out. `verify` checks such a pair, one\n"
    "Covenant wrote too.\n"
    "\n"
    "exit status: 0 ok (verified), 1 invalid or not verified, 2 usage\n";

static int audit_verify_covenant(const char *dir)
{
  struct gw_covenant_report rep;
  struct cap_error err = {0};
  if (gw_covenant_verify(dir, &rep, &err) < 0)
    return cov_fail("audit verify", &err, CLI_EXIT_INVALID);
  int r = CLI_EXIT_OK;
  if (rep.failures.len) {
    for (size_t i = 0; i < rep.failures.len; i++)
      fprintf(stderr, "capsule audit verify: %s: %s\n", dir, rep.failures.v[i]);
    fprintf(stderr, "capsule audit verify: %s: not verified (%zu events, %zu anchors)\n", dir,
            rep.events, rep.anchors);
    r = CLI_EXIT_INVALID;
  } else {
    printf("covenant audit verified: %zu events, root %s\n", rep.events, rep.root);
  }
  gw_covenant_report_free(&rep);
  return r;
}

int cmd_audit_format(int argc, char **argv)
{
  struct cov_opts o = {0};
  int r = cov_parse("audit", audit_format_help, argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  if (!o.format || strcmp(o.format, "covenant"))
    return cli_usage_error("audit", "--format takes covenant, not '%s'", o.format ? o.format : "");
  if (argc - optind != 2 || (strcmp(argv[optind], "export") && strcmp(argv[optind], "verify")))
    return cli_usage_error("audit", "give export DIR or verify DIR with --format covenant");
  const char *dir = argv[optind + 1];
  if (!strcmp(argv[optind], "verify"))
    return audit_verify_covenant(dir);
  struct gw_state *st = NULL;
  if ((r = open_state(&o.c, &st)))
    return r;
  size_t n = 0, left = 0;
  struct cap_error err = {0};
  if (gw_covenant_export(st, dir, &n, &left, &err) < 0)
    r = cov_fail("audit export", &err, CLI_EXIT_INVALID);
  else
    printf("exported %zu events to %s/events.jsonl (+ events.chain.jsonl); %zu records have no "
           "Covenant kind and were left out\n",
           n, dir, left);
  gw_state_close(st);
  return r;
}

int cmd_covenant(int argc, char **argv)
{
  if (!strcmp(argv[0], "token"))
    return cmd_token(argc, argv);
  if (!strcmp(argv[0], "budget"))
    return cmd_budget(argc, argv);
  return cmd_dispatch(argc, argv);
}
