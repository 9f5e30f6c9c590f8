/* The keywords of a schema object: a table from keyword name to the
 * vocabulary that must be enabled for it and the function that checks and
 * pre-digests it (as SQLite's keyword table replaces a strcmp chain), then
 * what validation needs precomputed: message pieces and fast-path flags. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/text.h"
#include "jsonschema/compile_internal.h"

static bool is_integral(const struct cap_node *n)
{
  if (n->kind == CAP_NODE_INT)
    return true;
  if (n->kind != CAP_NODE_FLOAT)
    return false;
  if (n->u.num.raw) {
    size_t len = strlen(n->u.num.raw);
    char *buf = cap_xmalloc(len + 1);
    struct js_dec d;
    bool ok = js_dec_parse(n->u.num.raw, len, buf, &d) && js_dec_is_integer(&d);
    free(buf);
    return ok;
  }
  return n->u.num.f == (double)(int64_t)n->u.num.f;
}

static int64_t nonneg_int(struct compiler *c, const struct node_info *info,
                          const struct cap_member *m)
{
  const struct cap_node *n = m->value;
  if (!cap_node_is_number(n) || !is_integral(n) || n->u.num.f < 0) {
    js_diag(c, info, n, m->key, "\"%s\" must be a non-negative integer", m->key);
    return -1;
  }
  if (n->kind == CAP_NODE_INT)
    return n->u.num.i;
  return n->u.num.f > 9.2e18 ? INT64_MAX : (int64_t)n->u.num.f;
}

static struct js_num *number_operand(struct compiler *c, const struct node_info *info,
                                     const struct cap_member *m)
{
  const struct cap_node *n = m->value;
  if (!cap_node_is_number(n)) {
    js_diag(c, info, n, m->key, "\"%s\" must be a number, not %s", m->key,
            cap_node_kind_name(n->kind));
    return NULL;
  }
  struct js_num *num = js_alloc(c->v, sizeof(*num));
  num->is_int = n->kind == CAP_NODE_INT;
  num->i = n->u.num.i;
  num->f = n->u.num.f;
  char tmp[64];
  const char *text = n->u.num.raw;
  if (!text) {
    if (n->kind == CAP_NODE_INT)
      snprintf(tmp, sizeof(tmp), "%lld", (long long)n->u.num.i);
    else
      snprintf(tmp, sizeof(tmp), "%.17g", n->u.num.f);
    text = tmp;
  }
  size_t len = strlen(text);
  if (num->is_int)
    snprintf(num->text, sizeof(num->text), "%lld", (long long)num->i);
  else
    snprintf(num->text, sizeof(num->text), "%.17g", num->f);
  num->text_len = (uint8_t)strlen(num->text);
  char *buf = js_alloc(c->v, len + 1);
  if (!js_dec_parse(text, len, buf, &num->dec)) {
    js_diag(c, info, n, m->key, "\"%s\" must be a finite number", m->key);
    return NULL;
  }
  return num;
}

static struct js_schema *sub(struct compiler *c, const struct cap_node *n)
{
  return js_compile_schema(c, n);
}

static struct js_schema **schema_array(struct compiler *c, const struct node_info *info,
                                       const struct cap_member *m, size_t *count)
{
  const struct cap_node *n = m->value;
  if (n->kind != CAP_NODE_ARRAY || n->u.arr.len == 0) {
    js_diag(c, info, n, m->key, "\"%s\" must be a non-empty array of schemas", m->key);
    *count = 0;
    return NULL;
  }
  struct js_schema **arr = js_alloc(c->v, n->u.arr.len * sizeof(*arr));
  for (size_t i = 0; i < n->u.arr.len; i++)
    arr[i] = sub(c, n->u.arr.items[i]);
  *count = n->u.arr.len;
  return arr;
}

static uint32_t prop_hash(const char *s, size_t n) { return (uint32_t)js_hash_bytes(s, n); }

static struct js_prop *schema_map(struct compiler *c, const struct node_info *info,
                                  const struct cap_member *m, size_t *count)
{
  const struct cap_node *n = m->value;
  *count = 0;
  if (n->kind != CAP_NODE_OBJECT) {
    js_diag(c, info, n, m->key, "\"%s\" must be an object whose values are schemas", m->key);
    return NULL;
  }
  struct js_prop *props = js_alloc(c->v, (n->u.obj.len + 1) * sizeof(*props));
  for (size_t i = 0; i < n->u.obj.len; i++) {
    const struct cap_member *pm = &n->u.obj.items[i];
    props[i].key = pm->key;
    props[i].keylen = pm->keylen;
    props[i].hash = prop_hash(pm->key, pm->keylen);
    props[i].schema = sub(c, pm->value);
  }
  *count = n->u.obj.len;
  return props;
}

static void build_prop_table(struct compiler *c, struct js_schema *s)
{
  uint32_t size = 8;
  while (size < s->n_props * 2)
    size *= 2;
  s->prop_table = js_alloc(c->v, size * sizeof(int32_t));
  for (uint32_t i = 0; i < size; i++)
    s->prop_table[i] = -1;
  s->prop_mask = size - 1;
  for (size_t i = 0; i < s->n_props; i++) {
    uint32_t h = s->props[i].hash & s->prop_mask;
    while (s->prop_table[h] >= 0)
      h = (h + 1) & s->prop_mask;
    s->prop_table[h] = (int32_t)i;
  }
}

static bool string_array(struct compiler *c, const struct node_info *info, const struct cap_node *n,
                         const char *key, bool unique)
{
  if (n->kind != CAP_NODE_ARRAY) {
    js_diag(c, info, n, key, "\"%s\" must be an array of strings", key);
    return false;
  }
  bool ok = true;
  for (size_t i = 0; i < n->u.arr.len; i++) {
    const struct cap_node *e = n->u.arr.items[i];
    if (e->kind != CAP_NODE_STRING) {
      js_diag(c, info, e, key, "\"%s\" must contain only strings; item %zu is %s", key, i,
              cap_node_kind_name(e->kind));
      ok = false;
      continue;
    }
    for (size_t j = 0; unique && j < i; j++)
      if (cap_node_equal(e, n->u.arr.items[j])) {
        js_diag(c, info, e, key, "\"%s\" lists \"%s\" twice; remove the duplicate", key,
                e->u.str.ptr);
        ok = false;
      }
  }
  return ok;
}

static uint8_t type_bit(const char *name)
{
  static const struct {
    const char *name;
    uint8_t bit;
  } types[] = {{"null", JS_T_NULL},  {"boolean", JS_T_BOOL}, {"integer", JS_T_INT},
               {"number", JS_T_NUM}, {"string", JS_T_STR},   {"array", JS_T_ARR},
               {"object", JS_T_OBJ}};
  for (size_t i = 0; i < ARRAY_SIZE(types); i++)
    if (strcmp(types[i].name, name) == 0)
      return types[i].bit;
  return 0;
}

static void add_pending(struct compiler *c, struct js_schema *s, const struct node_info *info,
                        const struct cap_member *m, bool dynamic)
{
  if (m->value->kind != CAP_NODE_STRING) {
    js_diag(c, info, m->value, m->key, "\"%s\" must be a string (a URI reference)", m->key);
    return;
  }
  char *abs = js_uri_resolve(info->base, m->value->u.str.ptr);
  if (c->n_pending == c->cap_pending) {
    c->cap_pending = c->cap_pending ? c->cap_pending * 2 : 16;
    c->pending = cap_xrealloc(c->pending, c->cap_pending * sizeof(*c->pending));
  }
  struct pending_ref *p = &c->pending[c->n_pending++];
  p->schema = s;
  p->uri = js_strdup(c->v, abs, strlen(abs));
  p->dynamic = dynamic;
  p->at = m->value;
  p->info = info;
  free(abs);
  if (dynamic)
    s->dynref_uri = p->uri;
  else
    s->ref_uri = p->uri;
  s->groups |= JS_G_INPLACE;
}

/* ---- the keyword table: one function per keyword ---- */

