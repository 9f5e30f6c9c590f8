/* capsule validate: JSON Schema 2020-12 validation of JSON files. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "core/json.h"
#include "core/text.h"
#include "jsonschema/jsonschema.h"
#include "manifest/model.h"

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

#define VALIDATE_OPTSTRING "s:r:jfFh"

struct validate_args {
  const char *schema_path;
  bool json, first;
  struct cap_js_options opts;
  struct cap_strv refs; /* URI=FILE */
};

/* Returns 0 with *a filled, -1 when --help was printed, or a usage status. */
static int validate_parse(int argc, char **argv, struct validate_args *a)
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
  int c;
  while ((c = getopt_long(argc, argv, VALIDATE_OPTSTRING, options, NULL)) != -1) {
    switch (c) {
    case 's': a->schema_path = optarg; break;
    case 'r':
      if (!strchr(optarg, '='))
        return cli_usage_error("validate", "--ref wants URI=FILE, got \"%s\"", optarg);
      cap_strv_push(&a->refs, optarg);
      break;
    case 'j': a->json = true; break;
    case 'f': a->first = true; break;
    case 'F': a->opts.format_assert = true; break;
    case 'h': fputs(help_text, stdout); return -1;
    default: return cli_option_error("validate", argv, VALIDATE_OPTSTRING);
    }
  }
  if (!a->schema_path)
    return cli_usage_error("validate", "--schema SCHEMA.json is required");
  if (optind >= argc)
    return cli_usage_error("validate", "name at least one INSTANCE.json to validate");
  return 0;
}

/* The schema and the --ref documents it may point at. */
struct validate_schema {
  struct cap_js_registry *reg;
  struct cap_doc **ref_docs; /* one per --ref */
  size_t n_refs;
  struct cap_doc *schema_doc;
  struct cap_js_validator *v;
};

/* Loads and compiles; problems printed. Returns 0 or CLI_EXIT_INVALID. */
static int validate_compile(const struct validate_args *a, struct validate_schema *s)
{
  s->reg = cap_js_registry_new();
  s->n_refs = a->refs.len;
  s->ref_docs = cap_xcalloc(s->n_refs + 1, sizeof(*s->ref_docs));
  int status = CLI_EXIT_OK;
  for (size_t i = 0; i < s->n_refs; i++) {
    const char *ref = a->refs.v[i], *eq = strchr(ref, '=');
    _cleanup_free_ char *uri = cap_xstrndup(ref, (size_t)(eq - ref));
    s->ref_docs[i] = load_json(eq + 1);
    if (s->ref_docs[i])
      cap_js_registry_add(s->reg, uri, s->ref_docs[i]->root);
    else
      status = CLI_EXIT_INVALID;
  }
  s->schema_doc = load_json(a->schema_path);
  if (!s->schema_doc || status != CLI_EXIT_OK)
    return CLI_EXIT_INVALID;
  struct cap_diags diags = {0};
  s->v = cap_js_compile(s->schema_doc->root, s->reg, &a->opts, a->schema_path, "", &diags);
  cap_diags_sort(&diags);
  if (!s->v)
    cap_diags_print(&diags, stderr);
  cap_diags_free(&diags);
  return s->v ? CLI_EXIT_OK : CLI_EXIT_INVALID;
}

static void validate_schema_free(struct validate_schema *s)
{
  cap_js_validator_free(s->v);
  cap_doc_free(s->schema_doc);
  for (size_t i = 0; i < s->n_refs; i++)
    cap_doc_free(s->ref_docs[i]);
  free(s->ref_docs);
  cap_js_registry_free(s->reg);
}

/* One instance: its result printed; true when valid. */
static bool validate_instance(const struct validate_args *a, const struct cap_js_validator *v,
                              const char *path)
{
  struct cap_doc *doc = load_json(path);
  if (!doc) {
    if (a->json)
      print_json_result(path, false, NULL, "cannot read or parse the instance");
    return false;
  }
  struct cap_js_errors errs = {0};
  bool ok = cap_js_validate(v, doc->root, a->first ? CAP_JS_FIRST_ONLY : 0, &errs);
  if (a->json) {
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
  cap_js_errors_free(&errs);
  cap_doc_free(doc);
  return ok;
}

int cmd_validate(int argc, char **argv)
{
  struct validate_args a = {0};
  int status = validate_parse(argc, argv, &a);
  if (status == 0) {
    struct validate_schema s = {0};
    status = validate_compile(&a, &s);
    for (int i = optind; s.v && i < argc; i++)
      if (!validate_instance(&a, s.v, argv[i]))
        status = CLI_EXIT_INVALID;
    validate_schema_free(&s);
  }
  cap_strv_free(&a.refs);
  return status < 0 ? CLI_EXIT_OK : status;
}
