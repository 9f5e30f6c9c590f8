#!/usr/bin/env bash
# A Selu tool called over MCP Streamable HTTP through `capsule serve
# --mcp-http` (curl as the client): the first call starts the instance;
# the calls on the running instance are answered by serve's warm Selu
# process with no fork (as root with strace: no process created by serve
# while they run), each audited once, validation and policy applied; a
# warm call whose process is killed mid-call is audited once as
# interrupted, and the next call is answered by a new warm process
# (serve's spawner forks it; a reload too); a killed serve leaves no
# record of the markers it kept between calls; a warm call that never
# answers (tests/gateway/selu_fault.c's hang) cancelled by
# notifications/cancelled, and one by a 2026-07-28 request's stream
# closed, each stopped and audited once as cancelled by the client, the
# instance answering the next call. Usage: serve_mcp_selu.sh CAPSULE [SELU_FAULT]
set -u
source "$(dirname "$0")/../lib/serve_selu.sh" "$1" serve-mcp-selu
spid= keeper= held=
# shellcheck disable=SC2086
cleanup() {
  [ -n "$held" ] && kill -CONT $held 2>/dev/null
  [ -n "$spid" ] && { kill_tree; kill -9 "$spid" 2>/dev/null; }
  local id
  for id in text-tools selu-slow; do "$capsule" stop --state "$work/state" "$id" >/dev/null 2>&1; done
  rm -rf "$work"
}
# serve's children (the spawner), their children (the warm process)
kill_tree() {
  local c
  for c in $(pgrep -P "$spid"); do pkill -9 -P "$c" 2>/dev/null; done
  pkill -9 -P "$spid" 2>/dev/null
}
trap cleanup EXIT
caps=$work/caps state=$work/state
C=(--caps "$caps" --state "$state")
mkdir -p "$caps"
cp -r "$root/examples/selu-text" "$caps/selu-text"
fault=${2:-}
if [ -n "$fault" ]; then # a server whose hang tool never answers
  selu_slow "$caps" "$fault"
fi
"$capsule" policy set "${C[@]}" text-tools word_count allow >/dev/null
token=$("$capsule" access issue selu-test --user alice --state "$state" 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1)
call() { # ID ARGS_JSON: the answer's JSON-RPC message (SSE or JSON)
  curl -sS -m 120 "${H[@]}" -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-06-18' --data \
    "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"tools/call\",\"params\":{\"name\":\"text-tools__word_count\",\"arguments\":$2}}" \
    "$url" | sed -n 's/^data: //p; /^{/p' | tail -1
}
words() { jq -e '.result.isError == false and .result.structuredContent.words == 3' >/dev/null <<<"$1"; }
records() { "$capsule" audit --json --state "$state" 2>/dev/null | jq "[.[] | select(.capability == \"text-tools\" and $1)] | length"; }

start_serve && ok "serve listens" || { bad "serve listens: $(tail -3 "$work/serve.log")"; finish "serve mcp selu"; exit; }
words "$(call 1 '{"text":"a b c"}')" && ok "the first call starts the instance and answers" ||
  bad "the first call starts the instance and answers"
# the spawner is serve's first child (forked at its start), the warm
# process the spawner's
spawner() { pgrep -P "$spid" | head -1; }
warm_pid() { local sp; sp=$(spawner); [ -n "$sp" ] && pgrep -P "$sp" | head -1; }
warm_proc() { [ -n "$(warm_pid)" ]; }
wait_for warm_proc && ok "serve has its warm Selu process" || bad "serve has its warm Selu process"

# the warm calls: no process made by serve meanwhile (its threads only)
trace_forks
n=0
for i in 2 3 4 5 6; do words "$(call $i '{"text":"a b c"}')" && n=$((n + 1)); done
[ $n = 5 ] && ok "five warm calls answered" || bad "five warm calls answered ($n)"
if [ $traced = yes ]; then
  traced_forks
  # the trace saw the calls' threads start, and nothing else
  [ -z "$forks" ] && [ "$threads" -ge 1 ] && ok "no fork for a warm call" ||
    bad "no fork for a warm call (threads $threads): $(head -3 <<<"$forks")"
else
  echo "  skip the fork check: it needs root and strace (attached)"
fi
[ "$(records '.user == "alice"')" = 6 ] && ok "every call audited once" ||
  bad "every call audited once (6 calls, found $(records '.user == "alice"'))"
bad_args=$(call 7 '{"text":3}')
jq -e '.result.isError == true' >/dev/null <<<"$bad_args" && grep -q "input schema" <<<"$bad_args" &&
  ok "invalid arguments refused" || bad "invalid arguments refused: $bad_args"
