/* capsule validate: JSON Schema 2020-12 validation of JSON files. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/json.h"
#include "core/text.h"
#include "jsonschema/jsonschema.h"

#define MAX_INPUT_BYTES (64u << 20)

static const char help_text[] =
    "usage: capsule validate --schema SCHEMA.json [--json] [--first] [--format-assert]\n"
    "                        [--ref URI=FILE]... INSTANCE.json...\n"
    "\n"
    "Validates each INSTANCE (\"-\" is stdin) against SCHEMA (JSON Schema draft 2020-12).\n"
    "\n"
    "  --schema FILE     the schema\n"
    "  --ref URI=FILE    serve FILE as the schema document at URI (for $ref); repeatable\n"
    "  --json            one JSON object per instance on stdout:\n"
    "                    {\"instance\",\"valid\",\"errors\":[{\"instanceLocation\",\n"
    "                    \"keywordLocation\",\"message\"}]}\n"
    "  --first           report only the first error of each instance\n"
    "  --format-assert   make \"format\" an assertion (default: annotation only)\n"
    "  --help            this text\n"
    "\n"
    "Human output: one line per error, INSTANCE: /pointer: message (keyword /path);\n"
    "the instance root is shown as \"/\". A valid instance prints INSTANCE: valid.\n"
    "exit status: 0 all valid, 1 an instance is invalid or unreadable (or the schema\n"
    "is), 2 usage.\n";

/* Parses a JSON file; prints diagnostics to stderr on failure. */
static struct cap_doc *load_json(const char *path)
{
  char *data;
  size_t len;
  struct cap_error err = {0};
  if (cap_read_file(path, MAX_INPUT_BYTES, &data, &len, &err) < 0) {
    fprintf(stderr, "%s: error: %s\n", path, err.message ? err.message : "cannot read");
    cap_error_clear(&err);
    return NULL;
  }
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  int r = cap_json_parse(doc, data, len, path, 0, &diags);
  free(data);
  if (r < 0) {
    cap_diags_print(&diags, stderr);
    cap_diags_free(&diags);
    cap_doc_free(doc);
    return NULL;
  }
  cap_diags_free(&diags);
  return doc;
}

static void print_json_result(const char *instance, bool valid, const struct cap_js_errors *errs,
                              const char *failure)
{
  struct cap_buf out = {0};
  struct cap_jw w;
  cap_jw_init(&w, &out, false);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "instance");
  cap_jw_string(&w, instance);
  cap_jw_key(&w, "valid");
  cap_jw_bool(&w, valid);
  if (failure) {
    cap_jw_key(&w, "error");
    cap_jw_string(&w, failure);
  }
  cap_jw_key(&w, "errors");
  cap_jw_begin_array(&w);
  for (size_t i = 0; errs && i < errs->len; i++) {
    cap_jw_begin_object(&w);
    cap_jw_key(&w, "instanceLocation");
    cap_jw_string(&w, errs->items[i].instance_location);
    cap_jw_key(&w, "keywordLocation");
    cap_jw_string(&w, errs->items[i].keyword_location);
    cap_jw_key(&w, "message");
    cap_jw_string(&w, errs->items[i].message);
    cap_jw_end_object(&w);
  }
  cap_jw_end_array(&w);
  cap_jw_end_object(&w);
  printf("%s\n", out.data);
  cap_buf_free(&out);
}

int cmd_validate(int argc, char **argv)
{
  static const struct option options[] = {
      {"schema", required_argument, NULL, 's'},
      {"ref", required_argument, NULL, 'r'},
      {"json", no_argument, NULL, 'j'},
      {"first", no_argument, NULL, 'f'},
      {"format-assert", no_argument, NULL, 'F'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  const char *schema_path = NULL;
  bool json = false, first = false;
  struct cap_js_options opts = {0};
  char **refs = NULL;
  size_t n_refs = 0;
  int c, status = CLI_EXIT_OK;
  while ((c = getopt_long(argc, argv, "s:r:jfFh", options, NULL)) != -1) {
    switch (c) {
    case 's': schema_path = optarg; break;
    case 'r':
      refs = realloc(refs, (n_refs + 1) * sizeof(*refs));
      refs[n_refs++] = optarg;
      break;
    case 'j': json = true; break;
    case 'f': first = true; break;
    case 'F': opts.format_assert = true; break;
    case 'h':
      fputs(help_text, stdout);
      free(refs);
      return CLI_EXIT_OK;
    default: free(refs); return cli_option_error("validate", argv, "s:r:jfFh");
    }
  }
  if (!schema_path) {
    free(refs);
    return cli_usage_error("validate", "--schema SCHEMA.json is required");
  }
  if (optind >= argc) {
    free(refs);
    return cli_usage_error("validate", "name at least one INSTANCE.json to validate");
  }
  for (size_t i = 0; i < n_refs; i++) {
    if (!strchr(refs[i], '=')) {
      int r = cli_usage_error("validate", "--ref wants URI=FILE, got \"%s\"", refs[i]);
      free(refs);
      return r;
    }
  }

  struct cap_js_registry *reg = cap_js_registry_new();
  struct cap_doc **ref_docs = calloc(n_refs + 1, sizeof(*ref_docs));
  struct cap_doc *schema_doc = NULL;
  struct cap_js_validator *v = NULL;
  for (size_t i = 0; i < n_refs; i++) {
    char *eq = strchr(refs[i], '=');
    char *uri = cap_xstrndup(refs[i], (size_t)(eq - refs[i]));
    ref_docs[i] = load_json(eq + 1);
    if (ref_docs[i])
      cap_js_registry_add(reg, uri, ref_docs[i]->root);
    else
      status = CLI_EXIT_INVALID;
    free(uri);
  }
  schema_doc = load_json(schema_path);
  if (!schema_doc || status != CLI_EXIT_OK) {
    status = CLI_EXIT_INVALID;
    goto out;
  }
  struct cap_diags diags = {0};
  v = cap_js_compile(schema_doc->root, reg, &opts, schema_path, "", &diags);
  if (!v) {
    cap_diags_sort(&diags);
    cap_diags_print(&diags, stderr);
    cap_diags_free(&diags);
    status = CLI_EXIT_INVALID;
    goto out;
  }
  cap_diags_free(&diags);

  for (int i = optind; i < argc; i++) {
    const char *path = argv[i];
    struct cap_doc *doc = load_json(path);
    if (!doc) {
      if (json)
        print_json_result(path, false, NULL, "cannot read or parse the instance");
      status = CLI_EXIT_INVALID;
      continue;
    }
    struct cap_js_errors errs = {0};
    bool ok = cap_js_validate(v, doc->root, first ? CAP_JS_FIRST_ONLY : 0, &errs);
    if (json) {
      print_json_result(path, ok, &errs, NULL);
    } else if (ok) {
      printf("%s: valid\n", path);
    } else {
      for (size_t e = 0; e < errs.len; e++) {
        const struct cap_js_error *er = &errs.items[e];
        printf("%s: %s: %s (keyword %s)\n", path,
               er->instance_location[0] ? er->instance_location : "/", er->message,
               er->keyword_location[0] ? er->keyword_location : "/");
      }
    }
    if (!ok)
      status = CLI_EXIT_INVALID;
    cap_js_errors_free(&errs);
    cap_doc_free(doc);
  }
out:
  cap_js_validator_free(v);
  cap_doc_free(schema_doc);
  for (size_t i = 0; i < n_refs; i++)
    cap_doc_free(ref_docs[i]);
  free(ref_docs);
  cap_js_registry_free(reg);
  free(refs);
  return status;
}
