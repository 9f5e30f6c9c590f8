#include "fields.h"

#include <stdlib.h>

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void mf_init(struct mf_ctx *c, const char *file, struct cap_diags *diags)
{
  *c = (struct mf_ctx){.file = file, .diags = diags};
}

void mf_free(struct mf_ctx *c) { cap_buf_free(&c->path); }

size_t mf_push_key(struct mf_ctx *c, const char *key)
{
  size_t mark = c->path.len;
  if (c->path.len)
    cap_buf_putc(&c->path, '.');
  cap_buf_puts(&c->path, key);
  return mark;
}

size_t mf_push_index(struct mf_ctx *c, size_t index)
{
  size_t mark = c->path.len;
  cap_buf_printf(&c->path, "[%zu]", index);
  return mark;
}

void mf_pop(struct mf_ctx *c, size_t mark)
{
  if (mark <= c->path.len) {
    c->path.len = mark;
    if (c->path.data)
      c->path.data[mark] = '\0';
  }
}

static void mf_vreport(struct mf_ctx *c, enum cap_severity sev, uint32_t line, uint32_t col,
                       const char *key, const char *fmt, va_list ap)
    __attribute__((format(printf, 6, 0)));

static void mf_vreport(struct mf_ctx *c, enum cap_severity sev, uint32_t line, uint32_t col,
                       const char *key, const char *fmt, va_list ap)
{
  size_t mark = c->path.len;
  if (key)
    mf_push_key(c, key);
  cap_diags_vadd(c->diags, sev, c->file, line, col, c->path.data ? c->path.data : "", fmt, ap);
  mf_pop(c, mark);
}

void mf_error(struct mf_ctx *c, const struct cap_node *at, const char *key, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  mf_vreport(c, CAP_SEV_ERROR, at ? at->line : 0, at ? at->col : 0, key, fmt, ap);
  va_end(ap);
}

void mf_warning(struct mf_ctx *c, const struct cap_node *at, const char *key, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  mf_vreport(c, CAP_SEV_WARNING, at ? at->line : 0, at ? at->col : 0, key, fmt, ap);
  va_end(ap);
}

const char *mf_kind_article(const struct mf_ctx *c, unsigned kind)
{
  if (c && c->toml && kind == CAP_NODE_OBJECT)
    return "a table";
  if (c && c->toml && kind == CAP_NODE_FLOAT)
    return "a float";
  switch (kind) {
  case CAP_NODE_NULL: return "null";
  case CAP_NODE_BOOL: return "a boolean";
  case CAP_NODE_INT: return "an integer";
  case CAP_NODE_FLOAT: return "a number";
  case CAP_NODE_STRING: return "a string";
  case CAP_NODE_ARRAY: return "an array";
  case CAP_NODE_OBJECT: return "an object";
  case CAP_NODE_DATETIME: return "a datetime";
  }
  return "a value";
}

static bool kind_matches(unsigned want, const struct cap_node *n)
{
  if (want == MF_ANY || want == n->kind)
    return true;
  return want == CAP_NODE_FLOAT && n->kind == CAP_NODE_INT;
}

const struct cap_node *mf_field(struct mf_ctx *c, const struct cap_node *obj, const char *key,
                                unsigned kind, unsigned flags)
{
  struct cap_node *n = cap_node_get(obj, key);
  if (n && n->kind == CAP_NODE_NULL && (flags & MF_NULL_OK))
    n = NULL;
  if (!n) {
    if ((flags & MF_REQUIRED) && obj)
      mf_error(c, obj, key, "required field is missing; add %s",
               kind == MF_ANY ? "it" : mf_kind_article(c, kind));
    return NULL;
  }
  if (!kind_matches(kind, n)) {
    mf_error(c, n, key, "must be %s, not %s", mf_kind_article(c, kind),
             mf_kind_article(c, n->kind));
    return NULL;
  }
  if (flags & MF_NONEMPTY) {
    if (n->kind == CAP_NODE_STRING && n->u.str.len == 0) {
      mf_error(c, n, key, "must not be empty");
      return NULL;
    }
    if (n->kind == CAP_NODE_ARRAY && n->u.arr.len == 0) {
      mf_error(c, n, key, "must not be empty; list at least one entry");
      return NULL;
    }
  }
  return n;
}

