#!/usr/bin/env bash
# serve --grpc answers a call that came alone with its thread still the one
# taking new calls (no wake-up of another per call), and hands that role
# over before it waits long: a call that comes while a warm Selu call waits
# on a slow instance (tests/gateway/selu_fault.c's sleep), or while a call
# starting a new instance waits in the call process (slow-start), is
# answered first. Only the order of the answers is checked.
# Usage: serve_grpc_lead.sh CAPSULE SELU_FAULT PROTO
set -u
source "$(dirname "$0")/../lib/gateway.sh" "$1"
fault=$2 proto=$3
needs_grpc_client selu-text
work=$(mktemp -d /var/tmp/capsule-serve-grpc-lead.XXXXXX)
chmod 755 "$work"
spid= cproc=
cleanup() {
  [ -n "$cproc" ] && kill -CONT "$cproc" 2>/dev/null
  [ -n "$spid" ] && kill -9 "$spid" 2>/dev/null
  local id
  for id in text-tools selu-slow selu-cold; do "$capsule" stop --state "$work/state" "$id" >/dev/null 2>&1; done
  rm -rf "$work"
}
trap cleanup EXIT
caps=$work/caps state=$work/state
mkdir -p "$caps"
cp -r "$root/examples/selu-text" "$caps/selu-text"
fault_cap() { # ID MODE
  mkdir -p "$caps/$1"
  cp "$fault" "$caps/$1/server"
  cat >"$caps/$1/manifest.yaml" <<YAML
id: $1
image: example/$1:1.0
tools:
  - {name: ok, description: Answers ok., recommended_policy: allow, input_schema: {type: object}}
  - {name: sleep, description: Sleeps ms., recommended_policy: allow, input_schema: {type: object}}
x-capsule:
  command: ["./server", "--mode", "$2"]
YAML
}
fault_cap selu-slow normal
fault_cap selu-cold slow-start
"$capsule" policy set --caps "$caps" --state "$state" text-tools word_count allow >/dev/null
token=$("$capsule" access issue lead --user alice --state "$state" 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1)
"$capsule" serve --caps "$caps" --state "$state" --grpc "unix:$work/g.sock" 2>"$work/serve.log" &
spid=$!
for _ in $(seq 200); do [ -S "$work/g.sock" ] && break; sleep 0.05; done
[ -S "$work/g.sock" ] || { bad "serve listens: $(tail -3 "$work/serve.log")"; finish "serve --grpc lead"; exit; }
drive() { # MODE: the driver's lines as checks
  local line
  while IFS= read -r line; do
    case $line in
    ok\ *) ok "${line#ok }" ;;
    FAIL\ *) bad "${line#FAIL }" ;;
    *) [ -n "$line" ] && echo "         $line" ;;
    esac
  done < <(node "$here/serve_grpc_lead.mjs" "$proto" "unix:$work/g.sock" "$token" "$1" 2>&1)
}
drive warm-up # both instances started (by the call process)
# the call process stopped: a warm call alone, then one slow warm call
# and a fast one behind it
for p in $(pgrep -P "$spid"); do
  c=$(pgrep -P "$p" | head -1)
  [ -n "$c" ] && cproc=$c
done
if [ -n "$cproc" ] && kill -STOP "$cproc"; then
  drive warm
  kill -CONT "$cproc"
  cproc=
else
  bad "the call process of serve --grpc was not found"
fi
drive cold # a call starting an instance (2 s) and a warm call behind it
finish "serve --grpc lead"
