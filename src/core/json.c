#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "text.h"

struct json_parser {
  struct cap_doc *doc;
  const char *s;
  size_t len, pos;
  const char *file;
  unsigned max_depth;
  struct cap_diags *diags;
  struct cap_textpos tp;
  struct cap_buf scratch;
  bool failed;
};

static void json_fail_at(struct json_parser *p, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void json_fail_at(struct json_parser *p, size_t off, const char *fmt, ...)
{
  if (p->failed)
    return;
  p->failed = true;
  uint32_t line, col;
  cap_textpos_at(&p->tp, off, &line, &col);
  va_list ap;
  va_start(ap, fmt);
  cap_diags_vadd(p->diags, CAP_SEV_ERROR, p->file, line, col, "", fmt, ap);
  va_end(ap);
}

static void skip_ws(struct json_parser *p)
{
  while (p->pos < p->len) {
    char c = p->s[p->pos];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
      p->pos++;
    else
      break;
  }
}

static const char *describe_char(struct json_parser *p, char *buf, size_t n)
{
  if (p->pos >= p->len)
    return "end of input";
  unsigned char c = (unsigned char)p->s[p->pos];
  if (c >= 0x20 && c < 0x7f)
    snprintf(buf, n, "'%c'", c);
  else
    snprintf(buf, n, "byte 0x%02x", c);
  return buf;
}

static struct cap_node *parse_value(struct json_parser *p, unsigned depth);

static int hex4(const char *s, uint32_t *out)
{
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    int d = cap_hex_digit((unsigned char)s[i]);
    if (d < 0)
      return -1;
    v = (v << 4) | (uint32_t)d;
  }
  *out = v;
  return 0;
}

/* A \u escape at p->pos (with its low surrogate when it is a high one),
 * appended to p->scratch as UTF-8. */
static int parse_unicode_escape(struct json_parser *p)
{
  uint32_t cp;
  if (p->pos + 6 > p->len || hex4(p->s + p->pos + 2, &cp) < 0) {
    json_fail_at(p, p->pos, "invalid \\u escape; write exactly four hex digits");
    return -1;
  }
  size_t esc = p->pos;
  p->pos += 6;
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    uint32_t lo;
    if (p->pos + 6 <= p->len && p->s[p->pos] == '\\' && p->s[p->pos + 1] == 'u' &&
        hex4(p->s + p->pos + 2, &lo) == 0 && lo >= 0xDC00 && lo <= 0xDFFF) {
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      p->pos += 6;
    } else {
      json_fail_at(p, esc, "lone UTF-16 surrogate \\u%04X; pair it with a low surrogate", cp);
      return -1;
    }
  } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
    json_fail_at(p, esc, "lone UTF-16 surrogate \\u%04X; pair it with a high surrogate", cp);
    return -1;
  }
  char enc[4];
  cap_buf_append(&p->scratch, enc, cap_utf8_encode(cp, enc));
  return 0;
}

/* The escape at p->pos (a backslash) inside the string that began at
 * start, appended to p->scratch. */
static int parse_escape(struct json_parser *p, size_t start)
{
  if (p->pos + 1 >= p->len) {
    json_fail_at(p, start, "unterminated string; add the closing '\"'");
    return -1;
  }
  char e = p->s[p->pos + 1];
  const char *simple = NULL;
  switch (e) {
  case '"': simple = "\""; break;
  case '\\': simple = "\\"; break;
  case '/': simple = "/"; break;
  case 'b': simple = "\b"; break;
  case 'f': simple = "\f"; break;
  case 'n': simple = "\n"; break;
  case 'r': simple = "\r"; break;
  case 't': simple = "\t"; break;
  case 'u': return parse_unicode_escape(p);
  default:
    json_fail_at(p, p->pos,
                 "invalid escape '\\%c'; JSON allows \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX",
                 (e >= 0x20 && e < 0x7f) ? e : '?');
    return -1;
  }
  cap_buf_putc(&p->scratch, simple[0]);
  p->pos += 2;
  return 0;
}