const char *mf_string(struct mf_ctx *c, const struct cap_node *obj, const char *key, unsigned flags,
                      const char *def)
{
  const struct cap_node *n = mf_field(c, obj, key, CAP_NODE_STRING, flags);
  return n ? n->u.str.ptr : def;
}

bool mf_bool(struct mf_ctx *c, const struct cap_node *obj, const char *key, unsigned flags,
             bool def)
{
  const struct cap_node *n = mf_field(c, obj, key, CAP_NODE_BOOL, flags);
  return n ? n->u.boolean : def;
}

int64_t mf_int(struct mf_ctx *c, const struct cap_node *obj, const char *key, unsigned flags,
               int64_t min, int64_t max, int64_t def)
{
  const struct cap_node *n = mf_field(c, obj, key, CAP_NODE_INT, flags);
  if (!n)
    return def;
  if (n->u.num.i < min || n->u.num.i > max) {
    if (max == INT64_MAX)
      mf_error(c, n, key, "%" PRId64 " is out of range; it must be >= %" PRId64, n->u.num.i, min);
    else
      mf_error(c, n, key, "%" PRId64 " is out of range; it must be %" PRId64 "..%" PRId64,
               n->u.num.i, min, max);
    return def;
  }
  return n->u.num.i;
}

double mf_number(struct mf_ctx *c, const struct cap_node *obj, const char *key, unsigned flags,
                 double min, double max, double def)
{
  const struct cap_node *n = mf_field(c, obj, key, CAP_NODE_FLOAT, flags);
  if (!n)
    return def;
  double v = n->u.num.f;
  if (!isfinite(v) || v < min || v > max) {
    mf_error(c, n, key, "%g is out of range; it must be between %g and %g", v, min, max);
    return def;
  }
  return v;
}

int mf_enum(struct mf_ctx *c, const struct cap_node *obj, const char *key, unsigned flags,
            const char *const *names, int def)
{
  const struct cap_node *n = mf_field(c, obj, key, CAP_NODE_STRING, flags);
  if (!n)
    return def;
  for (int i = 0; names[i]; i++)
    if (strcmp(names[i], n->u.str.ptr) == 0 && strlen(names[i]) == n->u.str.len)
      return i;
  struct cap_buf list = {0};
  for (int i = 0; names[i]; i++)
    cap_buf_printf(&list, "%s\"%s\"", i ? ", " : "", names[i]);
  const char *hint = mf_suggest(n->u.str.ptr, names);
  if (hint)
    mf_error(c, n, key, "\"%s\" is not one of %s (did you mean \"%s\"?)", n->u.str.ptr, list.data,
             hint);
  else
    mf_error(c, n, key, "\"%s\" is not one of %s", n->u.str.ptr, list.data);
  cap_buf_free(&list);
  return def;
}

const struct cap_node *mf_string_array(struct mf_ctx *c, const struct cap_node *obj,
                                       const char *key, unsigned flags)
{
  const struct cap_node *arr = mf_field(c, obj, key, CAP_NODE_ARRAY, flags);
  if (!arr)
    return NULL;
  size_t mark = mf_push_key(c, key);
  bool ok = true;
  for (size_t i = 0; i < arr->u.arr.len; i++) {
    const struct cap_node *item = arr->u.arr.items[i];
    if (item->kind != CAP_NODE_STRING) {
      size_t m2 = mf_push_index(c, i);
      mf_error(c, item, NULL, "must be a string, not %s", mf_kind_article(c, item->kind));
      mf_pop(c, m2);
      ok = false;
    }
  }
  mf_pop(c, mark);
  return ok ? arr : NULL;
}

const struct cap_node *mf_each_object(struct mf_ctx *c, const struct cap_node *obj, const char *key,
                                      unsigned flags,
                                      void (*fn)(struct mf_ctx *, const struct cap_node *, void *),
                                      void *arg)
{
  const struct cap_node *arr = mf_field(c, obj, key, CAP_NODE_ARRAY, flags);
  if (!arr)
    return NULL;
  size_t mark = mf_push_key(c, key);
  for (size_t i = 0; i < arr->u.arr.len; i++) {
    size_t m2 = mf_push_index(c, i);
    const struct cap_node *item = arr->u.arr.items[i];
    if (item->kind != CAP_NODE_OBJECT)
      mf_error(c, item, NULL, "must be an object, not %s", mf_kind_article(c, item->kind));
    else
      fn(c, item, arg);
    mf_pop(c, m2);
  }
  mf_pop(c, mark);
  return arr;
}

