/* JSON Schema draft 2020-12: compile a schema once into an immutable
 * validator, then validate many instances (from any thread at once).
 *
 * Ownership: the validator BORROWS the schema tree passed to cap_js_compile
 * and every tree added to the registry with cap_js_registry_add (it points
 * into them for const/enum values and strings): keep those documents alive
 * until cap_js_validator_free. Documents the validator loads itself (the
 * embedded meta-schemas, files found through cap_js_registry_add_dir) are
 * owned by the validator. The registry may be freed right after compile.
 * Errors returned by cap_js_validate are owned by the caller
 * (cap_js_errors_free).
 *
 * Validation does not allocate on the success path, except for objects
 * with more than 512 members under unevaluatedProperties and arrays longer
 * than 4096 items under unevaluatedItems/contains. It is bounded: schema
 * recursion depth and total evaluation steps are capped (a $ref loop or an
 * exponential schema yields an error, not a hang), and regular expressions
 * run under PCRE2 match limits. */
#ifndef CAPSULE_JSONSCHEMA_JSONSCHEMA_H
#define CAPSULE_JSONSCHEMA_JSONSCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/diag.h"
#include "core/node.h"

struct cap_js_registry;
struct cap_js_validator;

struct cap_js_options {
  bool format_assert;   /* "format" asserts (default: annotation only) */
  const char *base_uri; /* base URI of a root without $id (default "urn:capsule:schema") */
  uint64_t max_steps;   /* evaluation budget per instance (0: 20,000,000) */
  unsigned max_depth;   /* schema nesting while evaluating (0: 512) */
};

/* Extra schemas by URI, for "$ref" to documents outside the root. */
struct cap_js_registry *cap_js_registry_new(void);
void cap_js_registry_free(struct cap_js_registry *reg);
/* Makes `schema` (borrowed) the document retrieved at absolute `uri`. */
void cap_js_registry_add(struct cap_js_registry *reg, const char *uri,
                         const struct cap_node *schema);
/* URIs starting with `prefix` are read from `dir` + the rest of the URI
 * (JSON files, loaded at compile time only when referenced). */
void cap_js_registry_add_dir(struct cap_js_registry *reg, const char *prefix, const char *dir);

/* Compiles `schema`. Problems are added to diags at the schema node's
 * line:col in `file`, with the field path `path_prefix` (may be NULL or "")
 * followed by the dotted path inside the schema, e.g.
 * "tools[0].input_schema.properties.city.minLength". Returns NULL when the
 * schema has errors. reg and opts may be NULL. */
struct cap_js_validator *cap_js_compile(const struct cap_node *schema,
                                        const struct cap_js_registry *reg,
                                        const struct cap_js_options *opts, const char *file,
                                        const char *path_prefix, struct cap_diags *diags);
void cap_js_validator_free(struct cap_js_validator *v);
void cap_js_validator_freep(struct cap_js_validator **v);

/* The three strings live in one allocation that cap_js_errors_free releases;
 * do not free them one by one. */
struct cap_js_error {
  char *instance_location; /* JSON Pointer into the instance, "" for the root */
  char *keyword_location;  /* JSON Pointer of the failing keyword in the schema
                            * ("/properties/a/type"); "URI#/ptr" in another document */
  char *message;           /* what is wrong, readable by a person or an LLM */
};

struct cap_js_errors {
  struct cap_js_error *items;
  size_t len, cap;
  /* the first error, when it fits, lives here without an allocation (the
   * usual case with CAP_JS_FIRST_ONLY): a filled struct must not be copied */
  struct cap_js_error first;
  char first_text[320];
};

#define CAP_JS_FIRST_ONLY 1u /* stop at the first error */

/* True when instance is valid. With errs non-NULL, fills it with the errors
 * (all of them, or the first with CAP_JS_FIRST_ONLY); with errs NULL only
 * the verdict is computed (fastest). Object member names must be unique in
 * the instance (capsule's parsers refuse duplicates); a tree built by hand
 * with a name twice may be judged by its first member only. */
bool cap_js_validate(const struct cap_js_validator *v, const struct cap_node *instance,
                     unsigned flags, struct cap_js_errors *errs);
/* Frees what errs holds and leaves it empty, ready for the next call. */
void cap_js_errors_free(struct cap_js_errors *errs);

#endif
