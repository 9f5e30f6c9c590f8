/* Indexing a schema document: every schema resource ($id), anchor
 * ($anchor, $dynamicAnchor) and subschema by absolute URI, with its base
 * URI, location and vocabularies; loading referenced documents from the
 * registry or the embedded meta-schemas; resolving a URI (with a JSON
 * pointer or anchor fragment) to the node it names. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/text.h"
#include "jsonschema/compile_internal.h"

static struct js_resource *new_resource(struct compiler *c, const char *uri, unsigned vocab)
{
  struct js_resource *r = cap_xcalloc(1, sizeof(*r));
  r->uri = cap_xstrdup(uri);
  r->vocab = vocab;
  r->next = c->v->resources;
  c->v->resources = r;
  return r;
}

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

int js_intern_anchor(struct cap_js_validator *v, const char *name)
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
const struct cap_node *js_resolve_uri(struct compiler *c, const char *uri,
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
  const struct cap_node *meta = js_resolve_uri(c, uri, &mi);
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
      js_diag(c, info, schema_kw, "$schema",
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
  if (js_map_get(&c->infos, n))
    return;
  if (info->depth > MAX_SCHEMA_DEPTH) {
    js_diag(c, info, n, NULL, "schema nested deeper than %d levels; flatten it with $defs and $ref",
            MAX_SCHEMA_DEPTH);
    return;
  }
  js_map_put(&c->infos, n, info);
  if (n->kind != CAP_NODE_OBJECT)
    return;
  const struct cap_node *id = cap_node_get(n, "$id");
  if (id && id->kind == CAP_NODE_STRING) {
    char *abs = js_uri_resolve(info->base, id->u.str.ptr);
    const char *frag;
    char *doc = js_uri_split(abs, &frag);
    if (*frag)
      js_diag(c, info, id, "$id",
              "\"$id\" must not contain a fragment (\"#%s\"); use \"$anchor\" to name a "
              "subschema",
              frag);
    free(abs); /* frag pointed into it */
    if (strcmp(doc, info->res->uri) != 0) {
      info->res = new_resource(c, doc, info->res->vocab);
    }
    info->base = js_strdup(c->v, doc, strlen(doc));
    free(doc);
    js_map_put(&c->uris, info->base, (void *)n);
  } else if (id) {
    js_diag(c, info, id, "$id", "\"$id\" must be a string (a URI reference)");
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
      js_diag(c, info, a, anchor_kws[k],
              "\"%s\" must be a plain name (a letter or '_' then letters, digits, '-', '_', '.')",
              anchor_kws[k]);
      continue;
    }
    char *full = arena_printf(c->v, "%s#%s", info->base, a->u.str.ptr);
    js_map_put(&c->uris, full, (void *)n);
    if (k == 1) {
      struct js_resource *r = info->res;
      if (r->n_dyn == r->cap_dyn) {
        r->cap_dyn = r->cap_dyn ? r->cap_dyn * 2 : 4;
        r->dyn = cap_xrealloc(r->dyn, r->cap_dyn * sizeof(*r->dyn));
      }
      r->dyn[r->n_dyn].id = js_intern_anchor(c->v, a->u.str.ptr);
      r->dyn[r->n_dyn].node = n;
      r->dyn[r->n_dyn].schema = NULL;
      r->n_dyn++;
    }
  }
  for (size_t i = 0; i < n->u.obj.len; i++) {
    const struct cap_member *m = &n->u.obj.items[i];
    const struct cap_node *val = m->value;
    if (in_list(schema_keywords, m->key)) {
      index_schema(c, val, js_child_info(c, info, m->key, m->keylen, -1));
    } else if (in_list(schema_array_keywords, m->key) && val->kind == CAP_NODE_ARRAY) {
      struct node_info *ai = js_child_info(c, info, m->key, m->keylen, -1);
      for (size_t j = 0; j < val->u.arr.len; j++)
        index_schema(c, val->u.arr.items[j], js_child_info(c, ai, NULL, 0, (long)j));
    } else if (in_list(schema_map_keywords, m->key) && val->kind == CAP_NODE_OBJECT) {
      struct node_info *mi = js_child_info(c, info, m->key, m->keylen, -1);
      for (size_t j = 0; j < val->u.obj.len; j++) {
        const struct cap_member *pm = &val->u.obj.items[j];
        index_schema(c, pm->value, js_child_info(c, mi, pm->key, pm->keylen, -1));
      }
    }
  }
}

/* Registers a whole document retrieved from `uri`. */
void js_index_document(struct compiler *c, const struct cap_node *root, const char *uri,
                       const char *loc, const char *path, const char *file)
{
  struct node_info *info = js_alloc(c->v, sizeof(*info));
  info->base = js_strdup(c->v, uri, strlen(uri));
  info->loc = loc;
  info->path = path;
  info->file = file;
  info->res = new_resource(c, uri, JS_VOC_ALL);
  js_map_put(&c->uris, info->base, (void *)root);
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
  const struct cap_node *n = js_map_get(&c->uris, uri);
  if (n)
    return n;
  if (js_map_get(&c->loading, uri) || c->v->n_docs >= MAX_LOADED_DOCS)
    return NULL;
  char *key = js_strdup(c->v, uri, strlen(uri));
  js_map_put(&c->loading, key, (void *)1);
  char *loc = arena_printf(c->v, "%s#", uri);
  if (c->reg) {
    for (size_t i = 0; i < c->reg->len; i++) {
      const struct reg_entry *e = &c->reg->items[i];
      if (e->schema && strcmp(e->uri, uri) == 0) {
        js_index_document(c, e->schema, key, loc, loc, key);
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
  js_index_document(c, doc->root, key, loc, loc, file);
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
const struct cap_node *js_resolve_uri(struct compiler *c, const char *uri,
                                      const struct node_info **out_info)
{
  const char *frag;
  _cleanup_free_ char *doc = js_uri_split(uri, &frag);
  const struct cap_node *n = NULL;
  *out_info = NULL;
  if (*frag && *frag != '/') {
    n = js_map_get(&c->uris, uri);
    if (!n && load_document(c, doc))
      n = js_map_get(&c->uris, uri);
    if (n)
      *out_info = js_map_get(&c->infos, n);
    return n;
  }
  const struct cap_node *root = load_document(c, doc);
  if (!root)
    return NULL;
  if (!*frag) {
    *out_info = js_map_get(&c->infos, root);
    return root;
  }
  _cleanup_free_ char *decoded = js_percent_decode(frag, NULL);
  if (!decoded)
    return NULL;
  n = walk_pointer(root, decoded);
  if (!n)
    return NULL;
  const struct node_info *ri = js_map_get(&c->infos, root);
  if (!js_map_get(&c->infos, n) && ri) {
    /* a schema inside a location no keyword declares (e.g. an unknown
     * keyword): it takes the document's base URI */
    struct node_info *ni = js_alloc(c->v, sizeof(*ni));
    *ni = *ri;
    ni->loc = arena_printf(c->v, "%s%s", ri->loc, frag);
    ni->path = ni->loc;
    index_schema(c, n, ni);
  }
  *out_info = js_map_get(&c->infos, n);
  return n;
}