#define KW_ARGS                                                                                    \
  struct compiler *c, struct js_schema *s, const struct node_info *info,                           \
      const struct cap_member *m, const struct cap_node *n

static void kw_ref(KW_ARGS) { add_pending(c, s, info, m, false); }
static void kw_dynamic_ref(KW_ARGS) { add_pending(c, s, info, m, true); }
static void kw_defs(KW_ARGS)
{
  size_t count;
  schema_map(c, info, m, &count); /* compiled for their diagnostics */
}

static void kw_all_of(KW_ARGS)
{
  s->all_of = schema_array(c, info, m, &s->n_all_of);
  s->groups |= JS_G_INPLACE;
}
static void kw_any_of(KW_ARGS)
{
  s->any_of = schema_array(c, info, m, &s->n_any_of);
  s->groups |= JS_G_INPLACE;
}
static void kw_one_of(KW_ARGS)
{
  s->one_of = schema_array(c, info, m, &s->n_one_of);
  s->groups |= JS_G_INPLACE;
}
static void kw_not(KW_ARGS)
{
  s->not_ = sub(c, n);
  s->groups |= JS_G_INPLACE;
}
static void kw_if(KW_ARGS)
{
  s->if_ = sub(c, n);
  s->groups |= JS_G_INPLACE;
}
static void kw_then(KW_ARGS) { s->then_ = sub(c, n); }
static void kw_else(KW_ARGS) { s->else_ = sub(c, n); }
static void kw_properties(KW_ARGS)
{
  s->props = schema_map(c, info, m, &s->n_props);
  build_prop_table(c, s);
  s->groups |= JS_G_OBJ;
}

