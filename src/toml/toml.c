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

#define TOML_MAX_DEPTH 128

enum {
  F_HEADER = 1,
  F_IMPLICIT = 2,
  F_DOTTED = 4,
  F_FROZEN = 8,
  F_AOT = 16,
};

struct key_part {
  const char *s;
  size_t len;
  uint32_t line, col;
};

struct key {
  struct key_part parts[TOML_MAX_DEPTH];
  size_t n;
};

/* (table, key) -> member index, so big tables stay linear to build. */
struct slot {
  const struct cap_node *table;
  size_t index;
};

struct parser {
  struct cap_doc *doc;
  const char *s;
  size_t len, pos;
  uint32_t line, col;
  const char *file;
  struct cap_diags *diags;
  struct cap_node *root, *cur;
  unsigned cur_depth;
  struct cap_buf sbuf;
  struct slot *slots;
  size_t nslots, used;
};

/* ---- input ---- */

static int peek(const struct parser *p)
{
  return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1;
}

static int peek_at(const struct parser *p, size_t k)
{
  return p->pos + k < p->len ? (unsigned char)p->s[p->pos + k] : -1;
}

static void adv(struct parser *p)
{
  unsigned char c = (unsigned char)p->s[p->pos++];
  if (c == '\n') {
    p->line++;
    p->col = 1;
  } else if ((c & 0xC0) != 0x80) {
    p->col++;
  }
}

static void adv_n(struct parser *p, size_t n)
{
  while (n-- && p->pos < p->len)
    adv(p);
}

static bool is_digit(int c) { return c >= '0' && c <= '9'; }

static bool is_bare(int c)
{
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c) || c == '_' || c == '-';
}

static bool is_control(int c) { return (c >= 0 && c < 0x20 && c != '\t') || c == 0x7f; }

/* What the parser sees at the current position, for messages. */
static const char *describe(const struct parser *p, char *buf, size_t size)
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

__attribute__((format(printf, 4, 5))) static int fail_at(struct parser *p, uint32_t line,
                                                         uint32_t col, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  cap_diags_vadd(p->diags, CAP_SEV_ERROR, p->file, line, col, "", fmt, ap);
  va_end(ap);
  return -EINVAL;
}

#define fail(p, ...) fail_at((p), (p)->line, (p)->col, __VA_ARGS__)

