/* `capsule export oci` (export.c): a capability as an OCI runtime bundle. */
#ifndef CAPSULE_GATEWAY_EXPORT_H
#define CAPSULE_GATEWAY_EXPORT_H

#include <stdint.h>

#include "core/error.h"
#include "manifest/model.h"

/* Writes DIR (new) with config.json and rootfs for spec: its Selu image
 * from image_dir, or its x-capsule.command. id_base: as root, the
 * capability's host id range (gw_state_id_range). netns: a network
 * namespace path for the bundle to join, or NULL. On failure DIR is
 * removed again. */
int gw_export_oci(const char *image_dir, uint32_t id_base, const struct cap_spec *spec,
                  const char *dir, const char *netns, struct cap_error *err);

#endif
