#!/usr/bin/env bash
# Review 14 (a warm server's egress log, src/gateway/instance_egress.c,
# mcp_keeper_route.c, egress_spool.c; docs/state.md, "A warm instance's
# egress"): what a warm server's proxy decides while no call is leased on
# it goes to the next call granted, and when none comes before its keeper
# ends (idle after 5 minutes, retired after a change to its package, or a
# grant changed) that batch was freed unstored. A hostile third-party MCP
# server (probe/server.py's "later", in proxy mode) answers its call, then
# asks its proxy for a host the capability does not allow; its package is
# then touched (the keeper retires) and one more call is made (a new
# keeper). The refused CONNECT was in no egress row: a server's traffic
# after its last call left no trace in the state. Now the keeper keeps
# that batch in a spool file as well, and the next state open stores it
# with no call: once the retired keeper is gone, `capsule audit` (which
# opens the state) must find exactly one row of it, with no call_seq, and
# a second open must not store it again. Exits 1 while it is lost or
# duplicated, 0 when it is stored once, 77 when it cannot run here.
# Usage: warm_egress_lost.sh CAPSULE
# (A call gone before its answer: warm_egress_hang.sh; the keeper stopped
# or killed: warm_egress_stop.sh.)
. "$(dirname "$0")/lib.sh" "$1" review14-egress
proxied_probe
retired_after_later
for _ in $(seq 1 600); do # the retired keeper ends, then an open of the state stores its batch
  "$capsule" audit --tail 1 --state "$state" >/dev/null 2>&1
  later_rows >/dev/null
  [ "$rows" -ge 1 ] 2>/dev/null && break
  sleep 0.1
done
"$capsule" audit --tail 1 --state "$state" >/dev/null 2>&1 # stored once, not at every open
later_rows
free=$(sqlite3 "$state/state.db" "SELECT COUNT(*) FROM egress WHERE host = 'denied-later.invalid' AND call_seq IS NULL" 2>&1)
[ "$rows" = 1 ] && [ "$free" = 1 ] && { echo "held: stored once, with no call"; exit 0; }
[ "$rows" -ge 1 ] 2>/dev/null && { echo "FAIL: $rows rows ($free with no call): stored more than once"; exit 1; }
echo "OPEN: a warm server's egress after its last call, its keeper ended before the next call, is never stored"
exit 1
