/* ECMA-262 regular expressions on top of PCRE2. JSON Schema patterns are
 * ECMA-262 ("u" flag semantics, no flags, unanchored). PCRE2 in UTF mode
 * without UCP already gives ECMA's ASCII-only \d, \w and \b; what differs is
 * rewritten here: \s and "." use ECMA's sets, \uXXXX (and surrogate pairs)
 * and \u{...} become \x{...}, \cX and \v are control characters, "$" only
 * matches at the very end, and escapes ECMA does not define are errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"
#include "jsonschema/internal.h"

#define ECMA_SPACES                                                                                \
  "\\t\\n\\x{0b}\\f\\r \\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}"             \
  "\\x{205f}\\x{3000}\\x{feff}"

bool js_hexn(const char *s, size_t avail, size_t n, uint32_t *out)
{
  if (avail < n)
    return false;
  uint32_t v = 0;
  for (size_t i = 0; i < n; i++) {
    int h = cap_hex_digit((unsigned char)s[i]);
    if (h < 0)
      return false;
    v = v * 16 + (uint32_t)h;
  }
  *out = v;
  return true;
}

/* ECMA-262 spells general categories out ("Letter") and allows
 * "General_Category=", "gc=", "Script=", "sc=" and "Script_Extensions="
 * prefixes; PCRE2 10.42 knows the short names. */
static const struct {
  const char *long_name, *short_name;
} categories[] = {
    {"Letter", "L"},
    {"Cased_Letter", "L&"},
    {"Uppercase_Letter", "Lu"},
    {"Lowercase_Letter", "Ll"},
    {"Titlecase_Letter", "Lt"},
    {"Modifier_Letter", "Lm"},
    {"Other_Letter", "Lo"},
    {"Mark", "M"},
    {"Combining_Mark", "M"},
    {"Nonspacing_Mark", "Mn"},
    {"Spacing_Mark", "Mc"},
    {"Enclosing_Mark", "Me"},
    {"Number", "N"},
    {"Decimal_Number", "Nd"},
    {"digit", "Nd"},
    {"Letter_Number", "Nl"},
    {"Other_Number", "No"},
    {"Punctuation", "P"},
    {"punct", "P"},
    {"Connector_Punctuation", "Pc"},
    {"Dash_Punctuation", "Pd"},
    {"Open_Punctuation", "Ps"},
    {"Close_Punctuation", "Pe"},
    {"Initial_Punctuation", "Pi"},
    {"Final_Punctuation", "Pf"},
    {"Other_Punctuation", "Po"},
    {"Symbol", "S"},
    {"Math_Symbol", "Sm"},
    {"Currency_Symbol", "Sc"},
    {"Modifier_Symbol", "Sk"},
    {"Other_Symbol", "So"},
    {"Separator", "Z"},
    {"Space_Separator", "Zs"},
    {"Line_Separator", "Zl"},
    {"Paragraph_Separator", "Zp"},
    {"Other", "C"},
    {"Control", "Cc"},
    {"cntrl", "Cc"},
    {"Format", "Cf"},
    {"Surrogate", "Cs"},
    {"Private_Use", "Co"},
    {"Unassigned", "Cn"},
};

static size_t translate_property(const char *src, size_t len, size_t i, struct cap_buf *out,
                                 char *err, size_t errlen)
{
  char c = src[i + 1];
  if (i + 2 >= len || src[i + 2] != '{') {
    snprintf(err, errlen, "\\%c must be followed by {Property}", c);
    return 0;
  }
  const char *close = memchr(src + i + 3, '}', len - i - 3);
  if (!close) {
    snprintf(err, errlen, "unterminated \\%c{...}", c);
    return 0;
  }
  const char *name = src + i + 3;
  size_t nlen = (size_t)(close - name);
  const char *eq = memchr(name, '=', nlen);
  if (eq) {
    nlen -= (size_t)(eq + 1 - name);
    name = eq + 1;
  }
  cap_buf_putc(out, '\\');
  cap_buf_putc(out, c);
  cap_buf_putc(out, '{');
  bool mapped = false;
  for (size_t k = 0; k < sizeof(categories) / sizeof(categories[0]); k++) {
    if (strlen(categories[k].long_name) == nlen &&
        memcmp(categories[k].long_name, name, nlen) == 0) {
      cap_buf_puts(out, categories[k].short_name);
      mapped = true;
      break;
    }
  }
  if (!mapped)
    cap_buf_append(out, name, nlen);
  cap_buf_putc(out, '}');
  return (size_t)(close + 1 - (src + i));
}

