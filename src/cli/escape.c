/* Escaping for what the CLI prints for people (cli.h). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/text.h"

void cli_put_escaped(FILE *f, const char *s, size_t max)
{
  struct cap_buf b = {0};
  cap_text_escape(&b, s, strlen(s), max);
  if (b.len)
    fwrite(b.data, 1, b.len, f);
  cap_buf_free(&b);
}
