/* Operator grants applied to a capability: what `capsule grant` stored
 * (gateway/plugin_state.h) laid over the resolved spec without touching
 * it. Hosts join the egress allowlist (a capability without network gets
 * proxy mode with only those hosts; one with unrestricted network keeps
 * it); paths become read, write or read-write grants with origin
 * "operator". The result borrows from the spec and owns only what it
 * adds: free it before the spec. */
#ifndef CAPSULE_GATEWAY_GRANTS_H
#define CAPSULE_GATEWAY_GRANTS_H

#include "core/error.h"
#include "gateway/state.h"
#include "manifest/model.h"

struct gw_granted {
  struct cap_spec spec; /* a shallow copy with the grants added */
  size_t n_added;       /* how many grants the operator added */
  struct cap_fs_grant *grants;
  struct cap_endpoint *endpoints;
  struct cap_strv owned; /* the paths and hosts the copy points at */
};

/* out->spec is spec with st's grants for spec->id (an unchanged copy when
 * there are none). */
int gw_spec_with_grants(struct gw_state *st, const struct cap_spec *spec, struct gw_granted *out,
                        struct cap_error *err);
void gw_granted_free(struct gw_granted *g);

#endif
