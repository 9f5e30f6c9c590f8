/* Private to src/jsonschema: the compiled form of a schema and the helpers
 * the compiler and the validator share. */
#ifndef CAPSULE_JSONSCHEMA_INTERNAL_H
#define CAPSULE_JSONSCHEMA_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/node.h"
#include "jsonschema/jsonschema.h"

/* type bits */
enum {
  JS_T_NULL = 1,
  JS_T_BOOL = 2,
  JS_T_INT = 4, /* "integer": any number with an integral value */
  JS_T_NUM = 8, /* "number": every number */
  JS_T_STR = 16,
  JS_T_ARR = 32,
  JS_T_OBJ = 64,
};

/* keyword groups, so validation skips what cannot apply */
enum {
  JS_G_NUM = 1,
  JS_G_STR = 2,
  JS_G_ARR = 4,
  JS_G_OBJ = 8,
  JS_G_INPLACE = 16, /* allOf, anyOf, oneOf, not, if, $ref, $dynamicRef */
  JS_G_VALUE = 32,   /* enum, const */
};

/* vocabularies a resource's meta-schema enables */
enum {
  JS_VOC_APPLICATOR = 1,
  JS_VOC_UNEVALUATED = 2,
  JS_VOC_VALIDATION = 4,
  JS_VOC_FORMAT_ASSERT = 8,
  JS_VOC_ALL = JS_VOC_APPLICATOR | JS_VOC_UNEVALUATED | JS_VOC_VALIDATION,
};

/* An exact decimal: value = sign * digits * 10^exp; digits has no leading
 * or trailing zeros ("" for zero, sign 0). */
struct js_dec {
  int sign;
  const char *digits;
  size_t ndigits;
  int64_t exp;
};

/* A number keyword's operand, with a fast path for integers. */
struct js_num {
  bool is_int; /* fits int64 */
  int64_t i;
  double f;
  struct js_dec dec;
  char text[32]; /* as messages print it */
  uint8_t text_len;
};

enum js_format {
  JS_FMT_NONE = 0,
  JS_FMT_DATE_TIME,
  JS_FMT_DATE,
  JS_FMT_TIME,
  JS_FMT_DURATION,
  JS_FMT_EMAIL,
  JS_FMT_IDN_EMAIL,
  JS_FMT_HOSTNAME,
  JS_FMT_IDN_HOSTNAME,
  JS_FMT_IPV4,
  JS_FMT_IPV6,
  JS_FMT_URI,
  JS_FMT_URI_REFERENCE,
  JS_FMT_IRI,
  JS_FMT_IRI_REFERENCE,
  JS_FMT_URI_TEMPLATE,
  JS_FMT_UUID,
  JS_FMT_REGEX,
  JS_FMT_JSON_POINTER,
  JS_FMT_RELATIVE_JSON_POINTER,
  JS_FMT_UNKNOWN,
};

struct js_schema;
struct js_resource;

/* a text made at compile time, with its length */
struct js_text {
  const char *s;
  size_t n;
};

struct js_prop {
  const char *key;
  size_t keylen;
  uint32_t hash;
  struct js_schema *schema;
};

/* regex.c's small matcher (see js_fastre_compile) */
#define FRE_MAX_ATOMS 32
#define FRE_INF UINT32_MAX
#define FRE_MAX_POS 63    /* positions (one code point each) of a DFA's pattern */
#define FRE_MAX_DFA 64    /* DFA states */
#define FRE_SYM_SPACE 128 /* a non-ASCII ECMA white space code point */
#define FRE_SYM_OTHER 129 /* any other non-ASCII code point */
#define FRE_SYMS 130

struct fre_set {
  uint64_t bits[2]; /* ASCII members */
  uint8_t na;       /* non-ASCII code points: none, all, ECMA spaces, all but them */
};

struct fre_atom {
  struct fre_set set;
  uint32_t min, max;
  uint8_t table[256]; /* by byte: 1 ASCII member, 2 non-ASCII lead byte to decode, 0 no */
};

struct js_fastre {
  bool ascii_only; /* no set takes non-ASCII code points */
  bool greedy;     /* else the bit-parallel automaton */
  size_t n_atoms;
  /* automaton: bit 0 is the start, bit k the k-th state (one code point) */
  unsigned n_states;
  uint64_t ascii[128];              /* states each ASCII character may enter */
  uint64_t na_space, na_other;      /* same for non-ASCII code points */
  uint64_t loop, opt, opt_masks[6]; /* self-loops; optional states (skip closure) */
  /* or a DFA (patterns with groups, and sets the greedy scan cannot take):
   * state 0 rejects, 1 starts; next state at dfa[state * FRE_SYMS + symbol],
   * the symbol being the ASCII character or FRE_SYM_SPACE/FRE_SYM_OTHER for
   * a non-ASCII code point; bit k of dfa_accept: state k accepts */
  const uint8_t *dfa;
  uint64_t dfa_accept;
  struct fre_atom atoms[]; /* greedy: n_atoms of them */
};

