/* Egress policy decisions, with no I/O: which host:port a sandboxed tool may
 * reach, which resolved addresses the proxy must never connect to, and
 * which HTTP method + path an L7 rule admits. The proxy asks these
 * questions for every connection and request; they are kept pure so they can
 * be tested exhaustively. */
#ifndef CAPSULE_NET_RULES_H
#define CAPSULE_NET_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "manifest/model.h"

/* Whether host is a DNS name (letters, digits, '-', '_', single dots, one
 * trailing dot allowed) or an IP literal: what the proxy will look up,
 * connect to, log and mint a certificate for. */
bool net_host_valid(const char *host);

/* Whether net's policy lets the tool reach host:port (host: a DNS name or an
 * IP literal, any case, one trailing dot allowed). Only proxy mode filters;
 * blocked allows nothing, unrestricted everything. When an endpoints[]
 * entry matches, *ret_endpoint points at it (its L7 rules then apply);
 * otherwise NULL. */
bool net_host_allowed(const struct cap_network *net, const char *host, uint16_t port,
                      const struct cap_endpoint **ret_endpoint);

/* Whether some entry of net's allowlist (proxy mode; an endpoint or an
 * allow_domains name or pattern) names host, on whatever port: the
 * resolver's test for a name it may give an on-demand address
 * (egress_plan.h). net_host_allowed still decides each connection. */
bool net_host_listed(const struct cap_network *net, const char *host);

/* Addresses the proxy refuses whatever the allowlist says: unspecified,
 * link-local (cloud metadata 169.254.169.254 and fd00:ec2::254 among them),
 * multicast, broadcast; and unless allow_private: loopback, RFC 1918,
 * carrier-grade NAT, unique-local IPv6, IPv4-mapped forms of all of these.
 * A name that resolves to any of them is refused (DNS rebinding defence). */
bool net_address_forbidden(const struct sockaddr *sa, bool allow_private);

/* Whether path (no query string) matches glob: '*' is exactly one segment,
 * '**' any number of segments (zero included). Paths a proxy and an
 * upstream could read differently never match: "." or ".." segments,
 * percent-encoded '/', '.', '\\' or '%', broken escapes, backslashes, "//". */
bool net_path_matches(const char *glob, const char *path);

/* L7 default-deny: with no rules everything is allowed; otherwise at least
 * one rule must match method ("*" matches any) and path. */
bool net_rules_allow(const struct cap_http_rule *rules, size_t n, const char *method,
                     const char *path);

#endif
