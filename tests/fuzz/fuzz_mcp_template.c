/* libFuzzer target for the resource template matcher (src/front/
 * mcp_template.c): the input is a template a third-party MCP server
 * listed, a newline, and a URI a client asks to read. Whatever the bytes,
 * matching must not crash or leak, and a template without expressions
 * (no brace) of at most 1,024 bytes stands for itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "front/mcp_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (memchr(data, 0, size))
    return 0; /* JSON strings reach the matcher without NULs */
  char *text = malloc(size + 1);
  memcpy(text, data, size);
  text[size] = 0;
  char *nl = strchr(text, '\n');
  const char *uri = "";
  if (nl) {
    *nl = 0;
    uri = nl + 1;
  }
  (void)mcp_template_match(text, uri);
  if (!strpbrk(text, "{}") && strlen(text) <= 1024 && !mcp_template_match(text, text))
    abort();
  free(text);
  return 0;
}
