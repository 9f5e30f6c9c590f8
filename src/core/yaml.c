#include "yaml.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "buf.h"
#include "text.h"

/* Limits that keep hostile input cheap: nesting (including what an alias
 * adds where it is used) and the number of nodes a consumer walking the
 * tree would visit, counting every alias as a full copy of its target. */
#define YAML_MAX_DEPTH 128
#define YAML_MAX_NODES 100000

#define CORE_TAG "tag:yaml.org,2002:"

/* A string -> index hash (open addressing), for anchors and mapping keys:
 * linear scans would turn a large hostile file quadratic. */
struct strmap_slot {
  const char *key; /* not owned */
  size_t len;
  size_t val;
};

struct strmap {
  struct strmap_slot *slots;
  size_t cap, len;
};

static uint64_t hash_bytes(const char *s, size_t n)
{
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ull;
  }
  return h;
}

static struct strmap_slot *strmap_find(struct strmap *m, const char *key, size_t len)
{
  if (!m->cap)
    return NULL;
  size_t i = (size_t)hash_bytes(key, len) & (m->cap - 1);
  for (;;) {
    struct strmap_slot *s = &m->slots[i];
    if (!s->key)
      return NULL;
    if (s->len == len && memcmp(s->key, key, len) == 0)
      return s;
    i = (i + 1) & (m->cap - 1);
  }
}

static void strmap_insert_slot(struct strmap_slot *slots, size_t cap, const char *key, size_t len,
                               size_t val)
{
  size_t i = (size_t)hash_bytes(key, len) & (cap - 1);
  while (slots[i].key)
    i = (i + 1) & (cap - 1);
  slots[i] = (struct strmap_slot){.key = key, .len = len, .val = val};
}

/* Sets key to val, replacing an existing entry. */
static void strmap_put(struct strmap *m, const char *key, size_t len, size_t val)
{
  struct strmap_slot *s = strmap_find(m, key, len);
  if (s) {
    s->val = val;
    return;
  }
  if ((m->len + 1) * 2 > m->cap) {
    size_t ncap = m->cap ? m->cap * 2 : 16;
    struct strmap_slot *slots = cap_xcalloc(ncap, sizeof(*slots));
    for (size_t i = 0; i < m->cap; i++)
      if (m->slots[i].key)
        strmap_insert_slot(slots, ncap, m->slots[i].key, m->slots[i].len, m->slots[i].val);
    free(m->slots);
    m->slots = slots;
    m->cap = ncap;
  }
  strmap_insert_slot(m->slots, m->cap, key, len, val);
  m->len++;
}

static void strmap_free(struct strmap *m)
{
  free(m->slots);
  *m = (struct strmap){0};
}

struct anchor {
  struct cap_node *node; /* NULL while the anchored node is still being read */
  size_t size;           /* nodes in its expanded subtree */
  unsigned height;       /* nesting levels inside it (0 for a scalar) */
  uint32_t line, col;
};

struct yaml_builder {
  yaml_parser_t parser;
  struct cap_doc *doc;
  const char *file;
  const char *data; /* after any BOM */
  size_t len;
  struct cap_diags *diags;
  struct strmap anchor_names; /* name (in doc arena) -> index into anchors */
  struct anchor *anchors;
  size_t n_anchors, cap_anchors;
  size_t nodes; /* expanded node count so far */
  bool failed;  /* an error was reported */
};

