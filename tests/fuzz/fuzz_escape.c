/* libFuzzer target for the one terminal escaper and the JSON writer
 * (src/core/escape.c, cap_json_quote): whatever the bytes, the text form
 * is valid UTF-8 holding no control, DEL, C1 or bidi character; the
 * output form holds none but newline and tab; the output form cut in two
 * at a place the input chooses equals it whole; a JSON string of the
 * bytes parses back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/escape.h"
#include "core/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every character of s is plain (or, with lines, newline or tab). */
static void check_inert(const struct cap_buf *b, int lines)
{
  for (size_t i = 0; i < b->len;) {
    uint32_t cp;
    enum cap_text_kind kind;
    size_t u = cap_escape_scan(b->data + i, b->len - i, &cp, &kind);
    if (kind != CAP_TEXT_PLAIN && !(lines && (cp == '\n' || cp == '\t')))
      abort();
    i += u;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *s = (const char *)data;
  struct cap_buf text = {0}, whole = {0}, cut = {0}, json = {0};
  cap_escape_text(&text, s, size);
  check_inert(&text, 0);

  struct cap_escape_stream st = {0};
  cap_escape_output(&st, &whole, s, size);
  cap_escape_output_end(&st, &whole);
  check_inert(&whole, 1);
  size_t at = size ? data[0] % (size + 1) : 0;
  cap_escape_output(&st, &cut, s, at);
  cap_escape_output(&st, &cut, s + at, size - at);
  cap_escape_output_end(&st, &cut);
  if (cut.len != whole.len || memcmp(cut.data, whole.data, whole.len) != 0)
    abort();

  cap_json_quote(&json, s, size);
  check_inert(&json, 0);
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  if (cap_json_parse(doc, json.data, json.len, "fuzz.json", 0, &d) != 0)
    abort();
  cap_diags_free(&d);
  cap_doc_free(doc);
  cap_buf_free(&text);
  cap_buf_free(&whole);
  cap_buf_free(&cut);
  cap_buf_free(&json);
  return 0;
}
