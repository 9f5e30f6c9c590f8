/* The one escaper for terminals (escape.h). */
#include "core/escape.h"

#include <stdbool.h>
#include <string.h>

static bool is_bidi_control(uint32_t cp)
{
  return cp == 0x061c || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
         (cp >= 0x2060 && cp <= 0x2069) || cp == 0xfeff;
}

size_t cap_escape_scan(const char *str, size_t len, uint32_t *ret_cp, enum cap_text_kind *kind)
{
  const unsigned char *s = (const unsigned char *)str;
  unsigned char c = s[0];
  *ret_cp = c;
  if (c < 0x80) {
    *kind = c < 0x20 || c == 0x7f ? CAP_TEXT_CONTROL : CAP_TEXT_PLAIN;
    return 1;
  }
  size_t need = c >= 0xc2 && c <= 0xdf   ? 2
                : c >= 0xe0 && c <= 0xef ? 3
                : c >= 0xf0 && c <= 0xf4 ? 4
                                         : 0;
  /* the second byte's range is what rules out overlongs (E0, F0),
   * surrogates (ED) and code points above U+10FFFF (F4) */
  unsigned char lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
  unsigned char hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
  uint32_t cp = c & (0x7fu >> need);
  size_t i = 1;
  for (; i < need && i < len; i++, lo = 0x80, hi = 0xbf) {
    if (s[i] < lo || s[i] > hi)
      break;
    cp = cp << 6 | (s[i] & 0x3fu);
  }
  if (!need || (i < need && i < len)) {
    *kind = CAP_TEXT_INVALID;
    return 1;
  }
  if (i < need) {
    *kind = CAP_TEXT_CUT;
    return len;
  }
  *ret_cp = cp;
  *kind = cp < 0xa0 ? CAP_TEXT_CONTROL : is_bidi_control(cp) ? CAP_TEXT_BIDI : CAP_TEXT_PLAIN;
  return need;
}

/* Appends the character that starts s[0..len) escaped; output mode lets
 * newline, tab and backslash pass. Returns the bytes it used (a sequence
 * cut short here is malformed: one byte). */
static size_t escape_one(struct cap_buf *out, const char *s, size_t len, bool output)
{
  uint32_t cp;
  enum cap_text_kind kind;
  size_t u = cap_escape_scan(s, len, &cp, &kind);
  unsigned char c = (unsigned char)s[0];
  if (kind == CAP_TEXT_INVALID || kind == CAP_TEXT_CUT) {
    cap_buf_printf(out, "\\x%02x", c);
    return 1;
  }
  if (output && (c == '\n' || c == '\t' || c == '\\'))
    cap_buf_putc(out, (char)c);
  else if (c == '\\')
    cap_buf_puts(out, "\\\\");
  else if (!output && (c == '\n' || c == '\r' || c == '\t'))
    cap_buf_puts(out, c == '\n' ? "\\n" : c == '\r' ? "\\r" : "\\t");
  else if (kind == CAP_TEXT_CONTROL && cp < 0x80)
    cap_buf_printf(out, "\\x%02x", c);
  else if (kind != CAP_TEXT_PLAIN)
    cap_buf_printf(out, "\\u{%04x}", (unsigned)cp);
  else
    cap_buf_append(out, s, u);
  return u;
}

/* Escapes s[0..len); returns where a sequence cut at the end starts when
 * hold is set (len when there is none). */
static size_t escape_span(struct cap_buf *out, const char *s, size_t len, bool output, bool hold)
{
  size_t i = 0;
  while (i < len) {
    size_t j = i; /* a run of printable ASCII in one append */
    while (j < len && s[j] >= 0x20 && s[j] < 0x7f && s[j] != '\\')
      j++;
    cap_buf_append(out, s + i, j - i);
    if ((i = j) == len)
      break;
    uint32_t cp;
    enum cap_text_kind kind;
    if (hold && cap_escape_scan(s + i, len - i, &cp, &kind) && kind == CAP_TEXT_CUT)
      return i;
    i += escape_one(out, s + i, len - i, output);
  }
  return len;
}

void cap_escape_text(struct cap_buf *out, const char *s, size_t len)
{
  escape_span(out, s, len, false, false);
}

void cap_escape_fput(FILE *f, const char *s, size_t max)
{
  size_t len = strlen(s), n = len;
  if (n > max) { /* not inside a character: back to its first byte */
    n = max;
    while (n > 0 && max - n < 3 && ((unsigned char)s[n] & 0xc0) == 0x80)
      n--;
  }
  struct cap_buf b = {0};
  cap_escape_text(&b, s, n);
  if (n < len)
    cap_buf_puts(&b, "...");
  if (b.len)
    fwrite(b.data, 1, b.len, f);
  cap_buf_free(&b);
}

void cap_escape_output(struct cap_escape_stream *st, struct cap_buf *out, const char *in, size_t n)
{
  while (st->n_carry) { /* what the last piece cut, completed from this one */
    char seq[8];
    size_t take = n < 4 - st->n_carry ? n : 4 - st->n_carry;
    memcpy(seq, st->carry, st->n_carry);
    memcpy(seq + st->n_carry, in, take);
    uint32_t cp;
    enum cap_text_kind kind;
    size_t len = st->n_carry + take;
    if (cap_escape_scan(seq, len, &cp, &kind) && kind == CAP_TEXT_CUT && take == n) {
      memcpy(st->carry, seq, len);
      st->n_carry = len;
      return;
    }
    size_t used = escape_one(out, seq, len, true);
    if (used < st->n_carry) { /* malformed: its other bytes are looked at again */
      memmove(st->carry, st->carry + used, st->n_carry - used);
      st->n_carry -= used;
      continue;
    }
    in += used - st->n_carry;
    n -= used - st->n_carry;
    st->n_carry = 0;
  }
  size_t cut = escape_span(out, in, n, true, true);
  memcpy(st->carry, in + cut, n - cut);
  st->n_carry = n - cut;
}

void cap_escape_output_end(struct cap_escape_stream *st, struct cap_buf *out)
{
  escape_span(out, st->carry, st->n_carry, true, false);
  st->n_carry = 0;
}

void cap_escape_html(struct cap_buf *out, const char *s, size_t len)
{
  static const char *const refs[128] = {
      ['&'] = "&amp;",  ['<'] = "&lt;", ['>'] = "&gt;", ['"'] = "&quot;",
      ['\''] = "&#39;", ['\n'] = "\n",  ['\t'] = "\t"};
  size_t i = 0;
  while (i < len) {
    size_t j = i; /* a run of plain ASCII in one append */
    while (j < len && s[j] >= 0x20 && s[j] < 0x7f && !refs[(unsigned char)s[j]])
      j++;
    cap_buf_append(out, s + i, j - i);
    if ((i = j) == len)
      break;
    unsigned char c = (unsigned char)s[i];
    if (c < 128 && refs[c]) {
      cap_buf_puts(out, refs[c]);
      i++;
    } else {
      i += escape_one(out, s + i, len - i, true); /* a backslash stays single */
    }
  }
}

char *cap_shell_quote(const char *s)
{
  static const char safe[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./+,:@%=-";
  if (*s && s[strspn(s, safe)] == '\0')
    return cap_xstrdup(s);
  struct cap_buf b = {0};
  cap_buf_putc(&b, '\'');
  for (; *s; s++) {
    if (*s == '\'')
      cap_buf_puts(&b, "'\\''");
    else
      cap_buf_putc(&b, *s);
  }
  cap_buf_putc(&b, '\'');
  return b.data;
}