[ "$(records '.decision == "refused"')" = 1 ] && ok "the refusal audited" || bad "the refusal audited"
"$capsule" policy set "${C[@]}" text-tools word_count block >/dev/null
blocked=$(call 8 '{"text":"a b c"}')
jq -e '.result.isError == true' >/dev/null <<<"$blocked" && grep -q "blocked by policy" <<<"$blocked" &&
  ok "policy block applies to a warm call" || bad "policy block applies to a warm call: $blocked"
"$capsule" policy set "${C[@]}" text-tools word_count allow >/dev/null
# never a stale policy: each change seen by the very next warm call
flips=0
for i in 1 2 3; do
  "$capsule" policy set "${C[@]}" text-tools word_count block >/dev/null
  grep -q "blocked by policy" <<<"$(call $((80 + 2 * i)) '{"text":"a b c"}')" && flips=$((flips + 1))
  "$capsule" policy set "${C[@]}" text-tools word_count allow >/dev/null
  words "$(call $((81 + 2 * i)) '{"text":"a b c"}')" && flips=$((flips + 1))
done
[ $flips = 6 ] && ok "each policy change applies to the next warm call" ||
  bad "each policy change applies to the next warm call ($flips of 6)"

# the warm process killed mid-call (held up: the keeper stopped, so no
# new lease, and the instance's server with it, so a lease asked ahead,
# which needs no keeper, does not answer either): one interrupted record,
# and the next call is answered by a new warm process
keeper=$("$capsule" ps --json --state "$state" | jq -r '.[] | select(.capability == "text-tools") | .pid' | head -1)
wproc=$(warm_pid)
descendants() { local p; for p in $(pgrep -P "$1"); do echo "$p"; descendants "$p"; done; }
[ -n "$keeper" ] && held="$keeper $(descendants "$keeper" | tr '\n' ' ')"
# shellcheck disable=SC2086
if [ -n "$keeper" ] && [ -n "$wproc" ] && kill -STOP $held; then
  call 9 '{"text":"a b c"}' >"$work/killed.out" &
  caller=$!
  in_flight() { grep -lsa '^capsule-inflight-v1' "$state"/run/calls/* >/dev/null; }
  wait_for in_flight || bad "the warm call's marker (none in flight)"
  kill -9 "$wproc"
  wait "$caller"
  # shellcheck disable=SC2086
  kill -CONT $held
  held=
  jq -e '.result.isError == true' >/dev/null <"$work/killed.out" && ok "the killed call answers an error" ||
    bad "the killed call answers an error: $(cat "$work/killed.out")"
  [ "$(records '.outcome == "interrupted"')" = 1 ] && ok "the killed call audited once as interrupted" ||
    bad "the killed call audited once as interrupted (found $(records '.outcome == "interrupted"'))"
  sleep 1.1 # serve starts a warm process at most once a second
  words "$(call 10 '{"text":"a b c"}')" && ok "after the warm process died, the call answers" ||
    bad "after the warm process died, the call answers"
  # the new process answered it: a thread of its own per connection
  nproc=$(warm_pid)
  [ -n "$nproc" ] && [ "$nproc" != "$wproc" ] && [ "$(ls "/proc/$nproc/task" | wc -l)" -ge 2 ] &&
    ok "a new warm process answered it" ||
    bad "a new warm process answered it (was $wproc, now ${nproc:-none})"
  # it holds none of serve's sockets (the spawner forked it, not serve)
  serve_socks=$(find "/proc/$spid/fd" -lname 'socket:*' -printf '%l\n' 2>/dev/null | sort -u)
  warm_socks=$(find "/proc/$nproc/fd" -lname 'socket:*' -printf '%l\n' 2>/dev/null | sort -u)
  shared=$(comm -12 <(echo "$serve_socks") <(echo "$warm_socks") | grep -c socket)
  # serve's end of its connections to the process are its own: none shared
  [ "$shared" = 0 ] && ok "the new warm process holds none of serve's sockets" ||
    bad "the new warm process holds none of serve's sockets ($shared shared)"
  # a reload: the warm process reloads too, the calls still answered
  mkdir -p "$caps/selu-copy" && cp -r "$caps/selu-text/." "$caps/selu-copy/" &&
    sed -i 's/^id: .*/id: text-copy/' "$caps/selu-copy/manifest.yaml"
  reloaded() { [ "$(grep -c '"registry loaded"' "$work/serve.log")" -ge 2 ]; }
  wait_for reloaded && words "$(call 11 '{"text":"a b c"}')" &&
    ok "after a reload, calls answered" || bad "after a reload, calls answered"
else
  bad "the instance's keeper or the warm process was not found (keeper ${keeper:-none}, process ${wproc:-none})"
  held=
fi

# serve killed between calls: the markers it kept record nothing
kill_tree
kill -9 "$spid"
wait "$spid" 2>/dev/null
spid=
n=$(records '.outcome == "interrupted"')
[ "$n" = 1 ] && ok "a killed serve's kept markers record nothing" ||
  bad "a killed serve's kept markers record nothing ($n interrupted)"
t "the chain verifies" 0 "^audit log verified" audit verify --state "$state"
rm -f "$state/serve.sock" "$state/serve.status"
start_serve && words "$(call 12 '{"text":"a b c"}')" && ok "serve again after the kill" ||
  bad "serve again after the kill"

# cancelling a warm call: the hang tool never answers (its deadline is
# serve's, minutes away); a cancellation must stop it, audited once as
# cancelled by the client, and the instance answers the next call
slow_records() { "$capsule" audit --json --state "$state" 2>/dev/null | jq "[.[] | select(.capability == \"selu-slow\" and $1)] | length"; }
cancelled_records() { slow_records '.tool == "hang" and (.outcome | test("cancelled by the client"))'; }
n_cancelled() { [ "$(cancelled_records)" = "$1" ]; }
hang_in_flight() { # a live marker (NUL-separated fields) of a selu-slow.hang call
  local f
  for f in "$state"/run/calls/*; do
    [ -f "$f" ] && tr '\0' ' ' <"$f" | grep -q '^capsule-inflight-v1 .* selu-slow hang ' && return 0
  done
  return 1
}
slow_call() { # ID TOOL [PROTOCOL-ARGS...]: a call's answer
  local id=$1 tool=$2
  curl -sS -m 120 "${H[@]}" -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-06-18' --data \
    "{\"jsonrpc\":\"2.0\",\"id\":$id,\"method\":\"tools/call\",\"params\":{\"name\":\"selu-slow__$tool\",\"arguments\":{}}}" \
    "$url" | sed -n 's/^data: //p; /^{/p' | tail -1
}
slow_ok() { jq -e '.result.isError == false' >/dev/null <<<"$(slow_call "$1" ok)"; }
if [ -z "$fault" ]; then
  echo "  skip the cancellation checks: no selu_fault server given"
elif slow_ok 20 && wait_for warm_proc && slow_ok 21; then
  ok "the slow capability answers, warm"
  slow_call 22 hang >"$work/hang1.out" 2>&1 &
  hang=$!
  if wait_for hang_in_flight; then
    curl -sS -m 60 -o /dev/null "${H[@]}" -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-06-18' \
      --data '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":22,"reason":"test"}}' "$url"
    wait_for n_cancelled 1 && ok "notifications/cancelled stops a warm Selu call, audited as cancelled" ||
      bad "notifications/cancelled stops a warm Selu call, audited as cancelled (records: $(slow_records '.tool == "hang"'), cancelled $(cancelled_records); $(tail -2 "$work/serve.log"))"
  else
    bad "the hang call is in flight (no marker)"
  fi
  kill "$hang" 2>/dev/null; wait "$hang" 2>/dev/null
  # the first call's marker ended (its record comes just before), so the
  # marker looked for next is the second call's
  no_hang() { ! hang_in_flight; }
  wait_for no_hang || bad "the cancelled call's marker ends"
  # 2026-07-28: the request's stream closed cancels it
  meta='{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
  curl -sS -m 120 -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H "Authorization: Bearer $token" -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' \
    -H 'Mcp-Name: selu-slow__hang' --data \
    "{\"jsonrpc\":\"2.0\",\"id\":23,\"method\":\"tools/call\",\"params\":{\"name\":\"selu-slow__hang\",\"arguments\":{},\"_meta\":$meta}}" \
    "$url" >"$work/hang2.out" 2>&1 &
  hang=$!
  if wait_for hang_in_flight; then
    kill "$hang"; wait "$hang" 2>/dev/null
    wait_for n_cancelled 2 && ok "a 2026 request's stream closed stops a warm Selu call, audited as cancelled" ||
      bad "a 2026 request's stream closed stops a warm Selu call, audited as cancelled (cancelled $(cancelled_records))"
  else
    kill "$hang" 2>/dev/null; wait "$hang" 2>/dev/null
    bad "the 2026 hang call is in flight (no marker)"
  fi
  [ "$(slow_records '.tool == "hang"')" = 2 ] && ok "each cancelled call audited once" ||
    bad "each cancelled call audited once ($(slow_records '.tool == "hang"'))"
  slow_ok 24 && ok "after the cancellations, the instance answers" ||
    bad "after the cancellations, the instance answers"
else
  bad "the slow capability answers, warm"
fi
t "the chain verifies after the cancellations" 0 "^audit log verified" audit verify --state "$state"

kill -TERM "$spid"; wait "$spid"; st=$?
[ "$st" = 0 ] && ok "SIGTERM stops serve" || bad "SIGTERM stops serve (exit $st)"
spid=
finish "serve mcp selu"