static void report(struct yaml_builder *b, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void report(struct yaml_builder *b, uint32_t line, uint32_t col, const char *fmt, ...)
{
  b->failed = true;
  va_list ap;
  va_start(ap, fmt);
  cap_diags_vadd(b->diags, CAP_SEV_ERROR, b->file, line, col, "", fmt, ap);
  va_end(ap);
}

static uint32_t mark_line(yaml_mark_t m) { return (uint32_t)m.line + 1; }
static uint32_t mark_col(yaml_mark_t m) { return (uint32_t)m.column + 1; }

/* libyaml marks count characters; find the byte the mark points at. */
static size_t mark_offset(const struct yaml_builder *b, yaml_mark_t m)
{
  size_t line = 0, col = 0, i = 0;
  while (i < b->len && (line < m.line || col < m.column)) {
    unsigned char c = (unsigned char)b->data[i];
    if (line < m.line) {
      if (c == '\n')
        line++;
      i++;
      continue;
    }
    if (c == '\n')
      break;
    i++;
    while (i < b->len && ((unsigned char)b->data[i] & 0xC0) == 0x80)
      i++;
    col++;
  }
  return i;
}

static void report_parser_error(struct yaml_builder *b)
{
  yaml_parser_t *p = &b->parser;
  if (p->error == YAML_MEMORY_ERROR) {
    report(b, 0, 0, "out of memory while reading YAML");
    return;
  }
  if (p->error == YAML_READER_ERROR) {
    /* UTF-8 was checked before, so this is a character YAML forbids. */
    struct cap_textpos tp;
    uint32_t line, col;
    cap_textpos_init(&tp, b->data, b->len);
    cap_textpos_at(&tp, p->problem_offset, &line, &col);
    if (p->problem_value != -1)
      report(b, line, col, "%s (U+%04X); remove it (is this a binary file?)",
             p->problem ? p->problem : "unreadable character", (unsigned)p->problem_value);
    else
      report(b, line, col, "%s; save the file as UTF-8 text",
             p->problem ? p->problem : "unreadable input");
    return;
  }
  const char *problem = p->problem ? p->problem : "invalid YAML";
  size_t off = mark_offset(b, p->problem_mark);
  uint32_t line = mark_line(p->problem_mark), col = mark_col(p->problem_mark);
  if (off < b->len && b->data[off] == '\t') {
    report(b, line, col, "%s%s%s; YAML indents with spaces, not tabs: replace the tab", problem,
           p->context ? " " : "", p->context ? p->context : "");
    return;
  }
  if (p->context && p->context_mark.line != p->problem_mark.line)
    report(b, line, col, "%s %s (started at line %u); fix the YAML syntax", problem, p->context,
           mark_line(p->context_mark));
  else
    report(b, line, col, "%s%s%s; fix the YAML syntax", problem, p->context ? " " : "",
           p->context ? p->context : "");
}

static bool next_event(struct yaml_builder *b, yaml_event_t *ev)
{
  if (!yaml_parser_parse(&b->parser, ev)) {
    report_parser_error(b);
    return false;
  }
  return true;
}

/* "!!str" for core tags, the tag itself otherwise. */
static void tag_display(const char *tag, char *out, size_t n)
{
  if (strncmp(tag, CORE_TAG, strlen(CORE_TAG)) == 0)
    snprintf(out, n, "!!%s", tag + strlen(CORE_TAG));
  else
    snprintf(out, n, "%s", tag);
}

static void report_bad_tag(struct yaml_builder *b, yaml_mark_t m, const char *tag, const char *what)
{
  char shown[128];
  tag_display(tag, shown, sizeof(shown));
  report(b, mark_line(m), mark_col(m),
         "the tag %s is not supported on %s; capsule reads the YAML 1.2 core schema "
         "(!!str, !!int, !!float, !!bool, !!null on scalars, !!seq, !!map): remove the tag",
         shown, what);
}

static bool count_nodes(struct yaml_builder *b, size_t n, yaml_mark_t m, bool alias)
{
  if (n <= YAML_MAX_NODES && b->nodes + n <= YAML_MAX_NODES) {
    b->nodes += n;
    return true;
  }
  if (alias)
    report(b, mark_line(m), mark_col(m),
           "aliases expand the document to more than %d values (an alias bomb?); write "
           "the values out instead of nesting aliases",
           YAML_MAX_NODES);
  else
    report(b, mark_line(m), mark_col(m),
           "the document holds more than %d values; a manifest is far smaller: remove what "
           "it does not need",
           YAML_MAX_NODES);
  return false;
}

static bool too_deep(struct yaml_builder *b, unsigned depth, yaml_mark_t m)
{
  if (depth <= YAML_MAX_DEPTH)
    return false;
  report(b, mark_line(m), mark_col(m), "nesting is deeper than %d levels; flatten the structure",
         YAML_MAX_DEPTH);
  return true;
}

/* YAML 1.2 core schema resolution of plain scalars. */

static bool is_null_text(const char *s, size_t n)
{
  return n == 0 || (n == 1 && s[0] == '~') ||
         (n == 4 && (!memcmp(s, "null", 4) || !memcmp(s, "Null", 4) || !memcmp(s, "NULL", 4)));
}

static int bool_text(const char *s, size_t n)
{
  if (n == 4 && (!memcmp(s, "true", 4) || !memcmp(s, "True", 4) || !memcmp(s, "TRUE", 4)))
    return 1;
  if (n == 5 && (!memcmp(s, "false", 5) || !memcmp(s, "False", 5) || !memcmp(s, "FALSE", 5)))
    return 0;
  return -1;
}

/* Integers: [-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+. Values beyond int64 are
 * kept as floats, as the JSON parser does. */
static bool parse_int_text(struct yaml_builder *b, const char *s, size_t n, uint32_t line,
                           uint32_t col, struct cap_node **out)
{
  unsigned base = 10;
  size_t i = 0;
  bool neg = false;
  if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o')) {
    base = s[1] == 'x' ? 16 : 8;
    i = 2;
  } else if (n > 1 && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    i = 1;
  }
  if (i >= n)
    return false;
  uint64_t v = 0;
  double f = 0;
  bool overflow = false;
  for (size_t k = i; k < n; k++) {
    int d = cap_hex_digit((unsigned char)s[k]);
    if (d < 0 || d >= (int)base)
      return false;
    f = f * base + d;
    if (v > (UINT64_MAX - (uint64_t)d) / base)
      overflow = true;
    else
      v = v * base + (uint64_t)d;
  }
  if (!overflow && (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX))
    overflow = true;
  struct cap_node *node;
  if (overflow) {
    node = cap_node_new(b->doc, CAP_NODE_FLOAT, line, col);
    node->u.num.f = neg ? -f : f;
  } else {
    node = cap_node_new(b->doc, CAP_NODE_INT, line, col);
    node->u.num.i = neg ? (int64_t)(0 - v) : (int64_t)v;
    node->u.num.f = (double)node->u.num.i;
  }
  *out = node;
  return true;
}

