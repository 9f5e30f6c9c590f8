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
op=$("$capsule" access issue op --operator --state "$url" 2>/dev/null)
"$capsule" serve --caps "$work/caps" --state "$url" --ui 127.0.0.1:0 2>"$work/serve.log" &
server=$!
ui=
for _ in $(seq 1 300); do
  ui=$("$capsule" serve status --state "$url" --json 2>/dev/null | grep -o '"ui":"[^"]*"' | cut -d'"' -f4 || true)
  [ -n "$ui" ] && break
  sleep 0.1
done
[ -n "$ui" ] || { echo "serve --ui did not start:"; cat "$work/serve.log"; exit 1; }
U=http://$ui
jar=$work/jar
csrf=$(curl -s -c "$jar" "$U/login" | grep -o '[0-9a-f]\{64\}' | head -1)
curl -s -o /dev/null -b "$jar" -c "$jar" --data-urlencode "csrf=$csrf" --data-urlencode "token=$op" "$U/login"
# a signed-in session's pages are under its own path, /s/KEY (docs/dashboard.md)
cookie=$(awk '$6 == "capsule_ui" && $3 ~ /^\/s\// {print $7}' "$jar")
base=$(awk '$6 == "capsule_ui" && $3 ~ /^\/s\// {print $3}' "$jar")
[ -n "$cookie" ] || { echo "cannot sign in to the dashboard at $U"; exit 1; }

mid=$((n / 2))
sql() { "$build/bench/dashboard_fill" --sql-pg "$@"; }
names=("newest 100" "deep page" "filter cap+user+decision" "text search")
pages=("$base/audit" "$base/audit?before=$mid" "$base/audit?capability=cap9&user=user7&decision=block" "$base/audit?q=needle")
sqls=("$(sql '' '' '' '' 0)" "$(sql '' '' '' '' $mid)" "$(sql cap9 user7 block '' 0)" "$(sql '' '' '' needle 0)")
for i in "${!names[@]}"; do
  curl -s -b "$jar" -o "$work/page" "$U${pages[$i]}"
  grep -q 'class="record"' "$work/page" || { echo "the page ${pages[$i]} shows no record"; exit 1; }
  printf '%s\t%s\t%s\n' "${names[$i]}" "${pages[$i]}" "${sqls[$i]}"
done >"$work/cases"
paths= qs=
for k in $(seq 0 $((runs + 1))); do
  paths="$paths${paths:+ }$base/audit?before=$((mid - 1000 * (k + 1)))"
  # psql's own untouched records (500 before the page's): neither side finds
  # its page in PostgreSQL's buffers warmed by the other
  qs="$qs${qs:+$'\x1f'}$(sql '' '' '' '' $((mid - 1000 * (k + 1) - 500)))"
done
printf '%s\t%s\t%s\n' "deep page, first view" "$paths" "$qs" >>"$work/cases"
# EXPLAIN ANALYZE of each case's statement, for the record
while IFS=$'\t' read -r name _ q; do
  q=${q%%$'\x1f'*}
  echo "-- $name"
  psql_ -At -c "EXPLAIN (ANALYZE, COSTS OFF) $q" | sed 's/^/   /'
done <"$work/cases" >"$work/explain"
[ -n "${EXPLAIN:-}" ] && cat "$work/explain"
echo "$n records on PostgreSQL, $runs runs each in 5 rounds taking turns, 2 warm-up runs a round (mean and median; one keep-alive HTTP connection; a psql session a round, \\timing):"
PSQL="$pg_bin/psql -h $PGSOCK -U capsule -d capsule -X -q" python3 - "$ui" "$cookie" "$runs" "$work/cases" "$work" <<'PY'
import http.client, os, re, shlex, statistics, subprocess, sys, time
ui, cookie, runs, cases, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
host, port = ui.rsplit(":", 1)
http_conn = http.client.HTTPConnection(host, int(port))

def page(path):
    http_conn.request("GET", path, headers={"Cookie": f"capsule_ui={cookie}"})
    r = http_conn.getresponse()
    body = r.read()
    assert r.status == 200 and b'class="record"' in body, (path, r.status)

def page_times(each):
    for a in each[:2]:
        page(a)
    out = []
    for a in each[2:]:
        t = time.perf_counter()
        page(a)
        out.append((time.perf_counter() - t) * 1000)
    return out

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

# in rounds, the two sides taking turns (2 warm-up runs each, then a
# share of the runs), so that a moment of load on the shared machine
# lands on both alike
ROUNDS = min(5, runs)
def both(path, sql):
    distinct = isinstance(path, list)
    p, q = [], []
    for r in range(ROUNDS):
        n = runs // ROUNDS + (1 if r < runs % ROUNDS else 0)
        if distinct:  # runs + 2 distinct pages: each run another (warm-ups repeat the first)
            lo = 2 + sum(runs // ROUNDS + (1 if k < runs % ROUNDS else 0) for k in range(r))
            pa = path[:2] + path[lo:lo + n]
            sa = sql[:2] + sql[lo:lo + n]
        else:
            pa, sa = [path] * (n + 2), [sql] * (n + 2)
        p += page_times(pa)
        q += sql_times(sa)
    return p, q

print("| page | dashboard mean (ms) | psql mean (ms) | ratio | dashboard median | psql median | ratio |")
print("|---|---|---|---|---|---|---|")
for line in open(cases):
    name, path, sql = line.rstrip("\n").split("\t")
    if " " in path:
        path, sql = path.split(" "), sql.split("\x1f")
    p, q = both(path, sql)
    pm, qm = statistics.mean(p), statistics.mean(q)
    pd, qd = statistics.median(p), statistics.median(q)
    print(f"| {name} | {pm:.2f} | {qm:.2f} | {pm / qm:.2f}x | {pd:.2f} | {qd:.2f} | {pd / qd:.2f}x |")
PY
