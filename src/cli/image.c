/* capsule image import|pull|ls|inspect|rm: the OCI image store
 * (image/image.h) under the state directory. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/listing.h"
#include "core/cleanup.h"
#include "core/json.h"
#include "gateway/state.h"
#include "image/image.h"

static const char image_help[] =
    "usage: capsule image import PATH [--tag REF] [--state DIR]\n"
    "       capsule image pull REF [--state DIR]\n"
    "       capsule image ls [--json] [--state DIR]\n"
    "       capsule image inspect REF [--state DIR]\n"
    "       capsule image rm REF [--state DIR]\n"
    "\n"
    "The local, content-addressed image store that Selu capabilities (their\n"
    "`image:`) run from, with no container daemon and no root (docs/images.md).\n"
    "\n"
    "  import PATH   an OCI image layout directory, an OCI archive or a `docker\n"
    "                save` archive: every blob verified against its digest, the\n"
    "                layers unpacked rootless (capsule's applier: tar, gzip,\n"
    "                zstd) into a read-only root shared by every capability\n"
    "                using the image\n"
    "  pull REF      from a registry with skopeo, then as import\n"
    "  ls            the stored images: reference, digest, size, created\n"
    "  inspect REF   one image as JSON: digests, Entrypoint, Cmd, Env, WorkingDir,\n"
    "                its root\n"
    "  rm REF        forget REF, then remove what no other reference needs\n"
    "\n"
    "      --tag REF     the reference to store the import as (default: the\n"
    "                    archive's own RepoTags or ref.name annotation)\n"
    "      --json        ls: an array of objects (ref, digest, size, created)\n"
    "      --state DIR   capsule's state (default $CAPSULE_STATE, else\n"
    "                    $XDG_STATE_HOME/capsule or ~/.local/state/capsule)\n"
    "  -h, --help        this text\n"
    "\n"
    "exit status: 0 ok, 1 failed (a corrupt image, an unknown reference), 2 usage,\n"
    "3 skopeo is not installed (archives, pull).\n";

struct image_args {
  const char *state, *tag;
  bool json;
};

static int fail(const char *verb, int r, struct cap_error *err)
{
  cli_error(verb, err->message);
  int code = cli_exit_for(r, err);
  cap_error_clear(err);
  return code;
}

static void print_strv(struct cap_jw *w, const char *key, char **v)
{
  cap_jw_key(w, key);
  if (!v) {
    cap_jw_null(w);
    return;
  }
  cap_jw_begin_array(w);
  for (size_t i = 0; v[i]; i++)
    cap_jw_string(w, v[i]);
  cap_jw_end_array(w);
}

static void print_info(const struct image_info *info)
{
  struct cap_buf out = {0};
  struct cap_jw w;
  cap_jw_init(&w, &out, true);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "ref");
  cap_jw_string_or_null(&w, info->ref);
  cap_jw_key(&w, "digest");
  cap_jw_string(&w, info->digest);
  cap_jw_key(&w, "config_digest");
  cap_jw_string(&w, info->config_digest);
  cap_jw_key(&w, "size");
  cap_jw_int(&w, info->size);
  cap_jw_key(&w, "created");
  cap_jw_string_or_null(&w, info->config.created);
  cap_jw_key(&w, "architecture");
  cap_jw_string_or_null(&w, info->config.architecture);
  cap_jw_key(&w, "os");
  cap_jw_string_or_null(&w, info->config.os);
  print_strv(&w, "entrypoint", info->config.entrypoint);
  print_strv(&w, "cmd", info->config.cmd);
  print_strv(&w, "env", info->config.env);
  cap_jw_key(&w, "working_dir");
  cap_jw_string_or_null(&w, info->config.working_dir);
  cap_jw_key(&w, "user");
  cap_jw_string_or_null(&w, info->config.user);
  cap_jw_key(&w, "rootfs");
  cap_jw_string_or_null(&w, info->rootfs);
  cap_jw_end_object(&w);
  printf("%s\n", out.data);
  cap_buf_free(&out);
}

static int image_ls(const char *store, bool json)
{
  struct image_info *list = NULL;
  size_t n = 0;
  struct cap_error err = {0};
  int r = image_store_list(store, &list, &n, &err);
  if (r < 0)
    return fail("image ls", r, &err);
  static const struct cli_column cols[] = {
      {"ref", 48, NULL}, {"digest", 20, NULL}, {"size", 10, NULL}, {"created", 0, "-"}};
  struct cli_listing l;
  cli_listing_begin(&l, json);
  if (!json) {
    const char *const head[] = {"REF", "DIGEST", "SIZE", "CREATED"};
    cli_listing_row(&l, cols, head, 4);
  }
  for (size_t i = 0; i < n; i++) {
    char digest[IMAGE_DIGEST_LEN + 1], size[32];
    snprintf(digest, sizeof digest, "%s", list[i].digest);
    if (!json)
      digest[19] = '\0'; /* sha256: and 12 hex digits */
    snprintf(size, sizeof size, "%lld", (long long)list[i].size);
    const char *values[] = {list[i].ref, digest, size, list[i].config.created};
    cli_listing_row(&l, cols, values, 4);
  }
  cli_listing_end(&l, true);
  image_infos_free(list, n);
  return CLI_EXIT_OK;
}