/* A compiled regex kept for the validator's lifetime (freed with it). */
static pcre2_code *keep_regex(struct compiler *c, const char *src, size_t len, char *err,
                              size_t errlen)
{
  pcre2_code *re = js_regex_compile(src, len, err, errlen);
  if (!re)
    return NULL;
  if (c->v->n_regexes == c->v->cap_regexes) {
    c->v->cap_regexes = c->v->cap_regexes ? c->v->cap_regexes * 2 : 8;
    c->v->regexes = cap_xrealloc(c->v->regexes, c->v->cap_regexes * sizeof(pcre2_code *));
  }
  c->v->regexes[c->v->n_regexes++] = re;
  return re;
}

static void kw_pattern_properties(KW_ARGS)
{
  if (n->kind != CAP_NODE_OBJECT) {
    js_diag(c, info, n, m->key, "\"patternProperties\" must be an object of pattern: schema");
    return;
  }
  s->pattern_props = js_alloc(c->v, (n->u.obj.len + 1) * sizeof(*s->pattern_props));
  for (size_t i = 0; i < n->u.obj.len; i++) {
    const struct cap_member *pm = &n->u.obj.items[i];
    char err[200];
    pcre2_code *re = keep_regex(c, pm->key, pm->keylen, err, sizeof(err));
    if (!re) {
      struct node_info *ci = js_child_info(c, info, m->key, strlen(m->key), -1);
      js_diag(c, ci, pm->value, pm->key, "%s (in pattern \"%s\"); write an ECMA-262 regex", err,
              pm->key);
      continue;
    }
    struct js_pattern_prop *pp = &s->pattern_props[s->n_pattern_props++];
    pp->re = re;
    pp->fast = js_fastre_compile(c->v, pm->key, pm->keylen);
    pp->source = pm->key;
    pp->schema = sub(c, pm->value);
  }
  s->groups |= JS_G_OBJ;
}
static void kw_additional_properties(KW_ARGS)
{
  s->additional_props = sub(c, n);
  s->groups |= JS_G_OBJ;
}
static void kw_property_names(KW_ARGS)
{
  s->property_names = sub(c, n);
  s->groups |= JS_G_OBJ;
}
static void kw_dependent_schemas(KW_ARGS)
{
  s->dep_schemas = schema_map(c, info, m, &s->n_dep_schemas);
  s->groups |= JS_G_OBJ;
}
static void kw_prefix_items(KW_ARGS)
{
  s->prefix_items = schema_array(c, info, m, &s->n_prefix_items);
  s->groups |= JS_G_ARR;
}
static void kw_items(KW_ARGS)
{
  if (n->kind == CAP_NODE_ARRAY) {
    js_diag(c, info, n, m->key,
            "\"items\" must be a schema in draft 2020-12; for per-position schemas use "
            "\"prefixItems\"");
    return;
  }
  s->items = sub(c, n);
  s->groups |= JS_G_ARR;
}
static void kw_contains(KW_ARGS)
{
  s->contains = sub(c, n);
  s->groups |= JS_G_ARR;
}
static void kw_unevaluated_properties(KW_ARGS)
{
  s->unevaluated_props = sub(c, n);
  s->has_unevaluated = true;
  s->groups |= JS_G_OBJ;
}
static void kw_unevaluated_items(KW_ARGS)
{
  s->unevaluated_items = sub(c, n);
  s->has_unevaluated = true;
  s->groups |= JS_G_ARR;
}

