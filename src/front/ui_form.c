/* A form body (application/x-www-form-urlencoded) read into name/value
 * pairs (front/ui.h). */
#include <stdbool.h>
#include <string.h>

#include "core/buf.h"
#include "core/text.h"
#include "front/ui.h"

/* s[0..len) decoded into out: '+' a space, %XX a byte (a '%' not
 * followed by two hex digits stays as it is). False when it decodes to a
 * NUL, which no field of the dashboard's forms holds. */
static bool decode(const char *s, size_t len, struct cap_buf *out)
{
  for (size_t i = 0; i < len; i++) {
    int hi, lo;
    char c = s[i];
    if (c == '+')
      c = ' ';
    else if (c == '%' && i + 2 < len && (hi = cap_hex_digit((unsigned char)s[i + 1])) >= 0 &&
             (lo = cap_hex_digit((unsigned char)s[i + 2])) >= 0) {
      c = (char)(hi << 4 | lo);
      i += 2;
    }
    if (c == '\0')
      return false;
    cap_buf_putc(out, c);
  }
  cap_buf_putc(out, '\0');
  return true;
}

size_t ui_form_parse(const char *body, size_t len, ui_form_fn fn, void *arg)
{
  size_t n = 0;
  const char *p = body, *end = body + len;
  while (p < end && n < UI_MAX_FIELDS) {
    const char *amp = memchr(p, '&', (size_t)(end - p));
    const char *stop = amp ? amp : end, *eq = memchr(p, '=', (size_t)(stop - p));
    struct cap_buf k = {0}, v = {0};
    if (eq && eq > p && decode(p, (size_t)(eq - p), &k) &&
        decode(eq + 1, (size_t)(stop - eq - 1), &v)) {
      fn(arg, k.data, v.data ? v.data : "");
      n++;
    }
    if (v.data) /* a token, perhaps */
      explicit_bzero(v.data, v.len);
    cap_buf_free(&k);
    cap_buf_free(&v);
    p = stop + 1;
  }
  return n;
}