static int unexpected(struct parser *p, const char *expected)
{
  char buf[48];
  return fail(p, "expected %s, found %s", expected, describe(p, buf, sizeof(buf)));
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

static void skip_ws(struct parser *p)
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

static int eat_newline(struct parser *p)
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

static bool at_newline(const struct parser *p) { return peek(p) == '\n' || peek(p) == '\r'; }

/* Whitespace, newlines and comments (inside arrays). */
static int skip_ws_nl(struct parser *p)
{
  for (;;) {
    skip_ws(p);
    int c = peek(p);
    int r = 0;
    if (c == '#')
      r = skip_comment(p);
    else if (c == '\n' || c == '\r')
      r = eat_newline(p);
    else
      return 0;
    if (r < 0)
      return r;
  }
}

/* After a key/value pair or a header: only a comment may follow. */
static int end_of_line(struct parser *p, const char *after)
{
  skip_ws(p);
  if (peek(p) == '#') {
    int r = skip_comment(p);
    if (r < 0)
      return r;
  }
  if (peek(p) < 0)
    return 0;
  if (at_newline(p))
    return eat_newline(p);
  char buf[48];
  return fail(p, "unexpected %s after %s; put each key = value and each [table] on its own line",
              describe(p, buf, sizeof(buf)), after);
}

/* ---- strings ---- */

static int parse_escape(struct parser *p, struct cap_buf *b, bool multi)
{
  uint32_t line = p->line, col = p->col;
  adv(p); /* '\\' */
  int c = peek(p);
  const char *simple = NULL;
  switch (c) {
  case 'b': simple = "\b"; break;
  case 't': simple = "\t"; break;
  case 'n': simple = "\n"; break;
  case 'f': simple = "\f"; break;
  case 'r': simple = "\r"; break;
  case '"': simple = "\""; break;
  case '\\': simple = "\\"; break;
  default: break;
  }
  if (simple) {
    cap_buf_putc(b, simple[0]);
    adv(p);
    return 0;
  }
  if (c == 'u' || c == 'U') {
    int digits = c == 'u' ? 4 : 8;
    adv(p);
    uint32_t cp = 0;
    for (int i = 0; i < digits; i++) {
      int h = cap_hex_digit(peek(p));
      if (h < 0)
        return fail_at(p, line, col, "\\%c needs exactly %d hexadecimal digits (e.g. \\%c%s)", c,
                       digits, c, digits == 4 ? "00E9" : "0001F600");
      cp = cp * 16 + (uint32_t)h;
      adv(p);
    }
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
      return fail_at(p, line, col,
                     "escape \\%c%0*" PRIX32 " is not a Unicode scalar value (surrogates "
                     "D800-DFFF and values above 10FFFF are not allowed)",
                     c, digits, cp);
    char enc[4];
    cap_buf_append(b, enc, cap_utf8_encode(cp, enc));
    return 0;
  }
  if (multi && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
    /* line-ending backslash: drop whitespace and newlines up to the next
     * non-blank character */
    skip_ws(p);
    if (!at_newline(p))
      return fail_at(p, line, col,
                     "a line-ending backslash may only be followed by whitespace up to the end "
                     "of the line; write \\\\ for a literal backslash");
    for (;;) {
      skip_ws(p);
      if (!at_newline(p))
        return 0;
      int r = eat_newline(p);
      if (r < 0)
        return r;
    }
  }
  if (c < 0)
    return fail_at(p, line, col, "unterminated string; close it with '\"'");
  char buf[48];
  return fail_at(p, line, col,
                 "invalid escape sequence: backslash followed by %s; valid escapes are \\b \\t "
                 "\\n \\f \\r \\\" \\\\ \\uXXXX \\UXXXXXXXX (write \\\\ for a backslash)",
                 describe(p, buf, sizeof(buf)));
}

/* Copies one character (validated UTF-8) of string content. */
static int string_char(struct parser *p, struct cap_buf *b, const char *what)
{
  int c = peek(p);
  if (is_control(c))
    return fail(p,
                "control character U+%04X is not allowed in a %s; write it as an escape "
                "such as \\u%04X",
                (unsigned)c, what, (unsigned)c);
  size_t start = p->pos;
  adv(p);
  while (p->pos < p->len && ((unsigned char)p->s[p->pos] & 0xC0) == 0x80)
    adv(p);
  cap_buf_append(b, p->s + start, p->pos - start);
  return 0;
}

/* Multi-line newline: LF or CRLF, kept as LF. */
static int string_newline(struct parser *p, struct cap_buf *b)
{
  int r = eat_newline(p);
  if (r == 0)
    cap_buf_putc(b, '\n');
  return r;
}

/* Basic ("...", """...""") or literal ('...', '''...''') string into b. */
static int parse_string(struct parser *p, struct cap_buf *b)
{
  uint32_t line = p->line, col = p->col;
  char q = (char)peek(p);
  bool literal = q == '\'';
  bool multi = peek_at(p, 1) == q && peek_at(p, 2) == q;
  const char *what = literal ? (multi ? "multi-line literal string" : "literal string")
                             : (multi ? "multi-line string" : "string");
  b->len = 0;
  cap_buf_append(b, "", 0); /* NUL-terminated and never NULL, even when empty */
  adv_n(p, multi ? 3 : 1);
  if (multi && at_newline(p)) {
    int r = eat_newline(p); /* a newline right after the opening quotes is trimmed */
    if (r < 0)
      return r;
  }
  for (;;) {
    int c = peek(p);
    int r = 0;
    if (c < 0)
      return fail_at(p, line, col, "unterminated %s; close it with %s", what,
                     multi ? (literal ? "'''" : "\"\"\"") : (literal ? "'" : "\""));
    if (c == q) {
      if (!multi) {
        adv(p);
        return 0;
      }
      size_t run = 0;
      while (peek_at(p, run) == q)
        run++;
      if (run >= 3) {
        if (run > 5)
          return fail(p,
                      "too many quotes: at most two %c may come right before the closing "
                      "%s; escape the others%s",
                      q, literal ? "'''" : "\"\"\"", literal ? " or use a basic string" : "");
        for (size_t i = 0; i < run - 3; i++)
          cap_buf_putc(b, q);
        adv_n(p, run);
        return 0;
      }
      for (size_t i = 0; i < run; i++)
        cap_buf_putc(b, q);
      adv_n(p, run);
      continue;
    }
    if (c == '\\' && !literal)
      r = parse_escape(p, b, multi);
    else if (c == '\n' || c == '\r') {
      if (!multi) {
        if (c == '\r' && peek_at(p, 1) != '\n')
          return fail(p, "control character U+000D is not allowed in a %s; write it as \\r", what);
        return fail_at(p, line, col,
                       "unterminated %s: a newline comes before the closing quote; close it on "
                       "the same line or use a multi-line string (%s)",
                       what, literal ? "'''...'''" : "\"\"\"...\"\"\"");
      }
      r = string_newline(p, b);
    } else
      r = string_char(p, b, what);
    if (r < 0)
      return r;
  }
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
    int r = parse_string(p, &p->sbuf);
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
              describe(p, buf, sizeof(buf)));
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
    skip_ws(p);
    if (peek(p) != '.')
      return 0;
    adv(p);
    skip_ws(p);
  }
}

