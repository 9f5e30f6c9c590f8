/* libFuzzer target for the ClientHello reader of the transparent path
 * (src/net/sni.c): the input is what a tool sends first on a connection to
 * a synthetic address. Whatever the bytes, the reader must not read out of
 * bounds, must ask for more only while the first record is incomplete,
 * and a name it returns must be lower case host-name bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/sni.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char name[SNI_NAME_MAX];
  enum sni_result r = sni_parse(data, size, name);
  if (r == SNI_NEED_MORE) {
    if (size >= 5 && size >= 5 + ((size_t)data[3] << 8 | data[4]))
      abort();
    return 0;
  }
  size_t n = strlen(name);
  if (r != SNI_FOUND) {
    if (n)
      abort();
    return 0;
  }
  if (n == 0 || n >= SNI_NAME_MAX || name[n - 1] == '.')
    abort();
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
      abort();
  }
  return 0;
}
