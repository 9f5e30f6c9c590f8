/* policy set, policy rm, policy list: the operator's policies (docs/gateway.md).
 * `set` names a capability and tool the registry (--caps) holds, and both
 * changes print what they did and are audited. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/gateway.h"
#include "cli/listing.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "core/diag.h"
#include "core/escape.h"
#include "gateway/approval.h"
#include "gateway/registry.h"
#include "gateway/selu.h"
#include "gateway/state.h"

static const char set_usage[] =
    "policy set CAPABILITY TOOL allow|ask|block [--user U] [--caps DIR] [--force]";
static const char rm_usage[] = "policy rm CAPABILITY TOOL [--user U]";

static void print_policy(void *arg, const char *cap, const char *tool, const char *user,
                         enum cap_policy policy)
{
  static const struct cli_column cols[] = {{"capability", 20, NULL},
                                           {"tool", 24, NULL},
                                           {"policy", 6, NULL},
                                           {"user", 0, "(operator default)"}};
  const char *values[] = {cap, tool, cap_policy_name(policy), *user ? user : NULL};
  cli_listing_row(arg, cols, values, ARRAY_SIZE(cols));
}

/* "a, b, c" (at most 20), or "none" */
static char *names(const char *(*name)(const void *, size_t), const void *items, size_t n)
{
  struct cap_buf b = {0};
  for (size_t i = 0; i < n && i < 20; i++)
    cap_buf_printf(&b, "%s%s", i ? ", " : "", name(items, i));
  if (n > 20)
    cap_buf_puts(&b, ", ...");
  if (!b.data)
    cap_buf_puts(&b, "none");
  return b.data;
}

static const char *spec_name(const void *items, size_t i)
{
  return ((const struct cap_spec *const *)items)[i]->id;
}

static const char *tool_name(const void *items, size_t i)
{
  return ((const struct cap_tool *)items)[i].name;
}

/* The tool among the capability's own, or (tool_source dynamic) those
 * last discovered; an exit status naming the known ones when it is not. */
static int known_tool(const struct common *o, const struct cap_spec *spec, const char *tool)
{
  if (gw_spec_tool(spec, tool))
    return 0;
  struct gw_tools found = {0};
  const struct cap_tool *tools = spec->tools;
  size_t n = spec->n_tools;
  if (spec->tool_source == CAP_TOOL_SOURCE_DYNAMIC) {
    _cleanup_free_ char *dflt = o->state ? NULL : gw_state_default_dir();
    _cleanup_free_ char *cache = cap_xasprintf("%s/cache", o->state ? o->state : dflt);
    struct cap_error err = {0};
    gw_selu_cached_tools(cache, spec, &found, &err);
    cap_error_clear(&err);
    tools = found.tools;
    n = found.n;
  }
  int r = 0;
  if (!gw_tools_find(&found, tool) || !found.n) {
    _cleanup_free_ char *have = names(tool_name, tools, n);
    fprintf(stderr, "capsule policy: capability %s has no tool \"%s\" (it has: %s)%s\n", spec->id,
            tool, have,
            spec->tool_source == CAP_TOOL_SOURCE_DYNAMIC
                ? "; its tools are discovered on its first call: call it once, or give --force"
                : "");
    r = CLI_EXIT_INVALID;
  }
  gw_tools_free(&found);
  return r;
}

/* policy set names what the registry holds: a typo would otherwise store
 * a policy nothing ever reads. --force sets it regardless (a capability
 * not installed yet, or a --caps that cannot be read). */
static int check_known(const struct common *o, const char *cap, const char *tool)
{
  const char *dir = o->caps ? o->caps : "capabilities";
  struct gw_registry reg = {0};
  struct cap_diags diags = {0};
  int r = gw_registry_load(dir, &reg, &diags);
  if (r < 0) {
    fprintf(stderr, "capsule policy: cannot read the capabilities directory %s: %s; %s\n", dir,
            strerror(-r),
            o->force ? "setting the policy without checking it (--force)"
                     : "give the one that holds the capability with --caps DIR (or "
                       "CAPSULE_CAPS), or --force to set the policy without checking it");
    cap_diags_free(&diags);
    gw_registry_free(&reg);
    return o->force ? 0 : CLI_EXIT_INVALID;
  }
  const struct cap_spec *spec = gw_registry_find(&reg, cap);
  if (!spec && !o->force) {
    cap_diags_sort(&diags); /* its manifest may be the one that did not load */
    cap_diags_print(&diags, stderr);
    _cleanup_free_ char *have = names(spec_name, reg.caps, reg.n);
    fprintf(stderr,
            "capsule policy: no capability \"%s\" in %s (it has: %s); `capsule list` shows "
            "them, --force sets the policy anyway\n",
            cap, reg.dir, have);
    r = CLI_EXIT_INVALID;
  } else if (spec && !o->force) {
    r = known_tool(o, spec, tool);
  }
  cap_diags_free(&diags);
  gw_registry_free(&reg);
  return r;
}