/* ---- values ---- */

static int parse_value(struct parser *p, unsigned depth, struct cap_node **out);
static int parse_keyval(struct parser *p, struct cap_node *table, unsigned depth);

static bool at_value_end(const struct parser *p)
{
  int c = peek(p);
  return c < 0 || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '#' || c == ',' ||
         c == ']' || c == '}';
}

static int value_end(struct parser *p, uint32_t line, uint32_t col, const char *what)
{
  if (at_value_end(p))
    return 0;
  char buf[48];
  return fail_at(p, line, col, "invalid %s: unexpected %s", what, describe(p, buf, sizeof(buf)));
}

/* Digits of `base` with single underscores between digits; returns the
 * number of characters used, or -1 when an underscore is misplaced. */
static long scan_digits(const char *s, size_t n, size_t i, int base, size_t *ndigits)
{
  size_t start = i;
  *ndigits = 0;
  for (; i < n; i++) {
    int c = (unsigned char)s[i];
    int v = cap_hex_digit(c);
    if (c == '_') {
      if (i == start || i + 1 >= n || s[i - 1] == '_' || cap_hex_digit((unsigned char)s[i + 1]) < 0 ||
          cap_hex_digit((unsigned char)s[i + 1]) >= base)
        return -1;
      continue;
    }
    if (v < 0 || v >= base)
      break;
    (*ndigits)++;
  }
  return (long)(i - start);
}

