#!/usr/bin/env bash
# `capsule serve --grpc unix:PATH` in front of the pipeline, driven by the
# official Node gRPC client with Selu's proto: the bearer token on every
# call (its user is the call's and the audit's), CAPABILITY.TOOL names,
# validation, policy block, unknown tools, concurrent calls, SIGTERM.
# The orchestrator's Capability service on the same address; a capability
# added while serving; Healthcheck under --capability reports readiness;
# the orchestrator's artifact calls with the Node Selu example (node-tools).
# Usage: serve_grpc.sh CAPSULE PROTO ORCHESTRATOR_PROTO
set -u
source "$(dirname "$0")/../lib/gateway.sh"
proto=$2 orch=$3
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
[ -d "$here/../../examples/selu-node/node_modules/@grpc/grpc-js" ] ||
  { echo "SKIP: examples/selu-node's modules are not installed (scripts/deps.sh test)"; exit 77; }
command -v jq >/dev/null || { echo "SKIP: jq is not installed"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-serve-grpc.XXXXXX)
chmod 755 "$work"
spid=
cleanup() { # serve, then the warm instances it started (their keepers outlive it)
  [ -n "$spid" ] && kill -9 "$spid" 2>/dev/null
  local id
  for id in text-tools node-tools node-seed; do "$capsule" stop --state "$work/state" "$id" >/dev/null 2>&1; done
  rm -rf "$work"
}
trap cleanup EXIT
caps=$work/caps state=$work/state
agent() { # ID: a Covenant agent in sh answering {"got": REQUEST}
  mkdir -p "$caps/agents/$1"
  printf '[agent]\nid = "%s"\nname = "%s"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' "$1" "$1" >"$caps/agents/$1/agent.toml"
  printf '#!/bin/sh\nIFS= read -r line; printf "{\\"got\\":%%s}\\n" "$line"\n' >"$caps/agents/$1/run.sh"
  chmod 755 "$caps/agents/$1/run.sh"
}
drive() { # TARGET [MODE]: serve_grpc.mjs's lines as checks
  local out line
  out=$(node "$here/serve_grpc.mjs" "$proto" "$orch" "$1" "$token" "${2:-all}" 2>&1)
  printf '%s\n' "$out" >"$work/drive.out"
  while IFS= read -r line; do
    case $line in
    ok\ *) ok "${line#ok }" ;;
    FAIL\ *) bad "${line#FAIL }" ;;
    *) [ -n "$line" ] && echo "         $line" ;;
    esac
  done <<<"$out"
}
# serve's children: the gRPC process (its call process its child) and
# the warm Selu process of the MCP doors (no child): gproc and cproc
find_cproc() {
  gproc= cproc=
  local p c
  for p in $(pgrep -P "$spid"); do
    c=$(pgrep -P "$p" | head -1)
    [ -n "$c" ] && gproc=$p cproc=$c
  done
}
agent echo
agent blocked
root=$(cd "$here/../.." && pwd)
selu=no # the C Selu example, warm behind serve (make build builds it)
if [ -x "$root/examples/selu-text/capability" ]; then
  cp -r "$root/examples/selu-text" "$caps/selu-text"
  "$capsule" policy set --caps "$caps" --state "$state" text-tools word_count allow >/dev/null
  selu=yes
fi
# the Node Selu example, whose tools take and make artifacts (its modules
# are the ones the client uses)
cp -r "$root/examples/selu-node" "$caps/node-tools"
cp "$root/proto/selu/capability/v1/capability.proto" "$caps/node-tools/capability.proto"
cp "$root/proto/selu/orchestrator/capability.proto" "$caps/node-tools/orchestrator.proto"
# and the same speaking only the seed's contract, which has no artifacts
cp -r "$caps/node-tools" "$caps/node-seed"
sed -i -e 's/^id: node-tools/id: node-seed/' \
  -e 's|command: \["node", "server.js"\]|command: ["node", "server.js", "--protocol", "service"]|' "$caps/node-seed/manifest.yaml"
for t in read_attachments make_file; do # discovered on the first call
  "$capsule" policy set --caps "$caps" --state "$state" --force node-tools "$t" allow >/dev/null
  "$capsule" policy set --caps "$caps" --state "$state" --force node-seed "$t" allow >/dev/null
done
# a Talos function, whose arguments may carry attachments it cannot take
mkdir -p "$caps/talk"
printf '%s\n' '{"id": "talk", "name": "Talk", "description": "Says.", "version": "1.0.0",' \
  ' "functions": [{"name": "say", "description": "Says.", "parameters": {"type": "object"}}]}' >"$caps/talk/manifest.json"