/* Floats: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?, [-+]?.inf, .nan */
static bool parse_float_text(struct yaml_builder *b, const char *s, size_t n, uint32_t line,
                             uint32_t col, struct cap_node **out)
{
  size_t i = 0;
  bool neg = false;
  if (i < n && (s[i] == '-' || s[i] == '+'))
    neg = s[i++] == '-';
  const char *rest = s + i;
  size_t rn = n - i;
  double v;
  if (rn == 4 &&
      (!memcmp(rest, ".inf", 4) || !memcmp(rest, ".Inf", 4) || !memcmp(rest, ".INF", 4))) {
    v = neg ? -INFINITY : INFINITY;
  } else if (i == 0 && rn == 4 &&
             (!memcmp(rest, ".nan", 4) || !memcmp(rest, ".NaN", 4) || !memcmp(rest, ".NAN", 4))) {
    v = NAN;
  } else {
    size_t k = i, int_digits = 0, frac_digits = 0;
    while (k < n && s[k] >= '0' && s[k] <= '9')
      k++, int_digits++;
    if (k < n && s[k] == '.') {
      k++;
      while (k < n && s[k] >= '0' && s[k] <= '9')
        k++, frac_digits++;
    }
    if (int_digits == 0 && frac_digits == 0)
      return false;
    if (k < n && (s[k] == 'e' || s[k] == 'E')) {
      k++;
      if (k < n && (s[k] == '-' || s[k] == '+'))
        k++;
      size_t exp_digits = 0;
      while (k < n && s[k] >= '0' && s[k] <= '9')
        k++, exp_digits++;
      if (exp_digits == 0)
        return false;
    }
    if (k != n)
      return false;
    /* s is NUL-terminated by libyaml */
    v = strtod(s, NULL);
  }
  struct cap_node *node = cap_node_new(b->doc, CAP_NODE_FLOAT, line, col);
  node->u.num.f = v;
  *out = node;
  return true;
}

