/* The egress proxy: the only way out of a sandbox in `proxy` network mode.
 * It listens on a socket made inside the sandbox's network namespace (the
 * sandbox's pid 1 creates it and hands the fd over), runs in threads of
 * capsule's supervisor in the host namespace, and serves HTTP CONNECT:
 * host and port checked against the capability's allowlist, names
 * resolved by the proxy itself, forbidden addresses refused whatever they
 * resolve from (rules.h), then bytes relayed end to end; and plain-HTTP
 * absolute-form requests, one per connection, with the endpoint's method +
 * path rules applied. Not yet: TLS interception for L7 rules on HTTPS and
 * credential injection (CONNECT to a host with rules is refused). */
#ifndef CAPSULE_NET_PROXY_H
#define CAPSULE_NET_PROXY_H

#include <stdbool.h>

#include "core/error.h"
#include "manifest/model.h"

#define PROXY_PORT 3128 /* inside the sandbox: 127.0.0.1:3128 */

struct proxy;

/* Serves listen_fd (taken over) until proxy_stop. allow_private lets the
 * proxy reach loopback and private ranges (local development and tests);
 * link-local and metadata addresses stay refused. spec must outlive it. */
int proxy_start(const struct cap_spec *spec, int listen_fd, bool allow_private,
                struct proxy **ret, struct cap_error *err);
void proxy_stop(struct proxy *p);

#endif