static int parse_number(struct parser *p, struct cap_node **out)
{
  uint32_t line = p->line, col = p->col;
  size_t start = p->pos;
  while (peek(p) >= 0 && (is_bare(peek(p)) || peek(p) == '.' || peek(p) == '+'))
    adv(p);
  const char *t = p->s + start;
  size_t n = p->pos - start;
  if (!at_value_end(p))
    return value_end(p, line, col, "number");
  size_t i = 0;
  bool neg = false, sign = false;
  if (n && (t[0] == '+' || t[0] == '-')) {
    neg = t[0] == '-';
    sign = true;
    i = 1;
  }
  if (n - i == 3 && (memcmp(t + i, "inf", 3) == 0 || memcmp(t + i, "nan", 3) == 0)) {
    struct cap_node *f = cap_node_new(p->doc, CAP_NODE_FLOAT, line, col);
    f->u.num.f = t[i] == 'i' ? INFINITY : NAN;
    if (neg)
      f->u.num.f = -f->u.num.f;
    *out = f;
    return 0;
  }
  if (n - i >= 2 && t[i] == '0' && (t[i + 1] == 'x' || t[i + 1] == 'o' || t[i + 1] == 'b')) {
    int base = t[i + 1] == 'x' ? 16 : t[i + 1] == 'o' ? 8 : 2;
    const char *name = base == 16 ? "hexadecimal" : base == 8 ? "octal" : "binary";
    if (sign)
      return fail_at(p, line, col, "a %s integer cannot have a sign; write %.*s", name,
                     (int)(n - 1), t + 1);
    size_t nd;
    long used = scan_digits(t, n, i + 2, base, &nd);
    if (used < 0 || nd == 0 || i + 2 + (size_t)used != n)
      return fail_at(p, line, col,
                     "invalid %s integer \"%.*s\"; use digits %s, with single underscores only "
                     "between digits",
                     name, (int)n, t,
                     base == 16  ? "0-9 a-f"
                     : base == 8 ? "0-7"
                                 : "0-1");
    uint64_t v = 0;
    for (size_t j = i + 2; j < n; j++) {
      if (t[j] == '_')
        continue;
      uint64_t d = (uint64_t)cap_hex_digit((unsigned char)t[j]);
      if (v > (UINT64_C(0x7FFFFFFFFFFFFFFF) - d) / (uint64_t)base)
        return fail_at(p, line, col,
                       "integer %.*s does not fit in a signed 64-bit integer (largest is "
                       "9223372036854775807)",
                       (int)n, t);
      v = v * (uint64_t)base + d;
    }
    struct cap_node *iv = cap_node_new(p->doc, CAP_NODE_INT, line, col);
    iv->u.num.i = (int64_t)v;
    iv->u.num.f = (double)v;
    *out = iv;
    return 0;
  }
  /* decimal integer or float */
  size_t nd;
  long used = scan_digits(t, n, i, 10, &nd);
  if (used < 0 || nd == 0)
    goto bad;
  size_t int_start = i;
  size_t int_end = i + (size_t)used;
  i = int_end;
  if (t[int_start] == '0' && int_end - int_start > 1)
    return fail_at(p, line, col,
                   "leading zeros are not allowed in \"%.*s\"; write it without "
                   "them (octal needs the 0o prefix)",
                   (int)n, t);
  bool is_float = false;
  if (i < n && t[i] == '.') {
    is_float = true;
    used = scan_digits(t, n, i + 1, 10, &nd);
    if (used < 0 || nd == 0)
      goto bad;
    i += 1 + (size_t)used;
  }
  if (i < n && (t[i] == 'e' || t[i] == 'E')) {
    is_float = true;
    i++;
    if (i < n && (t[i] == '+' || t[i] == '-'))
      i++;
    used = scan_digits(t, n, i, 10, &nd);
    if (used < 0 || nd == 0)
      goto bad;
    i += (size_t)used;
  }
  if (i != n)
    goto bad;
  char stack[128];
  char *clean = n < sizeof(stack) ? stack : cap_xmalloc(n + 1);
  size_t cn = 0;
  for (size_t j = 0; j < n; j++)
    if (t[j] != '_')
      clean[cn++] = t[j];
  clean[cn] = '\0';
  struct cap_node *v;
  if (is_float) {
    v = cap_node_new(p->doc, CAP_NODE_FLOAT, line, col);
    errno = 0;
    v->u.num.f = strtod(clean, NULL);
    bool overflow = errno == ERANGE && isinf(v->u.num.f);
    if (clean != stack)
      free(clean);
    if (overflow)
      return fail_at(p, line, col,
                     "float %.*s is out of range for a 64-bit float (largest is about 1.8e308)",
                     (int)n, t);
  } else {
    uint64_t mag = 0;
    bool overflow = false;
    for (size_t j = (clean[0] == '+' || clean[0] == '-'); clean[j]; j++) {
      uint64_t d = (uint64_t)(clean[j] - '0');
      if (mag > (UINT64_MAX - d) / 10) {
        overflow = true;
        break;
      }
      mag = mag * 10 + d;
    }
    if (clean != stack)
      free(clean);
    if (overflow || mag > (neg ? UINT64_C(0x8000000000000000) : UINT64_C(0x7FFFFFFFFFFFFFFF)))
      return fail_at(p, line, col,
                     "integer %.*s does not fit in a signed 64-bit integer (range "
                     "-9223372036854775808..9223372036854775807)",
                     (int)n, t);
    v = cap_node_new(p->doc, CAP_NODE_INT, line, col);
    v->u.num.i = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    v->u.num.f = (double)v->u.num.i;
  }
  *out = v;
  return 0;
bad:
  return fail_at(p, line, col,
                 "invalid number \"%.*s\"; integers look like 42, -17, 1_000, 0xff, 0o755, "
                 "0b1010, floats like 3.14, -0.5, 5e+22, 1_000.5, inf, nan",
                 (int)n, t);
}

