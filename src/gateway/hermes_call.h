/* A Covenant agent with runtime = "hermes", called through the gateway:
 * the endpoint from HERMES_API_BASE_URL (capsule's environment, the
 * operator's), its key HERMES_API_KEY a sealed credential (`capsule cred
 * set --shared HERMES_API_KEY --scope system`, or the agent's own; never
 * in any environment), approvals asked through capsule's approval queue,
 * the run's tool events and approvals audited. runtime/hermes.h speaks the
 * protocol. */
#ifndef CAPSULE_GATEWAY_HERMES_CALL_H
#define CAPSULE_GATEWAY_HERMES_CALL_H

#include "gateway/call.h"

enum gw_outcome gw_hermes_call(const struct gw_call *call, struct gw_state *st,
                               const struct cap_spec *spec, const struct cap_node *args,
                               char **result, struct cap_error *err);

#endif