struct js_pattern_prop {
  pcre2_code *re;
  const struct js_fastre *fast; /* NULL: PCRE2 only */
  const char *source;
  struct js_schema *schema;
};

struct js_dep_required {
  const char *key;
  size_t keylen;
  const struct cap_node *names; /* array of strings */
};

struct js_schema {
  const struct cap_node *node;
  struct js_resource *resource;
  const char *loc; /* keyword location prefix: "" or "/properties/a" or "URI#/..." */
  size_t loc_len;
  bool is_bool, bool_value;
  /* bit (1 << instance kind) set when some keyword besides "type" applies to
   * instances of that kind: validation stops after the type check otherwise */
  uint8_t work;
  bool has_unevaluated; /* unevaluatedProperties or unevaluatedItems present */
  uint8_t types;        /* 0: no "type" */
  /* bit (1 << instance kind) set when "type" passes for every instance of
   * that kind (all kinds without "type"; floats need a look under "integer") */
  uint8_t type_ok;
  /* 1: no enum/const, in-place applicators or unevaluated*: per-kind
   * keywords only; 2: enum/const and at most "type", nothing else (work
   * is then 0: validate() checks the value where it checks the type) */
  uint8_t direct;
  /* members: 1 some of properties, patternProperties, additionalProperties,
   * propertyNames; 2 "properties" alone (members may be looked up) */
  uint8_t members;
  /* some of dependentRequired, dependentSchemas, maxProperties, minProperties */
  bool obj_tail;
  /* "properties" with one property and nothing else ({"properties": {"kind":
   * {"const": "click"}}}, the usual "if"): an "if" looks the member up itself
   * when that property's schema is an enum/const alone */
  bool disc;
  uint8_t groups; /* JS_G_*: which kinds of keywords are present */

  struct js_schema *ref;
  const char *ref_uri;
  struct js_schema *dynref; /* static target of $dynamicRef */
  const char *dynref_uri;
  int dynref_anchor; /* anchor id searched in the dynamic scope, -1: plain ref */

  struct js_schema **all_of, **any_of, **one_of;
  size_t n_all_of, n_any_of, n_one_of;
  struct js_schema *not_, *if_, *then_, *else_;

  struct js_prop *props;
  size_t n_props;
  int32_t *prop_table; /* open addressing over props, size prop_mask+1 */
  uint32_t prop_mask;
  struct js_pattern_prop *pattern_props;
  size_t n_pattern_props;
  struct js_schema *additional_props, *property_names, *unevaluated_props;
  struct js_prop *dep_schemas;
  size_t n_dep_schemas;
  struct js_dep_required *dep_required;
  size_t n_dep_required;

  struct js_schema **prefix_items;
  size_t n_prefix_items;
  struct js_schema *items, *contains, *unevaluated_items;
  int64_t min_contains, max_contains; /* -1: absent */

  const struct cap_node **enum_values;
  size_t n_enum;
  bool has_enum;
  const struct cap_node *const_value;

  struct js_num *multiple_of, *minimum, *maximum, *exclusive_minimum, *exclusive_maximum;
  int64_t max_length, min_length, max_items, min_items, max_props, min_props; /* -1 absent */
  bool unique_items;
  pcre2_code *pattern;
  const struct js_fastre *pattern_fast; /* NULL: PCRE2 only */
  const char *pattern_source;
  struct js_prop *required; /* schema unused */
  size_t n_required;
  bool required_in_props; /* every required name is also in "properties" */
  uint8_t *prop_required; /* per property: 1 when required */
  enum js_format format;
  bool format_assert;
  const char *format_name;
  /* message parts made at compile time, so reporting an error is cheap */
  const char *types_text;   /* "string or null" */
  const char *allowed_text; /* "; allowed: a, b" or "" */
  const char *enum_text;    /* "must be one of: ..." */
  const char *const_text;   /* "must be exactly ..." */
  /* their lengths as messages print them (up to a NUL) */
  uint32_t types_text_len, allowed_text_len, enum_text_len, const_text_len, pattern_source_len;
  /* whole messages and message tails, as the pieces above would make them */
  struct js_text not_allowed;     /* "\" is not allowed" + allowed_text */
  struct js_text pattern_msg;     /* "does not match the pattern \"...\"" */
  struct js_text min_length_tail; /* " characters long; at least N are required" */
  struct js_text max_length_tail; /* " characters long; at most N are allowed" */
  struct js_text min_items_tail;  /* " items; at least N are required" */
  struct js_text max_items_tail;  /* " items; at most N are allowed" */
  struct js_text *required_msg;   /* per required name: "missing required property \"a\"" */
};

