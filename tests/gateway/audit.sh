#!/usr/bin/env bash
# The audit log as an operator reads it: a call whose capsule was killed
# mid-call leaves one "interrupted" record on the next start (the chain
# still verifies); --since, --tail and --follow; policy, credential and
# approval changes recorded as records of their own (never a credential's
# value); calls refused for bad arguments or a missing credential recorded
# as refused; `policy set` only for known capabilities and tools, and
# `policy rm`; a failed call shows the end of the tool's stderr.
# Usage: audit.sh CAPSULE
set -u
source "$(dirname "$0")/../lib/gateway.sh"
command -v jq >/dev/null || { echo "SKIP: jq is not installed"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-audit.XXXXXX)
chmod 755 "$work"
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
[ -n "${KEEP:-}" ] && trap - EXIT
caps=$work/caps
state=$work/state
G=(--caps "$caps" --state "$state")
agent() { # agent ID SCRIPT-BODY: a Covenant agent in sh
  mkdir -p "$caps/agents/$1"
  printf '[agent]\nid = "%s"\nname = "%s"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' "$1" "$1" >"$caps/agents/$1/agent.toml"
  printf '#!/bin/sh\n%s\n' "$2" >"$caps/agents/$1/run.sh"
  chmod 755 "$caps/agents/$1/run.sh"
}
agent slow 'echo started >&2; sleep 600'
agent echo 'IFS= read -r line; printf "{\"got\":%s}\n" "$line"'
# waits (bounded) until COMMAND succeeds
wait_for() { local i; for i in $(seq 300); do "$@" && return 0; sleep 0.1; done; return 1; }
audit_json() { "$capsule" audit --json --state "$state" 2>/dev/null; }

echo "a capsule killed mid-call"
"$capsule" policy set slow dispatch allow "${G[@]}" >/dev/null
"$capsule" call "${G[@]}" slow dispatch '{"text": "x"}' >/dev/null 2>&1 </dev/null &
cpid=$!
pids+=("$cpid")
if wait_for grep -q started "$state/logs/slow.log" 2>/dev/null; then ok slow-call-running
else bad slow-call-running; fi
kill -9 "$cpid"
wait "$cpid" 2>/dev/null
# the sandbox goes with its capsule (PR_SET_PDEATHSIG); until then its
# call is still in flight and not recorded
if wait_for sh -c "audit_out=\$('$capsule' audit --json --state '$state' 2>/dev/null); echo \"\$audit_out\" | jq -e '[.[] | select(.capability == \"slow\")] | length == 1' >/dev/null"; then
  ok interrupted-recorded
else bad interrupted-recorded; fi
n=$(audit_json | jq '[.[] | select(.capability == "slow" and .tool == "dispatch" and .outcome == "interrupted" and .decision == "allow" and .user != "")] | length')
[ "$n" = 1 ] && ok interrupted-one-record || bad "interrupted-one-record ($n)"
audit_json >/dev/null
n=$(audit_json | jq '[.[] | select(.outcome == "interrupted")] | length')
[ "$n" = 1 ] && ok interrupted-not-repeated || bad "interrupted-not-repeated ($n)"
[ -z "$(ls -A "$state/run/calls" 2>/dev/null)" ] && ok marker-removed || bad marker-removed
t interrupted-verifies 0 "^audit log verified: [0-9]+ records" audit verify --state "$state"
t interrupted-text 0 "slow.dispatch allow [0-9]+ms interrupted$" audit --state "$state"

finish audit
