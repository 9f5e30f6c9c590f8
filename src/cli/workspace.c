/* capsule workspace ls | rm: the Selu workspaces (per user and session)
 * and caches (per user and capability) a state directory keeps
 * (gateway/volumes.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/gateway.h"
#include "cli/listing.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "core/escape.h"
#include "gateway/state.h"
#include "gateway/volumes.h"

static const char workspace_help[] =
    "usage: capsule workspace ls [--state DIR] [--json]\n"
    "       capsule workspace rm [--state DIR] [--user U] [--cache] NAME\n"
    "\n"
    "The workspaces of Selu capabilities with filesystem: workspace (one per\n"
    "user and session, seen at /workspace, kept across calls and restarts) and\n"
    "the caches of those with cache.enabled (one per user and capability, at\n"
    "/cache), kept under STATE/volumes.\n"
    "\n"
    "  ls   each one: kind (workspace or cache), user, name (the session, or the\n"
    "       capability), bytes used, last modified, and where it is\n"
    "  rm   removes user U's workspace of session NAME (with --cache: U's cache\n"
    "       of capability NAME) and everything in it. A warm instance of that\n"
    "       session keeps what it had open: stop it first (capsule stop).\n"
    "       Refused inside a capsule sandbox (exit 4).\n"
    "\n"
    "      --user U      whose (default the login name)\n"
    "      --cache       rm: a cache, not a workspace\n"
    "      --json        ls: an array of objects (kind, user, name, bytes,\n"
    "                    modified, path)\n"
    "      --state DIR   capsule's state (default $CAPSULE_STATE, else\n"
    "                    $XDG_STATE_HOME/capsule or ~/.local/state/capsule)\n"
    "  -h, --help        this text\n";

struct ws_args {
  const char *state, *user;
  bool json, cache;
};

static int ws_parse(int argc, char **argv, struct ws_args *a)
{
  enum { OPT_STATE = 256, OPT_JSON, OPT_USER, OPT_CACHE };
  static const struct option options[] = {{"state", required_argument, NULL, OPT_STATE},
                                          {"json", no_argument, NULL, OPT_JSON},
                                          {"user", required_argument, NULL, OPT_USER},
                                          {"cache", no_argument, NULL, OPT_CACHE},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    switch (c) {
    case OPT_STATE: a->state = optarg; break;
    case OPT_JSON: a->json = true; break;
    case OPT_USER: a->user = optarg; break;
    case OPT_CACHE: a->cache = true; break;
    case 'h': fputs(workspace_help, stdout); return -1;
    default: return cli_option_error("workspace", argv, "h");
    }
  }
  a->state = cli_default(a->state, "CAPSULE_STATE");
  return 0;
}

static char *volumes_dir_of(const struct ws_args *a)
{
  _cleanup_free_ char *dflt = a->state ? NULL : gw_state_default_dir();
  return cap_xasprintf("%s/volumes", a->state ? a->state : dflt);
}

static int ws_ls(const struct ws_args *a)
{
  _cleanup_free_ char *dir = volumes_dir_of(a);
  struct gw_volume_info *v = NULL;
  size_t n = 0;
  struct cap_error err = {0};
  if (gw_volume_list(dir, &v, &n, &err) < 0) {
    cli_error("workspace", err.message);
    cap_error_clear(&err);
    return CLI_EXIT_INVALID;
  }
  static const struct cli_column cols[] = {
      {"kind", 10, NULL},  {"user", 12, NULL},     {"name", 24, NULL},
      {"bytes", 12, NULL}, {"modified", 21, NULL}, {"path", 0, NULL},
  };
  struct cli_listing l;
  cli_listing_begin(&l, a->json);
  if (!a->json) {
    const char *const head[] = {"KIND", "USER", "NAME", "BYTES", "MODIFIED", "PATH"};
    cli_listing_row(&l, cols, head, 6);
  }
  for (size_t i = 0; i < n; i++) {
    char bytes[32], modified[32];
    snprintf(bytes, sizeof bytes, "%llu", (unsigned long long)v[i].bytes);
    time_t t = (time_t)(v[i].modified_ms / 1000);
    struct tm tm;
    strftime(modified, sizeof modified, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    const char *const row[] = {
        gw_volume_kind_name(v[i].kind), v[i].user, v[i].name, bytes, modified, v[i].path};
    cli_listing_row(&l, cols, row, 6);
  }
  cli_listing_end(&l, true);
  gw_volume_list_free(v, n);
  return CLI_EXIT_OK;
}

static int ws_rm(const struct ws_args *a, const char *name)
{
  int r = require_operator("workspace", "removing a workspace");
  if (r)
    return r;
  _cleanup_free_ char *dir = volumes_dir_of(a);
  const char *user = a->user ? a->user : cli_login_name();
  enum gw_volume_kind kind = a->cache ? GW_VOLUME_CACHE : GW_VOLUME_WORKSPACE;
  struct cap_error err = {0};
  if (gw_volume_remove(dir, kind, user, name, &err) < 0) {
    cli_error("workspace", err.message);
    cap_error_clear(&err);
    return CLI_EXIT_INVALID;
  }
  struct cap_buf b = {0};
  cap_buf_printf(&b, "removed the %s %s of user %s", gw_volume_kind_name(kind), name, user);
  cap_escape_fput(stdout, b.data, 1024);
  fputc('\n', stdout);
  cap_buf_free(&b);
  return CLI_EXIT_OK;
}

int cmd_workspace(int argc, char **argv)
{
  struct ws_args a = {0};
  int r = ws_parse(argc, argv, &a);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  int rest = argc - optind;
  const char *sub = rest > 0 ? argv[optind] : "";
  if (strcmp(sub, "ls") == 0 && rest == 1)
    return ws_ls(&a);
  if (strcmp(sub, "rm") == 0 && rest == 2)
    return ws_rm(&a, argv[optind + 1]);
  return cli_usage_error("workspace", "give ls, or rm NAME (see capsule workspace --help)");
}
