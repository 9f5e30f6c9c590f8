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
#include "jsonschema/internal.h"

#define DEFAULT_BASE "urn:capsule:schema"
#define META_2020 "https://json-schema.org/draft/2020-12/schema"
#define VOCAB_PREFIX "https://json-schema.org/draft/2020-12/vocab/"
#define MAX_SCHEMA_DEPTH 512
#define MAX_LOADED_DOCS 256
#define MAX_FILE_BYTES (16u << 20)

/* ---- registry ---- */

struct reg_entry {
  char *uri;
  const struct cap_node *schema; /* NULL for a directory mapping */
  char *dir;
};

struct cap_js_registry {
  struct reg_entry *items;
  size_t len, cap;
};

struct cap_js_registry *cap_js_registry_new(void)
{
  return cap_xcalloc(1, sizeof(struct cap_js_registry));
}

void cap_js_registry_free(struct cap_js_registry *reg)
{
  if (!reg)
    return;
  for (size_t i = 0; i < reg->len; i++) {
    free(reg->items[i].uri);
    free(reg->items[i].dir);
  }
  free(reg->items);
  free(reg);
}

static struct reg_entry *reg_push(struct cap_js_registry *reg)
{
  if (reg->len == reg->cap) {
    reg->cap = reg->cap ? reg->cap * 2 : 8;
    reg->items = cap_xrealloc(reg->items, reg->cap * sizeof(*reg->items));
  }
  struct reg_entry *e = &reg->items[reg->len++];
  memset(e, 0, sizeof(*e));
  return e;
}

void cap_js_registry_add(struct cap_js_registry *reg, const char *uri,
                         const struct cap_node *schema)
{
  struct reg_entry *e = reg_push(reg);
  const char *frag;
  e->uri = js_uri_split(uri, &frag);
  e->schema = schema;
}

void cap_js_registry_add_dir(struct cap_js_registry *reg, const char *prefix, const char *dir)
{
  struct reg_entry *e = reg_push(reg);
  e->uri = cap_xstrdup(prefix);
  e->dir = cap_xstrdup(dir);
}

/* ---- small hash maps ---- */

struct map_slot {
  const void *key; /* string (NUL-terminated) or pointer */
  void *value;
};

struct map {
  struct map_slot *slots;
  size_t len, cap; /* cap is a power of two */
  bool strings;
};

static uint64_t hash_bytes(const char *s, size_t n)
{
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
  return h;
}