static struct cap_node *resolve_plain(struct yaml_builder *b, const char *s, size_t n,
                                      uint32_t line, uint32_t col)
{
  struct cap_node *node = NULL;
  if (is_null_text(s, n))
    return cap_node_new(b->doc, CAP_NODE_NULL, line, col);
  int bv = bool_text(s, n);
  if (bv >= 0) {
    node = cap_node_new(b->doc, CAP_NODE_BOOL, line, col);
    node->u.boolean = bv == 1;
    return node;
  }
  if (parse_int_text(b, s, n, line, col, &node) || parse_float_text(b, s, n, line, col, &node))
    return node;
  return cap_node_new_string(b->doc, s, n, line, col);
}

/* A scalar with an explicit tag: the text must fit it. */
static struct cap_node *resolve_tagged(struct yaml_builder *b, const char *tag, const char *s,
                                       size_t n, yaml_mark_t m)
{
  uint32_t line = mark_line(m), col = mark_col(m);
  struct cap_node *node = NULL;
  const char *name = tag + strlen(CORE_TAG);
  if (strcmp(name, "str") == 0)
    return cap_node_new_string(b->doc, s, n, line, col);
  if (strcmp(name, "null") == 0) {
    if (is_null_text(s, n))
      return cap_node_new(b->doc, CAP_NODE_NULL, line, col);
  } else if (strcmp(name, "bool") == 0) {
    int bv = bool_text(s, n);
    if (bv >= 0) {
      node = cap_node_new(b->doc, CAP_NODE_BOOL, line, col);
      node->u.boolean = bv == 1;
      return node;
    }
  } else if (strcmp(name, "int") == 0) {
    if (parse_int_text(b, s, n, line, col, &node))
      return node;
  } else if (strcmp(name, "float") == 0) {
    if (parse_int_text(b, s, n, line, col, &node)) {
      node->kind = CAP_NODE_FLOAT;
      return node;
    }
    if (parse_float_text(b, s, n, line, col, &node))
      return node;
  } else {
    report_bad_tag(b, m, tag, "a scalar");
    return NULL;
  }
  report(b, line, col, "\"%.*s\" is not a valid !!%s value; fix the value or remove the tag",
         (int)(n > 64 ? 64 : n), s, name);
  return NULL;
}

static struct cap_node *build_scalar(struct yaml_builder *b, yaml_event_t *ev)
{
  const char *s = (const char *)ev->data.scalar.value;
  size_t n = ev->data.scalar.length;
  const char *tag = (const char *)ev->data.scalar.tag;
  uint32_t line = mark_line(ev->start_mark), col = mark_col(ev->start_mark);
  if (!tag)
    return ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE
               ? resolve_plain(b, s, n, line, col)
               : cap_node_new_string(b->doc, s, n, line, col);
  if (strcmp(tag, "!") == 0) /* the non-specific tag: a string */
    return cap_node_new_string(b->doc, s, n, line, col);
  if (strncmp(tag, CORE_TAG, strlen(CORE_TAG)) == 0)
    return resolve_tagged(b, tag, s, n, ev->start_mark);
  report_bad_tag(b, ev->start_mark, tag, "a scalar");
  return NULL;
}

