/* Compiling a schema: index every schema resource ($id), anchor ($anchor,
 * $dynamicAnchor) and subschema by absolute URI, turn each schema object
 * into a struct js_schema with its keywords checked and pre-digested, then
 * resolve every $ref/$dynamicRef to a compiled schema (loading documents
 * from the registry or the embedded meta-schemas as they are referenced).
 * The result never changes again, so validation needs no locks. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/text.h"
#include "jsonschema/compile_internal.h"

/* ---- small hash maps ---- */

uint64_t js_hash_bytes(const char *s, size_t n)
{
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
  return h;
}

static uint64_t map_hash(const struct map *m, const void *key)
{
  if (m->strings)
    return js_hash_bytes(key, strlen(key));
  uint64_t x = (uint64_t)(uintptr_t)key;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

static bool map_eq(const struct map *m, const void *a, const void *b)
{
  return m->strings ? strcmp(a, b) == 0 : a == b;
}

void *js_map_get(const struct map *m, const void *key)
{
  if (!m->cap)
    return NULL;
  for (size_t i = map_hash(m, key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    if (!m->slots[i].key)
      return NULL;
    if (map_eq(m, m->slots[i].key, key))
      return m->slots[i].value;
  }
}

/* Sets key (not copied: it must outlive the map) unless present; returns
 * the value now stored. */
void *js_map_put(struct map *m, const void *key, void *value)
{
  if ((m->len + 1) * 2 > m->cap) {
    size_t ncap = m->cap ? m->cap * 2 : 64;
    struct map_slot *old = m->slots;
    size_t ocap = m->cap;
    m->slots = cap_xcalloc(ncap, sizeof(*m->slots));
    m->cap = ncap;
    m->len = 0;
    for (size_t i = 0; i < ocap; i++)
      if (old[i].key)
        js_map_put(m, old[i].key, old[i].value);
    free(old);
  }
  size_t i = map_hash(m, key) & (m->cap - 1);
  for (; m->slots[i].key; i = (i + 1) & (m->cap - 1))
    if (map_eq(m, m->slots[i].key, key))
      return m->slots[i].value;
  m->slots[i].key = key;
  m->slots[i].value = value;
  m->len++;
  return value;
}

static void js_map_free(struct map *m)
{
  free(m->slots);
  memset(m, 0, sizeof(*m));
}

/* ---- compiler state ---- */

void *js_alloc(struct cap_js_validator *v, size_t n)
{
  void *p = cap_doc_alloc(v->arena, n ? n : 1);
  memset(p, 0, n ? n : 1);
  return p;
}

char *js_strdup(struct cap_js_validator *v, const char *s, size_t n)
{
  return cap_doc_strndup(v->arena, s, n);
}

void js_diag(struct compiler *c, const struct node_info *info, const struct cap_node *at,
             const char *key, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void js_diag(struct compiler *c, const struct node_info *info, const struct cap_node *at,
             const char *key, const char *fmt, ...)
{
  c->failed = true;
  if (!c->diags)
    return;
  struct cap_buf path = {0};
  cap_buf_puts(&path, info && info->path ? info->path : "");
  if (key) {
    if (path.len)
      cap_buf_putc(&path, '.');
    cap_buf_puts(&path, key);
  }
  struct cap_buf msg = {0};
  va_list ap;
  va_start(ap, fmt);
  cap_buf_vprintf(&msg, fmt, ap);
  va_end(ap);
  cap_diags_add(c->diags, CAP_SEV_ERROR, info && info->file ? info->file : c->file,
                at ? at->line : 0, at ? at->col : 0, path.data ? path.data : "", "%s",
                msg.data ? msg.data : "");
  cap_buf_free(&path);
  cap_buf_free(&msg);
}

static void pointer_escape(struct cap_buf *b, const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '~')
      cap_buf_puts(b, "~0");
    else if (s[i] == '/')
      cap_buf_puts(b, "~1");
    else
      cap_buf_putc(b, s[i]);
  }
}

/* child location/path: key is a keyword or property name, or index >= 0 */
struct node_info *js_child_info(struct compiler *c, const struct node_info *parent, const char *key,
                                size_t keylen, long index)
{
  struct node_info *ni = js_alloc(c->v, sizeof(*ni));
  *ni = *parent;
  ni->depth = parent->depth + 1;
  struct cap_buf b = {0};
  cap_buf_puts(&b, parent->loc);
  cap_buf_putc(&b, '/');
  if (index >= 0)
    cap_buf_printf(&b, "%ld", index);
  else
    pointer_escape(&b, key, keylen);
  ni->loc = js_strdup(c->v, b.data, b.len);
  b.len = 0;
  cap_buf_puts(&b, parent->path);
  if (index >= 0) {
    cap_buf_printf(&b, "[%ld]", index);
  } else {
    if (b.len)
      cap_buf_putc(&b, '.');
    cap_buf_append(&b, key, keylen);
  }
  ni->path = js_strdup(c->v, b.data, b.len);
  cap_buf_free(&b);
  return ni;
}

struct js_schema *js_compile_schema(struct compiler *c, const struct cap_node *n)
{
  struct js_schema *s = js_map_get(&c->compiled, n);
  if (s)
    return s;
  const struct node_info *info = js_map_get(&c->infos, n);
  if (!info) {
    /* not reached by indexing (cannot happen for well-formed input) */
    static const struct node_info none = {"", "", "", NULL, NULL, 0};
    info = &none;
  }
  s = js_alloc(c->v, sizeof(*s));
  s->node = n;
  s->resource = info->res;
  s->loc = info->loc;
  s->loc_len = strlen(info->loc);
  s->types_text = s->allowed_text = "";
  s->dynref_anchor = -1;
  s->min_contains = s->max_contains = -1;
  s->max_length = s->min_length = s->max_items = s->min_items = -1;
  s->max_props = s->min_props = -1;
  js_map_put(&c->compiled, n, s);
  if (n->kind == CAP_NODE_BOOL) {
    s->is_bool = true;
    s->bool_value = n->u.boolean;
    return s;
  }
  if (n->kind != CAP_NODE_OBJECT) {
    js_diag(c, info, n, NULL, "a schema must be an object or a boolean, not %s",
            cap_node_kind_name(n->kind));
    s->is_bool = true;
    s->bool_value = true;
    return s;
  }
  if (info->res)
    info->res->used = true;
  if (!info->res) {
    s->is_bool = true;
    s->bool_value = true;
    return s;
  }
  for (size_t i = 0; i < n->u.obj.len; i++)
    js_compile_keyword(c, s, info, &n->u.obj.items[i]);
  js_schema_finish(c, s, info);
  return s;
}

/* Resolves pending references until none are left (resolving one may load
 * documents and compile schemas that add more). */
static void resolve_pending(struct compiler *c)
{
  bool again = true;
  while (again) {
    again = false;
    for (size_t i = 0; i < c->n_pending; i++) {
      struct pending_ref p = c->pending[i];
      if (!p.uri)
        continue;
      c->pending[i].uri = NULL;
      again = true;
      const struct node_info *ti;
      const struct cap_node *target = js_resolve_uri(c, p.uri, &ti);
      if (!target) {
        js_diag(c, p.info, p.at, p.dynamic ? "$dynamicRef" : "$ref",
                "cannot resolve \"%s\" (absolute \"%s\"); define it in $defs, give the target "
                "an $id or $anchor, or add the document to the registry",
                p.at->u.str.ptr, p.uri);
        continue;
      }
      struct js_schema *t = js_compile_schema(c, target);
      if (!p.dynamic) {
        p.schema->ref = t;
        continue;
      }
      p.schema->dynref = t;
      const char *frag = strchr(p.uri, '#');
      const struct cap_node *da = cap_node_get(target, "$dynamicAnchor");
      if (frag && frag[1] && frag[1] != '/' && da && da->kind == CAP_NODE_STRING &&
          strcmp(da->u.str.ptr, frag + 1) == 0)
        p.schema->dynref_anchor = js_intern_anchor(c->v, frag + 1);
      if (p.schema->dynref_anchor >= 0)
        c->v->dynamic_scope = true;
    }
    /* every dynamic anchor can become a target at run time */
    for (struct js_resource *r = c->v->resources; r; r = r->next)
      for (size_t i = 0; r->used && i < r->n_dyn; i++)
        if (!r->dyn[i].schema) {
          r->dyn[i].schema = js_compile_schema(c, r->dyn[i].node);
          again = true;
        }
  }
}

/* A schema that is nothing but "$ref" adds no keyword of its own: errors
 * come from the target with the target's location either way, except the
 * limits: a skipped hop adds no recursion depth (instance depth still
 * bounds the recursion), and a budget error is reported where it ran out. */
static bool pure_ref(const struct js_schema *s)
{
  return !s->is_bool && s->ref && s->groups == JS_G_INPLACE && !s->types && !s->dynref &&
         !s->n_all_of && !s->n_any_of && !s->n_one_of && !s->not_ && !s->if_ &&
         !s->has_unevaluated && !s->format_assert;
}

static struct js_schema *through_refs(struct js_schema *s)
{
  struct js_schema *t = s;
  for (int hops = 0; t && pure_ref(t); hops++) {
    if (hops == 16)
      return s; /* a long chain or a cycle: left as it is (the depth limit sees it) */
    t = t->ref;
  }
  return t ? t : s;
}

#define THROUGH(field)                                                                             \
  do {                                                                                             \
    if (field)                                                                                     \
      field = through_refs(field);                                                                 \
  } while (0)

/* Points every subschema reference past pure "$ref" schemas, saving a
 * validation step each. Not done when $dynamicRef needs the dynamic scope,
 * which a skipped schema's resource could change. */
static void collapse_refs(struct compiler *c)
{
  if (c->v->dynamic_scope)
    return;
  for (size_t i = 0; i < c->compiled.cap; i++) {
    struct js_schema *s = c->compiled.slots[i].value;
    if (!c->compiled.slots[i].key || !s || s->is_bool)
      continue;
    THROUGH(s->ref);
    for (size_t k = 0; k < s->n_all_of; k++)
      THROUGH(s->all_of[k]);
    for (size_t k = 0; k < s->n_any_of; k++)
      THROUGH(s->any_of[k]);
    for (size_t k = 0; k < s->n_one_of; k++)
      THROUGH(s->one_of[k]);
    THROUGH(s->not_);
    THROUGH(s->if_);
    THROUGH(s->then_);
    THROUGH(s->else_);
    for (size_t k = 0; k < s->n_props; k++)
      THROUGH(s->props[k].schema);
    for (size_t k = 0; k < s->n_pattern_props; k++)
      THROUGH(s->pattern_props[k].schema);
    THROUGH(s->additional_props);
    THROUGH(s->property_names);
    THROUGH(s->unevaluated_props);
    for (size_t k = 0; k < s->n_dep_schemas; k++)
      THROUGH(s->dep_schemas[k].schema);
    for (size_t k = 0; k < s->n_prefix_items; k++)
      THROUGH(s->prefix_items[k]);
    THROUGH(s->items);
    THROUGH(s->contains);
    THROUGH(s->unevaluated_items);
  }
}

struct cap_js_validator *cap_js_compile(const struct cap_node *schema,
                                        const struct cap_js_registry *reg,
                                        const struct cap_js_options *opts, const char *file,
                                        const char *path_prefix, struct cap_diags *diags)
{
  struct cap_js_validator *v = cap_xcalloc(1, sizeof(*v));
  v->arena = cap_doc_new();
  if (opts)
    v->opts = *opts;
  if (!v->opts.max_steps)
    v->opts.max_steps = 20000000;
  if (!v->opts.max_depth)
    v->opts.max_depth = 512;
  v->mctx = pcre2_match_context_create(NULL);
  pcre2_set_match_limit(v->mctx, 1000000);
  pcre2_set_depth_limit(v->mctx, 10000);
  pcre2_set_heap_limit(v->mctx, 20000); /* KiB */

  struct compiler c = {.v = v, .reg = reg, .file = file ? file : "schema", .diags = diags};
  c.uris.strings = true;
  c.loading.strings = true;
  const char *base = v->opts.base_uri ? v->opts.base_uri : DEFAULT_BASE;
  const char *prefix = path_prefix ? path_prefix : "";
  js_index_document(&c, schema, base, "", js_strdup(v, prefix, strlen(prefix)), c.file);
  v->root = js_compile_schema(&c, schema);
  resolve_pending(&c);
  if (!c.failed && !v->dynamic_scope) {
    collapse_refs(&c);
    v->root = through_refs(v->root);
  }

  js_map_free(&c.uris);
  js_map_free(&c.infos);
  js_map_free(&c.compiled);
  js_map_free(&c.loading);
  free(c.pending);
  if (c.failed) {
    cap_js_validator_free(v);
    return NULL;
  }
  return v;
}

void cap_js_validator_free(struct cap_js_validator *v)
{
  if (!v)
    return;
  for (size_t i = 0; i < v->n_regexes; i++)
    pcre2_code_free(v->regexes[i]);
  free(v->regexes);
  for (size_t i = 0; i < v->n_docs; i++)
    cap_doc_free(v->docs[i]);
  free(v->docs);
  for (struct js_resource *r = v->resources, *next; r; r = next) {
    next = r->next;
    free(r->uri);
    free(r->dyn);
    free(r);
  }
  for (size_t i = 0; i < v->n_anchor_names; i++)
    free(v->anchor_names[i]);
  free(v->anchor_names);
  pcre2_match_context_free(v->mctx);
  cap_doc_free(v->arena);
  free(v);
}

void cap_js_validator_freep(struct cap_js_validator **v) { cap_js_validator_free(*v); }
