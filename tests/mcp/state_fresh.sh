#!/usr/bin/env bash
# serve's kept state reads (gateway/state_cache.c): through `capsule serve
# --mcp-http` on a warm MCP server (examples/mcp-c's echo), a policy
# changed by `capsule policy set` (another process), by a user's override
# and its removal, applies to the very next call, each time, ten times
# over (each state read twice between changes: the second call, on what
# the first kept, answers the same). As root and as uid 65534.
# Usage: state_fresh.sh CAPSULE
set -u
capsule=$(realpath "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
pkg-config --exists jansson 2>/dev/null || { echo "SKIP: libjansson-dev is not installed (scripts/deps.sh build)"; exit 77; }
make -s -C "$root/examples/mcp-c" >/dev/null || { echo "FAIL: examples/mcp-c does not build"; exit 1; }
work=$(mktemp -d /var/tmp/capsule-state-fresh.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  # the warm servers' keepers (they hold STATE/run/*.mcp.lock) end with their state
  for f in /proc/[0-9]*/fd/*; do
    case $(readlink "$f" 2>/dev/null) in "$work"/*) f=${f#/proc/}; kill "${f%%/*}" 2>/dev/null ;; esac
  done
  sleep 0.5
  rm -rf "$work"
}
trap cleanup EXIT
export CAPSULE_STATE_KEY=
pass=0 fail=0
ok() { echo "  ok   $1"; pass=$((pass + 1)); }
bad() { echo "  FAIL $1"; fail=$((fail + 1)); }
H=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
post() { # URL TOKEN SESSION BODY: the answer's body
  curl -sS -m 120 "${H[@]}" -H "Authorization: Bearer $2" -H "Mcp-Session-Id: $3" \
    -H 'MCP-Protocol-Version: 2025-06-18' --data "$4" "$1"
}
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
  local who=$1 state=$work/state-$1 caps=$work/caps-$1
  wrap=()
  mkdir -p "$state" "$caps" && chmod 700 "$state"
  cp -a "$root/examples/mcp-c" "$caps/mcp-c"
  if [ "$who" = nobody ]; then
    chown -R 65534:65534 "$state" "$caps"
    wrap=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  fi
  echo "as $who:"
  local C=(--caps "$caps" --state "$state") port serve_pid i good
  local me
  me=$("${wrap[@]}" id -un)
  "${wrap[@]}" "$capsule" call "${C[@]}" mcp-c echo '{"text":"x"}' >/dev/null 2>&1 # discovery
  "${wrap[@]}" "$capsule" policy set "${C[@]}" mcp-c echo allow >/dev/null || { bad "$who: policy set"; return; }
  token=$("${wrap[@]}" "$capsule" access issue t --state "$state" 2>/dev/null)
  port=$((20000 + RANDOM % 20000))
  url=http://127.0.0.1:$port/mcp
  "${wrap[@]}" "$capsule" serve "${C[@]}" --mcp-http "127.0.0.1:$port" --rate 1000000 2>"$work/serve-$who.log" &
  serve_pid=$!
  pids+=("$serve_pid")
  for _ in $(seq 1 600); do "${wrap[@]}" "$capsule" serve status --state "$state" >/dev/null 2>&1 && break; sleep 0.1; done
  sid=$(curl -sS -m 60 -D - -o /dev/null "${H[@]}" -H "Authorization: Bearer $token" --data \
    '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}' \
    "$url" | tr -d '\r' | awk -F': ' 'tolower($1) == "mcp-session-id" {print $2}')
  [ -n "$sid" ] || { bad "$who: no session"; head -5 "$work/serve-$who.log"; return; }
  post "$url" "$token" "$sid" '{"jsonrpc":"2.0","method":"notifications/initialized"}' >/dev/null
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
  local v
  v=$("${wrap[@]}" "$capsule" audit verify --state "$state" 2>&1) && ok "$who: audit verify passes" || bad "$who: audit verify: $v"
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