static bool collection_tag_ok(struct yaml_builder *b, yaml_event_t *ev, const char *tag,
                              const char *core_name, const char *what)
{
  if (!tag || strcmp(tag, "!") == 0)
    return true;
  if (strncmp(tag, CORE_TAG, strlen(CORE_TAG)) == 0 &&
      strcmp(tag + strlen(CORE_TAG), core_name) == 0)
    return true;
  report_bad_tag(b, ev->start_mark, tag, what);
  return false;
}

static struct cap_node *build_node(struct yaml_builder *b, yaml_event_t *ev, unsigned depth,
                                   unsigned *height);

/* Reads the next event as a node (the caller owns nothing afterwards). */
static struct cap_node *build_next(struct yaml_builder *b, unsigned depth, unsigned *height)
{
  yaml_event_t ev;
  if (!next_event(b, &ev))
    return NULL;
  struct cap_node *n = build_node(b, &ev, depth, height);
  yaml_event_delete(&ev);
  return n;
}

static struct cap_node *build_sequence(struct yaml_builder *b, yaml_event_t *ev, unsigned depth,
                                       unsigned *height)
{
  if (!collection_tag_ok(b, ev, (const char *)ev->data.sequence_start.tag, "seq", "a sequence"))
    return NULL;
  struct cap_node *arr =
      cap_node_new(b->doc, CAP_NODE_ARRAY, mark_line(ev->start_mark), mark_col(ev->start_mark));
  *height = 1;
  for (;;) {
    yaml_event_t item;
    if (!next_event(b, &item))
      return NULL;
    if (item.type == YAML_SEQUENCE_END_EVENT) {
      yaml_event_delete(&item);
      return arr;
    }
    unsigned h = 0;
    struct cap_node *v = build_node(b, &item, depth + 1, &h);
    yaml_event_delete(&item);
    if (!v)
      return NULL;
    if (h + 1 > *height)
      *height = h + 1;
    cap_node_array_push(b->doc, arr, v);
  }
}

static struct cap_node *build_mapping(struct yaml_builder *b, yaml_event_t *ev, unsigned depth,
                                      unsigned *height)
{
  if (!collection_tag_ok(b, ev, (const char *)ev->data.mapping_start.tag, "map", "a mapping"))
    return NULL;
  struct cap_node *obj =
      cap_node_new(b->doc, CAP_NODE_OBJECT, mark_line(ev->start_mark), mark_col(ev->start_mark));
  *height = 1;
  struct strmap keys = {0};
  struct cap_node *result = NULL;
  for (;;) {
    yaml_event_t kev;
    if (!next_event(b, &kev))
      goto out;
    if (kev.type == YAML_MAPPING_END_EVENT) {
      yaml_event_delete(&kev);
      result = obj;
      goto out;
    }
    uint32_t kline = mark_line(kev.start_mark), kcol = mark_col(kev.start_mark);
    if (kev.type != YAML_SCALAR_EVENT) {
      report(b, kline, kcol, "%s; mapping keys must be plain strings: write the key as text",
             kev.type == YAML_ALIAS_EVENT ? "an alias cannot be a mapping key"
                                          : "a mapping key is a collection");
      yaml_event_delete(&kev);
      goto out;
    }
    const char *ktag = (const char *)kev.data.scalar.tag;
    if (ktag && strcmp(ktag, "!") != 0 && strcmp(ktag, CORE_TAG "str") != 0) {
      report_bad_tag(b, kev.start_mark, ktag, "a mapping key");
      yaml_event_delete(&kev);
      goto out;
    }
    if (!count_nodes(b, 1, kev.start_mark, false)) {
      yaml_event_delete(&kev);
      goto out;
    }
    const char *key = (const char *)kev.data.scalar.value;
    size_t keylen = kev.data.scalar.length;
    bool merge = kev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ktag && keylen == 2 &&
                 memcmp(key, "<<", 2) == 0;
    if (merge)
      report(b, kline, kcol,
             "merge keys (<<) are YAML 1.1, not YAML 1.2; write the merged keys out");
    struct strmap_slot *dup = strmap_find(&keys, key, keylen);
    if (dup) {
      const struct cap_member *first = &obj->u.obj.items[dup->val];
      report(b, kline, kcol,
             "duplicate key \"%.*s\"; it is already defined at line %u: remove one of them",
             (int)(keylen > 64 ? 64 : keylen), key, first->line);
    }
    cap_node_object_add(b->doc, obj, key, keylen, kline, kcol, NULL);
    size_t index = obj->u.obj.len - 1;
    yaml_event_delete(&kev);
    if (!dup) {
      const struct cap_member *m = &obj->u.obj.items[index];
      strmap_put(&keys, m->key, m->keylen, index);
    }
    unsigned h = 0;
    struct cap_node *v = build_next(b, depth + 1, &h);
    if (!v)
      goto out;
    if (h + 1 > *height)
      *height = h + 1;
    obj->u.obj.items[index].value = v;
  }
out:
  strmap_free(&keys);
  return result;
}

