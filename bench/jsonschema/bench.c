/* capsule side of the benchmark: compile each schema once, parse every
 * instance once, then time validation only.
 * usage: bench CASES.json SECONDS -> "name<TAB>first-error inst/s<TAB>verdict inst/s" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/json.h"
#include "core/text.h"
#include "jsonschema/jsonschema.h"

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* instances/s validating every instance of the case in a loop */
static double measure(const struct cap_js_validator *v, const struct cap_node *insts,
                      double seconds, bool collect, size_t *sink)
{
  size_t n = 0;
  double start = now(), elapsed = 0;
  struct cap_js_errors errs = {0}; /* reused: cap_js_errors_free leaves it empty */
  while (elapsed < seconds) {
    for (int k = 0; k < 16; k++) {
      for (size_t i = 0; i < insts->u.arr.len; i++) {
        if (collect) {
          *sink += cap_js_validate(v, insts->u.arr.items[i], CAP_JS_FIRST_ONLY, &errs);
          cap_js_errors_free(&errs);
        } else {
          *sink += cap_js_validate(v, insts->u.arr.items[i], 0, NULL);
        }
        n++;
      }
    }
    elapsed = now() - start;
  }
  return (double)n / elapsed;
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: bench CASES.json [SECONDS]\n");
    return 2;
  }
  double seconds = argc > 2 ? atof(argv[2]) : 0.5;
  char *data;
  size_t len;
  struct cap_error err = {0};
  if (cap_read_file(argv[1], 256u << 20, &data, &len, &err) < 0) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  if (cap_json_parse(doc, data, len, argv[1], 0, &diags) < 0) {
    cap_diags_print(&diags, stderr);
    return 1;
  }
  size_t sink = 0;
  for (size_t c = 0; c < doc->root->u.arr.len; c++) {
    const struct cap_node *cs = doc->root->u.arr.items[c];
    const char *name = cap_node_get(cs, "name")->u.str.ptr;
    const struct cap_node *insts = cap_node_get(cs, "instances");
    const struct cap_node *valid = cap_node_get(cs, "valid");
    struct cap_js_validator *v =
        cap_js_compile(cap_node_get(cs, "schema"), NULL, NULL, name, "", &diags);
    if (!v) {
      cap_diags_print(&diags, stderr);
      return 1;
    }
    for (size_t i = 0; i < insts->u.arr.len; i++)
      if (cap_js_validate(v, insts->u.arr.items[i], 0, NULL) !=
          valid->u.arr.items[i]->u.boolean) {
        fprintf(stderr, "%s: instance %zu: capsule and ajv disagree\n", name, i);
        return 1;
      }
    double first = measure(v, insts, seconds, true, &sink);
    double verdict = measure(v, insts, seconds, false, &sink);
    printf("%s\t%.0f\t%.0f\n", name, first, verdict);
    cap_js_validator_free(v);
  }
  cap_doc_free(doc);
  free(data);
  return sink == 0 ? 0 : 0;
}
