#!/usr/bin/env bash
# subscriptions/listen (2026-07-28) in front of a warm third-party MCP
# server (examples/mcp-c) behind `capsule serve --capability mcp-c
# --mcp-http`, sessionless, in raw HTTP (curl):
# - resourceSubscriptions: the URIs the server took are acknowledged (one
#   it refused is not), and its notifications/resources/updated, sent
#   between calls (after `touch` answered), reach the listen's stream with
#   the listen's id as subscriptionId; a listen that did not ask for that
#   URI is not told;
# - promptsListChanged and resourcesListChanged acknowledged where the
#   served server is watched, not without a server (--capability absent);
# - a sessionless 2026-07-28 notification (notifications/cancelled) is
#   accepted with 202, as the transport says; one in no revision's form
#   without a session is still refused (400);
# - on stdio (`capsule mcp --capability mcp-c`): a listen cancelled by
#   notifications/cancelled is told no more (the server's next update
#   reaches only the listen opened after it).
# As root and as uid 65534.
# Usage: listen_watch.sh CAPSULE
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
pkg-config --exists jansson 2>/dev/null || { echo "SKIP: libjansson-dev is not installed (scripts/deps.sh build)"; exit 77; }
make -s -C "$root/examples/mcp-c" >/dev/null || { echo "FAIL: examples/mcp-c does not build"; exit 1; }
# shellcheck source=../lib/serve.sh
. "$root/tests/lib/serve.sh" "$1" listen-watch
V=2026-07-28
META='"_meta":{"io.modelcontextprotocol/protocolVersion":"'$V'","io.modelcontextprotocol/clientCapabilities":{}}'
post26() { # METHOD NAME BODY [CURL-ARGS...]: the answer's body
  local m=$1 n=$2 body=$3
  shift 3
  local name=()
  [ -n "$n" ] && name=(-H "Mcp-Name: $n")
  curl -sS -m 120 -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H "Authorization: Bearer $token" -H "MCP-Protocol-Version: $V" -H "Mcp-Method: $m" "${name[@]}" \
    "$@" --data "$body" "$url"
}
listen26() { # ID NOTIFICATIONS OUT: a listen stream into OUT, in the background
  post26 subscriptions/listen "" \
    "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"subscriptions/listen\",\"params\":{$META,\"notifications\":$2}}" \
    -N -m 300 >"$3" 2>/dev/null &
  pids+=($!)
}
acked() { grep -q '"method":"notifications/subscriptions/acknowledged"' "$1"; }

