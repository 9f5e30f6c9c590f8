/* libFuzzer target for the egress batch's wire form
 * (gw_egress_batch_decode, src/gateway/egress_store.c): what a run apart
 * sends back with its result and a warm instance's keeper at a lease's
 * end. Whatever the bytes, decoding must stay within them, keep at most
 * GW_EGRESS_BATCH_MAX rows, and what it kept must encode and decode again
 * to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "gateway/egress_store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *in = malloc(size ? size : 1);
  if (!in)
    return 0;
  memcpy(in, data, size);
  struct gw_egress_batch b, again;
  gw_egress_batch_init(&b);
  gw_egress_batch_init(&again);
  const char *p = in;
  bool ok = gw_egress_batch_decode(&b, &p, in + size);
  if (p < in || p > in + size || b.n > GW_EGRESS_BATCH_MAX)
    abort();
  struct cap_buf one = {0}, two = {0};
  gw_egress_batch_encode(&b, &one);
  const char *q = one.data ? one.data : "";
  if (!gw_egress_batch_decode(&again, &q, q + one.len) || q != (one.data ? one.data : "") + one.len)
    abort(); /* what was kept is well formed */
  gw_egress_batch_encode(&again, &two);
  if (one.len != two.len || (one.len && memcmp(one.data, two.data, one.len) != 0))
    abort();
  (void)ok;
  cap_buf_free(&one);
  cap_buf_free(&two);
  gw_egress_batch_free(&b);
  gw_egress_batch_free(&again);
  free(in);
  return 0;
}
