/* Readiness: whether a capability can start, as `capsule list` reports it.
 * "ready" means every step up to exec was checked: the runtime is one
 * capsule runs on this host, the manifest names something to run, and a
 * dry run of the capability's own sandbox (its grants, masks and limits;
 * the network blocked) finds the runtime's entry point there, reachable
 * and executable or readable by the sandbox's user. Credentials are the
 * caller's to check (they live in the state). */
#ifndef CAPSULE_GATEWAY_READY_H
#define CAPSULE_GATEWAY_READY_H

#include <stddef.h>

#include "core/error.h"
#include "gateway/call.h"
#include "manifest/model.h"

/* GW_OUTCOME_OK when ready; otherwise why says why not (the outcome
 * tells a host that cannot run it from a capability that is broken).
 * hidden: the paths masked in every sandbox (gw_state_private_paths). */
/* image_dir: the image store a Selu capability without x-capsule.command
 * runs from: ready when its image is stored, unpacked, and its entrypoint
 * is an executable file in it (no dry run: an image need not hold a
 * shell). */
enum gw_outcome gw_ready(const struct cap_spec *spec, const char *image_dir,
                         const char *const *hidden, size_t n_hidden, struct cap_error *why);

#endif
