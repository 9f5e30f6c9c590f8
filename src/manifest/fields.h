/* Field-by-field checking of a parsed manifest tree. Each format's lowering
 * walks its document with these helpers; they report wrong types, missing
 * or empty required fields, bad enum values and out-of-range numbers as
 * diagnostics at the value's file:line:col, with the dotted field path
 * ("tools[2].input_schema"), and return a usable default so checking goes on
 * and every problem is reported at once. */
#ifndef CAPSULE_MANIFEST_FIELDS_H
#define CAPSULE_MANIFEST_FIELDS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/diag.h"
#include "core/node.h"

struct mf_ctx {
  const char *file;
  struct cap_diags *diags;
  struct cap_buf path; /* current field path */
  bool toml;           /* name kinds as TOML does: "a table", "a float" */
};

/* flags */
#define MF_REQUIRED 1u /* missing -> error at the enclosing object */
#define MF_NONEMPTY 2u /* "" or [] -> error */
#define MF_NULL_OK 4u  /* an explicit null counts as absent */

#define MF_ANY 0xffu /* kind wildcard for mf_field */

void mf_init(struct mf_ctx *c, const char *file, struct cap_diags *diags);
void mf_free(struct mf_ctx *c);

/* Path stack: push returns a mark to pop back to. */
size_t mf_push_key(struct mf_ctx *c, const char *key);
size_t mf_push_index(struct mf_ctx *c, size_t index);
void mf_pop(struct mf_ctx *c, size_t mark);

/* Diagnostics at a node (or line:col) for the current path plus `key`
 * (NULL: the current path itself). */
void mf_error(struct mf_ctx *c, const struct cap_node *at, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void mf_warning(struct mf_ctx *c, const struct cap_node *at, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The member `key` of obj if present and of `kind` (MF_ANY: any kind).
 * Reports missing (MF_REQUIRED), wrong kind, and with MF_NONEMPTY an empty
 * string or array. Returns NULL when absent or unusable. For CAP_NODE_FLOAT
 * integers are accepted too (a number). */
const struct cap_node *mf_field(struct mf_ctx *c, const struct cap_node *obj, const char *key,
                                unsigned kind, unsigned flags);

const char *mf_string(struct mf_ctx *c, const struct cap_node *obj, const char *key, unsigned flags,
                      const char *def);
bool mf_bool(struct mf_ctx *c, const struct cap_node *obj, const char *key, unsigned flags,
             bool def);
/* Integers in [min, max]; a float with an integral value is refused. */
int64_t mf_int(struct mf_ctx *c, const struct cap_node *obj, const char *key, unsigned flags,
               int64_t min, int64_t max, int64_t def);
/* Any number in [min, max]. */
double mf_number(struct mf_ctx *c, const struct cap_node *obj, const char *key, unsigned flags,
                 double min, double max, double def);
/* Index into names (NULL-terminated) of the string value; def when absent
 * or invalid. */
int mf_enum(struct mf_ctx *c, const struct cap_node *obj, const char *key, unsigned flags,
            const char *const *names, int def);
/* Each element must be a string (reported per element); returns the array. */
const struct cap_node *mf_string_array(struct mf_ctx *c, const struct cap_node *obj,
                                       const char *key, unsigned flags);

/* Reports members of obj whose key is not in known (NULL-terminated), with a
 * "did you mean" suggestion, at the given severity. */
void mf_unknown_keys(struct mf_ctx *c, const struct cap_node *obj, const char *const *known,
                     enum cap_severity sev);

/* Calls fn(c, item, arg) for each element of the array obj[key] that is an
 * object, with the path at key[i]; elements that are not objects are
 * reported. Returns the array, or NULL when absent or not an array. */
const struct cap_node *mf_each_object(struct mf_ctx *c, const struct cap_node *obj, const char *key,
                                      unsigned flags,
                                      void (*fn)(struct mf_ctx *, const struct cap_node *, void *),
                                      void *arg);

/* Reports every object in arr whose string member `key` repeats an earlier
 * one's: "duplicate WHAT "x"; the first is at line N: FIX". The caller has
 * pushed the array's own key. */
void mf_report_duplicates(struct mf_ctx *c, const struct cap_node *arr, const char *key,
                          const char *what, const char *fix);

/* The known name closest to key (edit distance <= 2), or NULL. */
const char *mf_suggest(const char *key, const char *const *known);

/* "an integer", "a string", ... in the words of the format (c may be NULL) */
const char *mf_kind_article(const struct mf_ctx *c, unsigned kind);

#endif
