#!/usr/bin/env bash
# Review 14 (a warm server's egress log, src/gateway/egress_spool.c;
# docs/state.md, "A warm instance's egress"), the keeper ended by a signal:
# what a warm MCP server's proxy decides after its last call is kept in a
# spool file as it comes, so a keeper ended by `capsule stop` (SIGTERM,
# which it does not catch) or by SIGKILL leaves it for the state. A hostile
# server (probe/server.py's "later", proxy mode) answers, then asks its
# proxy for a host it may not reach (403). `capsule stop` stores it at
# once (it opens the state once the keeper is gone): one row, no call_seq.
# Then a new keeper, "later" again, the keeper killed with SIGKILL: the
# next state open (`capsule audit`) stores the second, and no open stores
# either twice. Exits 1 while a decision is lost or duplicated, 0 when each
# is stored once, 77 when it cannot run here.
# Usage: warm_egress_stop.sh CAPSULE
. "$(dirname "$0")/lib.sh" "$1" review14-stop
proxied_probe
# later_done N: the server said N times that its proxy answered its request
later_done() {
  local _
  for _ in $(seq 1 600); do
    [ "$(cat "$state"/logs/* 2>/dev/null | grep -c 'LATER-EGRESS-DONE')" -ge "$1" ] && return 0
    sleep 0.1
  done
  skip "the server's request after its call was not seen ($1)"
}
free_rows() {
  free=$(sqlite3 "$state/state.db" "SELECT COUNT(*) FROM egress WHERE host = 'denied-later.invalid' AND call_seq IS NULL" 2>&1)
  echo "$1: egress rows for denied-later.invalid with no call: $free"
}
a=$(call p later '{}')
grep -q 'LATER:ok' <<<"$a" || { skip "no answer from later ($a)"; }
later_done 1
"$capsule" stop --state "$state" p || { skip "capsule stop did not stop the warm server"; }
free_rows "after capsule stop"
[ "$free" = 1 ] || { echo "FAIL: the stopped keeper's egress after its last call was not stored once ($free)"; fail=1; }

a=$(call p later '{}') # a new keeper
grep -q 'LATER:ok' <<<"$a" || { skip "no answer from later after the stop ($a)"; }
later_done 2
pid=$("$capsule" ps --json --state "$state" | python3 -c 'import json,sys; print(*[i["pid"] for i in json.load(sys.stdin) if i["capability"] == "p"])')
[ -n "$pid" ] || skip "capsule ps lists no keeper for p"
kill -9 $pid
for _ in $(seq 1 600); do
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
"$capsule" audit --tail 1 --state "$state" >/dev/null 2>&1
"$capsule" audit --tail 1 --state "$state" >/dev/null 2>&1
free_rows "after SIGKILL and two opens of the state"
[ "$free" = 2 ] || { echo "FAIL: the killed keeper's egress after its last call was not stored once ($free)"; fail=1; }
[ "$fail" = 0 ] && echo "PASS: a stopped or killed keeper's egress after its last call is stored once"
exit "$fail"
