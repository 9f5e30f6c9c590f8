/* Differential test against ajv: runs differential.js (seeded schema and
 * instance generator, verdicts by ajv/dist/2020) and checks that capsule's
 * validator reaches the same valid/invalid verdict on every case.
 * usage: differential NODE SCRIPT NODE_MODULES [SEED] [COUNT]
 * exit 77 when node or ajv is missing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/json.h"
#include "jsonschema/jsonschema.h"

int main(int argc, char **argv)
{
  if (argc < 4) {
    fprintf(stderr, "usage: differential NODE SCRIPT NODE_MODULES [SEED] [COUNT]\n");
    return 2;
  }
  const char *node = argv[1], *script = argv[2], *modules = argv[3];
  const char *seed = argc > 4 ? argv[4] : "20251123", *count = argc > 5 ? argv[5] : "1500";
  char ajv[4096];
  snprintf(ajv, sizeof(ajv), "%s/ajv/dist/2020.js", modules);
  struct stat st;
  if (!*node || stat(ajv, &st) < 0) {
    printf("SKIP: node or ajv not installed (run scripts/deps.sh test)\n");
    return 77;
  }
  char cmd[8192];
  snprintf(cmd, sizeof(cmd), "CAPSULE_NODE_MODULES='%s' '%s' '%s' %s %s", modules, node, script,
           seed, count);
  FILE *p = popen(cmd, "r");
  if (!p) {
    perror("popen");
    return 1;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  size_t schemas = 0, cases = 0, agree = 0, compile_fail = 0, shown = 0, ajv_errors = 0;
  while ((n = getline(&line, &cap, p)) > 0) {
    struct cap_doc *doc = cap_doc_new();
    struct cap_diags diags = {0};
    if (cap_json_parse(doc, line, (size_t)n, "ajv", 0, &diags) < 0) {
      cap_diags_print(&diags, stderr);
      return 1;
    }
    if (cap_node_get(doc->root, "ajv_error")) {
      ajv_errors++;
      cap_diags_free(&diags);
      cap_doc_free(doc);
      continue;
    }
    const struct cap_node *schema = cap_node_get(doc->root, "schema");
    const struct cap_node *insts = cap_node_get(doc->root, "instances");
    const struct cap_node *verdicts = cap_node_get(doc->root, "valid");
    schemas++;
    struct cap_js_validator *v = cap_js_compile(schema, NULL, NULL, "schema", "", &diags);
    if (!v) {
      compile_fail++;
      cases += insts->u.arr.len;
      if (shown++ < 10) {
        printf("capsule refused a schema ajv accepts: %s", line);
        cap_diags_print(&diags, stdout);
      }
    }
    for (size_t i = 0; v && i < insts->u.arr.len; i++) {
      bool expect = verdicts->u.arr.items[i]->u.boolean;
      bool got = cap_js_validate(v, insts->u.arr.items[i], 0, NULL);
      struct cap_js_errors errs = {0};
      bool got_all = cap_js_validate(v, insts->u.arr.items[i], 0, &errs);
      cases++;
      if (got == expect && got_all == expect) {
        agree++;
      } else if (shown++ < 10) {
        struct cap_buf b = {0};
        struct cap_jw w;
        cap_jw_init(&w, &b, false);
        cap_jw_node(&w, insts->u.arr.items[i]);
        printf("DISAGREE ajv=%s capsule=%s\n  schema: %.*s  instance: %s\n",
               expect ? "valid" : "invalid", got ? "valid" : "invalid", (int)strcspn(line, "\n"),
               line, b.data);
        for (size_t e = 0; e < errs.len; e++)
          printf("  capsule: %s: %s (%s)\n", errs.items[e].instance_location, errs.items[e].message,
                 errs.items[e].keyword_location);
        cap_buf_free(&b);
      }
      cap_js_errors_free(&errs);
    }
    cap_js_validator_free(v);
    cap_diags_free(&diags);
    cap_doc_free(doc);
  }
  free(line);
  int rc = pclose(p);
  if (rc != 0) {
    fprintf(stderr, "differential.js failed (status %d)\n", rc);
    return 1;
  }
  printf("differential vs ajv: %zu schemas, %zu cases, %zu agree, %zu disagree"
         " (%zu schemas skipped: ajv threw while validating)\n",
         schemas, cases, agree, cases - agree, ajv_errors);
  return (schemas > 0 && agree == cases && !compile_fail) ? 0 : 1;
}