static struct cap_node *build_alias(struct yaml_builder *b, yaml_event_t *ev, unsigned depth,
                                    unsigned *height)
{
  const char *name = (const char *)ev->data.alias.anchor;
  uint32_t line = mark_line(ev->start_mark), col = mark_col(ev->start_mark);
  struct strmap_slot *s = strmap_find(&b->anchor_names, name, strlen(name));
  if (!s) {
    report(b, line, col, "the alias *%s names no anchor defined before it; define &%s first", name,
           name);
    return NULL;
  }
  const struct anchor *a = &b->anchors[s->val];
  if (!a->node) {
    report(b, line, col,
           "the alias *%s is inside the node it refers to (anchored at line %u); recursive "
           "structures cannot be read: remove the alias",
           name, a->line);
    return NULL;
  }
  /* The alias shares the anchored node; anyone walking the tree visits it
   * again, so it counts in full and its nesting adds to where it is used. */
  if (a->height && too_deep(b, depth + a->height - 1, ev->start_mark))
    return NULL;
  if (!count_nodes(b, a->size, ev->start_mark, true))
    return NULL;
  *height = a->height;
  return a->node;
}

static struct cap_node *build_node(struct yaml_builder *b, yaml_event_t *ev, unsigned depth,
                                   unsigned *height)
{
  *height = 0;
  const char *anchor = NULL;
  switch (ev->type) {
  case YAML_ALIAS_EVENT: return build_alias(b, ev, depth, height);
  case YAML_SCALAR_EVENT: anchor = (const char *)ev->data.scalar.anchor; break;
  case YAML_SEQUENCE_START_EVENT: anchor = (const char *)ev->data.sequence_start.anchor; break;
  case YAML_MAPPING_START_EVENT: anchor = (const char *)ev->data.mapping_start.anchor; break;
  default:
    report(b, mark_line(ev->start_mark), mark_col(ev->start_mark),
           "unexpected YAML structure; fix the YAML syntax");
    return NULL;
  }
  if (ev->type != YAML_SCALAR_EVENT && too_deep(b, depth, ev->start_mark))
    return NULL;
  size_t before = b->nodes;
  if (!count_nodes(b, 1, ev->start_mark, false))
    return NULL;
  size_t slot = 0;
  if (anchor) {
    if (b->n_anchors == b->cap_anchors) {
      b->cap_anchors = b->cap_anchors ? b->cap_anchors * 2 : 16;
      b->anchors = cap_xrealloc(b->anchors, b->cap_anchors * sizeof(*b->anchors));
    }
    slot = b->n_anchors++;
    b->anchors[slot] =
        (struct anchor){.line = mark_line(ev->start_mark), .col = mark_col(ev->start_mark)};
    size_t alen = strlen(anchor);
    const char *name = cap_doc_strndup(b->doc, anchor, alen);
    strmap_put(&b->anchor_names, name, alen, slot);
  }
  struct cap_node *n;
  if (ev->type == YAML_SCALAR_EVENT)
    n = build_scalar(b, ev);
  else if (ev->type == YAML_SEQUENCE_START_EVENT)
    n = build_sequence(b, ev, depth, height);
  else
    n = build_mapping(b, ev, depth, height);
  if (n && anchor) {
    b->anchors[slot].node = n;
    b->anchors[slot].size = b->nodes - before;
    b->anchors[slot].height = *height;
  }
  return n;
}

