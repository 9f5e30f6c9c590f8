/* TOML 1.0 (https://toml.io/en/v1.0.0), written from the spec and tested
 * against toml-test. One pass over the bytes, building the tree as it goes.
 *
 * Bookkeeping for the table rules lives in node->flags:
 *   HEADER   defined by a [table] or [[array]] header
 *   IMPLICIT created as a parent by a header path ([a.b] creates a)
 *   DOTTED   created (or extended) by dotted keys (a.b = 1 creates a)
 *   FROZEN   inline tables and static arrays: complete once written
 *   AOT      an array of tables made by [[...]] (may grow)
 * A header may define an IMPLICIT table once; it may never define a HEADER,
 * DOTTED or FROZEN one. Dotted keys may not enter HEADER or FROZEN tables
 * (the tomli reading of the spec's "dotted keys may not redefine tables"). */
#include "toml.h"
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/text.h"
#include "toml/toml.h"
#include "toml/toml_internal.h"

/* What the parser sees at the current position, for messages. */
const char *toml_describe(const struct parser *p, char *buf, size_t size)
{
  int c = peek(p);
  if (c < 0)
    return "end of file";
  if (c == '\n' || (c == '\r' && peek_at(p, 1) == '\n'))
    return "end of line";
  if (c < 0x20 || c == 0x7f) {
    snprintf(buf, size, "control character U+%04X", (unsigned)c);
    return buf;
  }
  if (c < 0x80) {
    snprintf(buf, size, "'%c'", c);
    return buf;
  }
  uint32_t cp;
  size_t n = cap_utf8_decode(p->s + p->pos, p->len - p->pos, &cp);
  snprintf(buf, size, "'%.*s'", (int)n, p->s + p->pos);
  return buf;
}

/* ---- errors ---- */

__attribute__((format(printf, 4, 5))) int toml_fail_at(struct parser *p, uint32_t line,
                                                       uint32_t col, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  cap_diags_vadd(p->diags, CAP_SEV_ERROR, p->file, line, col, "", fmt, ap);
  va_end(ap);
  return -EINVAL;
}

static int toml_unexpected(struct parser *p, const char *expected)
{
  char buf[48];
  return fail(p, "expected %s, found %s", expected, toml_describe(p, buf, sizeof(buf)));
}

/* ---- members (hashed lookup) ---- */

static uint64_t hash_key(const struct cap_node *t, const char *s, size_t n)
{
  uint64_t h = 1469598103934665603ull ^ ((uint64_t)(uintptr_t)t * 0x9E3779B97F4A7C15ull);
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ull;
  }
  return h ^ (h >> 29);
}

static void slots_put(struct slot *slots, size_t nslots, const struct cap_node *t, size_t index)
{
  const struct cap_member *m = &t->u.obj.items[index];
  size_t mask = nslots - 1, i = hash_key(t, m->key, m->keylen) & mask;
  while (slots[i].table)
    i = (i + 1) & mask;
  slots[i] = (struct slot){t, index};
}

static struct cap_member *find(const struct parser *p, const struct cap_node *t, const char *s,
                               size_t n)
{
  if (!p->nslots)
    return NULL;
  size_t mask = p->nslots - 1, i = hash_key(t, s, n) & mask;
  for (; p->slots[i].table; i = (i + 1) & mask) {
    if (p->slots[i].table != t)
      continue;
    struct cap_member *m = &t->u.obj.items[p->slots[i].index];
    if (m->keylen == n && memcmp(m->key, s, n) == 0)
      return m;
  }
  return NULL;
}

