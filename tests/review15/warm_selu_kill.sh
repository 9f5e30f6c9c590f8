#!/usr/bin/env bash
# The warm Selu process (capsule-selu, the spawner's child) SIGKILLed
# twice while 8 clients make calls on it at once through
# `serve --mcp-http` (its appends take turns on a mutex and commit in
# groups): the audit chain still verifies (`capsule audit verify`), no
# call has two records (each call's arguments are its own), every call
# answered OK has its record, every record's call was made, and the
# calls after the kills are warm again (a new warm process, spawned by
# the spawner). Exits 0 when all hold. Usage: warm_selu_kill.sh CAPSULE
set -u
. "$(dirname "$0")/lib.sh" "$1" r15-selu-kill
command -v jq >/dev/null && command -v sqlite3 >/dev/null || skip "jq or sqlite3 is not installed"
[ -x "$root/examples/selu-text/capability" ] || skip "examples/selu-text is not built (make build builds it)"
cp -r "$root/examples/selu-text" "$caps/selu-text"
"$capsule" policy set "${C[@]}" text-tools word_count allow >/dev/null || exit 1
serve_http --rate 100000
words() { # N: the call's text of N words; its answer's word count (else its answer, kept)
  local text a w
  text=$(seq -s ' ' 1 "$1")
  a=$(post '{"jsonrpc":"2.0","id":'"$1"',"method":"tools/call","params":{"name":"text-tools__word_count","arguments":{"text":"'"$text"'"}}}' |
    sed -n 's/^data: //p; /^{/p' | tail -1)
  w=$(jq -r '.result.structuredContent.words // "error"' 2>/dev/null <<<"$a")
  [ "$w" = "$1" ] || echo "$1: $a" >>"$work/failed"
  echo "${w:-error}"
}
[ "$(words 1)" = 1 ] || skip "the first Selu call did not answer"
warm_pid() {
  local c g
  for c in $(pgrep -P "${pids[0]}"); do
    for g in $(pgrep -P "$c"); do [ "$(cat /proc/"$g"/comm 2>/dev/null)" = capsule-selu ] && echo "$g"; done
  done | head -1
}
for _ in $(seq 100); do [ -n "$(warm_pid)" ] && break; sleep 0.1; done
[ -n "$(warm_pid)" ] || skip "no warm Selu process"
# 8 clients, 25 calls each, each call's text its own number of words
clients=()
for c in $(seq 0 7); do
  (for i in $(seq 1 25); do n=$((2 + c * 25 + i)); echo "$n $(words $n)"; done >"$work/client.$c") &
  clients+=($!)
done
killed=0
for _ in 1 2; do
  for _ in $(seq 100); do [ "$(cat "$work"/client.* 2>/dev/null | wc -l)" -ge $((killed * 70 + 40)) ] && break; sleep 0.1; done
  p=$(warm_pid)
  [ -n "$p" ] && kill -9 "$p" && killed=$((killed + 1))
  sleep 1.2 # the next process is asked for at most once a second
done
wait "${clients[@]}"
echo "warm processes killed: $killed"
[ "$killed" = 2 ] || skip "the warm process was not there to kill twice"
ok=$(awk '$1 == $2' "$work"/client.* | wc -l)
failed=$(awk '$1 != $2' "$work"/client.* | wc -l)
echo "calls answered OK: $ok, failed: $failed"
[ -f "$work/failed" ] && cut -c1-300 "$work/failed" | sort -t: -k2 | uniq -c -f1 | head -5
after=0
for i in 1 2 3; do [ "$(words $((300 + i)))" = $((300 + i)) ] && after=$((after + 1)); done
[ $after = 3 ] || { echo "FAIL: calls after the kills: $after of 3 answered"; fail=1; }
[ -n "$(warm_pid)" ] || { echo "FAIL: no warm process after the kills"; fail=1; }
kill "${pids[0]}" && wait "${pids[0]}" 2>/dev/null # serve's end: the state's last writes
pids=()
verify=$("$capsule" audit verify --state "$state" 2>&1) || { echo "FAIL: audit verify: $verify"; fail=1; }
q() { sqlite3 "$state/state.db" "$1"; }
rows=$(q "SELECT COUNT(*) FROM audit WHERE tool = 'word_count' AND args_hash != ''")
dups=$(q "SELECT COUNT(*) FROM (SELECT args_hash FROM audit WHERE tool = 'word_count' AND args_hash != '' GROUP BY args_hash HAVING COUNT(*) > 1)")
okrows=$(q "SELECT COUNT(*) FROM audit WHERE tool = 'word_count' AND outcome = 'ok'")
echo "records: $rows ($okrows ok), arguments recorded twice: $dups"
q "SELECT outcome, COUNT(*) FROM audit WHERE tool = 'word_count' GROUP BY outcome" | sed 's/^/  /'
# twice: a call recorded twice; the one window left (docs/gateway.md,
# "In-flight markers"), a kill between the COMMIT and the marker's spoiling
# write, gives its record then an interrupted one: said, not failed
twice=$(q "SELECT args_hash, group_concat(outcome, ',') FROM (SELECT args_hash, outcome FROM audit WHERE tool = 'word_count' AND args_hash != '' ORDER BY seq) GROUP BY args_hash HAVING COUNT(*) > 1")
if [ -n "$twice" ]; then
  echo "$twice" | sed 's/^/  twice: /'
  if echo "$twice" | grep -qv '|ok,interrupted$'; then
    echo "FAIL: a call recorded twice"
    fail=1
  else
    echo "(a kill between a COMMIT and its marker's write: the window docs/gateway.md names)"
  fi
fi
# the first call, the 200 of the clients, the 3 after
calls=$(q "SELECT COUNT(DISTINCT args_hash) FROM audit WHERE tool = 'word_count' AND args_hash != ''")
[ "$calls" -le 204 ] || { echo "FAIL: records of calls not made ($calls calls recorded)"; fail=1; }
[ "$okrows" -ge $((ok + 4)) ] || { echo "FAIL: a call answered OK without its record"; fail=1; }
sanitized
[ $fail = 0 ] && echo "held"
exit $fail
