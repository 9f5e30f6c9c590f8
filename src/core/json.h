/* JSON (RFC 8259) into the positioned document tree, and JSON out.
 *
 * The parser is strict: UTF-8 only (a leading BOM is skipped), no trailing
 * commas or comments, duplicate object keys rejected, nesting capped, and
 * every problem reported at file:line:col. Numbers keep their source text
 * (u.num.raw) so exact arithmetic stays possible. */
#ifndef CAPSULE_CORE_JSON_H
#define CAPSULE_CORE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "diag.h"
#include "node.h"

#define CAP_JSON_DEFAULT_DEPTH 256
#define CAP_JSON_MAX_DEPTH 512 /* hard cap for parser and writer */

/* Parses data into doc->root. On a syntax error adds one diagnostic (the
 * first; JSON cannot resynchronise meaningfully) and returns -EINVAL.
 * max_depth 0 means CAP_JSON_DEFAULT_DEPTH. */
int cap_json_parse(struct cap_doc *doc, const char *data, size_t len, const char *file,
                   unsigned max_depth, struct cap_diags *diags);

/* JSON text as capsule writes it: compact (no whitespace to hide a member
 * behind), every control, C1 and direction character in a string as a \\u
 * escape (it cannot drive a terminal). NULL when text is not JSON; the
 * caller frees it. */
char *cap_json_canonical(const char *text, size_t len);

/* A streaming writer that places commas and indentation itself. */
struct cap_jw {
  struct cap_buf *out;
  bool pretty;
  int depth;
  bool first[CAP_JSON_MAX_DEPTH + 2]; /* per depth: nothing written yet */
  bool after_key;
};
void cap_jw_init(struct cap_jw *w, struct cap_buf *out, bool pretty);
void cap_jw_begin_object(struct cap_jw *w);
void cap_jw_end_object(struct cap_jw *w);
void cap_jw_begin_array(struct cap_jw *w);
void cap_jw_end_array(struct cap_jw *w);
void cap_jw_key(struct cap_jw *w, const char *key);
void cap_jw_string(struct cap_jw *w, const char *s);
void cap_jw_string_n(struct cap_jw *w, const char *s, size_t n);
void cap_jw_string_or_null(struct cap_jw *w, const char *s);
void cap_jw_int(struct cap_jw *w, int64_t v);
void cap_jw_double(struct cap_jw *w, double v);
void cap_jw_bool(struct cap_jw *w, bool v);
void cap_jw_null(struct cap_jw *w);
/* Writes a whole document tree (datetimes as strings). */
void cap_jw_node(struct cap_jw *w, const struct cap_node *n);
/* n as compact JSON text (allocated; NULL: "null") */
char *cap_json_text(const struct cap_node *n);
/* n as compact JSON text (allocated) with the member at path (depth
 * keys, each an object's) replaced by json, a value as JSON text (null
 * where it does not parse); n unchanged where the path leads nowhere */
char *cap_json_rewritten(const struct cap_node *n, const char *const *path, size_t depth,
                         const char *json);

/* JSONC (JSON with // and block comments and trailing commas: what nono's
 * profiles are written in) made JSON in place: each comment and trailing
 * comma becomes spaces (newlines kept), so every position stays where it
 * was. Returns the offset of the first thing blanked, len when none. */
size_t cap_jsonc_blank(char *data, size_t len);

/* Appends s as a quoted, escaped JSON string. */
void cap_json_quote(struct cap_buf *out, const char *s, size_t n);

#endif