/* Expects the event `type` next; reports anything else with `what`. */
static bool expect_event(struct yaml_builder *b, yaml_event_type_t type, yaml_event_t *ev)
{
  if (!next_event(b, ev))
    return false;
  if (ev->type == type)
    return true;
  report(b, mark_line(ev->start_mark), mark_col(ev->start_mark),
         "unexpected YAML structure; fix the YAML syntax");
  yaml_event_delete(ev);
  return false;
}

static int parse_stream(struct yaml_builder *b)
{
  yaml_event_t ev;
  if (!expect_event(b, YAML_STREAM_START_EVENT, &ev))
    return -EINVAL;
  yaml_event_delete(&ev);
  if (!next_event(b, &ev))
    return -EINVAL;
  if (ev.type == YAML_STREAM_END_EVENT) {
    /* nothing but comments or blanks: the caller reports the empty file */
    yaml_event_delete(&ev);
    return 0;
  }
  if (ev.type != YAML_DOCUMENT_START_EVENT) {
    yaml_event_delete(&ev);
    report(b, 1, 1, "unexpected YAML structure; fix the YAML syntax");
    return -EINVAL;
  }
  yaml_event_delete(&ev);
  unsigned height = 0;
  struct cap_node *root = build_next(b, 1, &height);
  if (!root)
    return -EINVAL;
  if (!expect_event(b, YAML_DOCUMENT_END_EVENT, &ev))
    return -EINVAL;
  yaml_event_delete(&ev);
  if (!next_event(b, &ev))
    return -EINVAL;
  if (ev.type == YAML_DOCUMENT_START_EVENT) {
    report(b, mark_line(ev.start_mark), mark_col(ev.start_mark),
           "a second YAML document starts here; a manifest is one document: remove this "
           "'---' and what follows, or split it into another file");
    yaml_event_delete(&ev);
    return -EINVAL;
  }
  yaml_event_delete(&ev);
  if (b->failed)
    return -EINVAL;
  b->doc->root = root;
  return 0;
}

int cap_yaml_parse(struct cap_doc *doc, const char *data, size_t len, const char *file,
                   struct cap_diags *diags)
{
  struct yaml_builder b = {.doc = doc, .file = file, .data = data, .len = len, .diags = diags};
  /* libyaml would detect UTF-16 by its BOM; manifests are UTF-8 only, and a
   * UTF-8 BOM is dropped here so columns do not count it. */
  if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0) {
    b.data += 3;
    b.len -= 3;
  }
  size_t bad;
  if (!cap_utf8_valid(b.data, b.len, &bad)) {
    struct cap_textpos tp;
    uint32_t line, col;
    cap_textpos_init(&tp, b.data, b.len);
    cap_textpos_at(&tp, bad, &line, &col);
    cap_diags_add(diags, CAP_SEV_ERROR, file, line, col, "",
                  "invalid UTF-8 (byte 0x%02x); save the file as UTF-8",
                  (unsigned char)b.data[bad]);
    return -EINVAL;
  }
  if (!yaml_parser_initialize(&b.parser)) {
    cap_diags_add(diags, CAP_SEV_ERROR, file, 0, 0, "", "out of memory while reading YAML");
    return -ENOMEM;
  }
  yaml_parser_set_encoding(&b.parser, YAML_UTF8_ENCODING);
  yaml_parser_set_input_string(&b.parser, (const unsigned char *)b.data, b.len);
  int r = parse_stream(&b);
  yaml_parser_delete(&b.parser);
  strmap_free(&b.anchor_names);
  free(b.anchors);
  if (r < 0)
    doc->root = NULL;
  return r;
}
