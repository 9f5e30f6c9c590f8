#!/usr/bin/env bash
# The dashboard's audit page on a log of N records (default 1,000,000)
# against its own SQL statement run directly on the same database, side
# by side in one run (Python: one keep-alive HTTP connection for the
# page, one sqlite3 connection for the query); the cases are lib.sh's.
# Usage: bench/dashboard/run.sh [N] [RUNS]   (from the source tree, after a build)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build}
capsule=$build/src/cli/capsule
n=${1:-1000000}
runs=${2:-10}
for t in python3 curl; do command -v $t >/dev/null || { echo "needs $t (scripts/deps.sh bench)"; exit 1; }; done
work=$(mktemp -d /var/tmp/capsule-bench-ui.XXXXXX)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
. "$root/bench/dashboard/lib.sh"
export CAPSULE_STATE_KEY=
state=$work/state
mkdir -p "$state" "$work/caps" && chmod 700 "$state"
echo "filling $n records..."
"$build/bench/dashboard_fill" "$state" "$n"
ui_serve "$state"
# the statement the audit page prepares (gw_audit_query_sql), its values in place
ui_cases --sql 0
echo "$n records, $runs runs each in 5 rounds taking turns, 2 warm-up runs a round (mean and median; one keep-alive HTTP connection, one database connection):"
PYTHONPATH=$root/bench/dashboard python3 - "$ui" "$cookie" "$state/state.db" "$runs" "$work/cases" <<'PY'
import sqlite3, sys
import pages
ui, cookie, db, runs, cases = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
page = pages.page_getter(ui, cookie)
sql_conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)

def query(sql):
    sql_conn.execute(sql).fetchall()

pages.print_header("SQL")
for name, path, sql in pages.read_cases(cases):
    pages.print_row(name, *pages.in_rounds(lambda each: pages.timed(page, each),
                                           lambda each: pages.timed(query, each), path, sql, runs))
PY
