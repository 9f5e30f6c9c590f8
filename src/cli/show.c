/* capsule show PATH: the resolved capability manifest as JSON. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "core/cleanup.h"
#include "gateway/grants.h"
#include "manifest/load.h"

static const char show_help[] =
    "usage: capsule show [--compact] [--state DIR] PATH | --profile PROFILE\n"
    "\n"
    "Prints the fully-resolved capability manifest of one capability as JSON: a\n"
    "nono capability manifest (valid against nono's schema) plus capsule's own\n"
    "keys. Every default is explicit; every right that will be enforced is listed.\n"
    "\n"
    "      --profile P  a nono profile (a file, or a name: $XDG_CONFIG_HOME/nono/profiles,\n"
    "                   then nono's built-ins), compiled as nono compiles it to its\n"
    "                   manifest (`nono profile show P` with its manifest format)\n"
    "  -c, --compact  one line instead of indented JSON\n"
    "      --state DIR  add the operator's grants stored there (`capsule grant`);\n"
    "                 only when given\n"
    "  -h, --help     this text\n"
    "\n"
    "exit status: 0 ok, 1 invalid manifest, 2 usage\n";

/* spec as JSON, with the grants stored in state_dir (NULL: none). */
static char *show_json(const struct cap_spec *spec, const char *state_dir, bool pretty)
{
  struct gw_state *st = NULL;
  struct cap_error err = {0};
  if (!state_dir || gw_state_open(state_dir, &st, &err) < 0) {
    if (state_dir)
      fprintf(stderr, "capsule show: %s; the operator's grants are not shown\n", err.message);
    cap_error_clear(&err);
    return cap_spec_to_json(spec, pretty);
  }
  struct gw_granted g;
  char *json = NULL;
  if (gw_spec_with_grants(st, spec, &g, &err) == 0) {
    json = cap_spec_to_json(&g.spec, pretty);
    gw_granted_free(&g);
  } else {
    fprintf(stderr, "capsule show: %s; the operator's grants are not shown\n", err.message);
    cap_error_clear(&err);
    json = cap_spec_to_json(spec, pretty);
  }
  gw_state_close(st);
  return json;
}

static int show_one(const char *path, bool profile, struct cap_strv *files, struct cap_diags *diags,
                    bool pretty, const char *state_dir)
{
  _cleanup_(cap_spec_freep) struct cap_spec *spec = NULL;
  if (profile) {
    if (cap_manifest_load_profile(path, &spec, diags) < 0)
      return CLI_EXIT_INVALID;
    _cleanup_free_ char *json = cap_spec_to_json(spec, pretty);
    fputs(json, stdout);
    if (!pretty)
      putchar('\n');
    return CLI_EXIT_OK;
  }
  if (cap_manifest_discover(path, files, diags) < 0)
    return CLI_EXIT_INVALID;
  if (files->len != 1) {
    fprintf(stderr, "capsule show: %s holds %zu capabilities; name one of them:\n", path,
            files->len);
    for (size_t i = 0; i < files->len; i++)
      fprintf(stderr, "  capsule show %s\n", files->v[i]);
    return CLI_EXIT_USAGE;
  }
  if (cap_manifest_load(files->v[0], &spec, diags) < 0)
    return CLI_EXIT_INVALID;
  _cleanup_free_ char *json = show_json(spec, state_dir, pretty);
  fputs(json, stdout);
  if (!pretty)
    putchar('\n');
  return CLI_EXIT_OK;
}

int cmd_show(int argc, char **argv)
{
  static const struct option options[] = {
      {"compact", no_argument, NULL, 'c'},
      {"profile", required_argument, NULL, 'p'},
      {"state", required_argument, NULL, 's'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  bool pretty = true;
  const char *profile = NULL;
  const char *state_dir = NULL;
  int c;
  while ((c = getopt_long(argc, argv, "ch", options, NULL)) != -1) {
    switch (c) {
    case 'c': pretty = false; break;
    case 'p': profile = optarg; break;
    case 's': state_dir = optarg; break;
    case 'h': fputs(show_help, stdout); return CLI_EXIT_OK;
    default: return cli_option_error("show", argv, "ch");
    }
  }
  if (argc - optind != (profile ? 0 : 1))
    return cli_usage_error("show", profile ? "--profile names what to show; give no PATH"
                                           : "name exactly one manifest or capability directory");

  struct cap_diags diags = {0};
  struct cap_strv files = {0};
  int status = show_one(profile ? profile : argv[optind], profile != NULL, &files, &diags, pretty,
                        state_dir);
  cap_diags_sort(&diags);
  cap_diags_print(&diags, stderr);
  cap_diags_free(&diags);
  cap_strv_free(&files);
  return status;
}
