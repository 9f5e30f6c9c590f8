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
    .tls_open = tls_client_open,
    .tls_read = tls_client_read,
    .tls_write = tls_client_write,
    .tls_pending = tls_client_pending,
    .tls_free = tls_client_free,
    .expect_supervisor = proxy_expect_supervisor,
    .hold = proxy_hold,
    .connected = proxy_connected,
};
