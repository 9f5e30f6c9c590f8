#!/usr/bin/env bash
# A Selu tool called over `capsule mcp` on stdio (what agent hosts launch;
# this script is the client, on two FIFOs): the first call starts the
# instance; the calls on the running instance are answered by the warm
# Selu process (forked by capsule mcp's spawner at its start) with no
# fork (as root with strace: no process created by capsule mcp while they
# run), the instance reused (`capsule ps`: one, the same), each call
# audited once, validation and policy applied; every line on stdout is a
# protocol message; the warm process killed between calls, and again
# mid-call (audited once as interrupted), the next call still answered by
# a new one; a warm call that never answers (tests/gateway/selu_fault.c's
# hang) stopped by notifications/cancelled and audited once as cancelled
# by the client, the instance answering the next; stdin's end and SIGTERM
# (with a call in flight, audited once) each end capsule mcp, its
# spawner and its warm process. As root and as uid 65534.
# Usage: mcp_stdio_selu.sh CAPSULE [SELU_FAULT]
set -u
source "$(dirname "$0")/../lib/gateway.sh"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
command -v jq >/dev/null || { echo "SKIP: jq is not installed"; exit 77; }
[ -x "$root/examples/selu-text/capability" ] ||
  { echo "SKIP: examples/selu-text is not built (make build builds it)"; exit 77; }
fault=${2:-}
work=$(mktemp -d /var/tmp/capsule-mcp-stdio-selu.XXXXXX)
chmod 755 "$work"
mpid= keeper= held= wrap=() state=
# shellcheck disable=SC2086
cleanup() {
  [ -n "$held" ] && kill -CONT $held 2>/dev/null
  [ -n "$mpid" ] && { kill_tree; kill -9 "$mpid" 2>/dev/null; }
  for s in "$work"/state-*; do
    for id in text-tools selu-slow; do # stop takes one capability
      [ -d "$s" ] && "$capsule" stop --state "$s" "$id" >/dev/null 2>&1
    done
  done
  rm -rf "$work"
}
trap cleanup EXIT
caps=$work/caps
mkdir -p "$caps"
cp -r "$root/examples/selu-text" "$caps/selu-text"
# as uid 65534 no cgroup is writable: its memory limit is RLIMIT_DATA per
# process, which counts each thread's stack (8 MiB) of the gRPC server's
# threads: room for them, or its calls fail now and then (EAGAIN)
sed -i 's/max_memory_mb: 64/max_memory_mb: 1024/' "$caps/selu-text/manifest.yaml"
grep -q 'max_memory_mb: 1024' "$caps/selu-text/manifest.yaml" || { echo "FAIL: the manifest's memory limit"; exit 1; }
if [ -n "$fault" ]; then # a server whose hang tool never answers
  selu_slow "$caps" "$fault"
fi
chmod -R a+rX "$caps"

