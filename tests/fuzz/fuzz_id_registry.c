/* libFuzzer target for the host's id-range registry (/var/lib/capsule/
 * id-ranges, gateway/id_range.c): any text, lines of any length, NUL
 * bytes, format markers and lines capsule cannot read; every line it
 * reads must read the same once written back (a rewrite never changes a
 * line it keeps), and a key as the registry writes it is one word that
 * reads back as itself. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "gateway/state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  size_t lines, foreign;
  unsigned format;
  if (gw_id_registry_scan((const char *)data, size, &lines, &format, &foreign) == -EPROTO)
    abort();
  if (foreign > lines)
    abort();
  return 0;
}