/* One line: what was done, the names escaped (they come from argv). */
static void confirm(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void confirm(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  _cleanup_free_ char *line = NULL;
  if (vasprintf(&line, fmt, ap) < 0)
    line = NULL;
  va_end(ap);
  if (line)
    cap_escape_fput(stdout, line, 4096);
  putchar('\n');
}

static int policy_set(const struct common *o, char **pos, bool user_given)
{
  int p = strcmp(pos[2], "allow") == 0   ? CAP_POLICY_ALLOW
          : strcmp(pos[2], "ask") == 0   ? CAP_POLICY_ASK
          : strcmp(pos[2], "block") == 0 ? CAP_POLICY_BLOCK
                                         : -1;
  if (p < 0)
    return cli_usage_error("policy", "the decision is allow, ask or block, not '%s'", pos[2]);
  int r = require_operator("policy", "policy set");
  if (r || (r = check_known(o, pos[0], pos[1])))
    return r;
  struct gw_state *st = NULL;
  if ((r = open_state(o, &st)))
    return r;
  struct cap_error err = {0};
  r = gw_policy_set(st, pos[0], pos[1], user_given ? o->user : "", (enum cap_policy)p, &err);
  if (r == 0) /* what was approved under the old policy is not approved under the new one */
    r = gw_approval_void_for(st, pos[0], pos[1], &err);
  if (r < 0)
    cli_error("policy", err.message);
  cap_error_clear(&err);
  _cleanup_free_ char *what = user_given ? cap_xasprintf("%s for user %s", pos[2], o->user)
                                         : cap_xasprintf("%s (operator default)", pos[2]);
  if (r == 0)
    confirm("policy set: %s.%s %s", pos[0], pos[1], what);
  int ar = r == 0 ? audit_change(st, o, "policy-set", pos[0], pos[1], what) : CLI_EXIT_INVALID;
  gw_state_close(st);
  return ar;
}

static int policy_rm(const struct common *o, char **pos, bool user_given)
{
  int r = require_operator("policy", "policy rm");
  if (r)
    return r;
  struct gw_state *st = NULL;
  if ((r = open_state(o, &st)))
    return r;
  struct cap_error err = {0};
  bool found = false;
  const char *user = user_given ? o->user : "";
  r = gw_policy_rm(st, pos[0], pos[1], user, &found, &err);
  if (r == 0 && found) /* an approval given under the removed policy is void too */
    r = gw_approval_void_for(st, pos[0], pos[1], &err);
  if (r < 0)
    cli_error("policy", err.message);
  cap_error_clear(&err);
  _cleanup_free_ char *whose =
      user_given ? cap_xasprintf("user %s's override", o->user) : cap_xstrdup("operator default");
  if (r == 0 && !found) {
    fprintf(stderr, "capsule policy: no %s for %s.%s; `capsule policy list` shows them\n", whose,
            pos[0], pos[1]);
    r = -ENOENT;
  }
  if (r == 0)
    confirm("policy removed: %s.%s %s (%s)", pos[0], pos[1], whose,
            user_given ? "the operator default or the manifest's applies"
                       : "the manifest's recommendation applies, else block");
  int ar = r == 0 ? audit_change(st, o, "policy-rm", pos[0], pos[1], whose) : CLI_EXIT_INVALID;
  gw_state_close(st);
  return ar;
}

static int policy_list(const struct common *o)
{
  struct gw_state *st = NULL;
  int r = open_state(o, &st);
  if (r)
    return r;
  struct cap_error err = {0};
  struct cli_listing l;
  cli_listing_begin(&l, o->json);
  r = gw_policy_list(st, print_policy, &l, &err);
  cli_listing_end(&l, r == 0);
  if (r < 0)
    cli_error("policy", err.message);
  cap_error_clear(&err);
  gw_state_close(st);
  return r < 0 ? CLI_EXIT_INVALID : CLI_EXIT_OK;
}

int cmd_policy(int argc, char **argv)
{
  struct common o = {0};
  int r = parse_common("policy", argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  /* the sub-verb is the first argument that is not an option */
  const char *sub = optind < argc ? argv[optind] : "";
  int rest = argc - optind - 1;
  char **pos = argv + optind + 1;
  if (strcmp(sub, "set") == 0)
    return rest == 3 ? policy_set(&o, pos, o.user_given) : cli_usage_error("policy", set_usage);
  if (strcmp(sub, "rm") == 0)
    return rest == 2 ? policy_rm(&o, pos, o.user_given) : cli_usage_error("policy", rm_usage);
  if (strcmp(sub, "list") == 0)
    return policy_list(&o);
  return cli_usage_error("policy", "%s, %s, or policy list [--json]", set_usage, rm_usage);
}