/* Parses a string at p->pos (on the opening quote) into p->scratch. */
static int parse_string_raw(struct json_parser *p)
{
  size_t start = p->pos;
  p->pos++;
  p->scratch.len = 0;
  if (p->scratch.data)
    p->scratch.data[0] = '\0';
  for (;;) {
    size_t run = p->pos;
    while (p->pos < p->len) {
      unsigned char c = (unsigned char)p->s[p->pos];
      if (c == '"' || c == '\\' || c < 0x20)
        break;
      p->pos++;
    }
    if (p->pos > run)
      cap_buf_append(&p->scratch, p->s + run, p->pos - run);
    if (p->pos >= p->len) {
      json_fail_at(p, start, "unterminated string; add the closing '\"'");
      return -1;
    }
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c == '"') {
      p->pos++;
      return 0;
    }
    if (c < 0x20) {
      json_fail_at(p, p->pos, "control character 0x%02x in a string; escape it (\\n, \\t, \\u00XX)",
                   c);
      return -1;
    }
    if (parse_escape(p, start) < 0)
      return -1;
  }
}

static struct cap_node *parse_number(struct json_parser *p, uint32_t line, uint32_t col)
{
  size_t start = p->pos;
  const char *s = p->s;
  size_t i = p->pos;
  bool is_int = true;
  if (i < p->len && s[i] == '-')
    i++;
  if (i >= p->len || !(s[i] >= '0' && s[i] <= '9')) {
    json_fail_at(p, start, "invalid number; a digit must follow '-'");
    return NULL;
  }
  if (s[i] == '0') {
    i++;
    if (i < p->len && s[i] >= '0' && s[i] <= '9') {
      json_fail_at(p, start, "invalid number: leading zeros are not allowed in JSON");
      return NULL;
    }
  } else {
    while (i < p->len && s[i] >= '0' && s[i] <= '9')
      i++;
  }
  if (i < p->len && s[i] == '.') {
    is_int = false;
    i++;
    if (i >= p->len || !(s[i] >= '0' && s[i] <= '9')) {
      json_fail_at(p, start, "invalid number: a digit must follow '.'");
      return NULL;
    }
    while (i < p->len && s[i] >= '0' && s[i] <= '9')
      i++;
  }
  if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
    is_int = false;
    i++;
    if (i < p->len && (s[i] == '+' || s[i] == '-'))
      i++;
    if (i >= p->len || !(s[i] >= '0' && s[i] <= '9')) {
      json_fail_at(p, start, "invalid number: the exponent needs digits");
      return NULL;
    }
    while (i < p->len && s[i] >= '0' && s[i] <= '9')
      i++;
  }
  p->pos = i;
  char *raw = cap_doc_strndup(p->doc, s + start, i - start);
  struct cap_node *n = cap_node_new(p->doc, CAP_NODE_FLOAT, line, col);
  n->u.num.raw = raw;
  if (is_int) {
    errno = 0;
    long long v = strtoll(raw, NULL, 10);
    if (errno == 0) {
      n->kind = CAP_NODE_INT;
      n->u.num.i = v;
      n->u.num.f = (double)v;
      return n;
    }
  }
  n->u.num.f = strtod(raw, NULL);
  return n;
}

static bool match_word(struct json_parser *p, const char *w)
{
  size_t n = strlen(w);
  if (p->len - p->pos < n || memcmp(p->s + p->pos, w, n) != 0)
    return false;
  p->pos += n;
  return true;
}

static struct cap_node *parse_value(struct json_parser *p, unsigned depth);

