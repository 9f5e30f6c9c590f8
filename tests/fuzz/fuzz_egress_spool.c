/* libFuzzer target for a warm server's egress spool file as the state's
 * open reads it (gw_egress_spool_parse, src/gateway/egress_spool.c): what
 * a keeper left in STATE/run/egress, or anything else found there.
 * Whatever the bytes, parsing must stay within them, keep at most
 * GW_EGRESS_BATCH_MAX rows, no count below 0 and no sum past the bounds
 * below 0 (it saturates), and a head it took must name an ID of 24 hex
 * digits and a capability and a user. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/egress_spool.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *in = malloc(size ? size : 1);
  if (!in)
    return 0;
  memcpy(in, data, size);
  struct gw_egress_batch b;
  gw_egress_batch_init(&b);
  char id[25];
  char *capability = NULL, *user = NULL;
  if (gw_egress_spool_parse(in, size, &b, id, &capability, &user)) {
    if (!capability || !user || strlen(id) != 24 || strspn(id, "0123456789abcdef") != 24)
      abort();
    if (b.n > GW_EGRESS_BATCH_MAX || b.over < 0)
      abort();
    for (size_t i = 0; i < b.n; i++)
      if (b.rows[i].count < 0)
        abort();
  }
  free(capability);
  free(user);
  gw_egress_batch_free(&b);
  free(in);
  return 0;
}