static size_t edit_distance(const char *a, const char *b)
{
  size_t la = strlen(a), lb = strlen(b);
  if (la > 64 || lb > 64)
    return 99;
  size_t prev[65], cur[65];
  for (size_t j = 0; j <= lb; j++)
    prev[j] = j;
  for (size_t i = 1; i <= la; i++) {
    cur[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      size_t best = prev[j - 1] + cost;
      if (prev[j] + 1 < best)
        best = prev[j] + 1;
      if (cur[j - 1] + 1 < best)
        best = cur[j - 1] + 1;
      cur[j] = best;
    }
    memcpy(prev, cur, sizeof(size_t) * (lb + 1));
  }
  return prev[lb];
}

const char *mf_suggest(const char *key, const char *const *known)
{
  const char *best = NULL;
  size_t best_d = 3;
  for (size_t i = 0; known[i]; i++) {
    size_t d = edit_distance(key, known[i]);
    if (d < best_d) {
      best_d = d;
      best = known[i];
    }
  }
  return best;
}

void mf_unknown_keys(struct mf_ctx *c, const struct cap_node *obj, const char *const *known,
                     enum cap_severity sev)
{
  if (!obj || obj->kind != CAP_NODE_OBJECT)
    return;
  for (size_t i = 0; i < obj->u.obj.len; i++) {
    const struct cap_member *m = &obj->u.obj.items[i];
    bool found = false;
    for (size_t k = 0; known[k] && !found; k++)
      found = strcmp(known[k], m->key) == 0;
    if (found)
      continue;
    const char *hint = mf_suggest(m->key, known);
    const char *what =
        sev == CAP_SEV_ERROR
            ? "unknown field in a section capsule enforces; remove it or fix its name"
            : "unknown field; capsule ignores it";
    size_t mark = mf_push_key(c, m->key);
    if (hint)
      cap_diags_add(c->diags, sev, c->file, m->line, m->col, c->path.data,
                    "%s (did you mean \"%s\"?)", what, hint);
    else
      cap_diags_add(c->diags, sev, c->file, m->line, m->col, c->path.data, "%s", what);
    mf_pop(c, mark);
  }
}

/* The string `key` of each object in arr, for finding duplicates. */
struct named {
  const struct cap_node *name;
  size_t index;
};

static int compare_named(const void *pa, const void *pb)
{
  const struct named *a = pa, *b = pb;
  size_t n = a->name->u.str.len < b->name->u.str.len ? a->name->u.str.len : b->name->u.str.len;
  int r = memcmp(a->name->u.str.ptr, b->name->u.str.ptr, n);
  if (r == 0 && a->name->u.str.len != b->name->u.str.len)
    r = a->name->u.str.len < b->name->u.str.len ? -1 : 1;
  if (r == 0)
    r = a->index < b->index ? -1 : a->index > b->index;
  return r;
}

/* Sorted rather than compared pairwise so a huge list stays cheap. */
void mf_report_duplicates(struct mf_ctx *c, const struct cap_node *arr, const char *key,
                          const char *what, const char *fix)
{
  struct named *v = cap_xcalloc(arr->u.arr.len + 1, sizeof(*v));
  size_t n = 0;
  for (size_t i = 0; i < arr->u.arr.len; i++) {
    const struct cap_node *name = cap_node_get(arr->u.arr.items[i], key);
    if (name && name->kind == CAP_NODE_STRING && name->u.str.len > 0)
      v[n++] = (struct named){.name = name, .index = i};
  }
  qsort(v, n, sizeof(*v), compare_named);
  for (size_t i = 1, first = 0; i < n; i++) {
    if (!cap_node_equal(v[i].name, v[first].name)) {
      first = i;
      continue;
    }
    size_t mark = mf_push_index(c, v[i].index);
    mf_error(c, v[i].name, key, "duplicate %s \"%s\"; the first is at line %u: %s", what,
             v[i].name->u.str.ptr, v[first].name->line, fix);
    mf_pop(c, mark);
  }
  free(v);
}