/* n fixed digits at the current position, or -1. */
static int fixed_digits(struct parser *p, int n)
{
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (!is_digit(peek_at(p, (size_t)i)))
      return -1;
    v = v * 10 + (peek_at(p, (size_t)i) - '0');
  }
  adv_n(p, (size_t)n);
  return v;
}

static bool is_leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static int parse_time(struct parser *p, struct cap_buf *b, uint32_t line, uint32_t col)
{
  int h = fixed_digits(p, 2);
  if (h < 0 || peek(p) != ':')
    return fail_at(p, line, col, "invalid time; write HH:MM:SS such as 07:32:00");
  adv(p);
  int m = fixed_digits(p, 2);
  if (m < 0 || peek(p) != ':')
    return fail_at(p, line, col,
                   "invalid time: seconds are required in TOML 1.0; write "
                   "HH:MM:SS such as 07:32:00");
  adv(p);
  int s = fixed_digits(p, 2);
  if (s < 0)
    return fail_at(p, line, col, "invalid time; write HH:MM:SS such as 07:32:00");
  if (h > 23 || m > 59 || s > 60)
    return fail_at(p, line, col,
                   "invalid time %02d:%02d:%02d: hours run 00-23, minutes 00-59, "
                   "seconds 00-60",
                   h, m, s);
  cap_buf_printf(b, "%02d:%02d:%02d", h, m, s);
  if (peek(p) == '.') {
    adv(p);
    if (!is_digit(peek(p)))
      return fail_at(p, line, col,
                     "invalid time: a '.' must be followed by fractional "
                     "seconds (e.g. 07:32:00.999)");
    cap_buf_putc(b, '.');
    while (is_digit(peek(p))) {
      cap_buf_putc(b, (char)peek(p));
      adv(p);
    }
  }
  return 0;
}

