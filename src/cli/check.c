/* capsule check PATH...: every problem in every manifest, at once. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "manifest/load.h"

static const char check_help[] =
    "usage: capsule check [--quiet] [--strict] PATH...\n"
    "\n"
    "Validates manifests: files (manifest.yaml, agent.toml, manifest.json, a nono\n"
    "capability manifest), a capability directory (one manifest), or a directory\n"
    "of capabilities, checked exactly as `list` and `call` load it as their\n"
    "capabilities directory\n"
    "(Covenant's agents/<id>/agent.toml and every subdirectory; an id used twice\n"
    "is an error). Every problem is reported at once as\n"
    "  FILE:LINE:COL: error: FIELD.PATH: what is wrong and how to fix it\n"
    "\n"
    "  -q, --quiet    print problems only, not the ok lines\n"
    "      --strict   treat warnings as errors\n"
    "  -h, --help     this text\n"
    "\n"
    "exit status: 0 all valid, 1 any invalid, 2 usage\n";

struct check_result {
  char *file;
  struct cap_spec *spec; /* NULL when invalid */
  struct cap_diags diags;
  bool duplicate; /* its id is used by another capability too */
};

/* Covenant's loader orders agents by id so that ties resolve the same on every
 * host; do the same, keeping manifests that failed to load in path order. */
static int compare_results(const void *pa, const void *pb)
{
  const struct check_result *a = pa, *b = pb;
  if (a->spec && b->spec && a->spec->id && b->spec->id)
    return strcmp(a->spec->id, b->spec->id);
  return strcmp(a->file, b->file);
}

static void print_ok(const struct cap_spec *spec)
{
  printf("%s: ok: %s capability \"%s\" (%zu tool%s)\n", spec->source_path,
         cap_format_name(spec->format), spec->id ? spec->id : "", spec->n_tools,
         spec->n_tools == 1 ? "" : "s");
}

/* A file is itself, a directory holding a manifest one capability, any
 * other directory a directory of capabilities (as --caps reads it). */
static int discover(const char *path, struct cap_strv *files, struct cap_diags *diags)
{
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode) && !cap_is_capability_dir(path)) {
    size_t before = files->len, errors = diags->errors;
    int r = cap_caps_discover(path, files, diags);
    if (r == 0 && files->len == before) {
      if (diags->errors > errors)
        return -ENOENT; /* discovery said why */
      cap_diags_add(diags, CAP_SEV_ERROR, path, 0, 0, "",
                    "no manifest found, in it or in its subdirectories; expected "
                    "manifest.yaml (Selu), agent.toml or agents/<id>/agent.toml (Covenant), "
                    "manifest.json (Talos) or a nono capability manifest");
      return -ENOENT;
    }
    return r;
  }
  return cap_manifest_discover(path, files, diags);
}

/* An id loaded twice: the registry uses neither, so check fails both
 * (results are sorted by id). */
static void mark_duplicate_ids(struct check_result *results, size_t n)
{
  for (size_t i = 0; i + 1 < n; i++) {
    struct check_result *a = &results[i], *b = &results[i + 1];
    if (!a->spec || !b->spec || !a->spec->id || !b->spec->id || strcmp(a->spec->id, b->spec->id))
      continue;
    cap_diags_add(&b->diags, CAP_SEV_ERROR, b->file, 0, 0, "",
                  "capability id \"%s\" is also used by %s; ids must be unique (rename one)",
                  b->spec->id, a->file);
    b->duplicate = a->duplicate = true;
  }
}

int cmd_check(int argc, char **argv)
{
  static const struct option options[] = {
      {"quiet", no_argument, NULL, 'q'},
      {"strict", no_argument, NULL, 's'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  bool quiet = false, strict = false;
  int c;
  while ((c = getopt_long(argc, argv, "qh", options, NULL)) != -1) {
    switch (c) {
    case 'q': quiet = true; break;
    case 's': strict = true; break;
    case 'h': fputs(check_help, stdout); return CLI_EXIT_OK;
    default: return cli_option_error("check", argv, "qh");
    }
  }
  if (optind >= argc)
    return cli_usage_error("check", "name at least one manifest or capability directory");

  bool failed = false;
  for (int i = optind; i < argc; i++) {
    struct cap_diags found_diags = {0};
    struct cap_strv files = {0};
    if (discover(argv[i], &files, &found_diags) < 0) {
      cap_diags_print(&found_diags, stderr);
      failed = true;
    }
    cap_diags_free(&found_diags);

    struct check_result *results = cap_xcalloc(files.len, sizeof(*results));
    for (size_t k = 0; k < files.len; k++) {
      results[k].file = files.v[k];
      cap_manifest_load(files.v[k], &results[k].spec, &results[k].diags);
    }
    qsort(results, files.len, sizeof(*results), compare_results);
    mark_duplicate_ids(results, files.len);
    for (size_t k = 0; k < files.len; k++) {
      struct check_result *r = &results[k];
      cap_diags_sort(&r->diags);
      cap_diags_print(&r->diags, stderr);
      if (!r->spec || r->duplicate || (strict && r->diags.warnings))
        failed = true;
      else if (!quiet)
        print_ok(r->spec);
      fflush(stdout);
      fflush(stderr);
      cap_spec_free(r->spec);
      cap_diags_free(&r->diags);
    }
    free(results);
    cap_strv_free(&files);
  }
  return failed ? CLI_EXIT_INVALID : CLI_EXIT_OK;
}
