/* Covenant's intent router (covenant-router): each agent's capability
 * actions (required, then optional) map to keywords through Covenant's
 * table; an agent scores one point per keyword found in the lowercased
 * intent text, the highest score wins, and a tie goes to the agent first
 * by id (the registry is sorted by id, and a later agent must score
 * strictly more). Only Covenant agents take part. */
#ifndef CAPSULE_GATEWAY_ROUTER_H
#define CAPSULE_GATEWAY_ROUTER_H

#include "gateway/registry.h"

/* The chosen agent and its score, or NULL when no keyword matched. */
const struct cap_spec *gw_route(const struct gw_registry *reg, const char *text, unsigned *score);
/* The keywords an action routes on (NULL-terminated; empty when none). */
const char *const *gw_route_keywords(const char *action);

#endif
