/* The egress proxy module's one export (see proxy_module.h). */
#include "net/proxy_module.h"

__attribute__((visibility("default"))) const struct proxy_module proxy_module_v1 = {
    .size = sizeof(struct proxy_module),
    .create = proxy_new,
    .ca_bundle = proxy_ca_bundle,
    .tool_env = proxy_tool_env,
    .scrub = proxy_scrub,
    .start = proxy_start,
    .stop = proxy_stop,
    .cpu_ms = proxy_cpu_ms,
};
