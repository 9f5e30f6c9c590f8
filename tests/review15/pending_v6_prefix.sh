#!/usr/bin/env bash
# serve's pending HTTP connections (front/serve_conn.c): past the
# listener's share (64 for /mcp) the oldest pending connection of the
# owner holding most is evicted, the owner being a client's address when
# it is not on loopback. An IPv6 client has a /64 of addresses (most
# often far more): 128 unauthenticated connections, each from an address
# of its own, were 128 owners holding one each, so the eviction went by
# age and took the authenticated client's pending connection (its
# request on its way, as from a client far away). Run in a network
# namespace of its own (unshare -n) where fd00:15::/64 and fd00:16::/64
# are local, serve on [fd00:15::1] with --insecure. Exits 0 when the
# client's request is answered. Usage: pending_v6_prefix.sh CAPSULE
set -u
. "$(dirname "$0")/lib.sh" "$1" r15-v6
token=$("$capsule" access issue v6 --user alice --state "$state" 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1)
[ -n "$token" ] || { echo "FAIL: access issue"; exit 1; }
netns_serve 'ip -6 addr add fd00:15::1/64 dev lo nodad && ip -6 addr add fd00:16::1/64 dev lo nodad &&
  ip -6 route add local fd00:15::/64 dev lo table local &&
  ip -6 route add local fd00:16::/64 dev lo table local' "[fd00:15::1]:0" "$r15/pending_v6_prefix.py"
rc=$?
sanitized
exit $rc