static int parse_datetime(struct parser *p, bool has_date, struct cap_node **out)
{
  uint32_t line = p->line, col = p->col;
  struct cap_buf b = {0};
  enum cap_datetime_kind kind = CAP_DT_LOCAL_TIME;
  int r = 0;
  if (has_date) {
    int y = fixed_digits(p, 4);
    int mo = -1, d = -1;
    if (y >= 0 && peek(p) == '-') {
      adv(p);
      mo = fixed_digits(p, 2);
      if (mo >= 0 && peek(p) == '-') {
        adv(p);
        d = fixed_digits(p, 2);
      }
    }
    if (d < 0) {
      r = fail_at(p, line, col, "invalid date; write YYYY-MM-DD such as 1979-05-27");
      goto out;
    }
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mo < 1 || mo > 12) {
      r = fail_at(p, line, col, "invalid date %04d-%02d-%02d: months run 01-12", y, mo, d);
      goto out;
    }
    if (d < 1 || d > mdays[mo - 1] + (mo == 2 && is_leap(y) ? 1 : 0)) {
      r = fail_at(p, line, col, "invalid date %04d-%02d-%02d: no such day", y, mo, d);
      goto out;
    }
    cap_buf_printf(&b, "%04d-%02d-%02d", y, mo, d);
    kind = CAP_DT_LOCAL_DATE;
    int c = peek(p);
    bool time =
        c == 'T' || c == 't' ||
        (c == ' ' && is_digit(peek_at(p, 1)) && is_digit(peek_at(p, 2)) && peek_at(p, 3) == ':');
    if (time) {
      adv(p);
      cap_buf_putc(&b, 'T');
      r = parse_time(p, &b, line, col);
      if (r < 0)
        goto out;
      kind = CAP_DT_LOCAL_DATETIME;
      c = peek(p);
      if (c == 'Z' || c == 'z') {
        adv(p);
        cap_buf_putc(&b, 'Z');
        kind = CAP_DT_OFFSET;
      } else if (c == '+' || c == '-') {
        adv(p);
        int oh = fixed_digits(p, 2), om = -1;
        if (oh >= 0 && peek(p) == ':') {
          adv(p);
          om = fixed_digits(p, 2);
        }
        if (om < 0 || oh > 23 || om > 59) {
          r = fail_at(p, line, col,
                      "invalid time offset; write Z or +HH:MM / -HH:MM with "
                      "hours 00-23 and minutes 00-59");
          goto out;
        }
        cap_buf_printf(&b, "%c%02d:%02d", c, oh, om);
        kind = CAP_DT_OFFSET;
      }
    }
  } else {
    r = parse_time(p, &b, line, col);
    if (r < 0)
      goto out;
  }
  r = value_end(p, line, col, "date-time");
  if (r < 0)
    goto out;
  struct cap_node *n = cap_node_new(p->doc, CAP_NODE_DATETIME, line, col);
  n->subkind = (uint8_t)kind;
  n->u.str.ptr = cap_doc_strndup(p->doc, b.data, b.len);
  n->u.str.len = b.len;
  *out = n;
