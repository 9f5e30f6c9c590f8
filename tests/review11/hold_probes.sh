#!/usr/bin/env bash
# Attempts on a relayed server's requests held for a sessionless
# 2026-07-28 client (src/front/mcp_hold.c, serve.c's sess_adopt, the
# keeper's routing), past tests/mcp/relay26.mjs: alice's retry in a 2025
# session of hers; bob's retry of alice's state sessionless, in his 2025
# session and in alice's; bob's call while alice's is held on her warm
# server (his input request is his own); one state used by two retries at
# once; 2 x 8 calls whose clients never come back (each cancelled and
# audited once, serve's descriptors and threads not growing). Exits 1 when
# one works, 0 when all are blocked, 77 cannot run.
# Usage: hold_probes.sh CAPSULE
set -u
. "$(dirname "$0")/lib.sh" "$1"
conformance
ta=$(token alice) || exit 77
tb=$(token bob) || exit 77
CAPSULE_MCP_HOLD_MS=3000 serve11 --capability conformance
node "$root/tests/review11/hold_probes.mjs" "$url" "$ta" "$tb" "$spid" "$capsule" "$state"
rc=$?
kill -0 "$spid" 2>/dev/null || { echo "WORKS serve died"; tail -5 "$W/serve.log"; rc=1; }
[ "$rc" = 0 ] && echo blocked
exit $rc