echo 'export async function say(args) { return args; }' >"$caps/talk/index.mjs"
"$capsule" policy set --caps "$caps" --state "$state" talk say allow >/dev/null
"$capsule" policy set --caps "$caps" --state "$state" echo dispatch allow >/dev/null
"$capsule" policy set --caps "$caps" --state "$state" blocked dispatch block >/dev/null
token=$("$capsule" access issue grpc-test --user alice --state "$state" 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1)
[ -n "$token" ] && ok "access token issued" || bad "access token issued"
"$capsule" serve --caps "$caps" --state "$state" --grpc "unix:$work/g.sock" 2>"$work/serve.log" &
spid=$!
for _ in $(seq 200); do [ -S "$work/g.sock" ] && break; sleep 0.05; done
if [ -S "$work/g.sock" ]; then
  drive "unix:$work/g.sock"
  if [ $selu = yes ]; then # a Selu call from a child of the gRPC process: it must not hang
    drive "unix:$work/g.sock" selu
    # the instance is warm: its calls are made in the gRPC process itself,
    # so they are answered with the call process stopped (SIGSTOP)
    find_cproc
    if [ -n "$cproc" ] && kill -STOP "$cproc"; then
      drive "unix:$work/g.sock" warm
      "$capsule" policy set --caps "$caps" --state "$state" text-tools word_count block >/dev/null
      drive "unix:$work/g.sock" warm-blocked
      kill -CONT "$cproc"
      "$capsule" policy set --caps "$caps" --state "$state" text-tools word_count allow >/dev/null
      # a change in the package: the instance's keeper refuses its lease,
      # the call process starts a new instance, and the warm path reaches
      # the new one (not through the channel it kept to the old)
      echo edited >"$caps/selu-text/added.txt"
      drive "unix:$work/g.sock" selu
      grep -q "the package changed" "$state/logs/text-tools.log" && ok "the edit retired the instance" ||
        bad "the edit retired the instance (its log: $(tail -3 "$state/logs/text-tools.log"))"
      kill -STOP "$cproc"
      drive "unix:$work/g.sock" warm
      kill -CONT "$cproc"
      # an edit right after a warm call, whose next lease was asked ahead:
      # the next call never takes that lease, and a new instance answers
      EDIT_FILE="$caps/selu-text/added.txt" LOG="$state/logs/text-tools.log" \
        drive "unix:$work/g.sock" warm-edit
      # a lease asked ahead that no call takes is given back within ms:
      # the keepers show no lease held, so the idle clock runs
      held=
      for _ in $(seq 100); do
        held=$("$capsule" ps --json --state "$state" 2>/dev/null | jq '[.[] | .leases | split("/")[0] | tonumber] | add // 0')
        [ "$held" = 0 ] && break
        sleep 0.1
      done
      [ "$held" = 0 ] && ok "no lease held once the calls are over" ||
        bad "no lease held once the calls are over ($held held after 10 s: $("$capsule" ps --state "$state" 2>&1))"
    else
      bad "the call process of serve --grpc (a child of $gproc) was not found"
    fi
    # policy ask is not the warm path's: the call process leaves one
    # pending approval and one audit record
    "$capsule" policy set --caps "$caps" --state "$state" text-tools word_count ask >/dev/null
    drive "unix:$work/g.sock" warm-ask
    pending=$("$capsule" approvals --json --state "$state" 2>/dev/null | jq '[.[] | select(.capability == "text-tools")] | length')
    [ "$pending" = 1 ] && ok "an ask through serve --grpc leaves one approval" ||
      bad "an ask through serve --grpc leaves one approval (found ${pending:-none})"
    asks=$("$capsule" audit --json --state "$state" 2>/dev/null |
      jq '[.[] | select(.capability == "text-tools" and .decision == "approval-pending")] | length')
    [ "$asks" = 1 ] && ok "the ask is audited once" || bad "the ask is audited once (found ${asks:-none})"
    warm=$("$capsule" audit --json --state "$state" 2>/dev/null |
      jq '[.[] | select(.capability == "text-tools" and .user == "alice")] | length')
    [ "$warm" = 35 ] && ok "every text-tools call audited once" ||
      bad "every text-tools call audited once (35 calls, found ${warm:-none})"
    "$capsule" policy set --caps "$caps" --state "$state" text-tools word_count allow >/dev/null
  else
    echo "  skip selu: build examples/selu-text (make build does)"
  fi
  # the orchestrator's artifact calls: up, into a Selu tool, out of one,
  # down; through the call process, then (its instance warm) without it
  other=$("$capsule" access issue grpc-other --user bob --state "$state" 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1)
  OTHER_TOKEN=$other drive "unix:$work/g.sock" artifacts
  up=$(sed -n 's/^uploaded //p' "$work/drive.out") made=$(sed -n 's/^made //p' "$work/drive.out")
  find_cproc
  if [ -n "$cproc" ] && kill -STOP "$cproc"; then
    echo "  (the call process stopped: the warm path)"
    OTHER_TOKEN=$other drive "unix:$work/g.sock" artifacts
    kill -CONT "$cproc"
  else
    bad "the call process of serve --grpc (a child of $gproc) was not found"
  fi
  f=$(ls "$state"/run/artifacts/*/"$up.data" 2>/dev/null | head -1)
  [ -n "$f" ] && [ "$(stat -c %a "$f")" = 600 ] && [ "$(stat -c %a "$(dirname "$f")")" = 700 ] &&
    ok "an upload is stored in the state's run area, 0600 in a 0700 directory" ||
    bad "an upload is stored in the state's run area (found: ${f:-nothing} $(ls -la "$state/run/artifacts" 2>&1 | head -3))"
  parts() { ls -A "$state"/run/artifacts/*/ | grep -c 'part$'; }
  for _ in $(seq 100); do [ "$(parts)" = 0 ] && break; sleep 0.1; done
  [ "$(parts)" = 0 ] && ok "no half-written artifact left (the refused and abandoned uploads removed)" ||
    bad "no half-written artifact left: $(ls -A "$state"/run/artifacts/*/ | grep part)"
  # (an upload its client ended and cancelled at once may be kept or not:
  # gRPC cannot tell the two apart until the answer goes)
  d=$(ls "$state"/run/artifacts/*/ | sed -n 's/\.data$//p' | sort) m=$(ls "$state"/run/artifacts/*/ | sed -n 's/\.meta$//p' | sort)
  [ "$d" = "$m" ] && [ "$(wc -l <<<"$m")" -ge 19 ] && ok "every stored artifact has its record and bytes ($(wc -l <<<"$m"))" ||
    bad "every stored artifact has its record and bytes: $(diff <(echo "$d") <(echo "$m"))"
  audit=$("$capsule" audit --json --state "$state" 2>/dev/null)
  for want in "artifact-upload $up stored in.txt" "artifact-in $up in.txt" "artifact-out $made stored out.txt" \
    "artifact-download $made sent out.txt" "artifact-download $made refused"; do
    set -- $want ""
    jq -e --arg d "$1" --arg id "$2" --arg w "$3 $4" \
      '[.[] | select(.decision == $d and .tool == $id and (.outcome | gsub("\""; "") | startswith($w | rtrimstr(" "))))] | length >= 1' \
      <<<"$audit" >/dev/null && ok "audited: $1 $3 $4" || bad "audited: $1 $2 $3 $4"
  done
  jq -e '[.[] | select(.decision == "artifact-upload" and (.outcome | startswith("refused \"big.bin\"")))] | length == 2' \
    <<<"$audit" >/dev/null && ok "audited: the refused uploads" || bad "audited: the refused uploads"
  jq -e --arg id "$made" --arg up "$up" '[.[] | select(.user == "bob" and ((.decision == "artifact-download" and .tool == $id) or
    (.decision == "artifact-in" and .tool == $up)) and (.outcome | startswith("refused")))] | length == 2' \
    <<<"$audit" >/dev/null && ok "audited: the other user's attempts, as that user" || bad "audited: the other user's attempts"
  meta=$(ls "$state"/run/artifacts/*/"$made.meta" 2>/dev/null | head -1)
  if [ -n "$meta" ]; then # aged past its life (6 hours)
    sed -i 's/"created":[0-9]*/"created":1000/' "$meta"
    ARTIFACT_ID=$made drive "unix:$work/g.sock" expired
    [ ! -e "$meta" ] && ok "an expired artifact is removed" || bad "an expired artifact is removed"
  else
    bad "the output artifact's record is in the store"
  fi
  agent late
  "$capsule" policy set --caps "$caps" --state "$state" late dispatch allow >/dev/null
  n=6; [ $selu = yes ] && n=7
  for _ in $(seq 100); do grep -q "\"registry loaded\".*\"capabilities\":\"$n\"" "$work/serve.log" && break; sleep 0.1; done
  drive "unix:$work/g.sock" reloaded
  audit=$("$capsule" audit --json --state "$state" 2>/dev/null)
  jq -e '[.[] | select(.capability == "echo" and .tool == "dispatch" and .user == "alice")] | length >= 5' \
    <<<"$audit" >/dev/null && ok "calls audited as the token's user" || bad "calls audited as the token's user"
  kill -TERM "$spid"; wait "$spid"; st=$?
  spid=
  [ "$st" = 0 ] && ok "SIGTERM stops serve" || bad "SIGTERM stops serve (exit $st)"
else
  bad "serve --grpc did not listen: $(tail -3 "$work/serve.log")"
fi
only() { # CAPABILITY MODE: Healthcheck of a serve under --capability
  "$capsule" serve --caps "$caps" --state "$state" --socket "$work/o.sock" --capability "$1" \
    --grpc "unix:$work/o.grpc" 2>>"$work/serve.log" &
  spid=$!
  for _ in $(seq 200); do [ -S "$work/o.grpc" ] && break; sleep 0.05; done
  drive "unix:$work/o.grpc" "$2"
  kill -TERM "$spid"; wait "$spid"
  spid=
  rm -f "$work/o.grpc"
}
only echo ready
agent broken
rm "$caps/agents/broken/run.sh"
only broken not-ready
out=$("$capsule" serve --caps "$caps" --state "$state" --socket "$work/s2.sock" --grpc 0.0.0.0:1 2>&1)
[ $? != 0 ] && grep -q "not a loopback address" <<<"$out" && ok "a network address needs TLS or --insecure" ||
  bad "a network address needs TLS or --insecure: $out"
finish "serve --grpc"