run_as() {
  local who=$1 state=$work/state-$1 caps=$work/caps-$1
  local wrap=()
  mkdir -p "$state" "$caps" && chmod 700 "$state"
  cp -a "$root/examples/mcp-c" "$caps/mcp-c"
  if [ "$who" = nobody ]; then
    chown -R 65534:65534 "$state" "$caps"
    wrap=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  fi
  echo "as $who:"
  C() { "${wrap[@]}" "$capsule" "$@"; }
  local G=(--caps "$caps" --state "$state")
  C call "${G[@]}" mcp-c test_simple_text '{}' >/dev/null 2>&1 # discovers its tools
  C policy set "${G[@]}" mcp-c touch allow >/dev/null
  token=$(C access issue t --state "$state" 2>/dev/null)
  serve_start "${G[@]}" --capability mcp-c --mcp-http 127.0.0.1:0
  local port
  port=$(C serve status --state "$state" --json 2>/dev/null | sed -n 's/.*"mcp_http":"127\.0\.0\.1:\([0-9]*\)".*/\1/p')
  url=http://127.0.0.1:$port/mcp
  local a=$work/listen-a-$who b=$work/listen-b-$who
  listen26 7 '{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":["test://counter","test://none"]}' "$a"
  listen26 '"b"' '{"toolsListChanged":true}' "$b"
  if wait_for acked "$a" && wait_for acked "$b"; then ok "$who: listens-acknowledged"; else
    bad "$who: listens-acknowledged"; head -c 600 "$a" "$b" | sed 's/^/         /'; return; fi
  local ack
  ack=$(grep -m1 'subscriptions/acknowledged' "$a")
  grep -q '"io.modelcontextprotocol/subscriptionId":7' <<<"$ack" &&
    grep -q '"resourceSubscriptions":\["test://counter"\]' <<<"$ack" &&
    ok "$who: ack-lists-taken-uri-only" || bad "$who: ack-lists-taken-uri-only (${ack:0:400})"
  grep -q '"promptsListChanged":true' <<<"$ack" && grep -q '"resourcesListChanged":true' <<<"$ack" &&
    grep -q '"toolsListChanged":true' <<<"$ack" &&
    ok "$who: ack-lists-changes-of-watched-server" || bad "$who: ack-lists-changes-of-watched-server (${ack:0:400})"
  ack=$(grep -m1 'subscriptions/acknowledged' "$b")
  ! grep -q 'resourceSubscriptions\|promptsListChanged' <<<"$ack" && grep -q 'subscriptionId":"b"' <<<"$ack" &&
    ok "$who: ack-only-what-asked" || bad "$who: ack-only-what-asked (${ack:0:400})"
  local body
  body=$(post26 tools/call touch "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{$META,\"name\":\"touch\",\"arguments\":{}}}")
  grep -q 'counter 1' <<<"$body" && ok "$who: touched" || bad "$who: touched (${body:0:300})"
  # the server tells it after its answer: between calls, on the listen's stream
  if wait_for grep -q '"method":"notifications/resources/updated","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":7},"uri":"test://counter"}' "$a"; then
    ok "$who: update-on-listen-stream"
  else bad "$who: update-on-listen-stream"; head -c 800 "$a" | sed 's/^/         /'; fi
  ! grep -q 'resources/updated' "$b" && ok "$who: update-not-on-unasked-listen" || bad "$who: update-not-on-unasked-listen"
  # a sessionless 2026-07-28 notification: 202 (the transport's answer to one taken)
  local st
  st=$(post26 notifications/cancelled "" "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{$META,\"requestId\":3}}" -o /dev/null -w '%{http_code}')
  [ "$st" = 202 ] && ok "$who: sessionless-notification-202" || bad "$who: sessionless-notification-202 ($st)"
  st=$(curl -sS -m 60 -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H "Authorization: Bearer $token" --data '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}' "$url")
  [ "$st" = 400 ] && ok "$who: sessionless-2025-notification-400" || bad "$who: sessionless-2025-notification-400 ($st)"
  kill "${pids[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null
  pids=()
  # without a served third-party server: the lists' changes are not honoured
  serve_start "${G[@]}" --mcp-http 127.0.0.1:0
  port=$(C serve status --state "$state" --json 2>/dev/null | sed -n 's/.*"mcp_http":"127\.0\.0\.1:\([0-9]*\)".*/\1/p')
  url=http://127.0.0.1:$port/mcp
  local c=$work/listen-c-$who
  listen26 9 '{"promptsListChanged":true,"resourceSubscriptions":["test://counter"]}' "$c"
  if wait_for acked "$c" && grep -q '"notifications":{}' "$c"; then ok "$who: nothing-served-nothing-honoured"; else
    bad "$who: nothing-served-nothing-honoured"; head -c 600 "$c" | sed 's/^/         /'; fi
  kill "${pids[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null
  pids=()
  stdio_listen
  C stop --state "$state" mcp-c >/dev/null 2>&1
}

# stdio: lines to capsule mcp, its output in $work/stdio-$who
stdio_listen() {
  local out=$work/stdio-$who
  local sub='"notifications":{"resourceSubscriptions":["test://counter"]}'
  local in=$work/stdin-$who mcp to
  mkfifo "$in" && chmod 666 "$in"
  "${wrap[@]}" "$capsule" mcp "${G[@]}" --capability mcp-c <"$in" >"$out" 2>"$work/stdio-$who.err" &
  mcp=$!
  pids+=("$mcp")
  exec {to}>"$in"
  say() { printf '%s\n' "$1" >&"$to"; }
  touch26() { say "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"tools/call\",\"params\":{$META,\"name\":\"touch\",\"arguments\":{}}}"; }
  updates() { grep -c "\"method\":\"notifications/resources/updated\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":$1}" "$out"; }
  n_is() { [ "$(updates "$1")" = "$2" ]; }
  say "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"subscriptions/listen\",\"params\":{$META,$sub}}"
  wait_for grep -q '"resourceSubscriptions":\["test://counter"\]' "$out" && ok "$who: stdio-listen-acknowledged" ||
    { bad "$who: stdio-listen-acknowledged"; head -c 600 "$out" "$work/stdio-$who.err" | sed 's/^/         /'; }
  touch26 2
  wait_for n_is 1 1 && ok "$who: stdio-update" || bad "$who: stdio-update ($(updates 1))"
  say '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}'
  say "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"subscriptions/listen\",\"params\":{$META,$sub}}"
  wait_for grep -q 'subscriptionId":4},"notifications"' "$out" || bad "$who: stdio-second-listen"
  touch26 5
  # one update of the server's goes to every listen that asked, at once
  if wait_for n_is 4 1; then
    [ "$(updates 1)" = 1 ] && ok "$who: stdio-cancelled-listen-told-nothing" || bad "$who: stdio-cancelled-listen-told-nothing ($(updates 1))"
  else bad "$who: stdio-update-after-cancel"; head -c 1200 "$out" | sed 's/^/         /'; fi
  exec {to}>&-
  wait "$mcp" 2>/dev/null
}
run_as root
if setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$root/examples/mcp-c/server" 2>/dev/null; then
  run_as nobody
else
  echo "  (uid 65534 cannot reach $root: skipped as nobody)"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