/* One member of an object: "name": value, added to n; false after an error. */
static bool parse_member(struct json_parser *p, struct cap_node *n, unsigned depth)
{
  char buf[32];
  if (p->pos >= p->len || p->s[p->pos] != '"') {
    json_fail_at(p, p->pos, "expected a quoted member name, found %s",
                 describe_char(p, buf, sizeof buf));
    return false;
  }
  uint32_t kline, kcol;
  size_t kpos = p->pos;
  cap_textpos_at(&p->tp, kpos, &kline, &kcol);
  if (parse_string_raw(p) < 0)
    return false;
  const char *key = p->scratch.data ? p->scratch.data : "";
  if (cap_node_get_member(n, key, p->scratch.len)) {
    json_fail_at(p, kpos, "duplicate key \"%s\"; each key may appear once", key);
    return false;
  }
  struct cap_member *m = cap_node_object_add(p->doc, n, key, p->scratch.len, kline, kcol, NULL);
  skip_ws(p);
  if (p->pos >= p->len || p->s[p->pos] != ':') {
    json_fail_at(p, p->pos, "expected ':' after the member name, found %s",
                 describe_char(p, buf, sizeof buf));
    return false;
  }
  p->pos++;
  m->value = parse_value(p, depth + 1);
  return m->value != NULL;
}

/* An object or array (p at its '{' or '['). */
static struct cap_node *parse_container(struct json_parser *p, unsigned depth, uint32_t line,
                                        uint32_t col)
{
  char buf[32];
  if (depth >= p->max_depth) {
    json_fail_at(p, p->pos, "nesting deeper than %u levels; flatten the document", p->max_depth);
    return NULL;
  }
  bool is_obj = p->s[p->pos] == '{';
  char close = is_obj ? '}' : ']';
  struct cap_node *n = cap_node_new(p->doc, is_obj ? CAP_NODE_OBJECT : CAP_NODE_ARRAY, line, col);
  p->pos++;
  skip_ws(p);
  if (p->pos < p->len && p->s[p->pos] == close) {
    p->pos++;
    return n;
  }
  for (;;) {
    skip_ws(p);
    if (is_obj) {
      if (!parse_member(p, n, depth))
        return NULL;
    } else {
      struct cap_node *item = parse_value(p, depth + 1);
      if (!item)
        return NULL;
      cap_node_array_push(p->doc, n, item);
    }
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == ',') {
      p->pos++;
      skip_ws(p);
      if (p->pos < p->len && p->s[p->pos] == close) {
        json_fail_at(p, p->pos, "trailing comma before '%c'; remove it", close);
        return NULL;
      }
      continue;
    }
    if (p->pos < p->len && p->s[p->pos] == close) {
      p->pos++;
      return n;
    }
    json_fail_at(p, p->pos, "expected ',' or '%c', found %s", close,
                 describe_char(p, buf, sizeof buf));
    return NULL;
  }
}

static struct cap_node *parse_value(struct json_parser *p, unsigned depth)
{
  skip_ws(p);
  uint32_t line, col;
  cap_textpos_at(&p->tp, p->pos, &line, &col);
  char buf[32];
  if (p->pos >= p->len) {
    json_fail_at(p, p->pos, "unexpected end of input; a value was expected");
    return NULL;
  }
  char c = p->s[p->pos];
  switch (c) {
  case '{':
  case '[': return parse_container(p, depth, line, col);
  case '"': {
    if (parse_string_raw(p) < 0)
      return NULL;
    return cap_node_new_string(p->doc, p->scratch.data ? p->scratch.data : "", p->scratch.len, line,
                               col);
  }
  case 't':
  case 'f':
  case 'n':
    if (match_word(p, "true") || match_word(p, "false")) {
      struct cap_node *n = cap_node_new(p->doc, CAP_NODE_BOOL, line, col);
      n->u.boolean = c == 't';
      return n;
    }
    if (match_word(p, "null"))
      return cap_node_new(p->doc, CAP_NODE_NULL, line, col);
    break;
  default:
    if (c == '-' || (c >= '0' && c <= '9'))
      return parse_number(p, line, col);
    break;
  }
  json_fail_at(p, p->pos, "expected a JSON value, found %s", describe_char(p, buf, sizeof buf));
  return NULL;
}

