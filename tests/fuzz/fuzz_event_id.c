/* libFuzzer target for the SSE event ids of serve's resumable streams
 * (stream_parse_event_id, what a client sends as Last-Event-ID): any
 * text is refused or read as one stream number and one sequence number,
 * and what is read writes back (stream_event_id) as the same text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "front/serve_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *s = cap_xstrndup((const char *)data, size); /* up to the first NUL, as a header value */
  unsigned number;
  uint64_t seq;
  if (stream_parse_event_id(s, &number, &seq) == 0) {
    char again[STREAM_ID_MAX];
    stream_event_id(again, number, seq);
    if (strcmp(again, s) != 0)
      abort();
  }
  free(s);
  return 0;
}