static void add_member(struct parser *p, struct cap_node *t, const struct key_part *k,
                       struct cap_node *value)
{
  cap_node_object_add(p->doc, t, k->s, k->len, k->line, k->col, value);
  if ((p->used + 1) * 2 > p->nslots) {
    size_t n = p->nslots ? p->nslots * 2 : 64;
    struct slot *slots = cap_xcalloc(n, sizeof(*slots));
    for (size_t i = 0; i < p->nslots; i++)
      if (p->slots[i].table)
        slots_put(slots, n, p->slots[i].table, p->slots[i].index);
    free(p->slots);
    p->slots = slots;
    p->nslots = n;
  }
  slots_put(p->slots, p->nslots, t, t->u.obj.len - 1);
  p->used++;
}

/* A new (parent) table under key part in t. */
static struct cap_node *add_table(struct parser *p, struct cap_node *t, const struct key_part *part,
                                  uint8_t flags)
{
  struct cap_node *nt = cap_node_new(p->doc, CAP_NODE_OBJECT, part->line, part->col);
  nt->flags = flags;
  add_member(p, t, part, nt);
  return nt;
}

static char *key_toml(const struct key *k, size_t n);

/* The key for messages: "a.b", or 'a."x y"' when a part needs quotes. */
static char *key_name(const struct key *k, size_t n)
{
  _cleanup_free_ char *t = key_toml(k, n);
  return cap_xasprintf(strchr(t, '"') ? "'%s'" : "\"%s\"", t);
}

