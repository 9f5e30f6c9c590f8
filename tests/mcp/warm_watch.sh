#!/usr/bin/env bash
# A warm third-party MCP server (examples/mcp-c) behind `capsule serve
# --mcp-http`, what its keeper now does besides one call at a time:
# - resources/subscribe: the server's notifications/resources/updated,
#   sent between calls (after `touch` answered), reach the subscribed
#   session's GET stream; resources/unsubscribe answers;
# - the egress log: a warm server's connections through capsule's egress
#   proxy (`connect`: a CONNECT the proxy denies) are stored against the
#   call that made them, one row per call, each naming its audit record;
# - calls at once on one session and server: each answered with its own
#   text, one audit record per call, `audit verify` passing;
# - a call answered on serve's fast path (the HTTP thread), cancelled by
#   notifications/cancelled: no answer, audited, the server serving on,
#   the next call on that connection answered.
# As root and as uid 65534.
# Usage: warm_watch.sh CAPSULE
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
command -v sqlite3 >/dev/null || { echo "SKIP: sqlite3 is not installed"; exit 77; }
pkg-config --exists jansson 2>/dev/null || { echo "SKIP: libjansson-dev is not installed (scripts/deps.sh build)"; exit 77; }
make -s -C "$root/examples/mcp-c" >/dev/null || { echo "FAIL: examples/mcp-c does not build"; exit 1; }
# shellcheck source=../lib/serve.sh
. "$root/tests/lib/serve.sh" "$1" warm-watch
H=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
post() { # BODY: the answer's body
  curl -sS -m 120 "${H[@]}" -H "Authorization: Bearer $token" -H "Mcp-Session-Id: $sid" \
    -H 'MCP-Protocol-Version: 2025-06-18' --data "$1" "$url"
}
call() { # ID TOOL ARGS
  post "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"tools/call\",\"params\":{\"name\":\"$2\",\"arguments\":$3}}"
}
keeper_busy() { "${wrap[@]}" "$capsule" ps --state "$1" 2>/dev/null | grep -Eq "^$2 +[0-9]+ +serving +mcp +1/"; }