int cap_json_parse(struct cap_doc *doc, const char *data, size_t len, const char *file,
                   unsigned max_depth, struct cap_diags *diags)
{
  struct json_parser p = {
      .doc = doc,
      .s = data,
      .len = len,
      .file = file,
      .max_depth = !max_depth                       ? CAP_JSON_DEFAULT_DEPTH
                   : max_depth > CAP_JSON_MAX_DEPTH ? CAP_JSON_MAX_DEPTH
                                                    : max_depth,
      .diags = diags,
  };
  cap_textpos_init(&p.tp, data, len);
  size_t bad;
  if (!cap_utf8_valid(data, len, &bad)) {
    json_fail_at(&p, bad, "invalid UTF-8 (byte 0x%02x); save the file as UTF-8",
                 (unsigned char)data[bad]);
    return -EINVAL;
  }
  if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0)
    p.pos = 3;
  skip_ws(&p);
  if (p.pos >= len) {
    json_fail_at(&p, p.pos, "the file is empty; a JSON document was expected");
    return -EINVAL;
  }
  struct cap_node *root = parse_value(&p, 0);
  if (root) {
    skip_ws(&p);
    if (p.pos < len)
      json_fail_at(&p, p.pos, "unexpected data after the JSON document; remove it");
  }
  cap_buf_free(&p.scratch);
  if (p.failed)
    return -EINVAL;
  doc->root = root;
  return 0;
}

/* ---- writer ---- */

/* The escape JSON has for cp: a short one where there is one, else \uXXXX
 * (C0, DEL, C1 and bidi controls: a log line or listing read on a terminal
 * stays inert, and the document stays ASCII where the text was hostile). */
static void json_escape_char(struct cap_buf *out, uint32_t cp)
{
  switch (cp) {
  case '"': cap_buf_puts(out, "\\\""); break;
  case '\\': cap_buf_puts(out, "\\\\"); break;
  case '\n': cap_buf_puts(out, "\\n"); break;
  case '\r': cap_buf_puts(out, "\\r"); break;
  case '\t': cap_buf_puts(out, "\\t"); break;
  case '\b': cap_buf_puts(out, "\\b"); break;
  case '\f': cap_buf_puts(out, "\\f"); break;
  default: cap_buf_printf(out, "\\u%04x", (unsigned)cp);
  }
}

void cap_json_quote(struct cap_buf *out, const char *s, size_t n)
{
  cap_buf_putc(out, '"');
  size_t run = 0;
  for (size_t i = 0; i < n;) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      i++;
      continue;
    }
    uint32_t cp;
    enum cap_text_kind kind;
    size_t u = cap_escape_scan(s + i, n - i, &cp, &kind);
    if (kind == CAP_TEXT_PLAIN && c >= 0x80) {
      i += u;
      continue;
    }
    cap_buf_append(out, s + run, i - run);
    if (kind == CAP_TEXT_INVALID || kind == CAP_TEXT_CUT) {
      /* JSON is Unicode text: a byte that is not UTF-8 cannot be carried
       * as itself, and \u00XX would name another character; each becomes
       * U+FFFD, the replacement character */
      cap_buf_puts(out, "\\ufffd");
      u = 1;
    } else {
      json_escape_char(out, cp);
    }
    i += u;
    run = i;
  }
  cap_buf_append(out, s + run, n - run);
  cap_buf_putc(out, '"');
}

void cap_jw_init(struct cap_jw *w, struct cap_buf *out, bool pretty)
{
  memset(w, 0, sizeof(*w));
  w->out = out;
  w->pretty = pretty;
  w->first[0] = true;
}

static void jw_newline(struct cap_jw *w)
{
  if (!w->pretty)
    return;
  cap_buf_putc(w->out, '\n');
  for (int i = 0; i < w->depth; i++)
    cap_buf_puts(w->out, "  ");
}

/* Before any value or key: separator and indentation. */
static void jw_before(struct cap_jw *w)
{
  if (w->after_key) {
    w->after_key = false;
    return;
  }
  if (w->depth == 0)
    return;
  if (!w->first[w->depth])
    cap_buf_putc(w->out, ',');
  w->first[w->depth] = false;
  jw_newline(w);
}

