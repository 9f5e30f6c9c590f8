#!/usr/bin/env bash
# Review 14 (a warm third-party MCP server's egress log,
# src/gateway/mcp_keeper_route.c): a call gone before its answer (its
# deadline, a cancellation, its front door's end) had its egress
# decisions dropped by the keeper ("a call gone without its answer: its
# decisions dropped"), so a hostile server could make any connection its
# proxy allows, or try any it refuses, and leave no row of it in the
# state by simply not answering. Here probe/server.py's "hang" (proxy
# mode, example.com allowed) asks its proxy for denied-later.invalid at
# once and never answers; serve's --timeout 3 ends the call; once the
# server says its proxy answered, one more call: the refused CONNECT
# must be stored (now with that next call, as what a warm server does
# with no call in; a Selu instance's keeper the same:
# instance_egress.c). Exits 1 while the decision is lost, 0 stored, 77
# cannot run here. As root.
# Usage: warm_egress_hang.sh CAPSULE
. "$(dirname "$0")/lib.sh" "$1" review14-hang
proxied_probe --timeout 3 # its keeper started: the next calls are warm
a=$(post '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"p__hang","arguments":{}}}')
grep -q 'did not answer in time' <<<"$a" || { skip "the hanging call was not ended by its deadline: $(head -c 300 <<<"$a")"; }
later_egress "the server's request was not seen"
a=$(call p net '{}')
grep -q 'PROXY:http' <<<"$a" || { skip "no call after the hanging one ($a)"; }
later_rows
[ "$rows" -ge 1 ] 2>/dev/null && { echo "PASS: a call that never answered leaves its egress in the state"; exit 0; }
echo "FAIL: a warm server that does not answer its call leaves no egress row"
exit 1
