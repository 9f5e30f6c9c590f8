/* Escaping for what the CLI prints for people (cli.h). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/text.h"

/* Text for a terminal: control characters (C0, DEL, C1), bidi controls and
 * bytes that are not UTF-8 escaped, so what a tool or caller wrote cannot
 * move the cursor, recolour or reorder what the operator reads. */
void cli_put_escaped(FILE *f, const char *s, size_t max)
{
  size_t len = strlen(s), n = len > max ? max : len;
  for (size_t i = 0; i < n;) {
    unsigned char ch = (unsigned char)s[i];
    size_t bad = 0;
    if (ch >= 0x80 && !cap_utf8_valid(s + i, n - i > 4 ? 4 : n - i, &bad) && bad == 0) {
      fprintf(f, "\\x%02x", ch);
      i++;
      continue;
    }
    uint32_t cp = ch;
    size_t used = ch < 0x80 ? 1 : cap_utf8_decode(s + i, n - i, &cp);
    if (ch == '\\')
      fputs("\\\\", f);
    else if (ch == '\n')
      fputs("\\n", f);
    else if (ch == '\t')
      fputs("\\t", f);
    else if (cp < 0x20 || cp == 0x7f)
      fprintf(f, "\\x%02x", (unsigned)cp);
    else if ((cp >= 0x80 && cp < 0xa0) || (cp >= 0x202a && cp <= 0x202e) ||
             (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200e || cp == 0x200f || cp == 0x061c)
      fprintf(f, "\\u{%x}", (unsigned)cp);
    else
      fwrite(s + i, 1, used, f);
    i += used ? used : 1;
  }
  if (len > max)
    fputs("...", f);
}
