/* libFuzzer target for the names of Selu workspaces and caches
 * (gw_volume_encode, gw_volume_decode): a user or session id, whatever a
 * caller typed, becomes one path component under STATE/volumes, never "."
 * or ".." nor holding '/', and reads back as itself; a directory name
 * found there that the encoder did not make decodes to NULL or to a
 * string that encodes back to a name. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "gateway/volumes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *s = cap_xstrndup((const char *)data, size); /* up to the first NUL, as a C string */
  char *enc = gw_volume_encode(s);
  if (!*enc || strchr(enc, '/') || strcmp(enc, ".") == 0 || strcmp(enc, "..") == 0)
    abort();
  char *dec = gw_volume_decode(enc);
  if (!dec || strcmp(dec, s) != 0)
    abort();
  free(dec);
  dec = gw_volume_decode(s); /* s as a name found on disk */
  if (dec) {
    char *again = gw_volume_encode(dec);
    if (strchr(again, '/'))
      abort();
    free(again);
    free(dec);
  }
  free(enc);
  free(s);
  return 0;
}
