/* RFC 8785 canonical JSON from a document tree. */
#include "core/jcs.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"

static void write_string(struct cap_buf *out, const char *s, size_t len)
{
  cap_buf_putc(out, '"');
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    switch (c) {
    case '"': cap_buf_puts(out, "\\\""); break;
    case '\\': cap_buf_puts(out, "\\\\"); break;
    case '\b': cap_buf_puts(out, "\\b"); break;
    case '\f': cap_buf_puts(out, "\\f"); break;
    case '\n': cap_buf_puts(out, "\\n"); break;
    case '\r': cap_buf_puts(out, "\\r"); break;
    case '\t': cap_buf_puts(out, "\\t"); break;
    default:
      if (c < 0x20)
        cap_buf_printf(out, "\\u%04x", c);
      else
        cap_buf_putc(out, (char)c);
    }
  }
  cap_buf_putc(out, '"');
}

/* ECMAScript's Number::toString: the shortest digits that read back as v,
 * in plain notation for exponents -7 < e < 21, else d.ddde±x. */
static int write_double(struct cap_buf *out, double v)
{
  if (!isfinite(v))
    return -EINVAL;
  if (v == 0) {
    cap_buf_putc(out, '0');
    return 0;
  }
  char buf[40];
  int prec = 0;
  for (prec = 0; prec < 17; prec++) {
    snprintf(buf, sizeof buf, "%.*e", prec, v);
    if (strtod(buf, NULL) == v)
      break;
  }
  /* buf: [-]d[.ddd]e[+-]xx */
  bool neg = buf[0] == '-';
  char *p = buf + neg, digits[24];
  size_t nd = 0;
  for (; *p && *p != 'e'; p++)
    if (*p != '.')
      digits[nd++] = *p;
  int exp = atoi(p + 1) + 1; /* the position of the decimal point after the digits' first */
  while (nd > 1 && digits[nd - 1] == '0')
    nd--;
  if (neg)
    cap_buf_putc(out, '-');
  if (exp >= (int)nd && exp <= 21) { /* an integer */
    cap_buf_append(out, digits, nd);
    for (int i = (int)nd; i < exp; i++)
      cap_buf_putc(out, '0');
  } else if (exp > 0 && exp <= 21) {
    cap_buf_append(out, digits, (size_t)exp);
    cap_buf_putc(out, '.');
    cap_buf_append(out, digits + exp, nd - (size_t)exp);
  } else if (exp > -6 && exp <= 0) {
    cap_buf_puts(out, "0.");
    for (int i = exp; i < 0; i++)
      cap_buf_putc(out, '0');
    cap_buf_append(out, digits, nd);
  } else {
    cap_buf_putc(out, digits[0]);
    if (nd > 1) {
      cap_buf_putc(out, '.');
      cap_buf_append(out, digits + 1, nd - 1);
    }
    cap_buf_printf(out, "e%c%d", exp - 1 < 0 ? '-' : '+', abs(exp - 1));
  }
  return 0;
}

/* Compares two keys by UTF-16 code units, as RFC 8785 sorts. */
static int utf16_compare(const char *a, size_t alen, const char *b, size_t blen)
{
  size_t i = 0, j = 0;
  while (i < alen && j < blen) {
    uint32_t ca, cb;
    i += cap_utf8_decode(a + i, alen - i, &ca);
    j += cap_utf8_decode(b + j, blen - j, &cb);
    /* code points above the BMP become surrogates (0xD800..), which sort
     * below U+E000..U+FFFF */
    uint32_t ua = ca > 0xffff ? 0xd800 + ((ca - 0x10000) >> 10) : ca;
    uint32_t ub = cb > 0xffff ? 0xd800 + ((cb - 0x10000) >> 10) : cb;
    if (ua != ub)
      return ua < ub ? -1 : 1;
    uint32_t la = ca > 0xffff ? 0xdc00 + ((ca - 0x10000) & 0x3ff) : 0;
    uint32_t lb = cb > 0xffff ? 0xdc00 + ((cb - 0x10000) & 0x3ff) : 0;
    if (la != lb)
      return la < lb ? -1 : 1;
  }
  return i < alen ? 1 : j < blen ? -1 : 0;
}

static int member_compare(const void *x, const void *y)
{
  const struct cap_member *a = *(const struct cap_member *const *)x;
  const struct cap_member *b = *(const struct cap_member *const *)y;
  return utf16_compare(a->key, a->keylen, b->key, b->keylen);
}

static int write_object(struct cap_buf *out, const struct cap_node *n)
{
  size_t len = n->u.obj.len;
  const struct cap_member **sorted = calloc(len ? len : 1, sizeof *sorted);
  if (!sorted)
    return -ENOMEM;
  for (size_t i = 0; i < len; i++)
    sorted[i] = &n->u.obj.items[i];
  qsort(sorted, len, sizeof *sorted, member_compare);
  int r = 0;
  cap_buf_putc(out, '{');
  for (size_t i = 0; r == 0 && i < len; i++) {
    if (i && member_compare(&sorted[i - 1], &sorted[i]) == 0)
      r = -EINVAL; /* a repeated key has no canonical form */
    if (i)
      cap_buf_putc(out, ',');
    write_string(out, sorted[i]->key, sorted[i]->keylen);
    cap_buf_putc(out, ':');
    if (r == 0)
      r = cap_jcs_write(out, sorted[i]->value);
  }
  cap_buf_putc(out, '}');
  free(sorted);
  return r;
}

int cap_jcs_write(struct cap_buf *out, const struct cap_node *n)
{
  switch ((enum cap_node_kind)n->kind) {
  case CAP_NODE_NULL: cap_buf_puts(out, "null"); return 0;
  case CAP_NODE_BOOL: cap_buf_puts(out, n->u.boolean ? "true" : "false"); return 0;
  case CAP_NODE_INT: cap_buf_printf(out, "%lld", (long long)n->u.num.i); return 0;
  case CAP_NODE_FLOAT: return write_double(out, n->u.num.f);
  case CAP_NODE_STRING: write_string(out, n->u.str.ptr, n->u.str.len); return 0;
  case CAP_NODE_ARRAY: {
    int r = 0;
    cap_buf_putc(out, '[');
    for (size_t i = 0; r == 0 && i < n->u.arr.len; i++) {
      if (i)
        cap_buf_putc(out, ',');
      r = cap_jcs_write(out, n->u.arr.items[i]);
    }
    cap_buf_putc(out, ']');
    return r;
  }
  case CAP_NODE_OBJECT: return write_object(out, n);
  case CAP_NODE_DATETIME: break;
  }
  return -EINVAL;
}
