/* The addresses assigned to this machine's own interfaces (in the
 * network namespace capsule's supervisor runs in), so the egress proxy can
 * refuse them as it refuses loopback: a service bound to the host's eth0
 * address is no more the tool's to reach than one on 127.0.0.1. Read at
 * start and again after every address change the kernel announces on a
 * NETLINK_ROUTE socket (RTMGRP_IPV4_IFADDR, RTMGRP_IPV6_IFADDR, and the
 * route and rule groups for host_addrs_local's kept verdicts); without
 * that socket, re-read on every check. Thread-safe. */
#ifndef CAPSULE_NET_HOSTADDR_H
#define CAPSULE_NET_HOSTADDR_H

#include <stdbool.h>
#include <sys/socket.h>

struct host_addrs;

/* Always succeeds (returns 0); the caller frees with host_addrs_free. */
int host_addrs_new(struct host_addrs **ret);

/* Whether sa's address (IPv4, IPv6, or IPv4 in IPv6 forms: mapped,
 * compatible, NAT64) is assigned to an interface now. */
bool host_addrs_contains(struct host_addrs *h, const struct sockaddr *sa);

void host_addrs_free(struct host_addrs *h);

/* Whether sa's address is this machine's: host_addrs_contains or
 * host_route_local, the kernel's verdict kept until the next address,
 * route or rule event (with no event socket, asked every time). */
bool host_addrs_local(struct host_addrs *h, const struct sockaddr *sa);

/* Whether the kernel would deliver to sa's address locally (a route of type
 * local: the interface addresses, and also a whole prefix routed to this
 * machine with `ip route add local ...`, which no interface lists). Asks
 * the kernel (RTM_GETROUTE) each time. */
bool host_route_local(const struct sockaddr *sa);

/* Whether a and b hold the same address, IPv4 and its IPv6 forms alike
 * (ports ignored). */
bool host_addrs_same(const struct sockaddr *a, const struct sockaddr *b);

#endif
