#!/usr/bin/env bash
# Review 14 (a warm server's egress log, src/gateway/instance_egress.c,
# mcp_keeper_route.c; docs/state.md, "A warm instance's egress"): what a
# warm server's proxy decides while no call is leased on it goes to the
# next call granted, and when none comes before its keeper ends (idle
# after 5 minutes, retired after a change to its package, or a grant
# changed) that batch is freed unstored. A hostile third-party MCP server
# (probe/server.py's "later", in proxy mode) answers its call, then asks
# its proxy for a host the capability does not allow; its package is then
# touched (the keeper retires) and one more call is made (a new keeper).
# The refused CONNECT is in no egress row: a server's traffic after its
# last call leaves no trace in the state. Exits 1 while it is lost, 0 when
# it is stored (with a call, or with none), 77 when it cannot run here.
# OPEN: not in review-attacks (tests/review14/README.md).
# Usage: warm_egress_lost.sh CAPSULE
# (A call gone before its answer: warm_egress_hang.sh, fixed.)
. "$(dirname "$0")/lib.sh" "$1" review14-egress
command -v sqlite3 >/dev/null || { skip "sqlite3 is not installed"; }
probe_cap p
sed -i 's|"mode": "blocked"|"mode": "proxy", "allow_domains": ["example.com"]|' "$caps/p/capability.json"
serve_http
a=$(call p net '{}')
grep -q 'PROXY:http' <<<"$a" || { skip "the server has no egress proxy ($a)"; }
a=$(call p later '{}')
grep -q 'LATER:ok' <<<"$a" || { skip "no answer from later ($a)"; }
later_egress "the server's request after its call was not seen"
touch "$caps/p/server.py" # its keeper retires; the next call starts a new one
sleep 1
a=$(call p net '{}')
grep -q 'PROXY:http' <<<"$a" || { skip "no call after the change ($a)"; }
later_rows
[ "$rows" -ge 1 ] 2>/dev/null && { echo "held: stored"; exit 0; }
echo "OPEN: a warm server's egress after its last call, its keeper ended before the next call, is never stored"
exit 1
