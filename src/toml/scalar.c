/* TOML scalar values: basic and literal strings (single- and multi-line,
 * escapes), integers in four bases and floats (with the spec's underscore
 * and leading-zero rules), offset/local dates and times. */
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
#include "toml/toml_internal.h"

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
        return toml_fail_at(p, line, col, "\\%c needs exactly %d hexadecimal digits (e.g. \\%c%s)",
                            c, digits, c, digits == 4 ? "00E9" : "0001F600");
      cp = cp * 16 + (uint32_t)h;
      adv(p);
    }
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
      return toml_fail_at(p, line, col,
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
    toml_skip_ws(p);
    if (!toml_at_newline(p))
      return toml_fail_at(
          p, line, col,
          "a line-ending backslash may only be followed by whitespace up to the end "
          "of the line; write \\\\ for a literal backslash");
    for (;;) {
      toml_skip_ws(p);
      if (!toml_at_newline(p))
        return 0;
      int r = toml_eat_newline(p);
      if (r < 0)
        return r;
    }
  }
  if (c < 0)
    return toml_fail_at(p, line, col, "unterminated string; close it with '\"'");
  char buf[48];
  return toml_fail_at(
      p, line, col,
      "invalid escape sequence: backslash followed by %s; valid escapes are \\b \\t "
      "\\n \\f \\r \\\" \\\\ \\uXXXX \\UXXXXXXXX (write \\\\ for a backslash)",
      toml_describe(p, buf, sizeof(buf)));
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
  int r = toml_eat_newline(p);
  if (r == 0)
    cap_buf_putc(b, '\n');
  return r;
}

