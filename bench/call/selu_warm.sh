#!/usr/bin/env bash
# A warm Selu tool (the C example, examples/selu-text, word_count) called
# by `capsule call` (a process per call: the registry, policy, validation,
# the lease on the warm instance, the call, the audit append) beside the
# same server binary on host loopback called by bench/call/selu_call (a
# process and a connection per call, no capsule), the calls rotating one
# by one (direct, capsule, [the other build's capsule,] direct...) so that
# load lands on all alike, each round starting one further along (each
# called first, and after each other, as often); with BEFORE (another build's capsule, on a
# state of its own) that build in the same rotation.
# Usage: bench/call/selu_warm.sh [CAPSULE] [N] [BEFORE]   (needs `make build`)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capsule=$(realpath "${1:-$root/build/capsule}")
n=${2:-40}
before=${3:+$(realpath "$3")}
selu_call=${SELU_CALL:-$(realpath "$(dirname "$capsule")/../../bench/selu_call")}
work=$(mktemp -d /var/tmp/capsule-bench-selu-warm.XXXXXX)
chmod 755 "$work"
server_pid=
cleanup() {
  kill $server_pid 2>/dev/null || true # (set -e: a stop that finds nothing must not end it before the rm)
  "$capsule" stop --state "$work/this" text-tools >/dev/null 2>&1 || true
  [ -z "$before" ] || "$before" stop --state "$work/before" text-tools >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
make -s -C "$root/examples/selu-text" >/dev/null
mkdir -p "$work/caps"
cp -r "$root/examples/selu-text" "$work/caps/"
args='{"text": "one two three four five"}'
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$work/caps/selu-text/capability" "127.0.0.1:$port" >/dev/null 2>&1 &
server_pid=$!
names=(direct this) cmds=("$selu_call $port word_count '$args'")
warm() { # NAME CAPSULE: its state set up and its instance started
  "$2" policy set text-tools word_count allow --caps "$work/caps" --state "$work/$1" >/dev/null
  "$2" call --caps "$work/caps" --state "$work/$1" text-tools word_count "$args" >/dev/null
  cmds+=("$2 call --caps $work/caps --state $work/$1 text-tools word_count '$args'")
}
warm this "$capsule"
if [ -n "$before" ]; then
  names+=(before)
  warm before "$before"
fi
declare -A times
for _ in 1 2 3; do for c in "${cmds[@]}"; do eval "$c" >/dev/null; done; done # warm-ups
for r in $(seq "$n"); do
  for k in "${!cmds[@]}"; do
    i=$(((k + r) % ${#cmds[@]})) # the order rotated each round: each side called first as often
    s=$(date +%s%N)
    eval "${cmds[$i]}" >/dev/null
    times[${names[$i]}]+="$(( ($(date +%s%N) - s) / 1000 )) "
  done
done
p50() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]/1000}'; }
d=$(p50 "${times[direct]}")
echo "| calls | build | direct p50 ms | capsule call p50 ms | ratio |"
echo "|---|---|---|---|---|"
for b in "${names[@]:1}"; do
  c=$(p50 "${times[$b]}")
  echo "| $n | $b | $d | $c | $(awk -v c="$c" -v d="$d" 'BEGIN {printf "%.2fx", c / d}') |"
done
