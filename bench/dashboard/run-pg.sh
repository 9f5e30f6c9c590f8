#!/usr/bin/env bash
# The dashboard's audit page on a PostgreSQL state of N audit records
# (default 1,000,000) against its own SQL statement run directly with
# psql on the same database, side by side in one run: bench/dashboard/
# run.sh's cases on a real PostgreSQL 15 this script starts (initdb in a
# temporary directory, a unix socket, no TCP, as tests/state/pg-lib.sh;
# as root the server runs as uid 65534). The page is timed over one
# keep-alive HTTP connection (Python); the SQL by psql's \timing in one
# psql session (the statement sent, its rows received; output to
# /dev/null), the statement as the PostgreSQL driver sends it (fill
# --sql-pg: gw_audit_query_sql rewritten by gw_db_sql_pg, the page's
# values in place of its parameters).
# Usage: bench/dashboard/run-pg.sh [N] [RUNS]   (from the source tree, after a build)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build}
capsule=$build/src/cli/capsule
n=${1:-1000000}
runs=${2:-10}
. "$root/tests/state/pg-lib.sh"
[ -n "$pg_bin" ] || { echo "bench/dashboard: PostgreSQL is not installed (scripts/deps.sh test)"; exit 1; }
for t in python3 curl; do command -v $t >/dev/null || { echo "needs $t (scripts/deps.sh bench)"; exit 1; }; done
work=$(mktemp -d /var/tmp/capsule-bench-ui-pg.XXXXXX)
server=
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  pg_stop fast
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
. "$root/bench/dashboard/lib.sh"
export CAPSULE_STATE_KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
unset CAPSULE_STATE CAPSULE_STATE_KEY_FILE
export XDG_STATE_HOME=$work/xdg
mkdir -p "$work/caps" "$XDG_STATE_HOME"
# durable as bench/scale's (fsync on, synchronous_commit off); the page
# only reads
# PG_EXTRA: more server settings (e.g. "-c log_statement=all" with KEEP=1:
# every statement the page sends, in $work/pg.log)
PG_DURABILITY="-c synchronous_commit=off ${PG_EXTRA:-}" pg_start "$work" >/dev/null
url=$PGURL
psql_() { pg_as "$pg_bin/psql" -h "$PGSOCK" -U capsule -d capsule -v ON_ERROR_STOP=1 -q "$@"; }
echo "filling $n records..."
"$build/bench/dashboard_fill" "$url" "$n" >"$work/audit.copy"
chmod 644 "$work/audit.copy"
psql_ -c "\\copy audit FROM '$work/audit.copy'"
psql_ -c "SELECT setval(pg_get_serial_sequence('audit', 'seq'), (SELECT max(seq) FROM audit))" >/dev/null
psql_ -c "VACUUM ANALYZE audit"
rm -f "$work/audit.copy"
ui_serve "$url"
ui_cases --sql-pg 500
# EXPLAIN ANALYZE of each case's statement, for the record
while IFS=$'\t' read -r name _ q; do
  q=${q%%$'\x1f'*}
  echo "-- $name"
  psql_ -At -c "EXPLAIN (ANALYZE, COSTS OFF) $q" | sed 's/^/   /'
done <"$work/cases" >"$work/explain"
[ -n "${EXPLAIN:-}" ] && cat "$work/explain"
echo "$n records on PostgreSQL, $runs runs each in 5 rounds taking turns, 2 warm-up runs a round (mean and median; one keep-alive HTTP connection; a psql session a round, \\timing):"
PSQL="$pg_bin/psql -h $PGSOCK -U capsule -d capsule -X -q" PYTHONPATH=$root/bench/dashboard \
  python3 - "$ui" "$cookie" "$runs" "$work/cases" <<'PY'
import os, re, shlex, subprocess, sys
import pages
ui, cookie, runs, cases = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
page = pages.page_getter(ui, cookie)

def sql_times(each):
    """one psql session: \\timing on, the rows to /dev/null, every
    statement's "Time: X ms" read back (the first 2 are the warm-up)"""
    script = "\\timing on\n\\o /dev/null\n" + "\n".join(each) + "\n"
    cmd = shlex.split(os.environ["PSQL"])
    if os.getuid() == 0:
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"] + cmd
    out = subprocess.run(cmd, input=script, capture_output=True, text=True, check=True).stdout
    t = [float(x) for x in re.findall(r"^Time: ([0-9.]+) ms", out, re.M)]
    assert len(t) == len(each), out
    return t[2:]

pages.print_header("psql")
for name, path, sql in pages.read_cases(cases):
    pages.print_row(name, *pages.in_rounds(lambda each: pages.timed(page, each), sql_times, path, sql, runs))
PY