out:
  cap_buf_free(&b);
  return r;
}

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
      return fail_at(p, line, col, "unterminated array; close it with ']'");
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
      return fail_at(p, line, col, "unterminated array; close it with ']'");
    return unexpected(p, "',' or ']' in the array");
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
  skip_ws(p);
  if (peek(p) != '}') {
    for (;;) {
      skip_ws(p);
      if (at_newline(p))
        return fail(p, "newlines are not allowed inside an inline table (TOML 1.0); keep it "
                       "on one line or use a [table]");
      if (peek(p) < 0)
        return fail_at(p, line, col, "unterminated inline table; close it with '}'");
      int r = parse_keyval(p, t, depth);
      if (r < 0)
        return r;
      skip_ws(p);
      if (peek(p) == ',') {
        adv(p);
        skip_ws(p);
        if (peek(p) == '}')
          return fail(p, "a trailing comma is not allowed in an inline table (TOML 1.0); "
                         "remove it");
        continue;
      }
      if (peek(p) == '}')
        break;
      if (at_newline(p))
        return fail(p, "newlines are not allowed inside an inline table (TOML 1.0); keep it "
                       "on one line or use a [table]");
      if (peek(p) < 0)
        return fail_at(p, line, col, "unterminated inline table; close it with '}'");
      return unexpected(p, "',' or '}' in the inline table");
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
    int r = parse_string(p, &p->sbuf);
    if (r < 0)
      return r;
    *out = cap_node_new_string(p->doc, p->sbuf.data, p->sbuf.len, line, col);
    return value_end(p, line, col, "string: text after the closing quote");
  }
  if (c == '[')
    return parse_array(p, depth, out);
  if (c == '{')
    return parse_inline_table(p, depth, out);
  if (match_word(p, "true") || match_word(p, "false")) {
    bool v = c == 't';
    adv_n(p, v ? 4 : 5);
    if (!at_value_end(p))
      goto bare;
    struct cap_node *b = cap_node_new(p->doc, CAP_NODE_BOOL, line, col);
    b->u.boolean = v;
    *out = b;
    return 0;
  }
  if (is_digit(c) && is_digit(peek_at(p, 1)) && is_digit(peek_at(p, 2)) &&
      is_digit(peek_at(p, 3)) && peek_at(p, 4) == '-')
    return parse_datetime(p, true, out);
  if (is_digit(c) && is_digit(peek_at(p, 1)) && peek_at(p, 2) == ':')
    return parse_datetime(p, false, out);
  if (is_digit(c) || c == '+' || c == '-' || match_word(p, "inf") || match_word(p, "nan"))
    return parse_number(p, out);
  if (c < 0 || c == '\n' || c == '\r' || c == '#')
    return fail(p, "missing value after '='; write a value such as \"text\", 42 or true");
bare:
  if (is_bare(c)) {
    size_t n = 0, start = p->pos;
    while (n < 64 && is_bare(peek_at(p, n)))
      n++;
    return fail_at(p, line, col,
                   "invalid value %.*s; strings need quotes (\"%.*s\"), booleans are lower-case "
                   "true and false",
                   (int)n, p->s + start, (int)n, p->s + start);
  }
  return unexpected(p, "a value");
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
    return fail_at(p, k.parts[0].line, k.parts[0].col,
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
      return fail_at(p, part->line, part->col,
                     "cannot add keys to inline table %s (line %" PRIu32 "): an inline table is "
                     "complete as written; move the key into the braces",
                     name, m->line);
    if (v->kind == CAP_NODE_OBJECT && (v->flags & F_HEADER))
      return fail_at(p, part->line, part->col,
                     "cannot add to table %s with dotted keys: it is defined by the header at "
                     "line %" PRIu32 "; put the key under that header",
                     name, v->line);
    if (v->kind != CAP_NODE_OBJECT)
      return fail_at(p, part->line, part->col,
                     "key %s is already %s (line %" PRIu32 "), so it cannot also be a table", name,
                     v->kind == CAP_NODE_ARRAY ? "an array" : "a value", m->line);
    v->flags = (uint8_t)((v->flags & ~F_IMPLICIT) | F_DOTTED);
    t = v;
  }
  const struct key_part *last = &k.parts[k.n - 1];
  struct cap_member *m = find(p, t, last->s, last->len);
  if (m) {
    _cleanup_free_ char *name = key_name(&k, k.n);
    return fail_at(p, last->line, last->col,
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
                describe(p, buf, sizeof(buf)));
  }
  adv(p);
  skip_ws(p);
  struct cap_node *v;
  r = parse_value(p, vdepth, &v);
  if (r < 0)
    return r;
  add_member(p, t, &last, v);
  return 0;
}

