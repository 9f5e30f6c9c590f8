/* libFuzzer target for the artifact store's records (src/gateway/
 * artifact_store.c, STATE/run/artifacts/USER/ID.meta): whatever the
 * bytes, parsing must not crash or leak; a record it accepts has every
 * string, writes back, and reads back (its numbers the same). The arguments'
 * attachments are counted from the same bytes as JSON. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/diag.h"
#include "core/json.h"
#include "core/node.h"
#include "gateway/artifact_store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct gw_artifact_meta m = {.id = GW_ARTIFACT_ID_PREFIX "0123456789abcdef0123456789abcdef"};
  if (gw_artifact_meta_parse((const char *)data, size, &m)) {
    if (!m.user || !m.filename || !m.mime_type || !m.origin)
      abort();
    char *text = gw_artifact_meta_format(&m);
    struct gw_artifact_meta back = {0};
    memcpy(back.id, m.id, sizeof back.id);
    if (!gw_artifact_meta_parse(text, strlen(text), &back) || back.size != m.size ||
        back.created != m.created || !back.source_id != !m.source_id)
      abort();
    free(text);
    gw_artifact_meta_free(&back);
  }
  gw_artifact_meta_free(&m);
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags diags = {0};
  if (cap_json_parse(doc, (const char *)data, size, "args", 0, &diags) == 0)
    (void)gw_artifact_refs(doc->root);
  cap_diags_free(&diags);
  cap_doc_free(doc);
  char id[GW_ARTIFACT_ID_LEN + 1];
  size_t n = size < GW_ARTIFACT_ID_LEN ? size : GW_ARTIFACT_ID_LEN;
  memcpy(id, data, n);
  id[n] = '\0';
  if (gw_artifact_id_valid(id) && strlen(id) != GW_ARTIFACT_ID_LEN)
    abort();
  return 0;
}