static void type_names(struct compiler *c, const struct node_info *info, const struct cap_node *at,
                       const char *name, struct js_schema *s)
{
  uint8_t b = type_bit(name);
  if (!b)
    js_diag(c, info, at, "type",
            "unknown type \"%s\"; use null, boolean, integer, number, string, array or object",
            name);
  s->types |= b;
}
static void kw_type(KW_ARGS)
{
  if (n->kind == CAP_NODE_STRING) {
    type_names(c, info, n, n->u.str.ptr, s);
  } else if (n->kind == CAP_NODE_ARRAY && string_array(c, info, n, m->key, true)) {
    for (size_t i = 0; i < n->u.arr.len; i++)
      type_names(c, info, n->u.arr.items[i], n->u.arr.items[i]->u.str.ptr, s);
    if (n->u.arr.len == 0)
      js_diag(c, info, n, m->key, "\"type\" must name at least one type");
  } else if (n->kind != CAP_NODE_ARRAY) {
    js_diag(c, info, n, m->key, "\"type\" must be a type name or an array of type names");
  }
}
static void kw_enum(KW_ARGS)
{
  if (n->kind != CAP_NODE_ARRAY) {
    js_diag(c, info, n, m->key, "\"enum\" must be an array of the allowed values");
    return;
  }
  s->enum_values = (const struct cap_node **)n->u.arr.items;
  s->n_enum = n->u.arr.len;
  s->has_enum = true;
  s->groups |= JS_G_VALUE;
}
static void kw_const(KW_ARGS)
{
  s->const_value = n;
  s->groups |= JS_G_VALUE;
}
static void kw_multiple_of(KW_ARGS)
{
  s->multiple_of = number_operand(c, info, m);
  if (s->multiple_of && s->multiple_of->dec.sign <= 0) {
    js_diag(c, info, n, m->key, "\"multipleOf\" must be greater than 0");
    s->multiple_of = NULL;
  }
  s->groups |= JS_G_NUM;
}
static void kw_maximum(KW_ARGS)
{
  s->maximum = number_operand(c, info, m);
  s->groups |= JS_G_NUM;
}
static void kw_minimum(KW_ARGS)
{
  s->minimum = number_operand(c, info, m);
  s->groups |= JS_G_NUM;
}
static void kw_exclusive_maximum(KW_ARGS)
{
  s->exclusive_maximum = number_operand(c, info, m);
  s->groups |= JS_G_NUM;
}
static void kw_exclusive_minimum(KW_ARGS)
{
  s->exclusive_minimum = number_operand(c, info, m);
  s->groups |= JS_G_NUM;
}
static void kw_max_length(KW_ARGS)
{
  s->max_length = nonneg_int(c, info, m);
  s->groups |= JS_G_STR;
}
static void kw_min_length(KW_ARGS)
{
  s->min_length = nonneg_int(c, info, m);
  s->groups |= JS_G_STR;
}
static void kw_pattern(KW_ARGS)
{
  if (n->kind != CAP_NODE_STRING) {
    js_diag(c, info, n, m->key, "\"pattern\" must be a string (an ECMA-262 regex)");
    return;
  }
  char err[200];
  pcre2_code *re = keep_regex(c, n->u.str.ptr, n->u.str.len, err, sizeof(err));
  if (!re) {
    js_diag(c, info, n, m->key, "%s; write an ECMA-262 regex", err);
    return;
  }
  s->pattern = re;
  s->pattern_fast = js_fastre_compile(c->v, n->u.str.ptr, n->u.str.len);
  s->pattern_source = n->u.str.ptr;
  s->pattern_source_len = (uint32_t)strlen(n->u.str.ptr);
  s->groups |= JS_G_STR;
}
static void kw_max_items(KW_ARGS)
{
  s->max_items = nonneg_int(c, info, m);
  s->groups |= JS_G_ARR;
}
static void kw_min_items(KW_ARGS)
{
  s->min_items = nonneg_int(c, info, m);
  s->groups |= JS_G_ARR;
}
static void kw_unique_items(KW_ARGS)
{
  if (n->kind != CAP_NODE_BOOL)
    js_diag(c, info, n, m->key, "\"uniqueItems\" must be true or false");
  else
    s->unique_items = n->u.boolean;
  s->groups |= JS_G_ARR;
}
static void kw_max_contains(KW_ARGS) { s->max_contains = nonneg_int(c, info, m); }
static void kw_min_contains(KW_ARGS) { s->min_contains = nonneg_int(c, info, m); }
static void kw_max_properties(KW_ARGS)
{
  s->max_props = nonneg_int(c, info, m);
  s->groups |= JS_G_OBJ;
}
static void kw_min_properties(KW_ARGS)
{
  s->min_props = nonneg_int(c, info, m);
  s->groups |= JS_G_OBJ;
}
static void kw_required(KW_ARGS)
{
  if (!string_array(c, info, n, m->key, true))
    return;
  s->required = js_alloc(c->v, (n->u.arr.len + 1) * sizeof(*s->required));
  for (size_t i = 0; i < n->u.arr.len; i++) {
    s->required[i].key = n->u.arr.items[i]->u.str.ptr;
    s->required[i].keylen = n->u.arr.items[i]->u.str.len;
  }
  s->n_required = n->u.arr.len;
  s->groups |= JS_G_OBJ;
}
static void kw_dependent_required(KW_ARGS)
{
  if (n->kind != CAP_NODE_OBJECT) {
    js_diag(c, info, n, m->key, "\"dependentRequired\" must be an object of property: [names]");
    return;
  }
  s->dep_required = js_alloc(c->v, (n->u.obj.len + 1) * sizeof(*s->dep_required));
  for (size_t i = 0; i < n->u.obj.len; i++) {
    const struct cap_member *dm = &n->u.obj.items[i];
    if (!string_array(c, info, dm->value, m->key, true))
      continue;
    struct js_dep_required *d = &s->dep_required[s->n_dep_required++];
    d->key = dm->key;
    d->keylen = dm->keylen;
    d->names = dm->value;
  }
  s->groups |= JS_G_OBJ;
}
/* "format": an assertion's operand under the validation vocabulary (checked),
 * an annotation otherwise (a non-string is ignored) */
