/* `capsule token`: Covenant capability tokens and trust roots (the verb
 * table and shared options in covenant.c). */
#include <errno.h>
#include <fcntl.h>
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
#include "gateway/tokens.h"

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

static int token_key(struct gw_state *st)
{
  unsigned char pub[32];
  bool made;
  struct cap_error err = {0};
  if (gw_issuer_key(st, pub, NULL, &made, &err) < 0)
    return cov_fail("token key", &err, CLI_EXIT_INVALID);
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
      return cov_fail("token issue", &err, CLI_EXIT_INVALID);
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

/* A token's audit record: granted (token-issue: issue, import) or
 * revoked (token-revoke), its outcome the fields of Covenant's
 * capability_granted / capability_revoked. */
static int token_audit(struct gw_state *st, const struct cov_opts *o, const struct gw_token *t,
                       bool revoked, char sig[GW_SIG_B58])
{
  cap_base58_encode(t->signature, 64, sig);
  struct cap_buf what = {0};
  struct cap_jw w;
  cap_jw_init(&w, &what, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "subject_display");
  cap_jw_string(&w, t->subject_display);
  cap_jw_key(&w, "action");
  cap_jw_string(&w, t->action);
  if (!revoked) {
    cap_jw_key(&w, "granted_by_display");
    cap_jw_string(&w, t->granted_by_display);
  }
  cap_jw_key(&w, "signature_b58");
  cap_jw_string(&w, sig);
  if (revoked) {
    cap_jw_key(&w, "removed");
    cap_jw_bool(&w, true);
  }
  cap_jw_end_object(&w);
  int r =
      audit_change(st, &o->c, revoked ? "token-revoke" : "token-issue", "", t->action, what.data);
  cap_buf_free(&what);
  return r;
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
    return cov_fail("token issue", &err, CLI_EXIT_INVALID);
  char sig[GW_SIG_B58];
  struct cap_buf json = {0};
  gw_token_json(&t, &json);
  r = token_audit(st, o, &t, false, sig);
  printf("%s\n%s\n", sig, json.data);
  cap_buf_free(&json);
  gw_token_free(&t);
  return r;
}

static int token_revoke(struct gw_state *st, const struct cov_opts *o, const char *id)
{
  struct gw_token t;
  struct cap_error err = {0};
  int r = gw_token_revoke(st, id, &t, &err);
  if (r < 0)
    return cov_fail("token revoke", &err, CLI_EXIT_INVALID);
  char sig[GW_SIG_B58];
  r = token_audit(st, o, &t, true, sig);
  printf("revoked %s (%s for %s)\n", sig, t.action, t.subject_display);
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
    return cov_fail("token import", &err, CLI_EXIT_INVALID);
  int r = gw_token_import(st, json, len, &t, &err);
  free(json);
  if (r < 0)
    return cov_fail("token import", &err, CLI_EXIT_INVALID);
  char sig[GW_SIG_B58];
  r = token_audit(st, o, &t, false, sig);
  printf("%s\n", sig);
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
      return cov_fail("token trust", &err, CLI_EXIT_INVALID);
    return 0;
  }
  unsigned char pub[32];
  if (!cap_base58_decode(key, strlen(key), pub, 32))
    return cli_usage_error("token trust", "PUBKEY is a base58 Ed25519 public key, not '%s'", key);
  bool added;
  if (gw_trust_add(st, pub, &added, &err) < 0)
    return cov_fail("token trust", &err, CLI_EXIT_INVALID);
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
    return r < 0 ? cov_fail("token list", &err, CLI_EXIT_INVALID) : 0;
  }
  return cli_usage_error("token", "give key, keygen FILE, issue SUBJECT ACTION, import FILE|-, "
                                  "revoke ID, list or trust [PUBKEY]");
}

int cmd_token(int argc, char **argv)
{
  struct cov_opts o = {0};
  int r = cov_parse("token", token_help, argc, argv, &o);
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
