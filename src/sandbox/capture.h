/* Any-port names on the transparent path: inside the sandbox's network
 * namespace, where capsule holds CAP_NET_ADMIN (it owns the namespace's
 * user namespace), an nftables rule redirects every TCP connection to
 * 127.77.0.0/16 to the capture listener at 127.0.0.1:EGRESS_CAPTURE_PORT;
 * the proxy reads the original destination (SO_ORIGINAL_DST), maps it
 * back to its name and checks the port like any other. The rule is loaded
 * by the host's own nft binary, run before the sandbox's root replaces
 * the host's, with that one capability and an empty environment. Without
 * nft (or nf_tables) only the listed ports of such names work, and
 * `capsule doctor` says so. */
#ifndef CAPSULE_SANDBOX_CAPTURE_H
#define CAPSULE_SANDBOX_CAPTURE_H

#include <stdbool.h>

#include "core/error.h"
#include "manifest/model.h"

/* The nft binary capsule would run, or NULL when there is none. */
const char *capture_nft(void);

/* Whether spec's sandbox captures any port: proxy mode, a name allowed on
 * any port, and nft present. Landlock and the connect supervisor then
 * leave TCP connect ports alone (the redirect happens after their check). */
bool capture_planned(const struct cap_spec *spec);

/* In the sandbox's new network namespace, holding CAP_NET_ADMIN over it:
 * loads the redirect. 0, or a negative errno with err set. */
int capture_install(struct cap_error *err);

/* For doctor: whether the redirect loads in a new user and network
 * namespace here (a real try, in a child). */
bool capture_probe(void);

#endif
