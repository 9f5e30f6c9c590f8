/* `capsule grant CAPABILITY --host H[:P] | --read P | --write P | --rw P`,
 * `capsule grant list [CAPABILITY] [--json]`, `capsule revoke CAPABILITY
 * (the same flags)`: rights the operator gives a capability without editing
 * its manifest, stored in the state (gateway/plugin_state.h), added to its
 * sandbox at call time (gateway/grants.h) and audited. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/gateway.h"
#include "cli/listing.h"
#include "cli/plugin.h"
#include "core/cleanup.h"
#include "core/escape.h"
#include "gateway/instance.h"
#include "gateway/plugin_state.h"
#include "gateway/state.h"

#define MAX_PATH_GRANTS 32
#define STOP_WAIT_MS 10000 /* as capsule stop */

struct grant_arg {
  enum gw_grant_kind kind;
  const char *value;
};

/* Takes the grant flags out of argv (the common parser does not know them). */
static int take_grants(const char *verb, int *argc, char **argv, struct grant_arg *out, size_t *n)
{
  static const char *const flags[] = {"--host", "--read", "--write", "--rw"};
  *n = 0;
  for (int i = 1; i < *argc;) {
    int k = -1;
    for (int f = 0; f < 4; f++)
      if (strcmp(argv[i], flags[f]) == 0)
        k = f;
    if (k < 0) {
      i++;
      continue;
    }
    if (i + 1 >= *argc)
      return cli_usage_error(verb, "%s needs a value", flags[k]);
    if (*n >= 16)
      return cli_usage_error(verb, "give at most 16 grants at once");
    out[(*n)++] = (struct grant_arg){(enum gw_grant_kind)k, argv[i + 1]};
    memmove(&argv[i], &argv[i + 2], (size_t)(*argc - i - 2) * sizeof *argv);
    *argc -= 2;
    argv[*argc] = NULL;
  }
  return 0;
}

/* A host is host or host:port (1..65535), a name or an address without
 * spaces; a path is absolute. NULL when fine, else why not (allocated). */
