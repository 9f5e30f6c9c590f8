/* capsule export oci CAPABILITY DIR: the capability as an OCI runtime
 * bundle (gateway/export.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/gateway.h"
#include "core/cleanup.h"
#include "gateway/export.h"
#include "gateway/registry.h"
#include "gateway/state.h"
#include "image/image.h"

static const char export_help[] =
    "usage: capsule export oci [--caps DIR] [--state DIR] [--netns PATH] CAPABILITY DIR\n"
    "\n"
    "Writes CAPABILITY as an OCI runtime bundle in DIR (new): config.json and\n"
    "rootfs, for runc. A Selu image's root comes from the image store (hard links\n"
    "where possible) with its Entrypoint, Cmd, Env and WorkingDir and Selu's\n"
    "runner conventions; x-capsule.command gets an empty root with the host's\n"
    "system directories and the package bound read-only. The bundle carries the\n"
    "grants as mounts, the namespaces (user with the capability's own host ids as\n"
    "root), capsule's seccomp deny-list, no capabilities, no_new_privs, rlimits\n"
    "and the memory, CPU and pids limits. It cannot carry Landlock, the egress\n"
    "proxy or credentials (docs/images.md).\n"
    "\n"
    "      --netns PATH  join this network namespace (/run/netns/NAME); default a\n"
    "                    new, empty one (none when the network is unrestricted)\n"
    "      --caps DIR    the capabilities (default $CAPSULE_CAPS, else ./capabilities)\n"
    "      --state DIR   capsule's state (default $CAPSULE_STATE, else\n"
    "                    $XDG_STATE_HOME/capsule or ~/.local/state/capsule)\n"
    "  -h, --help        this text\n"
    "\n"
    "exit status: 0 written, 1 failed, 2 usage, 3 the image is not in the store.\n";

static int fail(int r, struct cap_error *err)
{
  cli_error("export", err->message);
  int code = cli_exit_for(r, err);
  cap_error_clear(err);
  return code;
}

int cmd_export(int argc, char **argv)
{
  enum { OPT_CAPS = 256, OPT_STATE, OPT_NETNS };
  static const struct option options[] = {{"caps", required_argument, NULL, OPT_CAPS},
                                          {"state", required_argument, NULL, OPT_STATE},
                                          {"netns", required_argument, NULL, OPT_NETNS},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  struct common o = {0};
  const char *netns = NULL;
  int c;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    switch (c) {
    case OPT_CAPS: o.caps = optarg; break;
    case OPT_STATE: o.state = optarg; break;
    case OPT_NETNS: netns = optarg; break;
    case 'h': fputs(export_help, stdout); return CLI_EXIT_OK;
    default: return cli_option_error("export", argv, "h");
    }
  }
  if (optind >= argc || strcmp(argv[optind], "oci") != 0)
    return cli_usage_error("export", "the one format is oci: capsule export oci CAPABILITY DIR");
  if (argc - optind != 3)
    return cli_usage_error("export", "oci takes CAPABILITY and DIR");
  const char *id = argv[optind + 1], *dir = argv[optind + 2];
  o.caps = cli_default(o.caps, "CAPSULE_CAPS");
  o.state = cli_default(o.state, "CAPSULE_STATE");
  struct gw_registry reg;
  bool bad = false;
  int r = load_registry(&o, &reg, &bad);
  if (r)
    return r;
  struct cap_error err = {0};
  const struct cap_spec *spec = gw_registry_find(&reg, id);
  if (!spec) {
    fprintf(stderr, "capsule export: no capability \"%s\" in %s; `capsule list` shows them\n", id,
            reg.dir);
    gw_registry_free(&reg);
    return CLI_EXIT_INVALID;
  }
  _cleanup_free_ char *dflt = o.state ? NULL : gw_state_default_dir();
  const char *state_dir = o.state ? o.state : dflt;
  uint32_t id_base = 0;
  if (geteuid() == 0) { /* the capability's own host ids, as its sandbox has them */
    struct gw_state *st = NULL;
    r = gw_state_open(state_dir, &st, &err);
    _cleanup_free_ char *key = gw_id_range_key(spec->id, spec->package_dir);
    if (r == 0)
      r = gw_state_id_range(st, key, true, &id_base, &err);
    gw_state_close(st);
  }
  _cleanup_free_ char *images = image_store_dir(state_dir);
  if (r == 0)
    r = gw_export_oci(images, id_base, spec, dir, netns, &err);
  gw_registry_free(&reg);
  if (r < 0)
    return fail(r, &err);
  printf("%s\n", dir);
  return CLI_EXIT_OK;
}