static int parse_header(struct parser *p)
{
  uint32_t hl = p->line, hc = p->col;
  adv(p);
  bool aot = peek(p) == '[';
  if (aot)
    adv(p);
  skip_ws(p);
  struct key k;
  int r = parse_key(p, &k);
  if (r < 0)
    return r;
  if (peek(p) != ']' || (aot && peek_at(p, 1) != ']'))
    return unexpected(p, aot ? "']]' to close the array-of-tables header"
                             : "']' to close the table header");
  adv_n(p, aot ? 2 : 1);

  struct cap_node *t = p->root;
  for (size_t i = 0; i + 1 < k.n; i++) {
    const struct key_part *part = &k.parts[i];
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
    _cleanup_free_ char *name = key_name(&k, i + 1);
    if (v->kind == CAP_NODE_OBJECT && (v->flags & F_FROZEN))
      return fail_at(p, part->line, part->col,
                     "cannot add to inline table %s (line %" PRIu32 "): an inline table is "
                     "complete as written; write it as a [table] instead",
                     name, m->line);
    if (v->kind != CAP_NODE_OBJECT)
      return fail_at(p, part->line, part->col,
                     "key %s is already %s (line %" PRIu32 "), so it cannot also be a table", name,
                     v->kind == CAP_NODE_ARRAY ? "an array" : "a value", m->line);
    t = v;
  }

  const struct key_part *last = &k.parts[k.n - 1];
  struct cap_member *m = find(p, t, last->s, last->len);
  _cleanup_free_ char *name = key_toml(&k, k.n);
  _cleanup_free_ char *quoted = key_name(&k, k.n);
  if (aot) {
    struct cap_node *arr;
    if (!m) {
      arr = cap_node_new(p->doc, CAP_NODE_ARRAY, last->line, last->col);
      arr->flags = F_AOT;
      add_member(p, t, last, arr);
    } else if (m->value->kind == CAP_NODE_ARRAY && (m->value->flags & F_AOT)) {
      arr = m->value;
    } else if (m->value->kind == CAP_NODE_ARRAY) {
      return fail_at(p, last->line, last->col,
                     "[[%s]] cannot extend the static array %s defined at line %" PRIu32
                     "; use either key = [...] or [[%s]] headers",
                     name, quoted, m->line, name);
    } else {
      return fail_at(p, last->line, last->col,
                     "[[%s]] conflicts with %s already defined as %s at line %" PRIu32
                     "; rename one of them",
                     name, quoted, m->value->kind == CAP_NODE_OBJECT ? "a table" : "a value",
                     m->value->kind == CAP_NODE_OBJECT ? m->value->line : m->line);
    }
    struct cap_node *nt = cap_node_new(p->doc, CAP_NODE_OBJECT, hl, hc);
    nt->flags = F_HEADER;
    cap_node_array_push(p->doc, arr, nt);
    t = nt;
  } else if (!m) {
    struct cap_node *nt = cap_node_new(p->doc, CAP_NODE_OBJECT, hl, hc);
    nt->flags = F_HEADER;
    add_member(p, t, last, nt);
    t = nt;
  } else {
    struct cap_node *v = m->value;
    if (v->kind == CAP_NODE_OBJECT && v->flags == F_IMPLICIT) {
      v->flags = F_HEADER;
      v->line = hl;
      v->col = hc;
      t = v;
    } else if (v->kind == CAP_NODE_OBJECT && (v->flags & F_HEADER)) {
      return fail_at(p, hl, hc,
                     "table [%s] is already defined at line %" PRIu32
                     "; a table can be defined only once, merge the two",
                     name, v->line);
    } else if (v->kind == CAP_NODE_OBJECT && (v->flags & F_FROZEN)) {
      return fail_at(p, hl, hc,
                     "table [%s] is already defined as an inline table at line %" PRIu32
                     "; an inline table is complete as written",
                     name, m->line);
    } else if (v->kind == CAP_NODE_OBJECT) {
      return fail_at(p, hl, hc,
                     "table [%s] is already defined by dotted keys at line %" PRIu32
                     "; a table can be defined only once, move those keys under [%s]",
                     name, m->line, name);
    } else if (v->kind == CAP_NODE_ARRAY && (v->flags & F_AOT)) {
      return fail_at(p, hl, hc,
                     "[%s] is an array of tables (line %" PRIu32 "); write [[%s]] to add an "
                     "element",
                     name, m->line, name);
    } else {
      return fail_at(p, hl, hc,
                     "table [%s] conflicts with key %s already defined at line %" PRIu32
                     "; rename one of them",
                     name, quoted, m->line);
    }
  }
  p->cur = t;
  p->cur_depth = (unsigned)k.n;
  return 0;
}

static int parse_document(struct parser *p)
{
  for (;;) {
    skip_ws(p);
    int c = peek(p);
    int r;
    if (c < 0)
      return 0;
    if (c == '#')
      r = skip_comment(p);
    else if (c == '\n' || c == '\r')
      r = eat_newline(p);
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
    return fail_at(&p, line, col, "invalid UTF-8 (byte 0x%02X); TOML files must be UTF-8",
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
