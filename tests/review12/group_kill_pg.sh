#!/usr/bin/env bash
# Review 12: group_kill.sh's rounds on a PostgreSQL state (serve's group
# commit appends a batch in one PostgreSQL transaction; the in-flight
# markers live under XDG_STATE_HOME). As root, with PostgreSQL installed
# (tests/state/pg-lib.sh starts one as uid 65534, unix socket only).
# Usage: group_kill_pg.sh CAPSULE
set -u
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root (the PostgreSQL server runs as uid 65534)"; exit 77; }
. "$(dirname "$0")/../lib/mcp_c.sh" "$1" review12-group-pg
. "$root/tests/state/pg-lib.sh"
[ -n "$pg_bin" ] || { echo "SKIP: PostgreSQL is not installed"; exit 77; }
. "$(dirname "$0")/group_lib.sh"
trap 'pg_stop immediate; mcpc_cleanup' EXIT
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
pg_start "$work/pg" || { echo "SKIP: cannot start PostgreSQL"; exit 77; }
export XDG_STATE_HOME=$work/home CAPSULE_STATE_KEY=$(printf '%064d' 1)
state=$PGURL caps=$work/caps
mkdir -p "$caps"
C=(--caps "$caps" --state "$state")
"$capsule" policy list --state "$state" >/dev/null 2>&1 || { echo "SKIP: cannot open the PostgreSQL state"; exit 77; }
gk_setup
gk_round pg-kill1 1
gk_round pg-kill2 1
gk_round pg-clean 0
echo "group_kill_pg: $pass passed, $fail failed"
[ "$fail" = 0 ]