static int image_verb(const char *sub, const char *state_dir, const char *store, const char *arg,
                      const struct image_args *a)
{
  struct cap_error err = {0};
  struct image_info info = {0};
  _cleanup_free_ char *warning = NULL;
  int r;
  _cleanup_free_ char *verb = cap_xasprintf("image %s", sub);
  if (strcmp(sub, "import") == 0 || strcmp(sub, "pull") == 0) {
    /* the state directory as every verb makes it (owner, mode 0700) */
    struct gw_state *st = NULL;
    r = gw_state_open(state_dir, &st, &err);
    gw_state_close(st);
    if (r < 0)
      return fail(verb, r, &err);
  }
  if (strcmp(sub, "import") == 0)
    r = image_import(store, arg, a->tag, &info, &warning, &err);
  else if (strcmp(sub, "pull") == 0)
    r = image_pull(store, arg, &info, &warning, &err);
  else if (strcmp(sub, "inspect") == 0)
    r = image_store_resolve(store, arg, &info, &err);
  else
    r = image_store_remove(store, arg, &err);
  if (r < 0) {
    image_info_free(&info);
    return fail(verb, r, &err);
  }
  if (warning)
    fprintf(stderr, "capsule %s: warning: %s\n", verb, warning);
  if (strcmp(sub, "inspect") == 0)
    print_info(&info);
  else if (strcmp(sub, "rm") == 0)
    printf("removed %s\n", arg);
  else
    printf("%s %s\n", info.ref, info.digest);
  image_info_free(&info);
  return CLI_EXIT_OK;
}

int cmd_image(int argc, char **argv)
{
  enum { OPT_STATE = 256, OPT_TAG, OPT_JSON };
  static const struct option options[] = {{"state", required_argument, NULL, OPT_STATE},
                                          {"tag", required_argument, NULL, OPT_TAG},
                                          {"json", no_argument, NULL, OPT_JSON},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  struct image_args a = {0};
  int c;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    switch (c) {
    case OPT_STATE: a.state = optarg; break;
    case OPT_TAG: a.tag = optarg; break;
    case OPT_JSON: a.json = true; break;
    case 'h': fputs(image_help, stdout); return CLI_EXIT_OK;
    default: return cli_option_error("image", argv, "h");
    }
  }
  if (optind >= argc)
    return cli_usage_error("image", "needs import, pull, ls, inspect or rm");
  const char *sub = argv[optind++];
  static const char *const with_arg[] = {"import", "pull", "inspect", "rm"};
  bool takes_arg = false, known = strcmp(sub, "ls") == 0;
  for (size_t i = 0; i < ARRAY_SIZE(with_arg); i++)
    if (strcmp(sub, with_arg[i]) == 0)
      takes_arg = known = true;
  if (!known)
    return cli_usage_error("image", "unknown subcommand '%s'", sub);
  if (takes_arg && optind != argc - 1)
    return cli_usage_error("image", "%s takes one %s", sub,
                           strcmp(sub, "import") == 0 ? "PATH" : "REF");
  if (!takes_arg && optind != argc)
    return cli_usage_error("image", "ls takes no arguments ('%s')", argv[optind]);
  if (a.tag && strcmp(sub, "import") != 0)
    return cli_usage_error("image", "--tag is for import");
  const char *state = cli_default(a.state, "CAPSULE_STATE");
  _cleanup_free_ char *dflt = state ? NULL : gw_state_default_dir();
  _cleanup_free_ char *store = image_store_dir(state ? state : dflt);
  if (!takes_arg)
    return image_ls(store, a.json);
  return image_verb(sub, state ? state : dflt, store, argv[optind], &a);
}
