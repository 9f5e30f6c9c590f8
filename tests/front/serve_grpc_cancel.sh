#!/usr/bin/env bash
# serve --grpc stops the work of a call its client gave up on, and audits
# it: the client's deadline (grpc-timeout) bounds the call, and a call the
# client cancels (RST_STREAM) is stopped. On the warm path (a Selu
# instance's call that never answers: tests/gateway/selu_fault.c's hang)
# and on the call process's (a Covenant agent that sleeps: its process is
# gone afterwards). serve's own deadline is minutes away: a call that ran
# on would leave no record within the wait. Driven by the official Node
# gRPC client (serve_grpc_cancel.mjs). The agent's wall clock (100 s) is
# past every wait too.
# Usage: serve_grpc_cancel.sh CAPSULE SELU_FAULT PROTO
set -u
source "$(dirname "$0")/../lib/gateway.sh" "$1"
fault=$2 proto=$3
needs_grpc_client jq
work=$(mktemp -d /var/tmp/capsule-serve-grpc-cancel.XXXXXX)
chmod 755 "$work"
spid=
nap=$((RANDOM % 900 + 100)).5 # the agent's sleep, told apart from any other
cleanup() {
  [ -n "$spid" ] && kill -9 "$spid" 2>/dev/null
  "$capsule" stop --state "$work/state" selu-slow >/dev/null 2>&1
  pkill -f "sleep $nap" 2>/dev/null
  pkill -f "sleep $stub" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
caps=$work/caps state=$work/state
mkdir -p "$caps/agents/napper"
selu_slow "$caps" "$fault"
printf '[agent]\nid = "napper"\nname = "napper"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 100000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' >"$caps/agents/napper/agent.toml"
printf '#!/bin/sh\nIFS= read -r line\nexec sleep %s\n' "$nap" >"$caps/agents/napper/run.sh"
chmod 755 "$caps/agents/napper/run.sh"
# an agent that ignores SIGTERM: only the SIGKILL after the grace stops it
stub=$((RANDOM % 900 + 1100)).5
mkdir -p "$caps/agents/stubborn"
sed 's/"napper"/"stubborn"/g' "$caps/agents/napper/agent.toml" >"$caps/agents/stubborn/agent.toml"
printf '#!/bin/sh\ntrap "" TERM INT HUP\nIFS= read -r line\nexec sleep %s\n' "$stub" >"$caps/agents/stubborn/run.sh"
chmod 755 "$caps/agents/stubborn/run.sh"
for t in ok hang; do "$capsule" policy set --caps "$caps" --state "$state" selu-slow "$t" allow >/dev/null; done
"$capsule" policy set --caps "$caps" --state "$state" napper dispatch allow >/dev/null
"$capsule" policy set --caps "$caps" --state "$state" stubborn dispatch allow >/dev/null
token=$("$capsule" access issue cancel --user alice --state "$state" 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1)
"$capsule" serve --caps "$caps" --state "$state" --grpc "unix:$work/g.sock" 2>"$work/serve.log" &
spid=$!
for _ in $(seq 200); do [ -S "$work/g.sock" ] && break; sleep 0.05; done
[ -S "$work/g.sock" ] || { bad "serve listens: $(tail -3 "$work/serve.log")"; finish "serve --grpc cancel"; exit; }
wait_for() { for _ in $(seq 600); do "$@" && return 0; sleep 0.1; done; return 1; }
call() { # TOOL PARAMS DEADLINE_MS [CANCEL_FILE]: the client's lines
  node "$here/serve_grpc_cancel.mjs" "$proto" "unix:$work/g.sock" "$token" "$@" 2>&1
}
records() { # CAPABILITY TOOL [JQ-CONDITION]: how many records
  "$capsule" audit --json --state "$state" 2>/dev/null |
    jq "[.[] | select(.capability == \"$1\" and .tool == \"$2\" and .decision != \"policy-set\" and (${3:-true}))] | length"
}
has_records() { [ "$(records "$@")" -ge 1 ] 2>/dev/null; }
in_flight() { # CAPABILITY TOOL: a live marker of such a call
  local f
  for f in "$state"/run/calls/*; do
    [ -f "$f" ] && tr '\0' ' ' <"$f" | grep -q "^capsule-inflight-v1 .* $1 $2 " && return 0
  done
  return 1
}
napping() { pgrep -f "sleep $nap" >/dev/null; }
awake() { ! napping; }
status_of() { sed -n 's/^status \([0-9]*\).*/\1/p' <<<"$1" | head -1; }
cancelled_call() { # TOOL PARAMS NAME COND...: TOOL called, cancelled by the
  # client once COND holds; checks it was answered CANCELLED; fails when
  # COND never held (the call did not get that far)
  local tool=$1 params=$2 name=$3 pid
  shift 3
  rm -f "$work/cancel"
  call "$tool" "$params" 0 "$work/cancel" >"$work/cancelled.out" &
  pid=$!
  if ! wait_for "$@"; then
    kill "$pid" 2>/dev/null
    bad "$name: it never ran ($*)"
    return 1
  fi
  touch "$work/cancel"
  wait "$pid"
  [ "$(status_of "$(cat "$work/cancelled.out")")" = 1 ] && ok "$name: CANCELLED" ||
    bad "$name: $(cat "$work/cancelled.out")"
}

out=$(call selu-slow.ok '{}' 60000)
[ "$(status_of "$out")" = 0 ] && ok "the slow capability answers (its instance started)" ||
  bad "the slow capability answers: $out"

# the warm path: the client's deadline bounds the instance's call
out=$(call selu-slow.hang '{}' 1500)
[ "$(status_of "$out")" = 4 ] && ok "a hanging warm call past the client's deadline: DEADLINE_EXCEEDED" ||
  bad "a hanging warm call past the client's deadline: $out"
wait_for has_records selu-slow hang && ok "the call past its deadline was stopped and audited" ||
  bad "the call past its deadline was stopped and audited (records: $(records selu-slow hang))"
out=$(call selu-slow.ok '{}' 60000)
[ "$(status_of "$out")" = 0 ] && ok "the instance answers the next call" || bad "the instance answers the next call: $out"

# the warm path: the client cancels
if cancelled_call selu-slow.hang '{}' "the client's cancel of a warm call" in_flight selu-slow hang; then
  cancelled() { has_records selu-slow hang '.outcome | test("cancelled by the client")'; }
  wait_for cancelled && ok "a cancelled warm call is stopped, audited as cancelled by the client" ||
    bad "a cancelled warm call is stopped, audited as cancelled by the client ($("$capsule" audit --json --state "$state" | jq -c '[.[] | select(.tool == "hang") | .outcome]'))"
fi
out=$(call selu-slow.ok '{}' 60000)
[ "$(status_of "$out")" = 0 ] && ok "the instance answers after the cancel" || bad "the instance answers after the cancel: $out"

# the call process's path: a sandboxed agent per call
out=$(call napper.dispatch '{"text":"zz"}' 1500)
[ "$(status_of "$out")" = 4 ] && ok "a sleeping agent past the client's deadline: DEADLINE_EXCEEDED" ||
  bad "a sleeping agent past the client's deadline: $out"
wait_for awake && ok "the agent past its deadline was stopped" || bad "the agent past its deadline was stopped (still asleep)"
wait_for has_records napper dispatch '.outcome | test("cancelled by the client|stopped")' && ok "the agent's call is audited" ||
  bad "the agent's call is audited (records: $(records napper dispatch))"
if cancelled_call napper.dispatch '{"text":"zz"}' "the client's cancel of an agent" napping; then
  wait_for awake && ok "a cancelled agent is stopped" || bad "a cancelled agent is stopped (still asleep)"
  two() { [ "$(records napper dispatch)" = 2 ] && has_records napper dispatch '.outcome | test("cancelled by the client")'; }
  wait_for two && sleep 1 && two && ok "the cancelled agent's call is audited once" ||
    bad "the cancelled agent's call is audited once: $("$capsule" audit --json --state "$state" | jq -c "[.[] | select(.tool == \"dispatch\") | [.decision, .outcome]]")"
fi
t "the chain verifies" 0 "^audit log verified" audit verify --state "$state"
# a cancelled call whose tool ignores SIGTERM (its process SIGKILLed
# after the grace): the gRPC call lasts until the call's process is gone,
# not just until the cancel, so it still counts among the calls at once
# (max_calls) and serve's drain waits for it: serve, stopped right after
# the cancel, has ended once its call's tool is gone
stubborn() { pgrep -f "sleep $stub" >/dev/null; }
if cancelled_call stubborn.dispatch '{"text":"zz"}' "the client's cancel of an agent that ignores SIGTERM" stubborn; then
  kill -TERM "$spid"
  wait "$spid"
  spid=
  stubborn && bad "serve stopped with a cancelled call's agent still running (its call not counted in flight)" ||
    ok "serve's drain waits for a cancelled call's agent"
  once() { [ "$(records stubborn dispatch)" = 1 ]; } # its marker, as interrupted
  wait_for once && sleep 1 && once && ok "the call of an agent that ignores SIGTERM is audited once" ||
    bad "the call of an agent that ignores SIGTERM is audited once: $("$capsule" audit --json --state "$state" | jq -c '[.[] | select(.capability == "stubborn") | [.decision, .outcome]]')"
fi
finish "serve --grpc cancel"