/* Basic ("...", """...""") or literal ('...', '''...''') string into b. */
int toml_parse_string(struct parser *p, struct cap_buf *b)
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
  if (multi && toml_at_newline(p)) {
    int r = toml_eat_newline(p); /* a newline right after the opening quotes is trimmed */
    if (r < 0)
      return r;
  }
  for (;;) {
    int c = peek(p);
    int r = 0;
    if (c < 0)
      return toml_fail_at(p, line, col, "unterminated %s; close it with %s", what,
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
        return toml_fail_at(
            p, line, col,
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

bool toml_at_value_end(const struct parser *p)
{
  int c = peek(p);
  return c < 0 || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '#' || c == ',' ||
         c == ']' || c == '}';
}

int toml_value_end(struct parser *p, uint32_t line, uint32_t col, const char *what)
{
  if (toml_at_value_end(p))
    return 0;
  char buf[48];
  return toml_fail_at(p, line, col, "invalid %s: unexpected %s", what,
                      toml_describe(p, buf, sizeof(buf)));
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
      if (i == start || i + 1 >= n || s[i - 1] == '_' ||
          cap_hex_digit((unsigned char)s[i + 1]) < 0 ||
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

/* 0x, 0o, 0b integers (t[i] is the '0'): no sign, digits of the base with
 * single underscores between them, within int64. */
static int parse_prefixed_int(struct parser *p, const char *t, size_t n, size_t i, bool sign,
                              uint32_t line, uint32_t col, struct cap_node **out)
{
  int base = t[i + 1] == 'x' ? 16 : t[i + 1] == 'o' ? 8 : 2;
  const char *name = base == 16 ? "hexadecimal" : base == 8 ? "octal" : "binary";
  if (sign)
    return toml_fail_at(p, line, col, "a %s integer cannot have a sign; write %.*s", name,
                        (int)(n - 1), t + 1);
  size_t nd;
  long used = scan_digits(t, n, i + 2, base, &nd);
  if (used < 0 || nd == 0 || i + 2 + (size_t)used != n)
    return toml_fail_at(p, line, col,
                        "invalid %s integer \"%.*s\"; use digits %s, with single underscores "
                        "only between digits",
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
      return toml_fail_at(p, line, col,
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

/* The shape of a decimal integer or float from t[i] (after any sign):
 * 1 for a float, 0 for an integer, -1 when malformed, -2 for leading
 * zeros. */
static int decimal_shape(const char *t, size_t n, size_t i)
{
  size_t nd;
  long used = scan_digits(t, n, i, 10, &nd);
  if (used < 0 || nd == 0)
    return -1;
  size_t int_start = i;
  i += (size_t)used;
  if (t[int_start] == '0' && i - int_start > 1)
    return -2;
  int is_float = 0;
  if (i < n && t[i] == '.') {
    is_float = 1;
    used = scan_digits(t, n, i + 1, 10, &nd);
    if (used < 0 || nd == 0)
      return -1;
    i += 1 + (size_t)used;
  }
  if (i < n && (t[i] == 'e' || t[i] == 'E')) {
    is_float = 1;
    i++;
    if (i < n && (t[i] == '+' || t[i] == '-'))
      i++;
    used = scan_digits(t, n, i, 10, &nd);
    if (used < 0 || nd == 0)
      return -1;
    i += (size_t)used;
  }
  return i == n ? is_float : -1;
}

/* The value of a well-formed decimal (`clean`: t without underscores). */
static int decimal_value(struct parser *p, const char *t, size_t n, const char *clean, bool neg,
                         bool is_float, uint32_t line, uint32_t col, struct cap_node **out)
{
  struct cap_node *v;
  if (is_float) {
    v = cap_node_new(p->doc, CAP_NODE_FLOAT, line, col);
    errno = 0;
    v->u.num.f = strtod(clean, NULL);
    if (errno == ERANGE && isinf(v->u.num.f))
      return toml_fail_at(
          p, line, col, "float %.*s is out of range for a 64-bit float (largest is about 1.8e308)",
          (int)n, t);
    *out = v;
    return 0;
  }
  uint64_t mag = 0;
  for (size_t j = (clean[0] == '+' || clean[0] == '-'); clean[j]; j++) {
    uint64_t d = (uint64_t)(clean[j] - '0');
    if (mag > (UINT64_MAX - d) / 10) {
      mag = UINT64_MAX;
      break;
    }
    mag = mag * 10 + d;
  }
  if (mag > (neg ? UINT64_C(0x8000000000000000) : UINT64_C(0x7FFFFFFFFFFFFFFF)))
    return toml_fail_at(p, line, col,
                        "integer %.*s does not fit in a signed 64-bit integer (range "
                        "-9223372036854775808..9223372036854775807)",
                        (int)n, t);
  v = cap_node_new(p->doc, CAP_NODE_INT, line, col);
  v->u.num.i = neg ? (int64_t)(0 - mag) : (int64_t)mag;
  v->u.num.f = (double)v->u.num.i;
  *out = v;
  return 0;
}

int toml_parse_number(struct parser *p, struct cap_node **out)
{
  uint32_t line = p->line, col = p->col;
  size_t start = p->pos;
  while (peek(p) >= 0 && (is_bare(peek(p)) || peek(p) == '.' || peek(p) == '+'))
    adv(p);
  const char *t = p->s + start;
  size_t n = p->pos - start;
  if (!toml_at_value_end(p))
    return toml_value_end(p, line, col, "number");
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
  if (n - i >= 2 && t[i] == '0' && (t[i + 1] == 'x' || t[i + 1] == 'o' || t[i + 1] == 'b'))
    return parse_prefixed_int(p, t, n, i, sign, line, col, out);
  int shape = decimal_shape(t, n, i);
  if (shape == -2)
    return toml_fail_at(p, line, col,
                        "leading zeros are not allowed in \"%.*s\"; write it without "
                        "them (octal needs the 0o prefix)",
                        (int)n, t);
  if (shape < 0)
    return toml_fail_at(p, line, col,
                        "invalid number \"%.*s\"; integers look like 42, -17, 1_000, 0xff, "
                        "0o755, 0b1010, floats like 3.14, -0.5, 5e+22, 1_000.5, inf, nan",
                        (int)n, t);
  char stack[128];
  char *clean = n < sizeof(stack) ? stack : cap_xmalloc(n + 1);
  size_t cn = 0;
  for (size_t j = 0; j < n; j++)
    if (t[j] != '_')
      clean[cn++] = t[j];
  clean[cn] = '\0';
  int r = decimal_value(p, t, n, clean, neg, shape == 1, line, col, out);
  if (clean != stack)
    free(clean);
  return r;
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
    return toml_fail_at(p, line, col, "invalid time; write HH:MM:SS such as 07:32:00");
  adv(p);
  int m = fixed_digits(p, 2);
  if (m < 0 || peek(p) != ':')
    return toml_fail_at(p, line, col,
                        "invalid time: seconds are required in TOML 1.0; write "
                        "HH:MM:SS such as 07:32:00");
  adv(p);
  int s = fixed_digits(p, 2);
  if (s < 0)
    return toml_fail_at(p, line, col, "invalid time; write HH:MM:SS such as 07:32:00");
  if (h > 23 || m > 59 || s > 60)
    return toml_fail_at(p, line, col,
                        "invalid time %02d:%02d:%02d: hours run 00-23, minutes 00-59, "
                        "seconds 00-60",
                        h, m, s);
  cap_buf_printf(b, "%02d:%02d:%02d", h, m, s);
  if (peek(p) == '.') {
    adv(p);
    if (!is_digit(peek(p)))
      return toml_fail_at(p, line, col,
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

/* After a date-time's time: Z or +HH:MM / -HH:MM (an offset date-time), or
 * nothing (a local one). */
static int parse_offset(struct parser *p, struct cap_buf *b, uint32_t line, uint32_t col,
                        enum cap_datetime_kind *kind)
{
  int c = peek(p);
  if (c == 'Z' || c == 'z') {
    adv(p);
    cap_buf_putc(b, 'Z');
    *kind = CAP_DT_OFFSET;
  } else if (c == '+' || c == '-') {
    adv(p);
    int oh = fixed_digits(p, 2), om = -1;
    if (oh >= 0 && peek(p) == ':') {
      adv(p);
      om = fixed_digits(p, 2);
    }
    if (om < 0 || oh > 23 || om > 59)
      return toml_fail_at(p, line, col,
                          "invalid time offset; write Z or +HH:MM / -HH:MM with "
                          "hours 00-23 and minutes 00-59");
    cap_buf_printf(b, "%c%02d:%02d", c, oh, om);
    *kind = CAP_DT_OFFSET;
  }
  return 0;
}

int toml_parse_datetime(struct parser *p, bool has_date, struct cap_node **out)
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
      r = toml_fail_at(p, line, col, "invalid date; write YYYY-MM-DD such as 1979-05-27");
      goto out;
    }
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mo < 1 || mo > 12) {
      r = toml_fail_at(p, line, col, "invalid date %04d-%02d-%02d: months run 01-12", y, mo, d);
      goto out;
    }
    if (d < 1 || d > mdays[mo - 1] + (mo == 2 && is_leap(y) ? 1 : 0)) {
      r = toml_fail_at(p, line, col, "invalid date %04d-%02d-%02d: no such day", y, mo, d);
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
      r = parse_offset(p, &b, line, col, &kind);
      if (r < 0)
        goto out;
    }
  } else {
    r = parse_time(p, &b, line, col);
    if (r < 0)
      goto out;
  }
  r = toml_value_end(p, line, col, "date-time");
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
