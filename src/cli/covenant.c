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

struct cov_opts {
  struct common c;
  const char *scope, *expires, *issuer, *agent, *priority, *parent, *format;
  bool caps_given;
};

enum {
  O_CAPS = 300,
  O_STATE,
  O_JSON,
  O_SCOPE,
  O_EXPIRES,
  O_ISSUER,
  O_AGENT,
  O_PRIORITY,
  O_PARENT,
  O_TIMEOUT,
  O_USER,
  O_FORMAT
};

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

static const char token_help[] =
    "usage: capsule token key | keygen FILE | trust [PUBKEY] | list [--json]\n"
    "       capsule token issue SUBJECT ACTION [--scope JSON] [--expires T]\n"
    "       capsule token revoke ID | import FILE|-\n"
    "\n"
    "Covenant capability tokens (Ed25519, Covenant's signed encoding). `key` prints\n"
    "the local issuer's public key (base58; made on first use, its secret sealed in\n"
    "the state). `issue` signs ACTION for SUBJECT (a base58 public key, or `local`)\n"
    "with it and prints the token's id and Covenant's JSON of it; `revoke ID` (the id\n"
    "or its first 8+ characters) withdraws one; `import FILE` records a token signed\n"
    "elsewhere (Covenant's JSON; - for stdin); `trust PUBKEY` adds a trust root\n"
    "whose grants count too (without PUBKEY: the roots); `keygen FILE` writes a new\n"
    "private key file for `dispatch --issuer`.\n"
    "\n"
    "      --scope JSON  the token's scope (default {}), checked as Covenant does\n"
    "      --expires T   a duration from now (30s, 10m, 2h, 7d) or RFC 3339 UTC\n"
    "      --json        list: an array of objects\n"
    "      --state DIR   capsule's state\n"
    "  -h, --help        this text\n"
    "\n"
    "exit status: 0 ok, 1 invalid input, 2 usage, 4 refused inside a sandbox\n";

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

static int parse(const char *verb, const char *help, int argc, char **argv, struct cov_opts *o)
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

/* ---- token ---- */

/* A duration from now (30s, 10m, 2h, 7d) or RFC 3339 UTC, as epoch ms. */
static bool parse_expiry(const char *s, uint64_t *ms)
{
  char *end;
  uint64_t now = cap_now_ms(CLOCK_REALTIME);
  unsigned long long v = strtoull(s, &end, 10);
  if (end != s && *s != '-' && end[0] && !end[1] && v <= 100000000ULL) {
    uint64_t unit = *end == 's'   ? 1000
                    : *end == 'm' ? 60000
                    : *end == 'h' ? 3600000
                    : *end == 'd' ? 86400000
                                  : 0;
    if (unit) {
      *ms = now + v * unit;
      return true;
    }
  }
  struct tm tm = {0};
  const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest)
    return false;
  unsigned frac = 0;
  if (*rest == '.') {
    int n = 0;
    if (sscanf(rest, ".%3u%n", &frac, &n) != 1 || n != 4)
      return false;
    rest += n;
  }
  if (strcmp(rest, "Z"))
    return false;
  time_t t = timegm(&tm);
  if (t < 0)
    return false;
  *ms = (uint64_t)t * 1000 + frac;
  return true;
}

static int fail(const char *verb, struct cap_error *err, int code)
{
  cli_error(verb, err->message);
  cap_error_clear(err);
  return code;
}

static int token_key(struct gw_state *st)
{
  unsigned char pub[32];
  bool made;
  struct cap_error err = {0};
  if (gw_issuer_key(st, pub, NULL, &made, &err) < 0)
    return fail("token key", &err, CLI_EXIT_INVALID);
  char b58[GW_KEY_B58];
  cap_base58_encode(pub, 32, b58);
  printf("%s\n", b58);
  if (made)
    fprintf(stderr, "capsule token key: made the local issuer key (its secret is sealed in the "
                    "state)\n");
  return 0;
}

static int token_keygen(const char *path)
{
  unsigned char pub[32], sk[64];
  crypto_sign_keypair(pub, sk);
  char hex[65];
  sodium_bin2hex(hex, sizeof hex, sk, 32);
  sodium_memzero(sk, sizeof sk);
  _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  bool ok = fd >= 0 && write(fd, hex, 64) == 64 && write(fd, "\n", 1) == 1;
  sodium_memzero(hex, sizeof hex);
  if (!ok) {
    fprintf(stderr, "capsule token keygen: cannot write %s: %s (it must not exist yet)\n", path,
            strerror(errno));
    return CLI_EXIT_INVALID;
  }
  char b58[GW_KEY_B58];
  cap_base58_encode(pub, 32, b58);
  printf("%s\n", b58);
  return 0;
}

