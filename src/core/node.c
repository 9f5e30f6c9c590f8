#include "node.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"

#define ARENA_BLOCK 16384

struct cap_arena_block {
  struct cap_arena_block *next;
  size_t used, size;
  max_align_t data[];
};

struct cap_doc *cap_doc_new(void) { return cap_xcalloc(1, sizeof(struct cap_doc)); }

void cap_doc_free(struct cap_doc *doc)
{
  if (!doc)
    return;
  struct cap_arena_block *b = doc->blocks;
  while (b) {
    struct cap_arena_block *next = b->next;
    free(b);
    b = next;
  }
  free(doc);
}

void cap_doc_freep(struct cap_doc **doc) { cap_doc_free(*doc); }

void *cap_doc_alloc(struct cap_doc *doc, size_t size)
{
  size = (size + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
  struct cap_arena_block *b = doc->blocks;
  if (!b || b->size - b->used < size) {
    size_t bsize = size > ARENA_BLOCK ? size : ARENA_BLOCK;
    b = cap_xmalloc(sizeof(*b) + bsize);
    b->size = bsize;
    b->used = 0;
    b->next = doc->blocks;
    doc->blocks = b;
  }
  void *p = (char *)b->data + b->used;
  b->used += size;
  return p;
}

char *cap_doc_strndup(struct cap_doc *doc, const char *s, size_t n)
{
  char *p = cap_doc_alloc(doc, n + 1);
  if (n)
    memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

struct cap_node *cap_node_new(struct cap_doc *doc, enum cap_node_kind kind, uint32_t line,
                              uint32_t col)
{
  struct cap_node *n = cap_doc_alloc(doc, sizeof(*n));
  memset(n, 0, sizeof(*n));
  n->kind = (uint8_t)kind;
  n->line = line;
  n->col = col;
  return n;
}

struct cap_node *cap_node_new_string(struct cap_doc *doc, const char *s, size_t n, uint32_t line,
                                     uint32_t col)
{
  struct cap_node *node = cap_node_new(doc, CAP_NODE_STRING, line, col);
  node->u.str.ptr = cap_doc_strndup(doc, s, n);
  node->u.str.len = n;
  return node;
}

/* Grows an arena-held vector; the old storage stays in the arena (at most
 * doubling the memory a vector ever used). */
static void *grow(struct cap_doc *doc, void *items, size_t len, size_t *cap, size_t elem)
{
  size_t ncap = *cap ? *cap * 2 : 4;
  void *n = cap_doc_alloc(doc, ncap * elem);
  if (len)
    memcpy(n, items, len * elem);
  *cap = ncap;
  return n;
}

void cap_node_array_push(struct cap_doc *doc, struct cap_node *array, struct cap_node *item)
{
  if (array->u.arr.len == array->u.arr.cap)
    array->u.arr.items = grow(doc, array->u.arr.items, array->u.arr.len, &array->u.arr.cap,
                              sizeof(struct cap_node *));
  array->u.arr.items[array->u.arr.len++] = item;
}

struct cap_member *cap_node_object_add(struct cap_doc *doc, struct cap_node *object,
                                       const char *key, size_t keylen, uint32_t line, uint32_t col,
                                       struct cap_node *value)
{
  if (object->u.obj.len == object->u.obj.cap)
    object->u.obj.items = grow(doc, object->u.obj.items, object->u.obj.len, &object->u.obj.cap,
                               sizeof(struct cap_member));
  struct cap_member *m = &object->u.obj.items[object->u.obj.len++];
  m->key = cap_doc_strndup(doc, key, keylen);
  m->keylen = keylen;
  m->line = line;
  m->col = col;
  m->value = value;
  return m;
}

struct cap_member *cap_node_get_member(const struct cap_node *obj, const char *key, size_t keylen)
{
  if (!obj || obj->kind != CAP_NODE_OBJECT)
    return NULL;
  for (size_t i = 0; i < obj->u.obj.len; i++) {
    struct cap_member *m = &obj->u.obj.items[i];
    if (m->keylen == keylen && memcmp(m->key, key, keylen) == 0)
      return m;
  }
  return NULL;
}

struct cap_node *cap_node_get(const struct cap_node *obj, const char *key)
{
  struct cap_member *m = cap_node_get_member(obj, key, strlen(key));
  return m ? m->value : NULL;
}

const char *cap_node_kind_name(enum cap_node_kind kind)
{
  switch (kind) {
  case CAP_NODE_NULL: return "null";
  case CAP_NODE_BOOL: return "boolean";
  case CAP_NODE_INT: return "integer";
  case CAP_NODE_FLOAT: return "number";
  case CAP_NODE_STRING: return "string";
  case CAP_NODE_ARRAY: return "array";
  case CAP_NODE_OBJECT: return "object";
  case CAP_NODE_DATETIME: return "datetime";
  }
  return "value";
}

bool cap_node_is_number(const struct cap_node *n)
{
  return n && (n->kind == CAP_NODE_INT || n->kind == CAP_NODE_FLOAT);
}

/* i == f exactly: f integral and in int64's range, not rounded through a
 * double (2^53 + 1 is not 2^53). */
static bool int_equals_double(int64_t i, double f)
{
  if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0))
    return false; /* out of range, or NaN */
  int64_t fi = (int64_t)f;
  return (double)fi == f && fi == i;
}

bool cap_node_equal(const struct cap_node *a, const struct cap_node *b)
{
  if (cap_node_is_number(a) && cap_node_is_number(b)) {
    if (a->kind == CAP_NODE_INT && b->kind == CAP_NODE_INT)
      return a->u.num.i == b->u.num.i;
    if (a->kind == CAP_NODE_INT)
      return int_equals_double(a->u.num.i, b->u.num.f);
    if (b->kind == CAP_NODE_INT)
      return int_equals_double(b->u.num.i, a->u.num.f);
    return a->u.num.f == b->u.num.f;
  }
  if (a->kind != b->kind)
    return false;
  switch (a->kind) {
  case CAP_NODE_NULL: return true;
  case CAP_NODE_BOOL: return a->u.boolean == b->u.boolean;
  case CAP_NODE_STRING:
  case CAP_NODE_DATETIME:
    return a->u.str.len == b->u.str.len && memcmp(a->u.str.ptr, b->u.str.ptr, a->u.str.len) == 0;
  case CAP_NODE_ARRAY:
    if (a->u.arr.len != b->u.arr.len)
      return false;
    for (size_t i = 0; i < a->u.arr.len; i++)
      if (!cap_node_equal(a->u.arr.items[i], b->u.arr.items[i]))
        return false;
    return true;
  case CAP_NODE_OBJECT:
    if (a->u.obj.len != b->u.obj.len)
      return false;
    for (size_t i = 0; i < a->u.obj.len; i++) {
      const struct cap_member *m = &a->u.obj.items[i];
      const struct cap_member *o = cap_node_get_member(b, m->key, m->keylen);
      if (!o || !cap_node_equal(m->value, o->value))
        return false;
    }
    return true;
  }
  return false;
}
