#!/usr/bin/env bash
# An earlier stop's open point (src/gateway/mcp_keeper_route.c,
# instance_egress.c, egress_spool.c; docs/state.md "A warm instance's
# egress"): a warm server's keeper killed during a call lost what its
# proxy had decided for that call. The keeper kept a call's decisions in
# memory until the call's answer (its spool file held only what came with
# no call in, and was emptied when a call took it), so a SIGKILL (the OOM
# killer, an operator's kill -9) mid-call left no row of the call's
# egress in the state. Here probe/server.py's "hang" (proxy mode,
# example.com allowed) asks its proxy for denied-later.invalid at once and
# never answers; once the server says its proxy refused it, the keeper is
# killed with SIGKILL, and an open of the state (`capsule audit`, which
# recovers the spools of keepers gone) must store the refused CONNECT
# once, with no call, and a second open not again. Now every decision is
# spooled as it comes and leaves the spool only as it goes to its call's
# front door. Exits 1 while it is lost or stored twice, 0 when stored
# once, 77 when it cannot run here. As root.
# Usage: warm_egress_killed.sh CAPSULE
. "$(dirname "$0")/lib.sh" "$1" review17-egress-killed
proxied_probe # its keeper started: the next call is warm
post '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"p__hang","arguments":{}}}' >"$work/hang.out" 2>&1 &
pids+=($!)
later_egress "the server's request was not seen"
keeper=$("$capsule" ps --state "$state" --json 2>/dev/null | tr -d ' \n' | tr '{' '\n' | grep '"capability":"p"' |
  grep -o '"pid":"[0-9]*"' | grep -o '[0-9][0-9]*' | head -1)
[ -n "$keeper" ] || skip "no keeper of p listed"
later_rows
[ "$rows" = 0 ] || { echo "FAIL: the hanging call's egress was stored before the kill ($rows rows)"; exit 1; }
kill -9 "$keeper"
for _ in $(seq 1 100); do kill -0 "$keeper" 2>/dev/null || break; sleep 0.1; done
"$capsule" audit --tail 1 --state "$state" >/dev/null 2>&1 # recovers the spools of keepers gone
"$capsule" audit --tail 1 --state "$state" >/dev/null 2>&1 # stored once, not at every open
later_rows
free=$(sqlite3 "$state/state.db" "SELECT COUNT(*) FROM egress WHERE host = 'denied-later.invalid' AND call_seq IS NULL" 2>&1)
if [ "$rows" = 1 ] && [ "$free" = 1 ]; then
  echo "PASS: a keeper killed mid-call leaves that call's egress to the recovery, stored once"
  exit 0
fi
[ "$rows" -ge 1 ] 2>/dev/null && { echo "FAIL: $rows rows ($free with no call): stored more than once"; exit 1; }
echo "FAIL: a keeper killed mid-call lost the call's egress (no row of denied-later.invalid)"
exit 1