# waits up to 60 s for a condition: nothing about timing is asserted
wait_for() { for _ in $(seq 600); do "$@" && return 0; sleep 0.1; done; return 1; }
# capsule mcp's children: the spawner (its first, forked at its start),
# whose child is the warm process
spawner() { pgrep -o -P "$mpid"; }
alive() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${s#Z}" = "$s" ]; } # not a zombie
warm_pid() {
  local sp p
  sp=$(spawner)
  [ -n "$sp" ] || return 1
  for p in $(pgrep -P "$sp"); do alive "$p" && { echo "$p"; return 0; }; done
  return 1
}
warm_proc() { [ -n "$(warm_pid)" ]; }
kill_tree() {
  local c
  for c in $(pgrep -P "$mpid"); do pkill -9 -P "$c" 2>/dev/null; done
  pkill -9 -P "$mpid" 2>/dev/null
}
records() { "${wrap[@]}" "$capsule" audit --json --state "$state" 2>/dev/null | jq "[.[] | select($1)] | length"; }
n_records() { [ "$(records "$1")" = "$2" ]; }

start_mcp() {
  rm -f "$work/in" "$work/out"
  mkfifo "$work/in" "$work/out"
  chmod 666 "$work/in" "$work/out"
  "${wrap[@]}" "$capsule" mcp --caps "$caps" --state "$state" <"$work/in" >"$work/out" 2>>"$work/mcp.log" &
  mpid=$!
  exec 3>"$work/in" 4<"$work/out"
  send '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}'
  answer 0 >/dev/null && send '{"jsonrpc":"2.0","method":"notifications/initialized"}'
}
send() { printf '%s\n' "$1" >&3; }
answer() { # ID: the answer to request ID (what else comes is skipped; a non-JSON line counted)
  local line
  while IFS= read -r -t 120 line <&4; do
    jq -e . >/dev/null 2>&1 <<<"$line" || { printf '%s\n' "$line" >>"$work/nonjson"; continue; }
    jq -e ".id == $1" >/dev/null <<<"$line" && { printf '%s\n' "$line"; return 0; }
  done
  return 1
}
request() { # ID NAME ARGS: sends the tools/call
  send "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"tools/call\",\"params\":{\"name\":\"$2\",\"arguments\":$3}}"
}
call() { request "$1" text-tools__word_count "$2" && answer "$1"; }
words() { jq -e '.result.isError == false and .result.structuredContent.words == 3' >/dev/null <<<"$1"; }
stop_mcp() { # closes stdin: capsule mcp ends, and its spawner and warm process with it
  local sp wp
  sp=$(spawner) wp=$(warm_pid)
  exec 3>&- 4<&-
  wait "$mpid"
  local st=$?
  mpid=
  gone() { ! alive "$sp" && { [ -z "$wp" ] || ! alive "$wp"; }; }
  [ "$st" = 0 ] && wait_for gone
}
instance_pid() { "${wrap[@]}" "$capsule" ps --json --state "$state" | jq -r '[.[] | select(.capability == "text-tools")] | if length == 1 then .[0].pid else "none" end'; }

slow_ok() { request "$1" selu-slow__ok '{}' && jq -e '.result.isError == false' >/dev/null <<<"$(answer "$1")"; }
hang_in_flight() { # a live marker (NUL-separated fields) of a selu-slow.hang call
  local f
  for f in "$state"/run/calls/*; do
    [ -f "$f" ] && tr '\0' ' ' <"$f" | grep -q '^capsule-inflight-v1 .* selu-slow hang ' && return 0
  done
  return 1
}
c='.capability == "selu-slow" and .tool == "hang" and (.outcome | test("cancelled by the client"))'

run_as() {
  local who=$1
  state=$work/state-$who
  mkdir -p "$state"
  [ "$who" = nobody ] && { chown 65534:65534 "$state"; wrap=(setpriv --reuid=65534 --regid=65534 --clear-groups --); }
  chmod 700 "$state"
  "${wrap[@]}" "$capsule" policy set --caps "$caps" --state "$state" text-tools word_count allow >/dev/null
  echo "as $who:"
  start_mcp || { bad "$who: capsule mcp answers initialize: $(tail -3 "$work/mcp.log")"; return; }
  words "$(call 1 '{"text":"a b c"}')" && ok "$who: the first call starts the instance and answers" ||
    bad "$who: the first call starts the instance and answers"
  wait_for warm_proc && ok "$who: capsule mcp has its warm Selu process" || bad "$who: capsule mcp has its warm Selu process"
  local inst
  inst=$(instance_pid)

  # the warm calls: no process made by capsule mcp meanwhile (its threads only)
  local traced=no tracer
  if [ "$(id -u)" = 0 ] && command -v strace >/dev/null; then
    # shellcheck disable=SC2046
    strace -f -qq -e trace=fork,vfork,clone,clone3 -o "$work/strace.out" $(ls "/proc/$mpid/task" | sed 's/^/-p /') 2>"$work/strace.err" &
    tracer=$!
    attached() { grep -q "^TracerPid:[[:space:]]*$tracer" "/proc/$mpid/status"; }
    if wait_for attached; then traced=yes; else kill "$tracer" 2>/dev/null; wait "$tracer" 2>/dev/null; fi
  fi
  local n=0 i out
  for i in 2 3 4 5 6; do
    out=$(call $i '{"text":"a b c"}')
    words "$out" && n=$((n + 1)) || echo "         call $i: ${out:0:300}"
  done
  [ $n = 5 ] && ok "$who: five warm calls answered" || bad "$who: five warm calls answered ($n)"
  if [ $traced = yes ]; then
    kill "$tracer"; wait "$tracer" 2>/dev/null
    local forks threads
    forks=$(grep -E 'fork\(|clone3?\(' "$work/strace.out" | grep -v CLONE_THREAD)
    threads=$(grep -c CLONE_THREAD "$work/strace.out")
    [ -z "$forks" ] && [ "$threads" -ge 1 ] && ok "$who: no fork for a warm call" ||
      bad "$who: no fork for a warm call (threads $threads): $(head -3 <<<"$forks")"
  else
    echo "  skip the fork check: it needs root and strace (attached)"
  fi
  [ "$inst" != none ] && [ "$(instance_pid)" = "$inst" ] && ok "$who: one instance, reused by every call" ||
    bad "$who: one instance, reused by every call (was $inst, now $(instance_pid))"
  n_records '.capability == "text-tools" and .outcome == "ok"' 6 && ok "$who: every call audited once" ||
    bad "$who: every call audited once (found $(records '.capability == "text-tools"'))"
  out=$(call 7 '{"text":3}')
  jq -e '.result.isError == true' >/dev/null <<<"$out" && grep -q "input schema" <<<"$out" &&
    n_records '.capability == "text-tools" and .decision == "refused"' 1 &&
    ok "$who: invalid arguments refused, audited" || bad "$who: invalid arguments refused, audited: $out"
  "${wrap[@]}" "$capsule" policy set --caps "$caps" --state "$state" text-tools word_count block >/dev/null
  out=$(call 8 '{"text":"a b c"}')
  jq -e '.result.isError == true' >/dev/null <<<"$out" && grep -q "blocked by policy" <<<"$out" &&
    ok "$who: policy block applies to a warm call" || bad "$who: policy block applies to a warm call: $out"
  "${wrap[@]}" "$capsule" policy set --caps "$caps" --state "$state" text-tools word_count allow >/dev/null

  # the warm process killed between calls: the next call answered (a new one)
  local wproc nproc
  wproc=$(warm_pid)
  kill -9 "$wproc"
  dead() { ! alive "$wproc"; }
  wait_for dead || bad "$who: the warm process killed"
  out=$(call 9 '{"text":"a b c"}')
  words "$out" && ok "$who: after the warm process was killed, the next call answers" ||
    bad "$who: after the warm process was killed, the next call answers: ${out:0:300}"
  # a new one started by that call, or (within a second of the last
  # start: it ran apart) by the next
  sleep 1.1
  out=$(call 12 '{"text":"a b c"}')
  words "$out" || bad "$who: the call after that answers: ${out:0:300}"
  nproc=$(warm_pid)
  [ -n "$nproc" ] && [ "$nproc" != "$wproc" ] && ok "$who: a new warm process" ||
    bad "$who: a new warm process (was $wproc, now ${nproc:-none}; $(ps -o pid,ppid,stat,cmd --ppid "$(spawner)" | tail -n +2))"
  # killed mid-call (held up: the keeper stopped, so no new lease, and
  # the instance's server with it, so a lease asked ahead, which needs no
  # keeper, does not answer either): one interrupted record, an error
  # answered, and the next call answered
  keeper=$("${wrap[@]}" "$capsule" ps --json --state "$state" | jq -r '.[] | select(.capability == "text-tools") | .pid' | head -1)
  descendants() { local p; for p in $(pgrep -P "$1"); do echo "$p"; descendants "$p"; done; }
  [ -n "$keeper" ] && held="$keeper $(descendants "$keeper" | tr '\n' ' ')"
  # shellcheck disable=SC2086
  if [ -n "$keeper" ] && [ -n "$nproc" ] && kill -STOP $held; then
    request 10 text-tools__word_count '{"text":"a b c"}'
    in_flight() { grep -lsa '^capsule-inflight-v1' "$state"/run/calls/* >/dev/null; }
    wait_for in_flight || bad "$who: the warm call's marker (none in flight)"
    kill -9 "$nproc"
    out=$(answer 10)
    # shellcheck disable=SC2086
    kill -CONT $held
    held=
    jq -e '.result.isError == true' >/dev/null <<<"$out" && ok "$who: the killed call answers an error" ||
      bad "$who: the killed call answers an error: $out"
    n_records '.capability == "text-tools" and .outcome == "interrupted"' 1 &&
      ok "$who: the killed call audited once as interrupted" ||
      bad "$who: the killed call audited once as interrupted (found $(records '.outcome == "interrupted"'))"
    sleep 1.1 # a warm process is started at most once a second
    words "$(call 11 '{"text":"a b c"}')" && ok "$who: the next call answers" || bad "$who: the next call answers"
  else
    bad "$who: the instance's keeper or the warm process was not found (keeper ${keeper:-none}, process ${nproc:-none})"
    held=
  fi

  # cancelling a warm call: the hang tool never answers (its deadline is
  # minutes away); notifications/cancelled stops it, audited once as
  # cancelled by the client, and the instance answers the next call
  if [ -z "$fault" ]; then
    echo "  skip the cancellation checks: no selu_fault server given"
  else
    if slow_ok 20 && wait_for warm_proc && slow_ok 21; then
      request 22 selu-slow__hang '{}'
      if wait_for hang_in_flight; then
        send '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":22,"reason":"test"}}'
        wait_for n_records "$c" 1 && ok "$who: notifications/cancelled stops a warm Selu call, audited as cancelled" ||
          bad "$who: notifications/cancelled stops a warm Selu call, audited as cancelled ($(records '.capability == "selu-slow"') records)"
      else
        bad "$who: the hang call is in flight (no marker)"
      fi
      slow_ok 23 && ok "$who: after the cancellation, the instance answers" ||
        bad "$who: after the cancellation, the instance answers"
    else
      bad "$who: the slow capability answers, warm"
    fi
  fi
  [ ! -s "$work/nonjson" ] && ok "$who: stdout carries only protocol messages" ||
    bad "$who: stdout carries only protocol messages: $(head -3 "$work/nonjson")"
  stop_mcp && ok "$who: stdin's end ends capsule mcp, its spawner and warm process" ||
    bad "$who: stdin's end ends capsule mcp, its spawner and warm process"

  # SIGTERM with a warm call in flight: it is stopped, audited once
  if [ -n "$fault" ] && start_mcp && slow_ok 30 && wait_for warm_proc && slow_ok 31; then
    request 32 selu-slow__hang '{}'
    wait_for hang_in_flight || bad "$who: the second hang call is in flight (no marker)"
    local sp wp
    sp=$(spawner) wp=$(warm_pid)
    kill -TERM "$mpid"
    wait "$mpid"
    local st=$?
    mpid=
    exec 3>&- 4<&-
    gone() { ! alive "$sp" && ! alive "$wp"; }
    [ "$st" = 0 ] && wait_for gone && ok "$who: SIGTERM ends capsule mcp, its spawner and warm process" ||
      bad "$who: SIGTERM ends capsule mcp, its spawner and warm process (exit $st)"
    wait_for n_records "$c" 2 && n_records '.capability == "selu-slow" and .tool == "hang"' 2 &&
      ok "$who: the call in flight at SIGTERM audited once" ||
      bad "$who: the call in flight at SIGTERM audited once ($(records '.capability == "selu-slow" and .tool == "hang"'))"
  elif [ -n "$fault" ]; then
    bad "$who: capsule mcp again, the slow capability warm"
  fi
  "${wrap[@]}" "$capsule" audit verify --state "$state" 2>&1 | grep -q "^audit log verified" &&
    ok "$who: the chain verifies" || bad "$who: the chain verifies"
  local id # not c: the cancellation checks' condition
  for id in text-tools selu-slow; do
    "${wrap[@]}" "$capsule" stop --state "$state" "$id" >/dev/null 2>&1
  done
}

run_as root
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && [ -z "${ASAN_OPTIONS:-}" ] &&
  setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" 2>/dev/null; then
  run_as nobody
else
  echo "  (uid 65534: skipped: not root, a sanitizer build, or uid 65534 cannot reach $capsule)"
fi
finish "mcp stdio selu"