struct js_dyn_anchor {
  int id;
  const struct cap_node *node;
  struct js_schema *schema;
};

struct js_resource {
  char *uri;
  struct js_dyn_anchor *dyn;
  size_t n_dyn, cap_dyn;
  unsigned vocab;
  bool used;                /* some schema of it was compiled */
  struct js_resource *next; /* all resources, for freeing */
};

struct cap_js_validator {
  struct js_schema *root;
  struct cap_js_options opts;
  pcre2_match_context *mctx;
  struct cap_doc *arena; /* every compiled schema and string */
  struct js_resource *resources;
  struct cap_doc **docs; /* owned documents (meta-schemas, loaded files) */
  size_t n_docs, cap_docs;
  pcre2_code **regexes; /* every compiled regex, for freeing */
  size_t n_regexes, cap_regexes;
  bool dynamic_scope;  /* some $dynamicRef searches the dynamic scope */
  char **anchor_names; /* dynamic anchor names by id */
  size_t n_anchor_names, cap_anchor_names;
};

/* compile.c: zeroed allocation and strings in the validator's arena */
void *js_alloc(struct cap_js_validator *v, size_t n);
char *js_strdup(struct cap_js_validator *v, const char *s, size_t n);

/* uri.c */
/* Resolves ref against base (RFC 3986 section 5.2); caller frees. */
char *js_uri_resolve(const char *base, const char *ref);
/* Splits off the fragment: returns the URI without '#...' (caller frees)
 * and points *frag into uri after '#', or at "" when there is none. */
char *js_uri_split(const char *uri, const char **frag);
/* Value of a hex digit, or -1. */
/* Percent-decodes s into a new string; NULL when malformed. */
char *js_percent_decode(const char *s, size_t *out_len);

/* number.c */
/* Parses JSON number text into an exact decimal; digits are written into
 * buf (room for at least len bytes). Returns false when text is not a
 * number. */
bool js_dec_parse(const char *text, size_t len, char *buf, struct js_dec *out);
int js_dec_cmp(const struct js_dec *a, const struct js_dec *b);
/* True when a is an integer multiple of b (b > 0). */
bool js_dec_is_multiple(const struct js_dec *a, const struct js_dec *b);
bool js_dec_is_integer(const struct js_dec *a);

/* n hex digits at s (avail bytes there) into *out; false if not. */
bool js_hexn(const char *s, size_t avail, size_t n, uint32_t *out);

/* regex.c */
/* Translates an ECMA-262 pattern to PCRE2 syntax and compiles it; on
 * failure returns NULL and writes a message into err. */
pcre2_code *js_regex_compile(const char *src, size_t len, char *err, size_t errlen);
/* A matcher without PCRE2 for "^" + character sets with quantifiers + "$"
 * (same language as the PCRE2 translation); NULL for other patterns. Only
 * for sources js_regex_compile accepted. */
struct js_fastre *js_fastre_compile(struct cap_js_validator *v, const char *src, size_t len);
/* the same; use_dfa false leaves out the DFA (for tests of the automaton) */
struct js_fastre *js_fastre_compile_with(struct cap_js_validator *v, const char *src, size_t len,
                                         bool use_dfa);
/* Whole-string match; s must be valid UTF-8 unless f->ascii_only (then a
 * non-ASCII byte simply does not match). */
bool js_fastre_match(const struct js_fastre *f, const char *s, size_t n);
/* For a DFA (f->dfa non-NULL) and any bytes: 1 match, 0 no match when s
 * is all ASCII (the answer js_fastre_match gives), -1 when s has a
 * non-ASCII byte (then check its UTF-8 and call js_fastre_match). */
int js_fastre_match_ascii(const struct js_fastre *f, const char *s, size_t n);

/* format.c */
enum js_format js_format_lookup(const char *name);
/* True when s conforms to format f (unknown formats always conform). */
bool js_format_check(enum js_format f, const char *s, size_t len);

/* metaschema.c */
const char *js_metaschema_lookup(const char *uri, size_t *len);

#endif