static void kw_format(KW_ARGS)
{
  bool checked = info->res->vocab & JS_VOC_VALIDATION;
  if (n->kind != CAP_NODE_STRING) {
    if (checked)
      js_diag(c, info, n, m->key, "\"format\" must be a string such as \"date-time\" or \"email\"");
    return;
  }
  s->format = js_format_lookup(n->u.str.ptr);
  s->format_name = n->u.str.ptr;
}

#define KW_CORE 0u /* always applies */

/* Sorted by name (strcmp order) for bsearch; `vocab` is the vocabulary
 * that must be enabled for the keyword to apply (unknown keywords and
 * those of disabled vocabularies are annotations: ignored). */
static const struct keyword {
  const char *name;
  unsigned vocab;
  void (*compile)(KW_ARGS);
} keywords[] = {
    {"$defs", KW_CORE, kw_defs},
    {"$dynamicRef", KW_CORE, kw_dynamic_ref},
    {"$ref", KW_CORE, kw_ref},
    {"additionalProperties", JS_VOC_APPLICATOR, kw_additional_properties},
    {"allOf", JS_VOC_APPLICATOR, kw_all_of},
    {"anyOf", JS_VOC_APPLICATOR, kw_any_of},
    {"const", JS_VOC_VALIDATION, kw_const},
    {"contains", JS_VOC_APPLICATOR, kw_contains},
    {"dependentRequired", JS_VOC_VALIDATION, kw_dependent_required},
    {"dependentSchemas", JS_VOC_APPLICATOR, kw_dependent_schemas},
    {"else", JS_VOC_APPLICATOR, kw_else},
    {"enum", JS_VOC_VALIDATION, kw_enum},
    {"exclusiveMaximum", JS_VOC_VALIDATION, kw_exclusive_maximum},
    {"exclusiveMinimum", JS_VOC_VALIDATION, kw_exclusive_minimum},
    {"format", KW_CORE, kw_format},
    {"if", JS_VOC_APPLICATOR, kw_if},
    {"items", JS_VOC_APPLICATOR, kw_items},
    {"maxContains", JS_VOC_VALIDATION, kw_max_contains},
    {"maxItems", JS_VOC_VALIDATION, kw_max_items},
    {"maxLength", JS_VOC_VALIDATION, kw_max_length},
    {"maxProperties", JS_VOC_VALIDATION, kw_max_properties},
    {"maximum", JS_VOC_VALIDATION, kw_maximum},
    {"minContains", JS_VOC_VALIDATION, kw_min_contains},
    {"minItems", JS_VOC_VALIDATION, kw_min_items},
    {"minLength", JS_VOC_VALIDATION, kw_min_length},
    {"minProperties", JS_VOC_VALIDATION, kw_min_properties},
    {"minimum", JS_VOC_VALIDATION, kw_minimum},
    {"multipleOf", JS_VOC_VALIDATION, kw_multiple_of},
    {"not", JS_VOC_APPLICATOR, kw_not},
    {"oneOf", JS_VOC_APPLICATOR, kw_one_of},
    {"pattern", JS_VOC_VALIDATION, kw_pattern},
    {"patternProperties", JS_VOC_APPLICATOR, kw_pattern_properties},
    {"prefixItems", JS_VOC_APPLICATOR, kw_prefix_items},
    {"properties", JS_VOC_APPLICATOR, kw_properties},
    {"propertyNames", JS_VOC_APPLICATOR, kw_property_names},
    {"required", JS_VOC_VALIDATION, kw_required},
    {"then", JS_VOC_APPLICATOR, kw_then},
    {"type", JS_VOC_VALIDATION, kw_type},
    {"unevaluatedItems", JS_VOC_UNEVALUATED, kw_unevaluated_items},
    {"unevaluatedProperties", JS_VOC_UNEVALUATED, kw_unevaluated_properties},
    {"uniqueItems", JS_VOC_VALIDATION, kw_unique_items},
};

