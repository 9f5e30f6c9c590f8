/* `capsule cred`: credentials sealed in the state (set, rm, list), by
 * capability and name or by a scope's bare name. */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/gateway.h"
#include "cli/listing.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "core/escape.h"
#include "gateway/state.h"

/* The secret from the terminal (echo off) or stdin; never from argv. */
static char *read_secret(size_t *len)
{
  bool tty = isatty(STDIN_FILENO);
  struct termios old, quiet;
  if (tty) {
    fprintf(stderr, "value (not echoed): ");
    tcgetattr(STDIN_FILENO, &old);
    quiet = old;
    quiet.c_lflag &= ~(tcflag_t)ECHO;
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
  }
  struct cap_buf b = {0};
  char buf[4096];
  ssize_t n;
  while ((n = read(STDIN_FILENO, buf, sizeof buf)) > 0) {
    cap_buf_append(&b, buf, (size_t)n);
    if (tty && memchr(buf, '\n', (size_t)n))
      break;
    if (b.len > 65536)
      break;
  }
  if (tty) {
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
    fprintf(stderr, "\n");
  }
  sodium_memzero(buf, sizeof buf);
  while (b.len && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == '\r'))
    b.data[--b.len] = '\0';
  *len = b.len;
  return b.data;
}

/* Which credentials a cred command names: a capability's or the shared
 * ones, a scope, a user (user scope only). For list, each part may be
 * left open. */
struct cred_sel {
  const char *cap; /* NULL: shared (or, for list without --shared, any) */
  const char *name;
  bool any_cap;
  enum cap_secret_scope scope;
  bool any_scope;
  const char *user; /* NULL: any (list) */
};

struct cred_print {
  const struct cred_sel *sel;
  struct cli_listing l;
};

static void print_cred(void *arg, const char *cap, const char *name, enum cap_secret_scope scope,
                       const char *user, const char *updated)
{
  struct cred_print *cp = arg;
  const struct cred_sel *sel = cp->sel;
  if ((!sel->any_cap && (cap ? !sel->cap || strcmp(cap, sel->cap) : sel->cap != NULL)) ||
      (!sel->any_scope && scope != sel->scope) ||
      (sel->user && scope == CAP_SCOPE_USER && strcmp(user, sel->user)))
    return;
  static const struct cli_column cols[] = {{"capability", 20, "(shared)"},
                                           {"name", 28, NULL},
                                           {"scope", 6, NULL},
                                           {"user", 16, "-"},
                                           {"updated", 0, NULL}};
  const char *values[] = {cap, name, scope == CAP_SCOPE_USER ? "user" : "system",
                          *user ? user : NULL, updated};
  cli_listing_row(&cp->l, cols, values, ARRAY_SIZE(cols));
}

static const char cred_forms[] =
    "cred set|rm CAPABILITY NAME --scope system|user [--user U], cred set|rm --shared NAME "
    "--scope system|user [--user U], or cred list [CAPABILITY | --shared] [--scope S] [--user U] "
    "[--json]";

/* The positional arguments and options into sel; a usage exit or 0. */
static int cred_select(const char *sub, int rest, char **pos, const struct common *o,
                       struct cred_sel *sel)
{
  bool list = strcmp(sub, "list") == 0;
  int want = (o->shared ? 0 : 1) + (list ? 0 : 1);
  if ((list && rest > want) || (!list && rest != want) || (o->shared && rest > want))
    return cli_usage_error("cred", "%s", cred_forms);
  if (!list && !o->scope)
    return cli_usage_error("cred", "cred %s needs --scope system or --scope user", sub);
  sel->cap = !o->shared && rest > 0 ? pos[0] : NULL;
  sel->any_cap = list && !o->shared && rest == 0;
  sel->name = list ? NULL : pos[rest - 1];
  sel->any_scope = !o->scope;
  sel->scope = o->scope && strcmp(o->scope, "user") == 0 ? CAP_SCOPE_USER : CAP_SCOPE_SYSTEM;
  if (o->user_given && !sel->any_scope && sel->scope == CAP_SCOPE_SYSTEM)
    return cli_usage_error("cred", "a system credential belongs to no user: drop --user, or "
                                   "give --scope user");
  sel->user = !list || o->user_given ? o->user : NULL;
  return 0;
}

/* "user credential for user U, of capability C" / "system credential,
 * shared": which row a set or rm touched. */
static char *cred_row_text(const struct cred_sel *sel)
{
  bool user = sel->scope == CAP_SCOPE_USER;
  return cap_xasprintf("%s credential%s%s, %s%s", user ? "user" : "system",
                       user ? " for user " : "", user ? sel->user : "",
                       sel->cap ? "of capability " : "shared", sel->cap ? sel->cap : "");
}

static int cred_set(struct gw_state *st, const struct cred_sel *sel, struct cap_error *err)
{
  size_t len = 0;
  char *value = read_secret(&len);
  int r;
  if (!value || !len) {
    fprintf(stderr, "capsule cred: no value given on stdin\n");
    r = -EINVAL;
  } else {
    r = gw_cred_set(st, sel->cap, sel->name, sel->scope, sel->user, value, len, err);
  }
  gw_secret_free(value);
  return r;
}

static int cred_rm(struct gw_state *st, const struct cred_sel *sel, struct cap_error *err)
{
  bool found = false;
  int r = gw_cred_rm(st, sel->cap, sel->name, sel->scope, sel->user, &found, err);
  if (r == 0 && !found) {
    fprintf(stderr, "capsule cred: no %s credential %s %s%s\n",
            sel->scope == CAP_SCOPE_USER ? "user" : "system", sel->name,
            sel->cap ? "for capability " : "shared", sel->cap ? sel->cap : "");
    r = -ENOENT;
  }
  return r;
}

int cmd_cred(int argc, char **argv)
{
  struct common o = {0};
  int r = parse_common("cred", argc, argv, &o);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  const char *sub = optind < argc ? argv[optind] : "";
  if (strcmp(sub, "set") && strcmp(sub, "rm") && strcmp(sub, "list"))
    return cli_usage_error("cred", "%s", cred_forms);
  struct cred_sel sel = {0};
  if ((r = cred_select(sub, argc - optind - 1, argv + optind + 1, &o, &sel)))
    return r;
  struct gw_state *st = NULL;
  if ((r = open_state(&o, &st)))
    return r;
  struct cap_error err = {0};
  bool change = strcmp(sub, "list") != 0;
  if (strcmp(sub, "set") == 0)
    r = cred_set(st, &sel, &err);
  else if (strcmp(sub, "rm") == 0)
    r = cred_rm(st, &sel, &err);
  else {
    struct cred_print cp = {.sel = &sel};
    cli_listing_begin(&cp.l, o.json);
    r = gw_cred_list(st, print_cred, &cp, &err);
    cli_listing_end(&cp.l, r == 0);
  }
  if (err.message)
    cli_error("cred", err.message);
  cap_error_clear(&err);
  int ar = 0;
  if (r == 0 && change) { /* which row, never its value */
    _cleanup_free_ char *what = cred_row_text(&sel);
    _cleanup_free_ char *line = cap_xasprintf(
        "credential %s: %s (%s)", strcmp(sub, "set") == 0 ? "set" : "removed", sel.name, what);
    cap_escape_fput(stdout, line, 4096);
    putchar('\n');
    ar = audit_change(st, &o, strcmp(sub, "set") == 0 ? "cred-set" : "cred-rm", sel.cap, sel.name,
                      what);
  }
  gw_state_close(st);
  return r < 0 ? CLI_EXIT_INVALID : ar;
}
