/* libFuzzer target for the resource template matcher (src/front/
 * mcp_template.c): the input is a template a third-party MCP server
 * listed, a newline, and a URI a client asks to read. Whatever the bytes,
 * matching must not crash or leak, a template without expressions (no
 * brace) of at most 256 bytes stands for itself, and a longer one
 * matches nothing (mcp_template.c's MCP_TEMPLATE_MAX). */
#include <stdbool.h>
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
  bool fits = mcp_template_match(text, uri);
  size_t len = strlen(text);
  if ((len > 256 && fits) ||
      (!strpbrk(text, "{}") && len <= 256 && !mcp_template_match(text, text)))
    abort();
  free(text);
  return 0;
}