static int keyword_cmp(const void *key, const void *entry)
{
  return strcmp(key, ((const struct keyword *)entry)->name);
}

void js_compile_keyword(struct compiler *c, struct js_schema *s, const struct node_info *info,
                        const struct cap_member *m)
{
  const struct keyword *kw =
      bsearch(m->key, keywords, ARRAY_SIZE(keywords), sizeof keywords[0], keyword_cmp);
  if (!kw || (kw->vocab && !(info->res->vocab & kw->vocab)))
    return;
  kw->compile(c, s, info, m, m->value);
}

/* JSON text of a small value, for messages */
static void value_text(const struct cap_node *n, size_t max, struct cap_buf *out)
{
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  cap_jw_node(&w, n);
  if (b.len > max) {
    b.len = max;
    b.data[max] = '\0';
    cap_buf_puts(&b, "...");
  }
  cap_buf_append(out, b.data ? b.data : "", b.len);
  cap_buf_free(&b);
}

static const char *buf_to_arena(struct cap_js_validator *v, struct cap_buf *b)
{
  const char *r = js_strdup(v, b->data ? b->data : "", b->len);
  cap_buf_free(b);
  return r;
}

/* The texts validate.c would otherwise put together from pieces at each
 * error, made once here. */
static void whole_messages(struct compiler *c, struct js_schema *s)
{
  struct cap_buf b = {0};
  /* each piece as printed: up to its first NUL */
  cap_buf_puts(&b, "\" is not allowed");
  cap_buf_append(&b, s->allowed_text, s->allowed_text_len);
  s->not_allowed.n = b.len;
  s->not_allowed.s = buf_to_arena(c->v, &b);
  if (s->pattern_source) {
    cap_buf_puts(&b, "does not match the pattern \"");
    cap_buf_append(&b, s->pattern_source, s->pattern_source_len);
    cap_buf_puts(&b, "\"");
    s->pattern_msg.n = b.len;
    s->pattern_msg.s = buf_to_arena(c->v, &b);
  }
  struct {
    int64_t limit;
    const char *head, *tail;
    struct js_text *out;
  } tails[] = {
      {s->min_length, " characters long; at least ", " are required", &s->min_length_tail},
      {s->max_length, " characters long; at most ", " are allowed", &s->max_length_tail},
      {s->min_items, " items; at least ", " are required", &s->min_items_tail},
      {s->max_items, " items; at most ", " are allowed", &s->max_items_tail},
  };
  for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
    if (tails[i].limit < 0)
      continue;
    cap_buf_printf(&b, "%s%lld%s", tails[i].head, (long long)tails[i].limit, tails[i].tail);
    tails[i].out->n = b.len;
    tails[i].out->s = buf_to_arena(c->v, &b);
  }
  if (s->n_required) {
    s->required_msg = js_alloc(c->v, s->n_required * sizeof(*s->required_msg));
    for (size_t i = 0; i < s->n_required; i++) {
      const char *k = s->required[i].key;
      size_t kn = 0;
      while (kn < s->required[i].keylen && k[kn])
        kn++;
      cap_buf_puts(&b, "missing required property \"");
      cap_buf_append(&b, k, kn);
      cap_buf_puts(&b, "\"");
      s->required_msg[i].n = b.len;
      s->required_msg[i].s = buf_to_arena(c->v, &b);
    }
  }
}