static uint64_t map_hash(const struct map *m, const void *key)
{
  if (m->strings)
    return hash_bytes(key, strlen(key));
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

static void *map_get(const struct map *m, const void *key)
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
static void *map_put(struct map *m, const void *key, void *value)
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
        map_put(m, old[i].key, old[i].value);
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

static void map_free(struct map *m)
{
  free(m->slots);
  memset(m, 0, sizeof(*m));
}

/* ---- compiler state ---- */

struct node_info {
  const char *base; /* absolute base URI in effect at this schema */
  const char *loc;  /* keyword-location prefix for errors */
  const char *path; /* dotted field path for compile diagnostics */
  const char *file; /* file name for compile diagnostics */
  struct js_resource *res;
  unsigned depth;
};

struct pending_ref {
  struct js_schema *schema;
  const char *uri;
  bool dynamic;
  const struct cap_node *at;
  const struct node_info *info;
};

struct compiler {
  struct cap_js_validator *v;
  const struct cap_js_registry *reg;
  const char *file;
  struct cap_diags *diags;
  bool failed;
  struct map uris;     /* absolute URI (with #anchor) -> const struct cap_node * */
  struct map infos;    /* node -> struct node_info * */
  struct map compiled; /* node -> struct js_schema * */
  struct map loading;  /* document URI -> (void *)1 once tried */
  struct pending_ref *pending;
  size_t n_pending, cap_pending;
};

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

static char *arena_printf(struct cap_js_validator *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static char *arena_printf(struct cap_js_validator *v, const char *fmt, ...)
{
  struct cap_buf b = {0};
  va_list ap;
  va_start(ap, fmt);
  cap_buf_vprintf(&b, fmt, ap);
  va_end(ap);
  char *s = js_strdup(v, b.data ? b.data : "", b.len);
  cap_buf_free(&b);
  return s;
}

static void diag(struct compiler *c, const struct node_info *info, const struct cap_node *at,
                 const char *key, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void diag(struct compiler *c, const struct node_info *info, const struct cap_node *at,
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
static struct node_info *child_info(struct compiler *c, const struct node_info *parent,
                                    const char *key, size_t keylen, long index)
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

static struct js_resource *new_resource(struct compiler *c, const char *uri, unsigned vocab)
{
  struct js_resource *r = cap_xcalloc(1, sizeof(*r));
  r->uri = cap_xstrdup(uri);
  r->vocab = vocab;
  r->next = c->v->resources;
  c->v->resources = r;
  return r;
}

static int intern_anchor(struct cap_js_validator *v, const char *name)
{
  for (size_t i = 0; i < v->n_anchor_names; i++)
    if (strcmp(v->anchor_names[i], name) == 0)
      return (int)i;
  if (v->n_anchor_names == v->cap_anchor_names) {
    v->cap_anchor_names = v->cap_anchor_names ? v->cap_anchor_names * 2 : 8;
    v->anchor_names = cap_xrealloc(v->anchor_names, v->cap_anchor_names * sizeof(char *));
  }
  v->anchor_names[v->n_anchor_names] = cap_xstrdup(name);
  return (int)v->n_anchor_names++;
}

static bool valid_anchor_name(const char *s)
{
  /* NCName-like: a letter or '_' then letters, digits, '-', '_', '.' */
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
    return false;
  for (s++; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '-' || *s == '_' || *s == '.'))
      return false;
  return true;
}

static const struct cap_node *load_document(struct compiler *c, const char *uri);
static void index_schema(struct compiler *c, const struct cap_node *n, struct node_info *info);
static const struct cap_node *resolve_uri(struct compiler *c, const char *uri,
                                          const struct node_info **out_info);

/* The vocabularies enabled by the meta-schema named in "$schema". */
static unsigned vocab_of(struct compiler *c, const struct cap_node *schema_kw,
                         const struct node_info *info, unsigned inherited)
{
  if (!schema_kw || schema_kw->kind != CAP_NODE_STRING)
    return inherited;
  const char *frag;
  _cleanup_free_ char *uri = js_uri_split(schema_kw->u.str.ptr, &frag);
  if (strcmp(uri, META_2020) == 0)
    return JS_VOC_ALL;
  const struct node_info *mi;
  const struct cap_node *meta = resolve_uri(c, uri, &mi);
  if (!meta)
    return JS_VOC_ALL; /* another draft or an unknown meta-schema: all keywords apply */
  const struct cap_node *vocabs = cap_node_get(meta, "$vocabulary");
  if (!vocabs || vocabs->kind != CAP_NODE_OBJECT)
    return JS_VOC_ALL;
  unsigned v = 0;
  for (size_t i = 0; i < vocabs->u.obj.len; i++) {
    const struct cap_member *m = &vocabs->u.obj.items[i];
    bool required = m->value->kind == CAP_NODE_BOOL && m->value->u.boolean;
    const char *name = strncmp(m->key, VOCAB_PREFIX, strlen(VOCAB_PREFIX)) == 0
                           ? m->key + strlen(VOCAB_PREFIX)
                           : NULL;
    if (name && strcmp(name, "applicator") == 0)
      v |= JS_VOC_APPLICATOR;
    else if (name && strcmp(name, "unevaluated") == 0)
      v |= JS_VOC_UNEVALUATED;
    else if (name && strcmp(name, "validation") == 0)
      v |= JS_VOC_VALIDATION;
    else if (name && strcmp(name, "format-assertion") == 0)
      v |= JS_VOC_FORMAT_ASSERT;
    else if (name && (strcmp(name, "core") == 0 || strcmp(name, "meta-data") == 0 ||
                      strcmp(name, "format-annotation") == 0 || strcmp(name, "content") == 0))
      ;
    else if (required)
      diag(c, info, schema_kw, "$schema",
           "meta-schema \"%s\" requires vocabulary \"%s\", which capsule does not "
           "implement; use the 2020-12 meta-schema or mark the vocabulary false",
           uri, m->key);
  }
  return v;
}

static const char *const schema_keywords[] = {"additionalProperties",
                                              "propertyNames",
                                              "unevaluatedProperties",
                                              "items",
                                              "contains",
                                              "unevaluatedItems",
                                              "not",
                                              "if",
                                              "then",
                                              "else",
                                              NULL};
static const char *const schema_array_keywords[] = {"allOf", "anyOf", "oneOf", "prefixItems", NULL};
static const char *const schema_map_keywords[] = {"properties", "patternProperties", "$defs",
                                                  "dependentSchemas", NULL};

static bool in_list(const char *const *list, const char *key)
{
  for (; *list; list++)
    if (strcmp(*list, key) == 0)
      return true;
  return false;
}

/* Records base URI, location and resource of n and of every subschema
 * below it, registering $id, $anchor and $dynamicAnchor. */
static void index_schema(struct compiler *c, const struct cap_node *n, struct node_info *info)
{
  if (map_get(&c->infos, n))
    return;
  if (info->depth > MAX_SCHEMA_DEPTH) {
    diag(c, info, n, NULL, "schema nested deeper than %d levels; flatten it with $defs and $ref",
         MAX_SCHEMA_DEPTH);
    return;
  }
  map_put(&c->infos, n, info);
  if (n->kind != CAP_NODE_OBJECT)
    return;
  const struct cap_node *id = cap_node_get(n, "$id");
  if (id && id->kind == CAP_NODE_STRING) {
    char *abs = js_uri_resolve(info->base, id->u.str.ptr);
    const char *frag;
    char *doc = js_uri_split(abs, &frag);
    if (*frag)
      diag(c, info, id, "$id",
           "\"$id\" must not contain a fragment (\"#%s\"); use \"$anchor\" to name a "
           "subschema",
           frag);
    free(abs); /* frag pointed into it */
    if (strcmp(doc, info->res->uri) != 0) {
      info->res = new_resource(c, doc, info->res->vocab);
    }
    info->base = js_strdup(c->v, doc, strlen(doc));
    free(doc);
    map_put(&c->uris, info->base, (void *)n);
  } else if (id) {
    diag(c, info, id, "$id", "\"$id\" must be a string (a URI reference)");
  }
  const struct cap_node *sch = cap_node_get(n, "$schema");
  if (sch && (info->depth == 0 || id))
    info->res->vocab = vocab_of(c, sch, info, info->res->vocab);
  static const char *const anchor_kws[] = {"$anchor", "$dynamicAnchor"};
  for (int k = 0; k < 2; k++) {
    const struct cap_node *a = cap_node_get(n, anchor_kws[k]);
    if (!a)
      continue;
    if (a->kind != CAP_NODE_STRING || !valid_anchor_name(a->u.str.ptr)) {
      diag(c, info, a, anchor_kws[k],
           "\"%s\" must be a plain name (a letter or '_' then letters, digits, '-', '_', '.')",
           anchor_kws[k]);
      continue;
    }
    char *full = arena_printf(c->v, "%s#%s", info->base, a->u.str.ptr);
    map_put(&c->uris, full, (void *)n);
    if (k == 1) {
      struct js_resource *r = info->res;
      if (r->n_dyn == r->cap_dyn) {
        r->cap_dyn = r->cap_dyn ? r->cap_dyn * 2 : 4;
        r->dyn = cap_xrealloc(r->dyn, r->cap_dyn * sizeof(*r->dyn));
      }
      r->dyn[r->n_dyn].id = intern_anchor(c->v, a->u.str.ptr);
      r->dyn[r->n_dyn].node = n;
      r->dyn[r->n_dyn].schema = NULL;
      r->n_dyn++;
    }
  }
  for (size_t i = 0; i < n->u.obj.len; i++) {
    const struct cap_member *m = &n->u.obj.items[i];
    const struct cap_node *val = m->value;
    if (in_list(schema_keywords, m->key)) {
      index_schema(c, val, child_info(c, info, m->key, m->keylen, -1));
    } else if (in_list(schema_array_keywords, m->key) && val->kind == CAP_NODE_ARRAY) {
      struct node_info *ai = child_info(c, info, m->key, m->keylen, -1);
      for (size_t j = 0; j < val->u.arr.len; j++)
        index_schema(c, val->u.arr.items[j], child_info(c, ai, NULL, 0, (long)j));
    } else if (in_list(schema_map_keywords, m->key) && val->kind == CAP_NODE_OBJECT) {
      struct node_info *mi = child_info(c, info, m->key, m->keylen, -1);
      for (size_t j = 0; j < val->u.obj.len; j++) {
        const struct cap_member *pm = &val->u.obj.items[j];
        index_schema(c, pm->value, child_info(c, mi, pm->key, pm->keylen, -1));
      }
    }
  }
}

/* Registers a whole document retrieved from `uri`. */
static void index_document(struct compiler *c, const struct cap_node *root, const char *uri,
                           const char *loc, const char *path, const char *file)
{
  struct node_info *info = js_alloc(c->v, sizeof(*info));
  info->base = js_strdup(c->v, uri, strlen(uri));
  info->loc = loc;
  info->path = path;
  info->file = file;
  info->res = new_resource(c, uri, JS_VOC_ALL);
  map_put(&c->uris, info->base, (void *)root);
  index_schema(c, root, info);
}

static void own_doc(struct cap_js_validator *v, struct cap_doc *doc)
{
  if (v->n_docs == v->cap_docs) {
    v->cap_docs = v->cap_docs ? v->cap_docs * 2 : 8;
    v->docs = cap_xrealloc(v->docs, v->cap_docs * sizeof(*v->docs));
  }
  v->docs[v->n_docs++] = doc;
}

/* Finds the document at `uri` (no fragment) in the registry or among the
 * embedded meta-schemas, and indexes it. */
static const struct cap_node *load_document(struct compiler *c, const char *uri)
{
  const struct cap_node *n = map_get(&c->uris, uri);
  if (n)
    return n;
  if (map_get(&c->loading, uri) || c->v->n_docs >= MAX_LOADED_DOCS)
    return NULL;
  char *key = js_strdup(c->v, uri, strlen(uri));
  map_put(&c->loading, key, (void *)1);
  char *loc = arena_printf(c->v, "%s#", uri);
  if (c->reg) {
    for (size_t i = 0; i < c->reg->len; i++) {
      const struct reg_entry *e = &c->reg->items[i];
      if (e->schema && strcmp(e->uri, uri) == 0) {
        index_document(c, e->schema, key, loc, loc, key);
        return e->schema;
      }
    }
  }
  size_t len;
  const char *text = js_metaschema_lookup(uri, &len);
  _cleanup_free_ char *data = NULL;
  char *file = key;
  if (!text && c->reg) {
    for (size_t i = 0; i < c->reg->len && !text; i++) {
      const struct reg_entry *e = &c->reg->items[i];
      size_t plen = strlen(e->uri);
      if (!e->dir || strncmp(e->uri, uri, plen) != 0)
        continue;
      const char *rest = uri + plen;
      if (strstr(rest, ".."))
        continue; /* stay inside the mapped directory */
      file = arena_printf(c->v, "%s/%s", e->dir, rest);
      struct cap_error err = {0};
      if (cap_read_file(file, MAX_FILE_BYTES, &data, &len, &err) < 0) {
        cap_error_clear(&err);
        continue;
      }
      text = data;
    }
  }
  if (!text)
    return NULL;
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags pd = {0};
  int r = cap_json_parse(doc, text, len, file, 0, &pd);
  if (r < 0) {
    if (c->diags)
      for (size_t i = 0; i < pd.len; i++)
        cap_diags_add(c->diags, CAP_SEV_ERROR, pd.items[i].file, pd.items[i].line, pd.items[i].col,
                      pd.items[i].path, "%s", pd.items[i].message);
    c->failed = true;
    cap_diags_free(&pd);
    cap_doc_free(doc);
    return NULL;
  }
  cap_diags_free(&pd);
  own_doc(c->v, doc);
  index_document(c, doc->root, key, loc, loc, file);
  return doc->root;
}

/* JSON Pointer (already percent-decoded) from n; NULL when it leads nowhere. */
static const struct cap_node *walk_pointer(const struct cap_node *n, const char *ptr)
{
  if (!*ptr)
    return n;
  if (*ptr != '/')
    return NULL;
  struct cap_buf seg = {0};
  const char *p = ptr + 1;
  for (;;) {
    seg.len = 0;
    cap_buf_puts(&seg, "");
    while (*p && *p != '/') {
      if (p[0] == '~' && p[1] == '0') {
        cap_buf_putc(&seg, '~');
        p += 2;
      } else if (p[0] == '~' && p[1] == '1') {
        cap_buf_putc(&seg, '/');
        p += 2;
      } else {
        cap_buf_putc(&seg, *p++);
      }
    }
    if (n->kind == CAP_NODE_OBJECT) {
      const struct cap_member *m = cap_node_get_member(n, seg.data, seg.len);
      n = m ? m->value : NULL;
    } else if (n->kind == CAP_NODE_ARRAY) {
      char *end;
      errno = 0;
      unsigned long long idx = strtoull(seg.data, &end, 10);
      bool ok = seg.len && *end == '\0' && !errno && (seg.data[0] != '0' || seg.len == 1) &&
                seg.data[0] != '-' && seg.data[0] != '+';
      n = ok && idx < n->u.arr.len ? n->u.arr.items[idx] : NULL;
    } else {
      n = NULL;
    }
    if (!n || !*p)
      break;
    p++;
  }
  cap_buf_free(&seg);
  return n;
}

/* Resolves an absolute URI to a schema node, indexing what it reaches. */
static const struct cap_node *resolve_uri(struct compiler *c, const char *uri,
                                          const struct node_info **out_info)
{
  const char *frag;
  _cleanup_free_ char *doc = js_uri_split(uri, &frag);
  const struct cap_node *n = NULL;
  *out_info = NULL;
  if (*frag && *frag != '/') {
    n = map_get(&c->uris, uri);
    if (!n && load_document(c, doc))
      n = map_get(&c->uris, uri);
    if (n)
      *out_info = map_get(&c->infos, n);
    return n;
  }
  const struct cap_node *root = load_document(c, doc);
  if (!root)
    return NULL;
  if (!*frag) {
    *out_info = map_get(&c->infos, root);
    return root;
  }
  _cleanup_free_ char *decoded = js_percent_decode(frag, NULL);
  if (!decoded)
    return NULL;
  n = walk_pointer(root, decoded);
  if (!n)
    return NULL;
  const struct node_info *ri = map_get(&c->infos, root);
  if (!map_get(&c->infos, n) && ri) {
    /* a schema inside a location no keyword declares (e.g. an unknown
     * keyword): it takes the document's base URI */
    struct node_info *ni = js_alloc(c->v, sizeof(*ni));
    *ni = *ri;
    ni->loc = arena_printf(c->v, "%s%s", ri->loc, frag);
    ni->path = ni->loc;
    index_schema(c, n, ni);
  }
  *out_info = map_get(&c->infos, n);
  return n;
}

/* ---- keywords ---- */

static struct js_schema *compile_schema(struct compiler *c, const struct cap_node *n);

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
    diag(c, info, n, m->key, "\"%s\" must be a non-negative integer", m->key);
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
    diag(c, info, n, m->key, "\"%s\" must be a number, not %s", m->key,
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
    diag(c, info, n, m->key, "\"%s\" must be a finite number", m->key);
    return NULL;
  }
  return num;
}

static struct js_schema *sub(struct compiler *c, const struct cap_node *n)
{
  return compile_schema(c, n);
}

static struct js_schema **schema_array(struct compiler *c, const struct node_info *info,
                                       const struct cap_member *m, size_t *count)
{
  const struct cap_node *n = m->value;
  if (n->kind != CAP_NODE_ARRAY || n->u.arr.len == 0) {
    diag(c, info, n, m->key, "\"%s\" must be a non-empty array of schemas", m->key);
    *count = 0;
    return NULL;
  }
  struct js_schema **arr = js_alloc(c->v, n->u.arr.len * sizeof(*arr));
  for (size_t i = 0; i < n->u.arr.len; i++)
    arr[i] = sub(c, n->u.arr.items[i]);
  *count = n->u.arr.len;
  return arr;
}

static uint32_t prop_hash(const char *s, size_t n) { return (uint32_t)hash_bytes(s, n); }

static struct js_prop *schema_map(struct compiler *c, const struct node_info *info,
                                  const struct cap_member *m, size_t *count)
{
  const struct cap_node *n = m->value;
  *count = 0;
  if (n->kind != CAP_NODE_OBJECT) {
    diag(c, info, n, m->key, "\"%s\" must be an object whose values are schemas", m->key);
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
    diag(c, info, n, key, "\"%s\" must be an array of strings", key);
    return false;
  }
  bool ok = true;
  for (size_t i = 0; i < n->u.arr.len; i++) {
    const struct cap_node *e = n->u.arr.items[i];
    if (e->kind != CAP_NODE_STRING) {
      diag(c, info, e, key, "\"%s\" must contain only strings; item %zu is %s", key, i,
           cap_node_kind_name(e->kind));
      ok = false;
      continue;
    }
    for (size_t j = 0; unique && j < i; j++)
      if (cap_node_equal(e, n->u.arr.items[j])) {
        diag(c, info, e, key, "\"%s\" lists \"%s\" twice; remove the duplicate", key, e->u.str.ptr);
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
    diag(c, info, m->value, m->key, "\"%s\" must be a string (a URI reference)", m->key);
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

static void compile_keyword(struct compiler *c, struct js_schema *s, const struct node_info *info,
                            const struct cap_member *m)
{
  const char *k = m->key;
  const struct cap_node *n = m->value;
  unsigned voc = info->res->vocab;
  bool appl = voc & JS_VOC_APPLICATOR, val = voc & JS_VOC_VALIDATION;

  if (strcmp(k, "$ref") == 0) {
    add_pending(c, s, info, m, false);
  } else if (strcmp(k, "$dynamicRef") == 0) {
    add_pending(c, s, info, m, true);
  } else if (strcmp(k, "$defs") == 0) {
    size_t count;
    schema_map(c, info, m, &count); /* compiled for their diagnostics */
  } else if (!appl && !val && strcmp(k, "unevaluatedProperties") != 0 &&
             strcmp(k, "unevaluatedItems") != 0) {
    if (strcmp(k, "format") == 0 && n->kind == CAP_NODE_STRING) {
      s->format = js_format_lookup(n->u.str.ptr);
      s->format_name = n->u.str.ptr;
    }
  } else if (appl && strcmp(k, "allOf") == 0) {
    s->all_of = schema_array(c, info, m, &s->n_all_of);
    s->groups |= JS_G_INPLACE;
  } else if (appl && strcmp(k, "anyOf") == 0) {
    s->any_of = schema_array(c, info, m, &s->n_any_of);
    s->groups |= JS_G_INPLACE;
  } else if (appl && strcmp(k, "oneOf") == 0) {
    s->one_of = schema_array(c, info, m, &s->n_one_of);
    s->groups |= JS_G_INPLACE;
  } else if (appl && strcmp(k, "not") == 0) {
    s->not_ = sub(c, n);
    s->groups |= JS_G_INPLACE;
  } else if (appl && strcmp(k, "if") == 0) {
    s->if_ = sub(c, n);
    s->groups |= JS_G_INPLACE;
  } else if (appl && strcmp(k, "then") == 0) {
    s->then_ = sub(c, n);
  } else if (appl && strcmp(k, "else") == 0) {
    s->else_ = sub(c, n);
  } else if (appl && strcmp(k, "properties") == 0) {
    s->props = schema_map(c, info, m, &s->n_props);
    build_prop_table(c, s);
    s->groups |= JS_G_OBJ;
  } else if (appl && strcmp(k, "patternProperties") == 0) {
    if (n->kind != CAP_NODE_OBJECT) {
      diag(c, info, n, k, "\"patternProperties\" must be an object of pattern: schema");
      return;
    }
    s->pattern_props = js_alloc(c->v, (n->u.obj.len + 1) * sizeof(*s->pattern_props));
    for (size_t i = 0; i < n->u.obj.len; i++) {
      const struct cap_member *pm = &n->u.obj.items[i];
      char err[200];
      pcre2_code *re = js_regex_compile(pm->key, pm->keylen, err, sizeof(err));
      if (!re) {
        struct node_info *ci = child_info(c, info, k, strlen(k), -1);
        diag(c, ci, pm->value, pm->key, "%s (in pattern \"%s\"); write an ECMA-262 regex", err,
             pm->key);
        continue;
      }
      if (c->v->n_regexes == c->v->cap_regexes) {
        c->v->cap_regexes = c->v->cap_regexes ? c->v->cap_regexes * 2 : 8;
        c->v->regexes = cap_xrealloc(c->v->regexes, c->v->cap_regexes * sizeof(pcre2_code *));
      }
      c->v->regexes[c->v->n_regexes++] = re;
      struct js_pattern_prop *pp = &s->pattern_props[s->n_pattern_props++];
      pp->re = re;
      pp->fast = js_fastre_compile(c->v, pm->key, pm->keylen);
      pp->source = pm->key;
      pp->schema = sub(c, pm->value);
    }
    s->groups |= JS_G_OBJ;
  } else if (appl && strcmp(k, "additionalProperties") == 0) {
    s->additional_props = sub(c, n);
    s->groups |= JS_G_OBJ;
  } else if (appl && strcmp(k, "propertyNames") == 0) {
    s->property_names = sub(c, n);
    s->groups |= JS_G_OBJ;
  } else if (appl && strcmp(k, "dependentSchemas") == 0) {
    s->dep_schemas = schema_map(c, info, m, &s->n_dep_schemas);
    s->groups |= JS_G_OBJ;
  } else if (appl && strcmp(k, "prefixItems") == 0) {
    s->prefix_items = schema_array(c, info, m, &s->n_prefix_items);
    s->groups |= JS_G_ARR;
  } else if (appl && strcmp(k, "items") == 0) {
    if (n->kind == CAP_NODE_ARRAY) {
      diag(c, info, n, k,
           "\"items\" must be a schema in draft 2020-12; for per-position schemas use "
           "\"prefixItems\"");
      return;
    }
    s->items = sub(c, n);
    s->groups |= JS_G_ARR;
  } else if (appl && strcmp(k, "contains") == 0) {
    s->contains = sub(c, n);
    s->groups |= JS_G_ARR;
  } else if ((voc & JS_VOC_UNEVALUATED) && strcmp(k, "unevaluatedProperties") == 0) {
    s->unevaluated_props = sub(c, n);
    s->has_unevaluated = true;
    s->groups |= JS_G_OBJ;
  } else if ((voc & JS_VOC_UNEVALUATED) && strcmp(k, "unevaluatedItems") == 0) {
    s->unevaluated_items = sub(c, n);
    s->has_unevaluated = true;
    s->groups |= JS_G_ARR;
  } else if (!val) {
    if (strcmp(k, "format") == 0 && n->kind == CAP_NODE_STRING) {
      s->format = js_format_lookup(n->u.str.ptr);
      s->format_name = n->u.str.ptr;
    }
  } else if (strcmp(k, "type") == 0) {
    if (n->kind == CAP_NODE_STRING) {
      s->types = type_bit(n->u.str.ptr);
      if (!s->types)
        diag(c, info, n, k,
             "unknown type \"%s\"; use null, boolean, integer, number, string, array or "
             "object",
             n->u.str.ptr);
    } else if (n->kind == CAP_NODE_ARRAY && string_array(c, info, n, k, true)) {
      for (size_t i = 0; i < n->u.arr.len; i++) {
        uint8_t b = type_bit(n->u.arr.items[i]->u.str.ptr);
        if (!b)
          diag(c, info, n->u.arr.items[i], k,
               "unknown type \"%s\"; use null, boolean, integer, number, string, array or "
               "object",
               n->u.arr.items[i]->u.str.ptr);
        s->types |= b;
      }
      if (n->u.arr.len == 0)
        diag(c, info, n, k, "\"type\" must name at least one type");
    } else if (n->kind != CAP_NODE_ARRAY) {
      diag(c, info, n, k, "\"type\" must be a type name or an array of type names");
    }
  } else if (strcmp(k, "enum") == 0) {
    if (n->kind != CAP_NODE_ARRAY) {
      diag(c, info, n, k, "\"enum\" must be an array of the allowed values");
      return;
    }
    s->enum_values = (const struct cap_node **)n->u.arr.items;
    s->n_enum = n->u.arr.len;
    s->has_enum = true;
    s->groups |= JS_G_VALUE;
  } else if (strcmp(k, "const") == 0) {
    s->const_value = n;
    s->groups |= JS_G_VALUE;
  } else if (strcmp(k, "multipleOf") == 0) {
    s->multiple_of = number_operand(c, info, m);
    if (s->multiple_of && s->multiple_of->dec.sign <= 0) {
      diag(c, info, n, k, "\"multipleOf\" must be greater than 0");
      s->multiple_of = NULL;
    }
    s->groups |= JS_G_NUM;
  } else if (strcmp(k, "maximum") == 0) {
    s->maximum = number_operand(c, info, m);
    s->groups |= JS_G_NUM;
  } else if (strcmp(k, "minimum") == 0) {
    s->minimum = number_operand(c, info, m);
    s->groups |= JS_G_NUM;
  } else if (strcmp(k, "exclusiveMaximum") == 0) {
    s->exclusive_maximum = number_operand(c, info, m);
    s->groups |= JS_G_NUM;
  } else if (strcmp(k, "exclusiveMinimum") == 0) {
    s->exclusive_minimum = number_operand(c, info, m);
    s->groups |= JS_G_NUM;
  } else if (strcmp(k, "maxLength") == 0) {
    s->max_length = nonneg_int(c, info, m);
    s->groups |= JS_G_STR;
  } else if (strcmp(k, "minLength") == 0) {
    s->min_length = nonneg_int(c, info, m);
    s->groups |= JS_G_STR;
  } else if (strcmp(k, "pattern") == 0) {
    if (n->kind != CAP_NODE_STRING) {
      diag(c, info, n, k, "\"pattern\" must be a string (an ECMA-262 regex)");
      return;
    }
    char err[200];
    pcre2_code *re = js_regex_compile(n->u.str.ptr, n->u.str.len, err, sizeof(err));
    if (!re) {
      diag(c, info, n, k, "%s; write an ECMA-262 regex", err);
      return;
    }
    if (c->v->n_regexes == c->v->cap_regexes) {
      c->v->cap_regexes = c->v->cap_regexes ? c->v->cap_regexes * 2 : 8;
      c->v->regexes = cap_xrealloc(c->v->regexes, c->v->cap_regexes * sizeof(pcre2_code *));
    }
    c->v->regexes[c->v->n_regexes++] = re;
    s->pattern = re;
    s->pattern_fast = js_fastre_compile(c->v, n->u.str.ptr, n->u.str.len);
    s->pattern_source = n->u.str.ptr;
    s->pattern_source_len = (uint32_t)strlen(n->u.str.ptr);
    s->groups |= JS_G_STR;
  } else if (strcmp(k, "maxItems") == 0) {
    s->max_items = nonneg_int(c, info, m);
    s->groups |= JS_G_ARR;
  } else if (strcmp(k, "minItems") == 0) {
    s->min_items = nonneg_int(c, info, m);
    s->groups |= JS_G_ARR;
  } else if (strcmp(k, "uniqueItems") == 0) {
    if (n->kind != CAP_NODE_BOOL)
      diag(c, info, n, k, "\"uniqueItems\" must be true or false");
    else
      s->unique_items = n->u.boolean;
    s->groups |= JS_G_ARR;
  } else if (strcmp(k, "maxContains") == 0) {
    s->max_contains = nonneg_int(c, info, m);
  } else if (strcmp(k, "minContains") == 0) {
    s->min_contains = nonneg_int(c, info, m);
  } else if (strcmp(k, "maxProperties") == 0) {
    s->max_props = nonneg_int(c, info, m);
    s->groups |= JS_G_OBJ;
  } else if (strcmp(k, "minProperties") == 0) {
    s->min_props = nonneg_int(c, info, m);
    s->groups |= JS_G_OBJ;
  } else if (strcmp(k, "required") == 0) {
    if (!string_array(c, info, n, k, true))
      return;
    s->required = js_alloc(c->v, (n->u.arr.len + 1) * sizeof(*s->required));
    for (size_t i = 0; i < n->u.arr.len; i++) {
      s->required[i].key = n->u.arr.items[i]->u.str.ptr;
      s->required[i].keylen = n->u.arr.items[i]->u.str.len;
    }
    s->n_required = n->u.arr.len;
    s->groups |= JS_G_OBJ;
  } else if (strcmp(k, "dependentRequired") == 0) {
    if (n->kind != CAP_NODE_OBJECT) {
      diag(c, info, n, k, "\"dependentRequired\" must be an object of property: [names]");
      return;
    }
    s->dep_required = js_alloc(c->v, (n->u.obj.len + 1) * sizeof(*s->dep_required));
    for (size_t i = 0; i < n->u.obj.len; i++) {
      const struct cap_member *dm = &n->u.obj.items[i];
      if (!string_array(c, info, dm->value, k, true))
        continue;
      struct js_dep_required *d = &s->dep_required[s->n_dep_required++];
      d->key = dm->key;
      d->keylen = dm->keylen;
      d->names = dm->value;
    }
    s->groups |= JS_G_OBJ;
  } else if (strcmp(k, "format") == 0) {
    if (n->kind != CAP_NODE_STRING) {
      diag(c, info, n, k, "\"format\" must be a string such as \"date-time\" or \"email\"");
      return;
    }
    s->format = js_format_lookup(n->u.str.ptr);
    s->format_name = n->u.str.ptr;
  }
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
  /* the texts validate.c would put together from pieces (each piece as
   * printed: up to its first NUL) */
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

static struct js_schema *compile_schema(struct compiler *c, const struct cap_node *n)
{
  struct js_schema *s = map_get(&c->compiled, n);
  if (s)
    return s;
  const struct node_info *info = map_get(&c->infos, n);
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
  map_put(&c->compiled, n, s);
  if (n->kind == CAP_NODE_BOOL) {
    s->is_bool = true;
    s->bool_value = n->u.boolean;
    return s;
  }
  if (n->kind != CAP_NODE_OBJECT) {
    diag(c, info, n, NULL, "a schema must be an object or a boolean, not %s",
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
    compile_keyword(c, s, info, &n->u.obj.items[i]);
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
      const struct cap_node *target = resolve_uri(c, p.uri, &ti);
      if (!target) {
        diag(c, p.info, p.at, p.dynamic ? "$dynamicRef" : "$ref",
             "cannot resolve \"%s\" (absolute \"%s\"); define it in $defs, give the target "
             "an $id or $anchor, or add the document to the registry",
             p.at->u.str.ptr, p.uri);
        continue;
      }
      struct js_schema *t = compile_schema(c, target);
      if (!p.dynamic) {
        p.schema->ref = t;
        continue;
      }
      p.schema->dynref = t;
      const char *frag = strchr(p.uri, '#');
      const struct cap_node *da = cap_node_get(target, "$dynamicAnchor");
      if (frag && frag[1] && frag[1] != '/' && da && da->kind == CAP_NODE_STRING &&
          strcmp(da->u.str.ptr, frag + 1) == 0)
        p.schema->dynref_anchor = intern_anchor(c->v, frag + 1);
      if (p.schema->dynref_anchor >= 0)
        c->v->dynamic_scope = true;
    }
    /* every dynamic anchor can become a target at run time */
    for (struct js_resource *r = c->v->resources; r; r = r->next)
      for (size_t i = 0; r->used && i < r->n_dyn; i++)
        if (!r->dyn[i].schema) {
          r->dyn[i].schema = compile_schema(c, r->dyn[i].node);
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
  index_document(&c, schema, base, "", js_strdup(v, prefix, strlen(prefix)), c.file);
  v->root = compile_schema(&c, schema);
  resolve_pending(&c);
  if (!c.failed && !v->dynamic_scope) {
    collapse_refs(&c);
    v->root = through_refs(v->root);
  }

  map_free(&c.uris);
  map_free(&c.infos);
  map_free(&c.compiled);
  map_free(&c.loading);
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
