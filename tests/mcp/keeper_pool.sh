#!/usr/bin/env bash
# serve's kept connections to a warm MCP server's keeper
# (gateway/mcp_keeper_pool.c, the keeper's calls told from idle kept
# connections in mcp_keeper_route.c), through `capsule serve --mcp-http`
# on examples/mcp-c's echo:
# - calls one after another go on one kept connection: a socket the
#   keeper accepted before a call still serves after it (without the pool
#   each call's connection ends with its answer);
# - the keeper killed (SIGKILL) between two calls: the next call is
#   answered all the same (the kept connection to the dead keeper is let
#   go, a new keeper starts), and so is the one after it;
# - the keeper killed (SIGKILL) while its server runs a call that came on
#   a kept connection (mcp-c's wait; the keeper said it took the call on
#   the connection's take pipe before the call reached the server): the
#   call fails, it is not made again on a new keeper (which would answer
#   "waited");
# - every call has exactly one audit record, outcome ok; audit verify
#   passes. As root and as uid 65534.
# Usage: keeper_pool.sh CAPSULE
set -u
command -v ss >/dev/null || { echo "SKIP: ss (iproute2) is not installed"; exit 77; }
. "$(dirname "$0")/../lib/mcp_c.sh" "$1" keeper-pool
kpost() { post "$url" "$token" "$sid" "$1"; }
call() { # TEXT: 0 when echo answered it
  local a
  a=$(kpost '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp-c__echo","arguments":{"text":"'"$1"'"}}}')
  grep -q "\"text\":\"$1\"" <<<"$a" && ! grep -q '"isError":true' <<<"$a" && return 0
  echo "    $1: $(head -c 300 <<<"$a")"
  return 1
}
accepted() { # the inodes of the sockets the keeper accepted (its socket's connections)
  local sock
  sock=$(find "$state" -name '*.mcp.sock' 2>/dev/null | head -1)
  [ -n "$sock" ] && ss -xH 2>/dev/null | awk -v s="$sock" '$5 == s && $6 != 0 {print $6}' | sort -u
}
keeper_pid() { # the process holding the keeper's lock (RUN/KEY.mcp.lock)
  for f in /proc/[0-9]*/fd/*; do
    case $(readlink "$f" 2>/dev/null) in "$state"/*.mcp.lock) f=${f#/proc/}; echo "${f%%/*}" ;; esac
  done | sort -u | head -1
}
busy() { # whether the keeper's status file shows a call in
  grep -qx 'leases=1' "$(find "$state" -name '*.mcp.status' 2>/dev/null | head -1)" 2>/dev/null
}
taken_then_killed() {
  local kp a
  kp=$(keeper_pid) # before the call: a scan of /proc takes seconds on a busy machine
  for _ in $(seq 1 300); do busy || break; sleep 0.1; done # b2 shown ended
  busy && { bad "$who: the keeper's status still shows b2 30 s after its answer"; return; }
  kpost '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp-c__wait","arguments":{"ms":15000}}}' >"$work/wait-$who.out" &
  a=$!
  for _ in $(seq 1 300); do busy && break; sleep 0.1; done
  sleep 0.5 # the server waits 15 s: killed well before its answer, even under ASan
  [ -n "$kp" ] && busy && kill -9 "$kp" || bad "$who: the wait call never showed in the keeper's status"
  wait "$a"
  if grep -q '"isError":true\|"error":' "$work/wait-$who.out" && ! grep -q waited "$work/wait-$who.out"; then
    ok "$who: a call taken on a kept connection, its keeper killed: failed, not made again"
  else
    bad "$who: a call taken on a kept connection, its keeper killed: $(head -c 300 "$work/wait-$who.out")"
  fi
}
run_as() {
  mcpc_user "$1"
  "${wrap[@]}" "$capsule" call "${C[@]}" mcp-c echo '{"text":"x"}' >/dev/null 2>&1 # discovery
  "${wrap[@]}" "$capsule" policy set "${C[@]}" mcp-c echo allow >/dev/null || { bad "$who: policy set"; return; }
  "${wrap[@]}" "$capsule" policy set "${C[@]}" mcp-c wait allow >/dev/null || { bad "$who: policy set wait"; return; }
  token=$("${wrap[@]}" "$capsule" access issue t --state "$state" 2>/dev/null)
  [ -n "$token" ] || { bad "$who: access issue"; return; }
  mcpc_serve "$work/serve-$who.log" --rate 1000000 || { bad "$who: no session"; return; }
  local texts=() t
  for t in a1 a2 a3; do # the first starts the keeper; the next ones find it warm
    texts+=("$who-$t")
    call "$who-$t" || bad "$who: call $t answered"
  done
  local before after kept=
  before=$(accepted)
  texts+=("$who-a4")
  call "$who-a4" || bad "$who: call a4 answered"
  after=$(accepted)
  for t in $before; do grep -qx "$t" <<<"$after" && kept=$t; done
  [ -n "$kept" ] && ok "$who: calls one after another go on one kept connection" ||
    bad "$who: no connection to the keeper outlived a call (before a4: [$before], after: [$after])"
  local kp
  kp=$(keeper_pid)
  [ -n "$kp" ] || { bad "$who: no keeper process found"; return; }
  kill -9 "$kp"
  for _ in $(seq 1 300); do [ -d "/proc/$kp" ] || break; sleep 0.1; done
  texts+=("$who-b1" "$who-b2")
  call "$who-b1" && ok "$who: the call after the keeper was killed is answered" ||
    bad "$who: the call after the keeper was killed is not answered"
  call "$who-b2" && ok "$who: and the one after it" || bad "$who: the second call after the kill"
  taken_then_killed
  kill "$serve_pid" 2>/dev/null
  wait "$serve_pid" 2>/dev/null
  "${wrap[@]}" "$capsule" audit --json --state "$state" >"$work/audit-$who.json" 2>"$work/audit-$who.err" ||
    { bad "$who: audit --json failed"; cat "$work/audit-$who.err"; return; }
  local why
  if why=$(python3 - "$work/audit-$who.json" "${texts[@]}" <<'PY'
import hashlib, json, sys
rows = json.load(open(sys.argv[1]))
def h(text):
    return hashlib.sha256(json.dumps({"text": text}, separators=(",", ":")).encode()).hexdigest()
bad = []
for t in sys.argv[2:]:
    got = [r for r in rows if r["capability"] == "mcp-c" and r["tool"] == "echo" and r["args_sha256"] == h(t)]
    if len(got) != 1:
        bad.append(f"{t}: {len(got)} records")
    elif got[0]["outcome"] != "ok":
        bad.append(f"{t}: outcome {got[0]['outcome']}")
print("; ".join(bad[:5]))
sys.exit(1 if bad else 0)
PY
  ); then
    ok "$who: every call has one audit record, outcome ok"
  else
    bad "$who: $why"
  fi
  mcpc_verify "$who"
}
run_as root
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  run_as nobody
else
  echo "  (uid 65534 part skipped: needs root and setpriv)"
fi
echo "keeper_pool: $pass passed, $fail failed"
[ "$fail" = 0 ]