/* The subject: `local` (the issuer key itself) or a base58 public key. */
static int subject_of(struct gw_state *st, const struct cov_opts *o, const char *arg,
                      unsigned char key[32], char **display)
{
  struct cap_error err = {0};
  bool made;
  if (strcmp(arg, "local") == 0) {
    if (gw_issuer_key(st, key, NULL, &made, &err) < 0)
      return fail("token issue", &err, CLI_EXIT_INVALID);
    *display = cap_xasprintf("%s@local", o->c.login);
    return 0;
  }
  if (!cap_base58_decode(arg, strlen(arg), key, 32))
    return cli_usage_error("token issue",
                           "SUBJECT is `local` or a base58 Ed25519 public key (32 bytes), not "
                           "'%s'",
                           arg);
  *display = cap_xasprintf("%.8s@peer", arg);
  return 0;
}

static int token_issue(struct gw_state *st, const struct cov_opts *o, const char *subject_arg,
                       const char *action)
{
  uint64_t expires_at = 0;
  if (o->expires && !parse_expiry(o->expires, &expires_at))
    return cli_usage_error("token issue",
                           "--expires takes a duration (30s, 10m, 2h, 7d) or RFC 3339 UTC "
                           "(2030-01-01T00:00:00Z), not '%s'",
                           o->expires);
  unsigned char subject[32];
  _cleanup_free_ char *display = NULL;
  int r = subject_of(st, o, subject_arg, subject, &display);
  if (r)
    return r;
  struct gw_token t;
  struct cap_error err = {0};
  if (gw_token_issue(st, subject, display, action, o->scope, o->expires != NULL, expires_at, &t,
                     &err) < 0)
    return fail("token issue", &err, CLI_EXIT_INVALID);
  char sig[GW_SIG_B58];
  cap_base58_encode(t.signature, 64, sig);
  struct cap_buf json = {0}, what = {0};
  gw_token_json(&t, &json);
  struct cap_jw w;
  cap_jw_init(&w, &what, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "subject_display");
  cap_jw_string(&w, t.subject_display);
  cap_jw_key(&w, "action");
  cap_jw_string(&w, t.action);
  cap_jw_key(&w, "granted_by_display");
  cap_jw_string(&w, t.granted_by_display);
  cap_jw_key(&w, "signature_b58");
  cap_jw_string(&w, sig);
  cap_jw_end_object(&w);
  r = audit_change(st, &o->c, "token-issue", "", t.action, what.data);
  printf("%s\n%s\n", sig, json.data);
  cap_buf_free(&json);
  cap_buf_free(&what);
  gw_token_free(&t);
  return r;
}

static int token_revoke(struct gw_state *st, const struct cov_opts *o, const char *id)
{
  struct gw_token t;
  struct cap_error err = {0};
  int r = gw_token_revoke(st, id, &t, &err);
  if (r < 0)
    return fail("token revoke", &err, CLI_EXIT_INVALID);
  char sig[GW_SIG_B58];
  cap_base58_encode(t.signature, 64, sig);
  struct cap_buf what = {0};
  struct cap_jw w;
  cap_jw_init(&w, &what, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "subject_display");
  cap_jw_string(&w, t.subject_display);
  cap_jw_key(&w, "action");
  cap_jw_string(&w, t.action);
  cap_jw_key(&w, "signature_b58");
  cap_jw_string(&w, sig);
  cap_jw_key(&w, "removed");
  cap_jw_bool(&w, true);
  cap_jw_end_object(&w);
  r = audit_change(st, &o->c, "token-revoke", "", t.action, what.data);
  printf("revoked %s (%s for %s)\n", sig, t.action, t.subject_display);
  cap_buf_free(&what);
  gw_token_free(&t);
  return r;
}

static int token_import(struct gw_state *st, const struct cov_opts *o, const char *path)
{
  char *json = NULL;
  size_t len = 0;
  struct gw_token t;
  struct cap_error err = {0};
  if (cap_read_file(path, 1u << 20, &json, &len, &err) < 0)
    return fail("token import", &err, CLI_EXIT_INVALID);
  int r = gw_token_import(st, json, len, &t, &err);
  free(json);
  if (r < 0)
    return fail("token import", &err, CLI_EXIT_INVALID);
  char sig[GW_SIG_B58];
  cap_base58_encode(t.signature, 64, sig);
  struct cap_buf what = {0};
  struct cap_jw w;
  cap_jw_init(&w, &what, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "subject_display");
  cap_jw_string(&w, t.subject_display);
  cap_jw_key(&w, "action");
  cap_jw_string(&w, t.action);
  cap_jw_key(&w, "granted_by_display");
  cap_jw_string(&w, t.granted_by_display);
  cap_jw_key(&w, "signature_b58");
  cap_jw_string(&w, sig);
  cap_jw_end_object(&w);
  r = audit_change(st, &o->c, "token-issue", "", t.action, what.data);
  printf("%s\n", sig);
  cap_buf_free(&what);
  gw_token_free(&t);
  return r;
}

static const struct cli_column token_cols[] = {
    {"id", 14, NULL},    {"subject", 12, NULL},    {"action", 22, NULL},
    {"scope", 18, NULL}, {"expires", 24, "never"}, {"status", 0, NULL},
};

