/* libFuzzer target for a Selu capability's discovery answer
 * (gw_tools_parse): the bytes a dynamic capability's list_tools returned,
 * which capsule must treat as hostile. Whatever they are, parsing either
 * fails with a message or yields tools that each have a name, a compiled
 * validator and a policy, and frees cleanly. */
#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "gateway/selu.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct gw_tools tools;
  struct cap_error err = {0};
  if (gw_tools_parse((const char *)data, size, "answer", &tools, &err) < 0) {
    if (!err.message)
      abort(); /* a refusal always says why */
    cap_error_clear(&err);
    return 0;
  }
  for (size_t i = 0; i < tools.n; i++)
    if (!tools.tools[i].name || !tools.tools[i].validator ||
        tools.tools[i].policy > CAP_POLICY_BLOCK)
      abort();
  gw_tools_free(&tools);
  return 0;
}
