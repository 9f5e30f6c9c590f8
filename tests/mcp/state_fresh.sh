#!/usr/bin/env bash
# serve's kept state reads (gateway/state_cache.c): through `capsule serve
# --mcp-http` on a warm MCP server (examples/mcp-c's echo), a policy
# changed by `capsule policy set` (another process), by a user's override
# and its removal, applies to the very next call, each time, ten times
# over (each state read twice between changes: the second call, on what
# the first kept, answers the same). As root and as uid 65534.
# Usage: state_fresh.sh CAPSULE
set -u
. "$(dirname "$0")/../lib/mcp_c.sh" "$1" state-fresh
call() { # the answer's text to tools/call of echo
  post "$url" "$token" "$sid" "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"tools/call\",\"params\":{\"name\":\"mcp-c__echo\",\"arguments\":{\"text\":\"t$1\"}}}"
}
expect() { # NAME ID allowed|blocked
  local a
  a=$(call "$2")
  if [ "$3" = allowed ]; then
    grep -q "\"text\":\"t$2\"" <<<"$a" && ! grep -q '"isError":true' <<<"$a" && return 0
  else
    grep -q '"isError":true' <<<"$a" && grep -q 'blocked by policy' <<<"$a" && return 0
  fi
  bad "$1 (wanted $3: ${a:0:300})"
  return 1
}
run_as() {
  mcpc_user "$1"
  local i good
  local me
  me=$("${wrap[@]}" id -un)
  "${wrap[@]}" "$capsule" call "${C[@]}" mcp-c echo '{"text":"x"}' >/dev/null 2>&1 # discovery
  "${wrap[@]}" "$capsule" policy set "${C[@]}" mcp-c echo allow >/dev/null || { bad "$who: policy set"; return; }
  token=$("${wrap[@]}" "$capsule" access issue t --state "$state" 2>/dev/null)
  mcpc_serve "$work/serve-$who.log" --rate 1000000 || { bad "$who: no session"; return; }
  good=0
  for i in $(seq 1 10); do
    expect "$who: round $i: allowed" "${i}1" allowed && expect "$who: round $i: allowed again (kept)" "${i}2" allowed || continue
    "${wrap[@]}" "$capsule" policy set "${C[@]}" mcp-c echo block >/dev/null || { bad "$who: policy set block"; continue; }
    expect "$who: round $i: blocked right after policy set block" "${i}3" blocked && expect "$who: round $i: blocked again" "${i}4" blocked || continue
    "${wrap[@]}" "$capsule" policy set "${C[@]}" mcp-c echo allow --user "$me" >/dev/null || { bad "$who: policy set --user"; continue; }
    expect "$who: round $i: allowed right after the user's override" "${i}5" allowed || continue
    "${wrap[@]}" "$capsule" policy rm mcp-c echo --user "$me" --state "$state" >/dev/null || { bad "$who: policy rm --user"; continue; }
    expect "$who: round $i: blocked right after the override's removal" "${i}6" blocked || continue
    "${wrap[@]}" "$capsule" policy set "${C[@]}" mcp-c echo allow >/dev/null || { bad "$who: policy set allow"; continue; }
    good=$((good + 1))
  done
  [ "$good" = 10 ] && ok "$who: every policy change applied to the next call (10 rounds, 60 calls)" || bad "$who: $good of 10 rounds right"
  mcpc_verify "$who"
  kill "$serve_pid" 2>/dev/null
  wait "$serve_pid" 2>/dev/null
}
run_as root
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  run_as nobody
else
  echo "  (uid 65534 part skipped: needs root and setpriv)"
fi
echo "state_fresh: $pass passed, $fail failed"
[ "$fail" = 0 ]