static char *grant_check(const struct grant_arg *g)
{
  const char *v = g->value;
  if (g->kind != GW_GRANT_HOST)
    return v[0] == '/' && !strstr(v, "/../") && strlen(v) < PATH_MAX
               ? NULL
               : cap_xasprintf("--%s takes an absolute path, not '%s'",
                               gw_grant_kind_names[g->kind], v);
  const char *colon = strrchr(v, ':');
  size_t host_len = colon ? (size_t)(colon - v) : strlen(v);
  bool ok = host_len > 0 && host_len < 254;
  for (size_t i = 0; ok && i < host_len; i++)
    ok = (v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z') ||
         (v[i] >= '0' && v[i] <= '9') || v[i] == '.' || v[i] == '-' || v[i] == '*';
  if (ok && colon) {
    char *end;
    long port = strtol(colon + 1, &end, 10);
    ok = *end == '\0' && colon[1] && port >= 1 && port <= 65535;
  }
  return ok ? NULL : cap_xasprintf("--host takes HOST or HOST:PORT (port 1..65535), not '%s'", v);
}

struct list_ctx {
  struct cli_listing *l;
  size_t paths;
};

static const struct cli_column grant_cols[] = {
    {"capability", 20, NULL}, {"kind", 6, NULL}, {"value", 40, NULL}, {"created", 0, NULL}};

static void grant_row(void *arg, const char *cap, enum gw_grant_kind kind, const char *value,
                      const char *created)
{
  struct list_ctx *c = arg;
  c->paths += kind != GW_GRANT_HOST;
  if (c->l) {
    const char *v[] = {cap, gw_grant_kind_names[kind], value, created};
    cli_listing_row(c->l, grant_cols, v, 4);
  }
}

static int grant_list(const struct common *o, struct gw_state *st, const char *cap)
{
  struct cli_listing l;
  cli_listing_begin(&l, o->json);
  struct list_ctx c = {.l = &l};
  struct cap_error err = {0};
  int r = gw_grant_list(st, cap, grant_row, &c, &err);
  cli_listing_end(&l, r == 0);
  if (r < 0) {
    cli_error("grant list", err.message);
    cap_error_clear(&err);
    return CLI_EXIT_INVALID;
  }
  return 0;
}

/* *changed: a grant was added or removed (each is committed on its own:
 * one refused later leaves the earlier ones done) */
static int grant_change(const struct common *o, struct gw_state *st, const char *verb,
                        const char *cap, const struct grant_arg *g, size_t n, bool *changed)
{
  bool add = strcmp(verb, "grant") == 0;
  struct list_ctx c = {0};
  struct cap_error err = {0};
  if (add && gw_grant_list(st, cap, grant_row, &c, &err) < 0) {
    cli_error(verb, err.message);
    cap_error_clear(&err);
    return CLI_EXIT_INVALID;
  }
  for (size_t i = 0; i < n; i++) {
    _cleanup_free_ char *m = NULL;
    bool found = true;
    int r;
    if (add && g[i].kind != GW_GRANT_HOST && ++c.paths > MAX_PATH_GRANTS)
      r = cap_error_set(&err, E2BIG, "capability %s has %d path grants already; revoke one first",
                        cap, MAX_PATH_GRANTS);
    else
      r = add ? gw_grant_add(st, cap, g[i].kind, g[i].value, &err)
              : gw_grant_rm(st, cap, g[i].kind, g[i].value, &found, &err);
    if (r < 0 || !found) {
      if (r < 0)
        cli_error(verb, err.message);
      else
        cli_error("revoke", m = cap_xasprintf("%s has no %s grant %s", cap,
                                              gw_grant_kind_names[g[i].kind], g[i].value));
      cap_error_clear(&err);
      return CLI_EXIT_INVALID;
    }
    *changed = true;
    _cleanup_free_ char *what = cap_xasprintf("%s %s", gw_grant_kind_names[g[i].kind], g[i].value);
    _cleanup_free_ char *line = cap_xasprintf("%s: %s %s", add ? "granted" : "revoked", cap, what);
    cap_escape_fput(stdout, line, 8192);
    putchar('\n');
    if ((r = audit_change(st, o, add ? "grant" : "revoke", cap, "", what)))
      return r;
  }
  return 0;
}

struct revoked {
  const char *cap;
  int status;
};

static void stopped_revoked(void *ctx, const struct gw_instance_info *inst,
                            const struct cap_error *failed)
{
  struct revoked *r = ctx;
  if (failed) {
    _cleanup_free_ char *m = cap_xasprintf(
        "%s: the warm server started with the revoked grant did not stop (%s); stop it with "
        "`capsule stop %s`",
        r->cap, failed->message, r->cap);
    cli_error("revoke", m);
    r->status = CLI_EXIT_INVALID;
    return;
  }
  _cleanup_free_ char *line =
      cap_xasprintf("stopped %s (keeper pid %d): it ran with the revoked grant", r->cap, inst->pid);
  cap_escape_fput(stdout, line, 8192);
  putchar('\n');
}

/* After a revoke, the capability's warm servers (Selu instances, MCP
 * servers) end at once: each runs with the grants of its start. No later
 * call reaches one (the digest of what a sandbox may reach names it), but
 * until it idled out it would keep what was revoked, and go on using it.
 * Calls in progress on them fail, as under `capsule stop`. 1 when one did
 * not end within STOP_WAIT_MS. */
static int stop_warm(const struct common *o, const char *cap)
{
  _cleanup_free_ char *dflt = o->state ? NULL : gw_state_default_dir();
  struct revoked r = {.cap = cap, .status = CLI_EXIT_OK};
  struct cap_error err = {0};
  if (gw_instances_revoke(o->state ? o->state : dflt, cap, STOP_WAIT_MS, stopped_revoked, &r,
                          &err) < 0) {
    cli_error("revoke", err.message);
    cap_error_clear(&err);
    return CLI_EXIT_INVALID;
  }
  return r.status;
}

static int grant_verb(const char *verb, int argc, char **argv)
{
  struct grant_arg g[16];
  size_t n = 0;
  int r = take_grants(verb, &argc, argv, g, &n);
  struct common o = {0};
  if (r || (r = parse_common(verb, argc, argv, &o)))
    return r < 0 ? CLI_EXIT_OK : r;
  int rest = argc - optind;
  bool list = strcmp(verb, "grant") == 0 && rest >= 1 && strcmp(argv[optind], "list") == 0;
  if (list ? (rest > 2 || n) : (rest != 1 || !n))
    return cli_usage_error(verb,
                           "give CAPABILITY and --host H[:P], --read P, --write P or --rw "
                           "P%s",
                           strcmp(verb, "grant") == 0 ? "; or list [CAPABILITY]" : "");
  for (size_t i = 0; i < n; i++) {
    _cleanup_free_ char *why = grant_check(&g[i]);
    if (why) {
      cli_error(verb, why);
      return CLI_EXIT_INVALID;
    }
  }
  if (!list && (r = require_operator(verb, "changing grants")))
    return r;
  const char *cap = list ? (rest == 2 ? argv[optind + 1] : NULL) : argv[optind];
  struct gw_state *st = NULL;
  if ((r = open_state(&o, &st)))
    return r;
  bool changed = false;
  r = list ? grant_list(&o, st, cap) : grant_change(&o, st, verb, cap, g, n, &changed);
  gw_state_close(st);
  /* a revoke that removed any grant stops the warm servers, even when a
   * later one of the same command failed (the earlier are committed) */
  if (changed && strcmp(verb, "revoke") == 0) {
    int s = stop_warm(&o, cap);
    r = r ? r : s;
  }
  return r;
}

int cmd_grant(int argc, char **argv) { return grant_verb("grant", argc, argv); }
int cmd_revoke(int argc, char **argv) { return grant_verb("revoke", argc, argv); }
