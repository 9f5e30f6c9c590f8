/* The Talos runtime: a tool is a function exported by the capability's JS
 * module, called through a Node shim (src/runtime/talos_shim.mjs, embedded
 * at build time) that speaks the Covenant runtime's one-line exchange.
 * Credentials with handler delivery reach the function's context, never
 * its environment. */
#ifndef CAPSULE_RUNTIME_TALOS_H
#define CAPSULE_RUNTIME_TALOS_H

#include "gateway/call.h"
#include "manifest/model.h"

/* handler[i] is spec->secrets[i]'s value when it is delivered to the
 * handler, else NULL. *result (allocated) is the function's JSON result. */
enum gw_outcome talos_run(const struct gw_call *call, const struct cap_spec *spec,
                          const struct cap_tool *tool, const struct cap_node *args,
                          char *const *handler, char **result, struct cap_error *err);

/* The module a Talos capability loads (allocated). */
char *talos_module_path(const struct cap_spec *spec);

#endif