/* What validation needs to report errors without building text itself. */
static void message_parts(struct compiler *c, struct js_schema *s)
{
  struct cap_buf b = {0};
  static const char *const names[] = {"null",   "boolean", "integer", "number",
                                      "string", "array",   "object"};
  bool first = true;
  for (int i = 0; i < 7; i++) {
    if (!(s->types & (1u << i)))
      continue;
    if (!first)
      cap_buf_puts(&b, " or ");
    cap_buf_puts(&b, names[i]);
    first = false;
  }
  s->types_text = buf_to_arena(c->v, &b);
  if (s->n_props && s->n_props <= 20) {
    cap_buf_puts(&b, "; allowed: ");
    for (size_t i = 0; i < s->n_props; i++) {
      if (i)
        cap_buf_puts(&b, ", ");
      cap_buf_append(&b, s->props[i].key, s->props[i].keylen);
    }
  }
  s->allowed_text = buf_to_arena(c->v, &b);
  if (s->has_enum) {
    cap_buf_puts(&b, "must be one of: ");
    for (size_t i = 0; i < s->n_enum && i < 20; i++) {
      if (i)
        cap_buf_puts(&b, ", ");
      value_text(s->enum_values[i], 80, &b);
    }
    if (s->n_enum > 20)
      cap_buf_puts(&b, ", ...");
    s->enum_text = buf_to_arena(c->v, &b);
  }
  if (s->const_value) {
    cap_buf_puts(&b, "must be exactly ");
    value_text(s->const_value, 200, &b);
    s->const_text = buf_to_arena(c->v, &b);
  }
  s->types_text_len = (uint32_t)strlen(s->types_text);
  s->allowed_text_len = (uint32_t)strlen(s->allowed_text);
  s->enum_text_len = s->enum_text ? (uint32_t)strlen(s->enum_text) : 0;
  s->const_text_len = s->const_text ? (uint32_t)strlen(s->const_text) : 0;
  cap_buf_free(&b);
  whole_messages(c, s);
}