static void token_row(void *arg, const struct gw_token *t, enum gw_token_status status,
                      int64_t issued_ms)
{
  struct cli_listing *l = arg;
  char sig[GW_SIG_B58], subject[GW_KEY_B58], expires[40] = "";
  cap_base58_encode(t->signature, 64, sig);
  cap_base58_encode(t->subject, 32, subject);
  if (t->expires) {
    time_t secs = (time_t)(t->expires_at / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    strftime(expires, sizeof expires, "%Y-%m-%dT%H:%M:%SZ", &tm);
  }
  char short_sig[13], short_subject[12];
  snprintf(short_sig, sizeof short_sig, "%.12s", sig);
  snprintf(short_subject, sizeof short_subject, "%.10s", subject);
  const char *values[] = {
      l->json ? sig : short_sig,   l->json ? subject : short_subject, t->action, t->scope,
      t->expires ? expires : NULL, gw_token_status_name(status)};
  (void)issued_ms;
  cli_listing_row(l, token_cols, values, 6);
}

static void trust_row(void *arg, const char *key, const char *added, bool local)
{
  (void)arg;
  printf("%s  %s\n", key, local ? "(the local issuer)" : added);
}

static int token_trust(struct gw_state *st, const struct cov_opts *o, const char *key)
{
  struct cap_error err = {0};
  if (!key) {
    if (gw_trust_list(st, trust_row, NULL, &err) < 0)
      return fail("token trust", &err, CLI_EXIT_INVALID);
    return 0;
  }
  unsigned char pub[32];
  if (!cap_base58_decode(key, strlen(key), pub, 32))
    return cli_usage_error("token trust", "PUBKEY is a base58 Ed25519 public key, not '%s'", key);
  bool added;
  if (gw_trust_add(st, pub, &added, &err) < 0)
    return fail("token trust", &err, CLI_EXIT_INVALID);
  printf("%s %s\n", added ? "trusted" : "already trusted", key);
  return added ? audit_change(st, &o->c, "token-trust", "", "", key) : 0;
}

static int token_run(struct gw_state *st, const struct cov_opts *o, const char *sub, int n,
                     char **pos)
{
  bool change = !strcmp(sub, "issue") || !strcmp(sub, "revoke") || !strcmp(sub, "import") ||
                (!strcmp(sub, "trust") && n);
  int r = change ? require_operator("token", "changing capability tokens") : 0;
  if (r)
    return r;
  if (!strcmp(sub, "key") && n == 0)
    return token_key(st);
  if (!strcmp(sub, "issue") && n == 2)
    return token_issue(st, o, pos[0], pos[1]);
  if (!strcmp(sub, "revoke") && n == 1)
    return token_revoke(st, o, pos[0]);
  if (!strcmp(sub, "import") && n == 1)
    return token_import(st, o, pos[0]);
  if (!strcmp(sub, "trust") && n <= 1)
    return token_trust(st, o, n ? pos[0] : NULL);
  if (!strcmp(sub, "list") && n == 0) {
    struct cli_listing l;
    struct cap_error err = {0};
    cli_listing_begin(&l, o->c.json);
    r = gw_token_list(st, token_row, &l, &err);
    cli_listing_end(&l, r == 0);
    return r < 0 ? fail("token list", &err, CLI_EXIT_INVALID) : 0;
  }
  return cli_usage_error("token", "give key, keygen FILE, issue SUBJECT ACTION, import FILE|-, "
                                  "revoke ID, list or trust [PUBKEY]");
}

static int cmd_token(int argc, char **argv)
{
  struct cov_opts o = {0};
  int r = parse("token", token_help, argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  if (optind >= argc)
    return cli_usage_error("token", "give key, keygen FILE, issue, revoke, list or trust");
  const char *sub = argv[optind];
  int n = argc - optind - 1;
  if (!strcmp(sub, "keygen"))
    return n == 1 ? token_keygen(argv[optind + 1]) : cli_usage_error("token", "keygen FILE");
  struct gw_state *st = NULL;
  if ((r = open_state(&o.c, &st)))
    return r;
  r = token_run(st, &o, sub, n, argv + optind + 1);
  gw_state_close(st);
  return r;
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
      return fail("budget show", &err, CLI_EXIT_INVALID);
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
    return fail("budget set", &err, CLI_EXIT_INVALID);
  _cleanup_free_ char *what =
      cap_xasprintf("%" PRIu64 " of %" PRIu64 " credits left", b.tokens, b.capacity);
  printf("agent %s: %s\n", id, what);
  return audit_change(st, &o->c, "budget-set", id, "dispatch", what);
}

static int cmd_budget(int argc, char **argv)
{
  struct cov_opts o = {0};
  int r = parse("budget", budget_help, argc, argv, &o);
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
  return r < 0 ? fail("dispatch", &err, CLI_EXIT_INVALID) : 0;
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
  int r = parse("dispatch", dispatch_help, argc, argv, &o);
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
    return fail("audit verify", &err, CLI_EXIT_INVALID);
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
  int r = parse("audit", audit_format_help, argc, argv, &o);
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
    r = fail("audit export", &err, CLI_EXIT_INVALID);
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