/* \uXXXX (with a following low surrogate), \u{X...}: as \x{...}; returns
 * bytes consumed, or 0 with err set. */
static size_t translate_unicode_escape(const char *src, size_t len, size_t i, struct cap_buf *out,
                                       char *err, size_t errlen)
{
  uint32_t cp = 0;
  size_t used = 6;
  if (i + 2 < len && src[i + 2] == '{') {
    size_t j = i + 3;
    while (j < len && cap_hex_digit((unsigned char)src[j]) >= 0 && cp <= 0x10FFFF)
      cp = cp * 16 + (uint32_t)cap_hex_digit((unsigned char)src[j++]);
    if (j == i + 3 || j >= len || src[j] != '}' || cp > 0x10FFFF)
      goto bad;
    cap_buf_printf(out, "\\x{%x}", cp);
    return j + 1 - i;
  }
  if (!js_hexn(src + i + 2, len - i - 2, 4, &cp))
    goto bad;
  if (cp >= 0xD800 && cp <= 0xDBFF && i + 12 <= len && src[i + 6] == '\\' && src[i + 7] == 'u') {
    uint32_t lo;
    if (js_hexn(src + i + 8, len - i - 8, 4, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      used = 12;
    }
  }
  if (cp >= 0xD800 && cp <= 0xDFFF) {
    snprintf(err, errlen, "lone surrogate \\u%04X cannot match UTF-8 text", cp);
    return 0;
  }
  cap_buf_printf(out, "\\x{%x}", cp);
  return used;
bad:
  snprintf(err, errlen, "\\u is not a valid escape in an ECMA-262 regular expression");
  return 0;
}

/* Translates the escape at src[i] == '\\'; returns bytes consumed or 0 on
 * error. */
static size_t translate_escape(const char *src, size_t len, size_t i, bool in_class,
                               struct cap_buf *out, char *err, size_t errlen)
{
  if (i + 1 >= len) {
    snprintf(err, errlen, "pattern ends with a lone backslash");
    return 0;
  }
  char c = src[i + 1];
  uint32_t cp;
  switch (c) {
  case 'd':
  case 'D':
  case 'w':
  case 'W':
  case 'f':
  case 'n':
  case 'r':
  case 't':
    cap_buf_putc(out, '\\');
    cap_buf_putc(out, c);
    return 2;
  case 'b':
  case 'B':
    if (in_class) {
      if (c == 'B')
        goto bad;
      cap_buf_puts(out, "\\x{08}");
    } else {
      cap_buf_putc(out, '\\');
      cap_buf_putc(out, c);
    }
    return 2;
  case 's': cap_buf_puts(out, in_class ? ECMA_SPACES : "[" ECMA_SPACES "]"); return 2;
  case 'S': cap_buf_puts(out, in_class ? "\\S" : "[^" ECMA_SPACES "]"); return 2;
  case 'v': cap_buf_puts(out, "\\x{0b}"); return 2;
  case '0':
    if (i + 2 < len && src[i + 2] >= '0' && src[i + 2] <= '9')
      goto bad;
    cap_buf_puts(out, "\\x{00}");
    return 2;
  case 'c':
    if (i + 2 < len &&
        ((src[i + 2] >= 'a' && src[i + 2] <= 'z') || (src[i + 2] >= 'A' && src[i + 2] <= 'Z'))) {
      cap_buf_printf(out, "\\x{%02x}", (unsigned)(src[i + 2] % 32));
      return 3;
    }
    goto bad;
  case 'x':
    if (!js_hexn(src + i + 2, len - i - 2, 2, &cp))
      goto bad;
    cap_buf_printf(out, "\\x{%x}", cp);
    return 4;
  case 'u': return translate_unicode_escape(src, len, i, out, err, errlen);
  case 'p':
  case 'P': return translate_property(src, len, i, out, err, errlen);
  case 'k':
    cap_buf_putc(out, '\\');
    cap_buf_putc(out, c);
    return 2;
  default:
    if (c >= '1' && c <= '9' && !in_class) {
      cap_buf_putc(out, '\\');
      cap_buf_putc(out, c);
      return 2;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
        (unsigned char)c >= 0x80)
      goto bad;
    if (c == '-' && !in_class)
      goto bad;
    /* syntax characters and "/": escape kept */
    cap_buf_putc(out, '\\');
    cap_buf_putc(out, c);
    return 2;
  }
bad:
  snprintf(err, errlen, "\\%c is not a valid escape in an ECMA-262 regular expression",
           (c >= 0x20 && c < 0x7f) ? c : '?');
  return 0;
}

/* At src[i] == '(': "(?" must open one of ECMA's groups: (?: (?= (?! (?<=
 * (?<! (?<name> -- not PCRE's others. */
static bool ecma_group_ok(const char *src, size_t len, size_t i, char *err, size_t errlen)
{
  if (i + 1 >= len || src[i + 1] != '?')
    return true;
  const char *g = src + i + 2;
  size_t rest = len - i - 2;
  bool ok = rest >= 1 && (g[0] == ':' || g[0] == '=' || g[0] == '!');
  if (!ok && rest >= 2 && g[0] == '<')
    ok = g[1] == '=' || g[1] == '!' || (g[1] >= 'a' && g[1] <= 'z') ||
         (g[1] >= 'A' && g[1] <= 'Z') || g[1] == '_' || g[1] == '$';
  if (!ok)
    snprintf(err, errlen, "\"(?%c\" is not an ECMA-262 group", rest ? g[0] : ' ');
  return ok;
}

pcre2_code *js_regex_compile(const char *src, size_t len, char *err, size_t errlen)
{
  struct cap_buf out = {0};
  bool in_class = false;
  size_t i = 0;
  cap_buf_puts(&out, "");
  while (i < len) {
    char c = src[i];
    if (c == '\\') {
      size_t n = translate_escape(src, len, i, in_class, &out, err, errlen);
      if (!n) {
        cap_buf_free(&out);
        return NULL;
      }
      i += n;
      continue;
    }
    if (in_class) {
      if (c == ']')
        in_class = false;
      if (c == '[') {
        cap_buf_puts(&out, "\\[");
        i++;
        continue;
      }
      cap_buf_putc(&out, c);
      i++;
      continue;
    }
    if (c == '[') {
      in_class = true;
      cap_buf_putc(&out, c);
      i++;
      /* a leading "]" closes the class in ECMA ("[]" is empty), but is a
       * literal in PCRE2; PCRE2_ALLOW_EMPTY_CLASS gives ECMA's reading */
      if (i < len && src[i] == '^') {
        cap_buf_putc(&out, '^');
        i++;
      }
      if (i < len && src[i] == ']') {
        cap_buf_putc(&out, ']');
        in_class = false;
        i++;
      }
      continue;
    }
    if (c == '(' && !ecma_group_ok(src, len, i, err, errlen)) {
      cap_buf_free(&out);
      return NULL;
    }
    if (c == '.') {
      cap_buf_puts(&out, "[^\\n\\r\\x{2028}\\x{2029}]");
      i++;
      continue;
    }
    cap_buf_putc(&out, c);
    i++;
  }
  int code;
  PCRE2_SIZE off;
  pcre2_code *re = pcre2_compile((PCRE2_SPTR)out.data, out.len,
                                 PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_ALLOW_EMPTY_CLASS |
                                     PCRE2_MATCH_UNSET_BACKREF | PCRE2_NEVER_BACKSLASH_C,
                                 &code, &off, NULL);
  cap_buf_free(&out);
  if (!re) {
    PCRE2_UCHAR msg[160];
    pcre2_get_error_message(code, msg, sizeof(msg));
    snprintf(err, errlen, "invalid regular expression: %s", (const char *)msg);
    return NULL;
  }
  pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
  return re;
}
