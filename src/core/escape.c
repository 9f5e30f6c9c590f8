#include "core/escape.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/text.h"

static bool is_bidi_control(uint32_t cp)
{
  return (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* Length of the valid UTF-8 sequence at s, or 0. */
static size_t utf8_sequence(const char *s, size_t len)
{
  unsigned char c = (unsigned char)s[0];
  size_t n = c < 0x80             ? 1
             : (c & 0xe0) == 0xc0 ? 2
             : (c & 0xf0) == 0xe0 ? 3
             : (c & 0xf8) == 0xf0 ? 4
                                  : 0;
  size_t bad;
  return n && n <= len && cap_utf8_valid(s, n, &bad) ? n : 0;
}

void cap_escape_text(struct cap_buf *out, const char *s, size_t len)
{
  for (size_t i = 0; i < len;) {
    unsigned char c = (unsigned char)s[i];
    size_t n = utf8_sequence(s + i, len - i);
    uint32_t cp = 0;
    if (n)
      cap_utf8_decode(s + i, n, &cp);
    if (c == '\\')
      cap_buf_puts(out, "\\\\");
    else if (c == '\n')
      cap_buf_puts(out, "\\n");
    else if (c == '\r')
      cap_buf_puts(out, "\\r");
    else if (c == '\t')
      cap_buf_puts(out, "\\t");
    else if (!n || cp < 0x20 || cp == 0x7f) {
      cap_buf_printf(out, "\\x%02x", c);
      n = 1;
    } else if ((cp >= 0x80 && cp < 0xa0) || is_bidi_control(cp))
      cap_buf_printf(out, "\\u{%04x}", (unsigned)cp);
    else
      cap_buf_append(out, s + i, n);
    i += n ? n : 1;
  }
}

char *cap_escape_str(const char *s)
{
  struct cap_buf b = {0};
  cap_escape_text(&b, s, strlen(s));
  return cap_buf_steal(&b);
}