/* Which instance kinds need more than the type check. */
static uint8_t work_of(const struct js_schema *s)
{
  uint8_t w = 0;
  if (s->groups & (JS_G_VALUE | JS_G_INPLACE))
    w = 0xff;
  if ((s->groups & JS_G_OBJ) || s->unevaluated_props)
    w |= 1u << CAP_NODE_OBJECT;
  if ((s->groups & JS_G_ARR) || s->unevaluated_items)
    w |= 1u << CAP_NODE_ARRAY;
  if (s->groups & JS_G_STR)
    w |= 1u << CAP_NODE_STRING;
  if (s->groups & JS_G_NUM)
    w |= (1u << CAP_NODE_INT) | (1u << CAP_NODE_FLOAT);
  return w;
}

/* The instance kinds "type" accepts without looking at the value. */
static uint8_t type_ok_of(uint8_t types)
{
  if (!types)
    return 0xff;
  uint8_t ok = 0;
  if (types & JS_T_NULL)
    ok |= 1u << CAP_NODE_NULL;
  if (types & JS_T_BOOL)
    ok |= 1u << CAP_NODE_BOOL;
  if (types & (JS_T_INT | JS_T_NUM))
    ok |= 1u << CAP_NODE_INT;
  if (types & JS_T_NUM)
    ok |= 1u << CAP_NODE_FLOAT;
  if (types & JS_T_STR)
    ok |= (1u << CAP_NODE_STRING) | (1u << CAP_NODE_DATETIME);
  if (types & JS_T_ARR)
    ok |= 1u << CAP_NODE_ARRAY;
  if (types & JS_T_OBJ)
    ok |= 1u << CAP_NODE_OBJECT;
  return ok;
}

void js_schema_finish(struct compiler *c, struct js_schema *s, const struct node_info *info)
{
  if (s->n_required && s->props) {
    /* lets validation count required names while it walks the members */
    s->prop_required = js_alloc(c->v, s->n_props);
    s->required_in_props = true;
    for (size_t r = 0; r < s->n_required; r++) {
      bool found = false;
      for (size_t p = 0; p < s->n_props && !found; p++)
        if (s->props[p].keylen == s->required[r].keylen &&
            memcmp(s->props[p].key, s->required[r].key, s->required[r].keylen) == 0) {
          s->prop_required[p] = 1;
          found = true;
        }
      s->required_in_props = s->required_in_props && found;
    }
  }
  if (s->contains) {
    if (s->min_contains < 0)
      s->min_contains = 1;
  } else {
    s->min_contains = s->max_contains = -1;
  }
  s->format_assert = s->format != JS_FMT_NONE && s->format != JS_FMT_UNKNOWN &&
                     (c->v->opts.format_assert || (info->res->vocab & JS_VOC_FORMAT_ASSERT));
  if (s->format_assert)
    s->groups |= JS_G_STR;
  message_parts(c, s);
  s->work = work_of(s);
  s->type_ok = type_ok_of(s->types);
  s->direct = !(s->groups & (JS_G_VALUE | JS_G_INPLACE)) && !s->has_unevaluated;
  if (s->groups == JS_G_VALUE && !s->has_unevaluated) {
    s->direct = 2;
    s->work = 0; /* validate() checks the value with the type */
  }
  s->members = (s->props || s->pattern_props || s->additional_props || s->property_names);
  if (s->props && !s->pattern_props && !s->additional_props && !s->property_names)
    s->members = 2;
  s->obj_tail = s->n_dep_required || s->n_dep_schemas || s->max_props >= 0 || s->min_props >= 0;
  s->disc = s->groups == JS_G_OBJ && s->members == 2 && s->n_props == 1 && !s->n_required &&
            !s->obj_tail && !s->types && !s->has_unevaluated;
}
