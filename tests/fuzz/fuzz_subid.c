/* libFuzzer target for a line of /etc/subuid or /etc/subgid
 * (cap_subid_line: serve's loopback owners, the id ranges' taken ids): any
 * bytes are refused or read as a non-empty name without a NUL and a range
 * of at least one id that ends at or before 2^32. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/subid.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  size_t name_len;
  uint64_t start, count;
  if (cap_subid_line((const char *)data, size, &name_len, &start, &count) < 0)
    return 0;
  if (name_len == 0 || name_len >= size || memchr(data, '\0', name_len) || data[name_len] != ':' ||
      count == 0 || start + count > UINT32_MAX + 1ull)
    abort();
  return 0;
}