static void jw_open(struct cap_jw *w, char c)
{
  jw_before(w);
  cap_buf_putc(w->out, c);
  if (w->depth < CAP_JSON_MAX_DEPTH + 1)
    w->depth++;
  w->first[w->depth] = true;
}

static void jw_close(struct cap_jw *w, char c)
{
  bool empty = w->first[w->depth];
  if (w->depth > 0)
    w->depth--;
  if (!empty)
    jw_newline(w);
  cap_buf_putc(w->out, c);
}

void cap_jw_begin_object(struct cap_jw *w) { jw_open(w, '{'); }
void cap_jw_end_object(struct cap_jw *w) { jw_close(w, '}'); }
void cap_jw_begin_array(struct cap_jw *w) { jw_open(w, '['); }
void cap_jw_end_array(struct cap_jw *w) { jw_close(w, ']'); }

static void jw_key_n(struct cap_jw *w, const char *key, size_t n)
{
  jw_before(w);
  cap_json_quote(w->out, key, n);
  cap_buf_puts(w->out, w->pretty ? ": " : ":");
  w->after_key = true;
}

void cap_jw_key(struct cap_jw *w, const char *key) { jw_key_n(w, key, strlen(key)); }

void cap_jw_string_n(struct cap_jw *w, const char *s, size_t n)
{
  jw_before(w);
  cap_json_quote(w->out, s, n);
}

void cap_jw_string(struct cap_jw *w, const char *s) { cap_jw_string_n(w, s, strlen(s)); }

void cap_jw_string_or_null(struct cap_jw *w, const char *s)
{
  if (s)
    cap_jw_string(w, s);
  else
    cap_jw_null(w);
}

void cap_jw_int(struct cap_jw *w, int64_t v)
{
  jw_before(w);
  cap_buf_printf(w->out, "%lld", (long long)v);
}

void cap_jw_double(struct cap_jw *w, double v)
{
  jw_before(w);
  if (!isfinite(v)) {
    cap_buf_puts(w->out, "null");
    return;
  }
  if (v == (double)(long long)v && fabs(v) < 1e15) {
    cap_buf_printf(w->out, "%.1f", v);
    return;
  }
  cap_buf_printf(w->out, "%.17g", v);
}

void cap_jw_bool(struct cap_jw *w, bool v)
{
  jw_before(w);
  cap_buf_puts(w->out, v ? "true" : "false");
}

void cap_jw_null(struct cap_jw *w)
{
  jw_before(w);
  cap_buf_puts(w->out, "null");
}

void cap_jw_node(struct cap_jw *w, const struct cap_node *n)
{
  switch ((enum cap_node_kind)n->kind) {
  case CAP_NODE_NULL: cap_jw_null(w); return;
  case CAP_NODE_BOOL: cap_jw_bool(w, n->u.boolean); return;
  case CAP_NODE_INT: cap_jw_int(w, n->u.num.i); return;
  case CAP_NODE_FLOAT:
    if (n->u.num.raw) {
      jw_before(w);
      cap_buf_puts(w->out, n->u.num.raw);
    } else {
      cap_jw_double(w, n->u.num.f);
    }
    return;
  case CAP_NODE_STRING:
  case CAP_NODE_DATETIME: cap_jw_string_n(w, n->u.str.ptr, n->u.str.len); return;
  case CAP_NODE_ARRAY:
    cap_jw_begin_array(w);
    for (size_t i = 0; i < n->u.arr.len; i++)
      cap_jw_node(w, n->u.arr.items[i]);
    cap_jw_end_array(w);
    return;
  case CAP_NODE_OBJECT:
    cap_jw_begin_object(w);
    for (size_t i = 0; i < n->u.obj.len; i++) {
      jw_key_n(w, n->u.obj.items[i].key, n->u.obj.items[i].keylen);
      cap_jw_node(w, n->u.obj.items[i].value);
    }
    cap_jw_end_object(w);
    return;
  }
}

