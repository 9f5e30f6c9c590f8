#!/usr/bin/env bash
# The dashboard's audit page on a log of N records (default 1,000,000)
# against its own SQL statement run directly on the same database, side
# by side in one run (Python: one keep-alive HTTP connection for the
# page, one sqlite3 connection for the query). Four pages:
# the newest 100, a deep page (keyset: before the middle), a filter by
# capability, user and decision, and a text search that matches one
# record in 100,000 (a full scan on both sides); and a deep page seen for
# the first time (another one each run: no record's check remembered).
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
export CAPSULE_STATE_KEY=
state=$work/state
mkdir -p "$state" "$work/caps" && chmod 700 "$state"
echo "filling $n records..."
"$build/bench/dashboard_fill" "$state" "$n"
op=$("$capsule" access issue op --operator --state "$state" 2>/dev/null)
"$capsule" serve --caps "$work/caps" --state "$state" --ui 127.0.0.1:0 2>"$work/serve.log" &
server=$!
for _ in $(seq 1 100); do
  url=$("$capsule" serve status --state "$state" --json 2>/dev/null | grep -o '"ui":"[^"]*"' | cut -d'"' -f4 || true)
  [ -n "$url" ] && break
  sleep 0.1
done
U=http://$url
jar=$work/jar
csrf=$(curl -s -c "$jar" "$U/login" | grep -o '[0-9a-f]\{64\}' | head -1)
curl -s -o /dev/null -b "$jar" -c "$jar" --data-urlencode "csrf=$csrf" --data-urlencode "token=$op" "$U/login"
# a signed-in session's pages are under its own path, /s/KEY (docs/dashboard.md)
cookie=$(awk '$6 == "capsule_ui" && $3 ~ /^\/s\// {print $7}' "$jar")
base=$(awk '$6 == "capsule_ui" && $3 ~ /^\/s\// {print $3}' "$jar")
[ -n "$cookie" ] || { echo "cannot sign in to the dashboard at $U"; exit 1; }

mid=$((n / 2))
# the statement the audit page prepares (gw_audit_query_sql), its values in place
sql() { "$build/bench/dashboard_fill" --sql "$@"; }
names=("newest 100" "deep page" "filter cap+user+decision" "text search")
pages=("$base/audit" "$base/audit?before=$mid" "$base/audit?capability=cap9&user=user7&decision=block" "$base/audit?q=needle")
sqls=("$(sql '' '' '' '' 0)" "$(sql '' '' '' '' $mid)" "$(sql cap9 user7 block '' 0)" "$(sql '' '' '' needle 0)")
for i in "${!names[@]}"; do
  curl -s -b "$jar" -o "$work/page" "$U${pages[$i]}"
  grep -q 'class="record"' "$work/page" || { echo "the page ${pages[$i]} shows no record"; exit 1; }
  printf '%s\t%s\t%s\n' "${names[$i]}" "${pages[$i]}" "${sqls[$i]}"
done >"$work/cases"
# a deep page seen for the first time: every run another 100 records
# (before mid - k*1000), none of them checked by this serve before, so
# each record's MAC is computed (the others show what a page costs once
# its records have been checked: serve remembers a record's bytes and MAC)
paths= qs=
for k in $(seq 0 $((runs + 1))); do
  paths="$paths${paths:+ }$base/audit?before=$((mid - 1000 * (k + 1)))"
  qs="$qs${qs:+$'\x1f'}$(sql '' '' '' '' $((mid - 1000 * (k + 1))))"
done
printf '%s\t%s\t%s\n' "deep page, first view" "$paths" "$qs" >>"$work/cases"
echo "$n records, $runs runs each after 2 warm-up runs (mean and median; one keep-alive HTTP connection, one database connection):"
python3 - "$url" "$cookie" "$state/state.db" "$runs" "$work/cases" <<'PY'
import http.client, sqlite3, statistics, sys, time
url, cookie, db, runs, cases = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
host, port = url.rsplit(":", 1)
http_conn = http.client.HTTPConnection(host, int(port))
sql_conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)

def page(path):
    http_conn.request("GET", path, headers={"Cookie": f"capsule_ui={cookie}"})
    r = http_conn.getresponse()
    body = r.read()
    assert r.status == 200 and b'class="record"' in body, (path, r.status)

def query(sql):
    sql_conn.execute(sql).fetchall()

def times_ms(fn, args):
    """each run's time; args: one argument for every run, or a list of
    runs + 2 distinct ones"""
    each = args if isinstance(args, list) else [args] * (runs + 2)
    for a in each[:2]:
        fn(a)
    out = []
    for a in each[2:runs + 2]:
        t = time.perf_counter()
        fn(a)
        out.append((time.perf_counter() - t) * 1000)
    return out

# the mean, as before; the median too, which a shared machine's moments of
# load move less
print("| page | dashboard mean (ms) | SQL mean (ms) | ratio | dashboard median | SQL median | ratio |")
print("|---|---|---|---|---|---|---|")
for line in open(cases):
    name, path, sql = line.rstrip("\n").split("\t")
    if " " in path:  # distinct pages, one a run
        path, sql = path.split(" "), sql.split("\x1f")
    p, q = times_ms(page, path), times_ms(query, sql)
    pm, qm = statistics.mean(p), statistics.mean(q)
    pd, qd = statistics.median(p), statistics.median(q)
    print(f"| {name} | {pm:.2f} | {qm:.2f} | {pm / qm:.2f}x | {pd:.2f} | {qd:.2f} | {pd / qd:.2f}x |")
PY
