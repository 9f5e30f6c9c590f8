#!/usr/bin/env bash
# Review 12 (s10-mcpcpu: serve's audit group commit, src/gateway/
# state_group.c, each call's at_end run by the batch's leader): alice and
# bob call at once while the operator changes bob's policy, serve killed
# with SIGKILL mid-burst; every answered call has exactly its own record
# (its user, the decision its answer reflects), the chain verifies, a
# second round (stopped cleanly) goes on from it. On SQLite, as root
# (tests/review12/group_lib.sh says what is checked).
# Usage: group_kill.sh CAPSULE
set -u
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root"; exit 77; }
. "$(dirname "$0")/../lib/mcp_c.sh" "$1" review12-group
. "$(dirname "$0")/group_lib.sh"
state=$work/state caps=$work/caps
mkdir -p "$caps" && mkdir -m 700 "$state"
C=(--caps "$caps" --state "$state")
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
gk_setup
gk_round kill1 1
gk_round kill2 1
gk_round clean 0
echo "group_kill: $pass passed, $fail failed"
[ "$fail" = 0 ]