char *cap_json_canonical(const char *text, size_t len)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  int r = cap_json_parse(doc, text, len, "json", 0, &diags);
  cap_diags_free(&diags);
  char *out = NULL;
  if (r == 0 && doc->root) {
    struct cap_buf b = {0};
    struct cap_jw w;
    cap_jw_init(&w, &b, false);
    cap_jw_node(&w, doc->root);
    out = b.data ? b.data : cap_xstrdup("");
  }
  cap_doc_free(doc);
  return out;
}

/* Skips a JSON string starting at data[i] == '"'; returns the index after
 * its closing quote (len when unterminated). */
static size_t jsonc_skip_string(const char *data, size_t len, size_t i)
{
  for (i++; i < len; i++) {
    if (data[i] == '\\')
      i++;
    else if (data[i] == '"')
      return i + 1;
  }
  return len;
}

static void jsonc_note(size_t *first, size_t at)
{
  if (at < *first)
    *first = at;
}

size_t cap_jsonc_blank(char *data, size_t len)
{
  size_t first = len;
  for (size_t i = 0; i < len;) { /* comments */
    if (data[i] == '"') {
      i = jsonc_skip_string(data, len, i);
    } else if (data[i] == '/' && i + 1 < len && data[i + 1] == '/') {
      jsonc_note(&first, i);
      for (; i < len && data[i] != '\n'; i++)
        data[i] = ' ';
    } else if (data[i] == '/' && i + 1 < len && data[i + 1] == '*') {
      const char *end = memmem(data + i + 2, len - i - 2, "*/", 2);
      if (!end)
        break; /* unterminated: left for the parser to report */
      jsonc_note(&first, i);
      for (size_t stop = (size_t)(end - data) + 2; i < stop; i++)
        if (data[i] != '\n')
          data[i] = ' ';
    } else {
      i++;
    }
  }
  for (size_t i = 0; i < len;) { /* trailing commas */
    if (data[i] == '"') {
      i = jsonc_skip_string(data, len, i);
      continue;
    }
    if (data[i] == ',') {
      size_t j = i + 1;
      while (j < len && (data[j] == ' ' || data[j] == '\t' || data[j] == '\n' || data[j] == '\r'))
        j++;
      if (j < len && (data[j] == '}' || data[j] == ']')) {
        jsonc_note(&first, i);
        data[i] = ' ';
      }
    }
    i++;
  }
  return first;
}

char *cap_json_text(const struct cap_node *n)
{
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  if (n)
    cap_jw_node(&w, n);
  else
    cap_jw_null(&w);
  return cap_buf_steal(&b);
}

/* json (a value as JSON text) written as a value */
static void write_json(struct cap_jw *w, const char *json)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  if (cap_json_parse(doc, json, strlen(json), "the replacement", 4, &d) == 0)
    cap_jw_node(w, doc->root);
  else
    cap_jw_null(w);
  cap_diags_free(&d);
  cap_doc_free(doc);
}

static void write_with(struct cap_jw *w, const struct cap_node *n, const char *const *path,
                       size_t depth, const char *json)
{
  if (!depth) {
    write_json(w, json);
    return;
  }
  if (n->kind != CAP_NODE_OBJECT) {
    cap_jw_node(w, n);
    return;
  }
  cap_jw_begin_object(w);
  for (size_t i = 0; i < n->u.obj.len; i++) {
    const struct cap_member *m = &n->u.obj.items[i];
    cap_jw_key(w, m->key);
    if (strcmp(m->key, path[0]) == 0)
      write_with(w, m->value, path + 1, depth - 1, json);
    else
      cap_jw_node(w, m->value);
  }
  cap_jw_end_object(w);
}

char *cap_json_rewritten(const struct cap_node *n, const char *const *path, size_t depth,
                         const char *json)
{
  struct cap_buf b = {0};
  struct cap_jw w;
  cap_jw_init(&w, &b, false);
  write_with(&w, n, path, depth, json);
  return cap_buf_steal(&b);
}