run_as() {
  local who=$1 state=$work/state-$1 caps=$work/caps-$1
  local wrap=()
  mkdir -p "$state" "$caps" && chmod 700 "$state"
  cp -a "$root/examples/mcp-c" "$caps/mcp-c"
  cp -a "$root/examples/mcp-c" "$caps/mcp-net" # the same server, its network through the proxy
  # its own resource URI: one two servers of a session name is read from neither (docs/mcp.md)
  sed -i -e 's|"network": { "mode": "blocked" }|"network": { "mode": "proxy", "allow_domains": ["allowed.invalid"] }|' \
    -e 's|"mcp_server": \["./server"\]|"mcp_server": ["./server", "test://net-counter"]|' \
    "$caps/mcp-net/capability.json"
  if [ "$who" = nobody ]; then
    chown -R 65534:65534 "$state" "$caps"
    wrap=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  fi
  echo "as $who:"
  C() { "${wrap[@]}" "$capsule" "$@"; }
  local G=(--caps "$caps" --state "$state")
  for cap in mcp-c mcp-net; do
    C call "${G[@]}" "$cap" test_simple_text '{}' >/dev/null 2>&1 # discovers its tools
    for t in test_simple_text echo touch connect wait; do C policy set "${G[@]}" "$cap" "$t" allow >/dev/null; done
  done
  token=$(C access issue t --state "$state" 2>/dev/null)
  serve_start "${G[@]}" --mcp-http 127.0.0.1:0
  local port
  port=$(C serve status --state "$state" --json 2>/dev/null | sed -n 's/.*"mcp_http":"127\.0\.0\.1:\([0-9]*\)".*/\1/p')
  url=http://127.0.0.1:$port/mcp
  sid=$(curl -sS -m 60 -D - -o /dev/null "${H[@]}" -H "Authorization: Bearer $token" --data \
    '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}' \
    "$url" | tr -d '\r' | awk -F': ' 'tolower($1) == "mcp-session-id" {print $2}')
  [ -n "$sid" ] && ok "$who: session" || { bad "$who: session"; head -5 "$work/serve-$who.log"; return; }
  post '{"jsonrpc":"2.0","method":"notifications/initialized"}' >/dev/null
  # the session's GET stream: what is not an answer (the updates) comes on it
  curl -sS -N -m 300 -H 'Accept: text/event-stream' -H "Authorization: Bearer $token" -H "Mcp-Session-Id: $sid" \
    -H 'MCP-Protocol-Version: 2025-06-18' "$url" >"$work/sse-$who" 2>/dev/null &
  pids+=($!)
  local body
  body=$(post '{"jsonrpc":"2.0","id":1,"method":"resources/list"}')
  grep -q 'test://counter' <<<"$body" && ok "$who: resources-listed" || bad "$who: resources-listed (${body:0:300})"
  body=$(post '{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"test://counter"}}')
  grep -q '"id":2,"result":{}' <<<"$body" && ok "$who: subscribed" || bad "$who: subscribed (${body:0:300})"
  body=$(call 3 mcp-c__touch '{}')
  grep -q 'counter 1' <<<"$body" && ok "$who: touched" || bad "$who: touched (${body:0:300})"
  # the server tells it after its answer: between calls, on the GET stream
  if wait_for grep -q '"method":"notifications/resources/updated","params":{"uri":"test://counter"}' "$work/sse-$who"; then
    ok "$who: update-between-calls-delivered"
  else bad "$who: update-between-calls-delivered"; head -c 600 "$work/sse-$who" | sed 's/^/         /'; fi
  body=$(post '{"jsonrpc":"2.0","id":4,"method":"resources/unsubscribe","params":{"uri":"test://counter"}}')
  grep -q '"id":4,"result":{}' <<<"$body" && ok "$who: unsubscribed" || bad "$who: unsubscribed (${body:0:300})"
  # the egress log: each warm call's denied CONNECT stored against that call
  local denied=0
  for i in 5 6; do
    body=$(call $i mcp-net__connect "{\"host\":\"blocked-$i.invalid\",\"port\":443}") # two hosts: not coalesced
    grep -q 'HTTP/1.[01] 4[0-9][0-9]' <<<"$body" && denied=$((denied + 1))
  done
  [ "$denied" = 2 ] && ok "$who: proxy-denied-connect" || bad "$who: proxy-denied-connect (${body:0:300})"
  local rows
  # each call's row names its own audit record: two records, in the calls' order
  rows=$("${wrap[@]}" sqlite3 "$state/state.db" "SELECT e.decision, e.host, e.port, a.tool, a.decision FROM egress e JOIN audit a ON a.seq = e.call_seq WHERE e.capability = 'mcp-net' ORDER BY e.call_seq, e.seq" 2>&1)
  local seqs
  seqs=$("${wrap[@]}" sqlite3 "$state/state.db" "SELECT COUNT(DISTINCT call_seq) FROM egress WHERE capability = 'mcp-net'" 2>&1)
  if [ "$(printf '%s\n' "$rows" | head -2)" = "$(printf 'deny|blocked-5.invalid|443|connect|allow\ndeny|blocked-6.invalid|443|connect|allow')" ] && [ "$seqs" = 2 ]; then
    ok "$who: warm-egress-rows-per-call"
  else bad "$who: warm-egress-rows-per-call"; echo "$rows" | head -5 | sed 's/^/         /'; fi
  # calls at once on the one warm server
  local k
  for k in $(seq 10 17); do call "$k" mcp-c__echo "{\"text\":\"at once $k\"}" >"$work/at-once-$who-$k" & done
  wait_calls=0
  for k in $(seq 10 17); do
    for _ in $(seq 1 1200); do grep -q "at once $k" "$work/at-once-$who-$k" 2>/dev/null && break; sleep 0.1; done
    grep -q "\"id\":$k,.*at once $k" "$work/at-once-$who-$k" && ! grep -q '"isError":true' "$work/at-once-$who-$k" && wait_calls=$((wait_calls + 1))
  done
  [ "$wait_calls" = 8 ] && ok "$who: calls-at-once-answered" || bad "$who: calls-at-once-answered ($wait_calls of 8)"
  local n
  n=$(C audit --json --state "$state" 2>/dev/null | python3 -c '
import json, sys
print(sum(1 for r in json.load(sys.stdin) if r["capability"] == "mcp-c" and r["tool"] == "echo" and not r["decision"].startswith("policy")))')
  [ "$n" = 8 ] && ok "$who: one-audit-record-per-call" || bad "$who: one-audit-record-per-call ($n, not 8)"
  # a call on serve's fast path (this client declared nothing: answered on
  # the HTTP thread) cancelled by notifications/cancelled: no answer (202),
  # the server told, the call audited as not ok; then a call on the same
  # connection (its HTTP thread, whose cancellation is reset) answered
  local A=("${H[@]}" -H "Authorization: Bearer $token" -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-06-18')
  curl -sS -m 120 -o "$work/cancel-$who" -w '%{http_code}\n' "${A[@]}" \
    --data '{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"mcp-c__wait","arguments":{"ms":20000}}}' \
    "$url" --next -sS -m 120 -o "$work/cancel-next-$who" -w '%{http_code} %{num_connects}\n' "${A[@]}" \
    --data '{"jsonrpc":"2.0","id":32,"method":"tools/call","params":{"name":"mcp-c__echo","arguments":{"text":"same connection"}}}' \
    "$url" >"$work/cancel-code-$who" 2>&1 &
  local waiter=$!
  wait_for keeper_busy "$state" mcp-c
  post '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":30,"reason":"the test"}}' >/dev/null
  wait "$waiter"
  if [ "$(head -1 "$work/cancel-code-$who")" = 202 ] && [ ! -s "$work/cancel-$who" ]; then ok "$who: fast-call-cancelled-no-answer"
  else bad "$who: fast-call-cancelled-no-answer (HTTP $(head -1 "$work/cancel-code-$who"): $(head -c 200 "$work/cancel-$who"))"; fi
  # num_connects 0: curl sent it on the cancelled call's connection
  if [ "$(sed -n 2p "$work/cancel-code-$who")" = "200 0" ] && grep -q 'same connection' "$work/cancel-next-$who"; then
    ok "$who: fast-call-after-cancel-same-connection"
  else bad "$who: fast-call-after-cancel-same-connection ($(sed -n 2p "$work/cancel-code-$who"): $(head -c 200 "$work/cancel-next-$who" 2>/dev/null))"; fi
  n=$(C audit --json --state "$state" 2>/dev/null | python3 -c '
import json, sys
print(sum(1 for r in json.load(sys.stdin) if r["tool"] == "wait" and r["decision"] == "allow" and r["outcome"] != "ok"))')
  [ "$n" = 1 ] && ok "$who: fast-call-cancel-audited" || bad "$who: fast-call-cancel-audited ($n records)"
  body=$(call 31 mcp-c__echo '{"text":"after the cancel"}')
  grep -q 'after the cancel' <<<"$body" && ok "$who: serves-after-cancel" || bad "$who: serves-after-cancel (${body:0:200})"
  C audit verify --state "$state" >/dev/null 2>&1 && ok "$who: audit-verifies" || bad "$who: audit-verifies"
  kill "${pids[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null
  pids=()
  C stop --state "$state" mcp-c >/dev/null 2>&1
  C stop --state "$state" mcp-net >/dev/null 2>&1
}
run_as root
if setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$root/examples/mcp-c/server" 2>/dev/null; then
  run_as nobody
else
  echo "  (uid 65534 cannot reach $root: skipped as nobody)"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
