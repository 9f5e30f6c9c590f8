/* libFuzzer target: one manifest format's whole front end (parser, checks,
 * lowering, JSON emission) on arbitrary bytes. Built once per format with
 * FUZZ_FORMAT set to an enum cap_format value. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "manifest/load.h"

#ifndef FUZZ_FORMAT
#error "define FUZZ_FORMAT"
#endif

static const char *const names[] = {"manifest.yaml", "agent.toml", "manifest.json",
                                    "capability.json", "profile.jsonc"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct cap_diags diags = {0};
  struct cap_spec *spec = NULL;
  if (cap_manifest_load_buffer((const char *)data, size, names[FUZZ_FORMAT], FUZZ_FORMAT,
                               "/fuzz/weather", &spec, &diags) == 0) {
    free(cap_spec_to_json(spec, true));
    cap_spec_free(spec);
  }
  cap_diags_free(&diags);
  return 0;
}
