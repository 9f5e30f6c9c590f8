# shellcheck shell=bash disable=SC2154,SC2034 # sourced: the variables are the caller's
# What bench/dashboard/run.sh (SQLite) and run-pg.sh (PostgreSQL) share,
# sourced after they set build, capsule, work, n and runs: serve --ui
# started on the state and signed in to, and the cases timed (the page and
# its own SQL statement, as `dashboard_fill --sql` or `--sql-pg` prints
# it, the page's values in place of its parameters).

# ui_serve STATE: `capsule serve --ui` on a free port (server, its pid;
# ui, the address; U, its URL), then signed in with a new operator token
# (cookie, the session's; base, its path /s/KEY: docs/dashboard.md)
ui_serve() {
  local state=$1 op jar=$work/jar csrf
  op=$("$capsule" access issue op --operator --state "$state" 2>/dev/null)
  "$capsule" serve --caps "$work/caps" --state "$state" --ui 127.0.0.1:0 2>"$work/serve.log" &
  server=$!
  ui=
  for _ in $(seq 1 300); do
    ui=$("$capsule" serve status --state "$state" --json 2>/dev/null | grep -o '"ui":"[^"]*"' | cut -d'"' -f4 || true)
    [ -n "$ui" ] && break
    sleep 0.1
  done
  [ -n "$ui" ] || { echo "serve --ui did not start:"; cat "$work/serve.log"; exit 1; }
  U=http://$ui
  csrf=$(curl -s -c "$jar" "$U/login" | grep -o '[0-9a-f]\{64\}' | head -1)
  curl -s -o /dev/null -b "$jar" -c "$jar" --data-urlencode "csrf=$csrf" --data-urlencode "token=$op" "$U/login"
  cookie=$(awk '$6 == "capsule_ui" && $3 ~ /^\/s\// {print $7}' "$jar")
  base=$(awk '$6 == "capsule_ui" && $3 ~ /^\/s\// {print $3}' "$jar")
  [ -n "$cookie" ] || { echo "cannot sign in to the dashboard at $U"; exit 1; }
}

# ui_cases SQL-FLAG APART: the cases into $work/cases, a line each: name,
# page path(s), statement(s), tab-separated. Four pages: the newest 100, a
# deep page (keyset: before the middle), a filter by capability, user and
# decision, and a text search that matches one record in 100,000 (a full
# scan on both sides); then a deep page seen for the first time: every run
# another 100 records (before mid - k*1000), none of them checked by this
# serve before, so each record's MAC is computed (the others show what a
# page costs once its records have been checked: serve remembers a
# record's bytes and MAC), its paths space-separated and its statements
# \x1f-separated; APART: the statements' records that many before the
# page's (PostgreSQL: neither side finds its page in the server's buffers
# warmed by the other), 0 for the same ones.
ui_cases() {
  local flag=$1 apart=$2 mid=$((n / 2)) i k paths='' qs=''
  sql() { "$build/bench/dashboard_fill" "$flag" "$@"; }
  local names=("newest 100" "deep page" "filter cap+user+decision" "text search")
  local pages=("$base/audit" "$base/audit?before=$mid" "$base/audit?capability=cap9&user=user7&decision=block" "$base/audit?q=needle")
  local sqls=("$(sql '' '' '' '' 0)" "$(sql '' '' '' '' $mid)" "$(sql cap9 user7 block '' 0)" "$(sql '' '' '' needle 0)")
  for i in "${!names[@]}"; do
    curl -s -b "$work/jar" -o "$work/page" "$U${pages[$i]}"
    grep -q 'class="record"' "$work/page" || { echo "the page ${pages[$i]} shows no record"; exit 1; }
    printf '%s\t%s\t%s\n' "${names[$i]}" "${pages[$i]}" "${sqls[$i]}"
  done >"$work/cases"
  for k in $(seq 0 $((runs + 1))); do
    paths="$paths${paths:+ }$base/audit?before=$((mid - 1000 * (k + 1)))"
    qs="$qs${qs:+$'\x1f'}$(sql '' '' '' '' $((mid - 1000 * (k + 1) - apart)))"
  done
  printf '%s\t%s\t%s\n' "deep page, first view" "$paths" "$qs" >>"$work/cases"
}
