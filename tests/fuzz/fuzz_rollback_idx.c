/* libFuzzer target for a rollback pack's index (rb_pack_index_parse,
 * src/sandbox/rollback_pack.c): whatever the file holds (a torn write, a
 * foreign line), every entry kept has a 64-digit lower-case hex name and
 * a range that does not wrap, and lookups by name find entries after the
 * sort rb_packs_load applies. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/rollback_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int by_hex(const void *a, const void *b)
{
  return strcmp(((const struct rb_pack_ref *)a)->hex, ((const struct rb_pack_ref *)b)->hex);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct rb_packs p = {0};
  rb_pack_index_parse(&p, 0, (const char *)data, size);
  for (size_t i = 0; i < p.len; i++) {
    const struct rb_pack_ref *r = &p.v[i];
    if (strlen(r->hex) != 64 || strspn(r->hex, "0123456789abcdef") != 64 ||
        r->off > UINT64_MAX - r->len || r->pack != 0)
      abort();
  }
  if (p.len)
    qsort(p.v, p.len, sizeof *p.v, by_hex);
  for (size_t i = 0; i < p.len; i++)
    if (!rb_packs_find(&p, p.v[i].hex))
      abort();
  rb_packs_free(&p);
  return 0;
}
