/* libFuzzer target for src/jsonschema: the input is a schema and an
 * instance separated by the first NUL byte (no NUL: the input is used as
 * both). Both are parsed as JSON, the schema compiled (with formats
 * asserting, to reach the format checkers) and the instance validated with
 * all errors, first error only and verdict only; the three must agree. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "jsonschema/jsonschema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *text = (const char *)data;
  const char *nul = memchr(text, '\0', size);
  size_t schema_len = nul ? (size_t)(nul - text) : size;
  const char *inst = nul ? nul + 1 : text;
  size_t inst_len = nul ? size - schema_len - 1 : size;

  struct cap_doc *sdoc = cap_doc_new(), *idoc = cap_doc_new();
  struct cap_diags diags = {0};
  if (cap_json_parse(sdoc, text, schema_len, "schema", 64, &diags) == 0 &&
      cap_json_parse(idoc, inst, inst_len, "instance", 64, &diags) == 0) {
    struct cap_js_options opts = {.format_assert = true, .max_steps = 200000};
    struct cap_js_validator *v = cap_js_compile(sdoc->root, NULL, &opts, "schema", "fuzz", &diags);
    if (v) {
      struct cap_js_errors all = {0}, first = {0};
      bool a = cap_js_validate(v, idoc->root, 0, &all);
      bool f = cap_js_validate(v, idoc->root, CAP_JS_FIRST_ONLY, &first);
      bool q = cap_js_validate(v, idoc->root, 0, NULL);
      if (a != f || a != q || (!a && (all.len == 0 || first.len == 0)))
        abort();
      cap_js_errors_free(&all);
      cap_js_errors_free(&first);
      cap_js_validator_free(v);
    }
  }
  cap_diags_free(&diags);
  cap_doc_free(sdoc);
  cap_doc_free(idoc);
  return 0;
}