/* a.b as written in TOML, non-bare parts quoted. */
static char *key_toml(const struct key *k, size_t n)
{
  struct cap_buf b = {0};
  for (size_t i = 0; i < n; i++) {
    const struct key_part *part = &k->parts[i];
    bool bare = part->len > 0;
    for (size_t j = 0; j < part->len && bare; j++)
      bare = is_bare((unsigned char)part->s[j]);
    if (i)
      cap_buf_putc(&b, '.');
    if (bare) {
      cap_buf_append(&b, part->s, part->len);
    } else {
      cap_buf_putc(&b, '"');
      for (size_t j = 0; j < part->len; j++) {
        unsigned char c = (unsigned char)part->s[j];
        if (c == '"' || c == '\\')
          cap_buf_printf(&b, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
          cap_buf_printf(&b, "\\u%04X", c);
        else
          cap_buf_putc(&b, (char)c);
      }
      cap_buf_putc(&b, '"');
    }
  }
  return cap_buf_steal(&b);
}

/* ---- whitespace, comments, newlines ---- */

void toml_skip_ws(struct parser *p)
{
  while (peek(p) == ' ' || peek(p) == '\t')
    adv(p);
}

static int skip_comment(struct parser *p)
{
  adv(p); /* '#' */
  for (;;) {
    int c = peek(p);
    if (c < 0 || c == '\n')
      return 0;
    if (c == '\r') {
      if (peek_at(p, 1) == '\n')
        return 0;
      return fail(p, "a carriage return (U+000D) in a comment must be followed by a newline");
    }
    if (is_control(c))
      return fail(p, "control character U+%04X is not allowed in a comment; remove it",
                  (unsigned)c);
    adv(p);
  }
}

int toml_eat_newline(struct parser *p)
{
  if (peek(p) == '\n') {
    adv(p);
    return 0;
  }
  if (peek(p) == '\r' && peek_at(p, 1) == '\n') {
    adv_n(p, 2);
    return 0;
  }
  return fail(p, "a carriage return (U+000D) must be followed by a newline (U+000A)");
}

bool toml_at_newline(const struct parser *p) { return peek(p) == '\n' || peek(p) == '\r'; }

/* Whitespace, newlines and comments (inside arrays). */
static int skip_ws_nl(struct parser *p)
{
  for (;;) {
    toml_skip_ws(p);
    int c = peek(p);
    int r = 0;
    if (c == '#')
      r = skip_comment(p);
    else if (c == '\n' || c == '\r')
      r = toml_eat_newline(p);
    else
      return 0;
    if (r < 0)
      return r;
  }
}

/* After a key/value pair or a header: only a comment may follow. */
static int end_of_line(struct parser *p, const char *after)
{
  toml_skip_ws(p);
  if (peek(p) == '#') {
    int r = skip_comment(p);
    if (r < 0)
      return r;
  }
  if (peek(p) < 0)
    return 0;
  if (toml_at_newline(p))
    return toml_eat_newline(p);
  char buf[48];
  return fail(p, "unexpected %s after %s; put each key = value and each [table] on its own line",
              toml_describe(p, buf, sizeof(buf)), after);
}

/* ---- keys ---- */

static int parse_simple_key(struct parser *p, struct key_part *out)
{
  out->line = p->line;
  out->col = p->col;
  int c = peek(p);
  if (is_bare(c)) {
    size_t start = p->pos;
    while (is_bare(peek(p)))
      adv(p);
    out->s = p->s + start;
    out->len = p->pos - start;
    return 0;
  }
  if (c == '"' || c == '\'') {
    if (peek_at(p, 1) == c && peek_at(p, 2) == c)
      return fail(p, "a multi-line string cannot be a key; use a quoted key on one line");
    int r = toml_parse_string(p, &p->sbuf);
    if (r < 0)
      return r;
    out->s = cap_doc_strndup(p->doc, p->sbuf.data, p->sbuf.len);
    out->len = p->sbuf.len;
    return 0;
  }
  char buf[48];
  if (c == '=')
    return fail(p, "missing key before '='; write key = value");
  return fail(p,
              "expected a key, found %s; bare keys use A-Z a-z 0-9 _ -, other keys need "
              "quotes",
              toml_describe(p, buf, sizeof(buf)));
}

static int parse_key(struct parser *p, struct key *k)
{
  k->n = 0;
  for (;;) {
    if (k->n == TOML_MAX_DEPTH)
      return fail(p, "key has more than %d dotted parts; nest less deeply", TOML_MAX_DEPTH);
    int r = parse_simple_key(p, &k->parts[k->n++]);
    if (r < 0)
      return r;
    toml_skip_ws(p);
    if (peek(p) != '.')
      return 0;
    adv(p);
    toml_skip_ws(p);
  }
}

/* ---- values ---- */

static int parse_value(struct parser *p, unsigned depth, struct cap_node **out);
static int parse_keyval(struct parser *p, struct cap_node *table, unsigned depth);

static void freeze(struct cap_node *n)
{
  n->flags |= F_FROZEN;
  if (n->kind == CAP_NODE_OBJECT) {
    for (size_t i = 0; i < n->u.obj.len; i++)
      if (!(n->u.obj.items[i].value->flags & F_FROZEN))
        freeze(n->u.obj.items[i].value);
  } else if (n->kind == CAP_NODE_ARRAY) {
    for (size_t i = 0; i < n->u.arr.len; i++)
      if (!(n->u.arr.items[i]->flags & F_FROZEN))
        freeze(n->u.arr.items[i]);
  }
}

static int parse_array(struct parser *p, unsigned depth, struct cap_node **out)
{
  uint32_t line = p->line, col = p->col;
  struct cap_node *arr = cap_node_new(p->doc, CAP_NODE_ARRAY, line, col);
  arr->flags = F_FROZEN;
  adv(p); /* '[' */
  for (;;) {
    int r = skip_ws_nl(p);
    if (r < 0)
      return r;
    if (peek(p) == ']')
      break;
    if (peek(p) < 0)
      return toml_fail_at(p, line, col, "unterminated array; close it with ']'");
    struct cap_node *item;
    r = parse_value(p, depth + 1, &item);
    if (r < 0)
      return r;
    cap_node_array_push(p->doc, arr, item);
    r = skip_ws_nl(p);
    if (r < 0)
      return r;
    if (peek(p) == ',') {
      adv(p);
      continue;
    }
    if (peek(p) == ']')
      break;
    if (peek(p) < 0)
      return toml_fail_at(p, line, col, "unterminated array; close it with ']'");
    return toml_unexpected(p, "',' or ']' in the array");
  }
  adv(p);
  *out = arr;
  return 0;
}

static int parse_inline_table(struct parser *p, unsigned depth, struct cap_node **out)
{
  uint32_t line = p->line, col = p->col;
  struct cap_node *t = cap_node_new(p->doc, CAP_NODE_OBJECT, line, col);
  adv(p); /* '{' */
  toml_skip_ws(p);
  if (peek(p) != '}') {
    for (;;) {
      toml_skip_ws(p);
      if (toml_at_newline(p))
        return fail(p, "newlines are not allowed inside an inline table (TOML 1.0); keep it "
                       "on one line or use a [table]");
      if (peek(p) < 0)
        return toml_fail_at(p, line, col, "unterminated inline table; close it with '}'");
      int r = parse_keyval(p, t, depth);
      if (r < 0)
        return r;
      toml_skip_ws(p);
      if (peek(p) == ',') {
        adv(p);
        toml_skip_ws(p);
        if (peek(p) == '}')
          return fail(p, "a trailing comma is not allowed in an inline table (TOML 1.0); "
                         "remove it");
        continue;
      }
      if (peek(p) == '}')
        break;
      if (toml_at_newline(p))
        return fail(p, "newlines are not allowed inside an inline table (TOML 1.0); keep it "
                       "on one line or use a [table]");
      if (peek(p) < 0)
        return toml_fail_at(p, line, col, "unterminated inline table; close it with '}'");
      return toml_unexpected(p, "',' or '}' in the inline table");
    }
  }
  adv(p);
  freeze(t);
  *out = t;
  return 0;
}

static bool match_word(const struct parser *p, const char *w)
{
  size_t n = strlen(w);
  return p->len - p->pos >= n && memcmp(p->s + p->pos, w, n) == 0;
}

static int parse_value(struct parser *p, unsigned depth, struct cap_node **out)
{
  if (depth > TOML_MAX_DEPTH)
    return fail(p, "nesting is too deep (more than %d levels); flatten the document",
                TOML_MAX_DEPTH);
  uint32_t line = p->line, col = p->col;
  int c = peek(p);
  if (c == '"' || c == '\'') {
    int r = toml_parse_string(p, &p->sbuf);
    if (r < 0)
      return r;
    *out = cap_node_new_string(p->doc, p->sbuf.data, p->sbuf.len, line, col);
    return toml_value_end(p, line, col, "string: text after the closing quote");
  }
  if (c == '[')
    return parse_array(p, depth, out);
  if (c == '{')
    return parse_inline_table(p, depth, out);
  if (match_word(p, "true") || match_word(p, "false")) {
    bool v = c == 't';
    adv_n(p, v ? 4 : 5);
    if (!toml_at_value_end(p))
      goto bare;
    struct cap_node *b = cap_node_new(p->doc, CAP_NODE_BOOL, line, col);
    b->u.boolean = v;
    *out = b;
    return 0;
  }
  if (is_digit(c) && is_digit(peek_at(p, 1)) && is_digit(peek_at(p, 2)) &&
      is_digit(peek_at(p, 3)) && peek_at(p, 4) == '-')
    return toml_parse_datetime(p, true, out);
  if (is_digit(c) && is_digit(peek_at(p, 1)) && peek_at(p, 2) == ':')
    return toml_parse_datetime(p, false, out);
  if (is_digit(c) || c == '+' || c == '-' || match_word(p, "inf") || match_word(p, "nan"))
    return toml_parse_number(p, out);
  if (c < 0 || c == '\n' || c == '\r' || c == '#')
    return fail(p, "missing value after '='; write a value such as \"text\", 42 or true");
bare:
  if (is_bare(c)) {
    size_t n = 0, start = p->pos;
    while (n < 64 && is_bare(peek_at(p, n)))
      n++;
    return toml_fail_at(
        p, line, col,
        "invalid value %.*s; strings need quotes (\"%.*s\"), booleans are lower-case "
        "true and false",
        (int)n, p->s + start, (int)n, p->s + start);
  }
  return toml_unexpected(p, "a value");
}

/* ---- key/value pairs and headers ---- */

/* Walks the dotted key from table, creating DOTTED tables, and returns the
 * table that receives the value and the final key part. */
static int resolve_keyval(struct parser *p, struct cap_node *table, unsigned depth,
                          struct cap_node **ret_table, struct key_part *ret_last,
                          unsigned *ret_depth)
{
  struct key k;
  int r = parse_key(p, &k);
  if (r < 0)
    return r;
  if (depth + k.n > TOML_MAX_DEPTH)
    return toml_fail_at(p, k.parts[0].line, k.parts[0].col,
                        "nesting is too deep (more than %d levels); flatten the document",
                        TOML_MAX_DEPTH);
  struct cap_node *t = table;
  for (size_t i = 0; i + 1 < k.n; i++) {
    const struct key_part *part = &k.parts[i];
    struct cap_member *m = find(p, t, part->s, part->len);
    if (!m) {
      t = add_table(p, t, part, F_DOTTED);
      continue;
    }
    struct cap_node *v = m->value;
    _cleanup_free_ char *name = key_name(&k, i + 1);
    if (v->kind == CAP_NODE_OBJECT && (v->flags & F_FROZEN))
      return toml_fail_at(p, part->line, part->col,
                          "cannot add keys to inline table %s (line %" PRIu32
                          "): an inline table is "
                          "complete as written; move the key into the braces",
                          name, m->line);
    if (v->kind == CAP_NODE_OBJECT && (v->flags & F_HEADER))
      return toml_fail_at(p, part->line, part->col,
                          "cannot add to table %s with dotted keys: it is defined by the header at "
                          "line %" PRIu32 "; put the key under that header",
                          name, v->line);
    if (v->kind != CAP_NODE_OBJECT)
      return toml_fail_at(p, part->line, part->col,
                          "key %s is already %s (line %" PRIu32 "), so it cannot also be a table",
                          name, v->kind == CAP_NODE_ARRAY ? "an array" : "a value", m->line);
    v->flags = (uint8_t)((v->flags & ~F_IMPLICIT) | F_DOTTED);
    t = v;
  }
  const struct key_part *last = &k.parts[k.n - 1];
  struct cap_member *m = find(p, t, last->s, last->len);
  if (m) {
    _cleanup_free_ char *name = key_name(&k, k.n);
    return toml_fail_at(p, last->line, last->col,
                        "duplicate key %s: already defined at line %" PRIu32 "; remove one", name,
                        m->line);
  }
  *ret_table = t;
  *ret_last = *last;
  *ret_depth = depth + (unsigned)k.n;
  return 0;
}

static int parse_keyval(struct parser *p, struct cap_node *table, unsigned depth)
{
  struct cap_node *t;
  struct key_part last;
  unsigned vdepth;
  int r = resolve_keyval(p, table, depth, &t, &last, &vdepth);
  if (r < 0)
    return r;
  if (peek(p) != '=') {
    char buf[48];
    return fail(p, "expected '=' after the key, found %s; write key = value",
                toml_describe(p, buf, sizeof(buf)));
  }
  adv(p);
  toml_skip_ws(p);
  struct cap_node *v;
  r = parse_value(p, vdepth, &v);
  if (r < 0)
    return r;
  add_member(p, t, &last, v);
  return 0;
}

/* The parent table a header's key path leads to (all parts but the last),
 * creating implicit tables and entering the last element of arrays of
 * tables; *out is NULL after a reported error. */
static int header_parent(struct parser *p, const struct key *k, struct cap_node **out)
{
  struct cap_node *t = p->root;
  for (size_t i = 0; i + 1 < k->n; i++) {
    const struct key_part *part = &k->parts[i];
    struct cap_member *m = find(p, t, part->s, part->len);
    if (!m) {
      t = add_table(p, t, part, F_IMPLICIT);
      continue;
    }
    struct cap_node *v = m->value;
    if (v->kind == CAP_NODE_ARRAY && (v->flags & F_AOT)) {
      t = v->u.arr.items[v->u.arr.len - 1];
      continue;
    }
    _cleanup_free_ char *name = key_name(k, i + 1);
    if (v->kind == CAP_NODE_OBJECT && (v->flags & F_FROZEN))
      return toml_fail_at(p, part->line, part->col,
                          "cannot add to inline table %s (line %" PRIu32 "): an inline table is "
                          "complete as written; write it as a [table] instead",
                          name, m->line);
    if (v->kind != CAP_NODE_OBJECT)
      return toml_fail_at(p, part->line, part->col,
                          "key %s is already %s (line %" PRIu32 "), so it cannot also be a table",
                          name, v->kind == CAP_NODE_ARRAY ? "an array" : "a value", m->line);
    t = v;
  }
  *out = t;
  return 0;
}

/* [[a.b]]: a new table appended to the array of tables a.b (made on first
 * use) in parent t. */
static int header_array_element(struct parser *p, const struct key *k, struct cap_node *t,
                                uint32_t hl, uint32_t hc, struct cap_node **out)
{
  const struct key_part *last = &k->parts[k->n - 1];
  struct cap_member *m = find(p, t, last->s, last->len);
  struct cap_node *arr;
  if (!m) {
    arr = cap_node_new(p->doc, CAP_NODE_ARRAY, last->line, last->col);
    arr->flags = F_AOT;
    add_member(p, t, last, arr);
  } else if (m->value->kind == CAP_NODE_ARRAY && (m->value->flags & F_AOT)) {
    arr = m->value;
  } else {
    _cleanup_free_ char *name = key_toml(k, k->n);
    _cleanup_free_ char *quoted = key_name(k, k->n);
    if (m->value->kind == CAP_NODE_ARRAY)
      return toml_fail_at(p, last->line, last->col,
                          "[[%s]] cannot extend the static array %s defined at line %" PRIu32
                          "; use either key = [...] or [[%s]] headers",
                          name, quoted, m->line, name);
    return toml_fail_at(p, last->line, last->col,
                        "[[%s]] conflicts with %s already defined as %s at line %" PRIu32
                        "; rename one of them",
                        name, quoted, m->value->kind == CAP_NODE_OBJECT ? "a table" : "a value",
                        m->value->kind == CAP_NODE_OBJECT ? m->value->line : m->line);
  }
  struct cap_node *nt = cap_node_new(p->doc, CAP_NODE_OBJECT, hl, hc);
  nt->flags = F_HEADER;
  cap_node_array_push(p->doc, arr, nt);
  *out = nt;
  return 0;
}

/* [a.b]: the table a.b in parent t, new or defined implicitly before (a
 * table may be defined only once). */
static int header_table(struct parser *p, const struct key *k, struct cap_node *t, uint32_t hl,
                        uint32_t hc, struct cap_node **out)
{
  const struct key_part *last = &k->parts[k->n - 1];
  struct cap_member *m = find(p, t, last->s, last->len);
  if (!m) {
    struct cap_node *nt = cap_node_new(p->doc, CAP_NODE_OBJECT, hl, hc);
    nt->flags = F_HEADER;
    add_member(p, t, last, nt);
    *out = nt;
    return 0;
  }
  struct cap_node *v = m->value;
  if (v->kind == CAP_NODE_OBJECT && v->flags == F_IMPLICIT) {
    v->flags = F_HEADER;
    v->line = hl;
    v->col = hc;
    *out = v;
    return 0;
  }
  _cleanup_free_ char *name = key_toml(k, k->n);
  _cleanup_free_ char *quoted = key_name(k, k->n);
  if (v->kind == CAP_NODE_OBJECT && (v->flags & F_HEADER))
    return toml_fail_at(p, hl, hc,
                        "table [%s] is already defined at line %" PRIu32
                        "; a table can be defined only once, merge the two",
                        name, v->line);
  if (v->kind == CAP_NODE_OBJECT && (v->flags & F_FROZEN))
    return toml_fail_at(p, hl, hc,
                        "table [%s] is already defined as an inline table at line %" PRIu32
                        "; an inline table is complete as written",
                        name, m->line);
  if (v->kind == CAP_NODE_OBJECT)
    return toml_fail_at(p, hl, hc,
                        "table [%s] is already defined by dotted keys at line %" PRIu32
                        "; a table can be defined only once, move those keys under [%s]",
                        name, m->line, name);
  if (v->kind == CAP_NODE_ARRAY && (v->flags & F_AOT))
    return toml_fail_at(p, hl, hc,
                        "[%s] is an array of tables (line %" PRIu32 "); write [[%s]] to add an "
                        "element",
                        name, m->line, name);
  return toml_fail_at(p, hl, hc,
                      "table [%s] conflicts with key %s already defined at line %" PRIu32
                      "; rename one of them",
                      name, quoted, m->line);
}

static int parse_header(struct parser *p)
{
  uint32_t hl = p->line, hc = p->col;
  adv(p);
  bool aot = peek(p) == '[';
  if (aot)
    adv(p);
  toml_skip_ws(p);
  struct key k;
  int r = parse_key(p, &k);
  if (r < 0)
    return r;
  if (peek(p) != ']' || (aot && peek_at(p, 1) != ']'))
    return toml_unexpected(p, aot ? "']]' to close the array-of-tables header"
                                  : "']' to close the table header");
  adv_n(p, aot ? 2 : 1);
  struct cap_node *parent = NULL, *t = NULL;
  r = header_parent(p, &k, &parent);
  if (r < 0)
    return r;
  r = aot ? header_array_element(p, &k, parent, hl, hc, &t)
          : header_table(p, &k, parent, hl, hc, &t);
  if (r < 0)
    return r;
  p->cur = t;
  p->cur_depth = (unsigned)k.n;
  return 0;
}

static int parse_document(struct parser *p)
{
  for (;;) {
    toml_skip_ws(p);
    int c = peek(p);
    int r;
    if (c < 0)
      return 0;
    if (c == '#')
      r = skip_comment(p);
    else if (c == '\n' || c == '\r')
      r = toml_eat_newline(p);
    else if (c == '[') {
      r = parse_header(p);
      if (r == 0)
        r = end_of_line(p, "the table header");
    } else {
      r = parse_keyval(p, p->cur, p->cur_depth);
      if (r == 0)
        r = end_of_line(p, "the value");
    }
    if (r < 0)
      return r;
  }
}

int cap_toml_parse(struct cap_doc *doc, const char *data, size_t len, const char *file,
                   struct cap_diags *diags)
{
  struct parser p = {
      .doc = doc,
      .s = data,
      .len = len,
      .line = 1,
      .col = 1,
      .file = file,
      .diags = diags,
  };
  size_t bad;
  if (!cap_utf8_valid(data, len, &bad)) {
    struct cap_textpos tp;
    uint32_t line, col;
    cap_textpos_init(&tp, data, len);
    cap_textpos_at(&tp, bad, &line, &col);
    return toml_fail_at(&p, line, col, "invalid UTF-8 (byte 0x%02X); TOML files must be UTF-8",
                        (unsigned char)data[bad]);
  }
  if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0)
    p.pos = 3; /* the BOM is not a character the user sees */
  p.root = cap_node_new(doc, CAP_NODE_OBJECT, 1, 1);
  p.root->flags = F_HEADER;
  p.cur = p.root;
  int r = parse_document(&p);
  free(p.slots);
  cap_buf_free(&p.sbuf);
  if (r < 0)
    return r;
  doc->root = p.root;
  return 0;
}
