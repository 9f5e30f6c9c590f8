#!/usr/bin/env bash
# Covenant: routing a dispatch over 1,000 agents beside loading their
# registry, and checking a capability token beside libsodium's bare
# crypto_sign_verify_detached on the same bytes; both side by side in one
# process (bench/covenant/covenant_bench.c), run twice.
# Usage: bench/covenant/run.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath "${1:-$root/build}")
rounds=${2:-20}
bench=$build/bench/covenant_bench
[ -x "$bench" ] || { echo "build it first: ninja -C $build"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
caps=("tool.web_search" "tool.summarize" "tool.gpu_inference" "memory.write" "memory.read"
      "intent.delegate" "intent.subscribe" "tool.code")
for i in $(seq -w 1 1000); do
  mkdir -p "$work/agents/agent-$i"
  a=${caps[$((10#$i % 8))]} b=${caps[$((10#$i * 7 % 8))]}
  printf '[agent]\nid = "agent-%s"\nname = "agent %s"\nversion = "0.1.0"\nruntime = "python3"\nentry = "main.py"\n[capabilities]\nrequired = ["%s"]\noptional = ["%s"]\n[resources]\nnetwork = "off"\n' \
    "$i" "$i" "$a" "$b" >"$work/agents/agent-$i/agent.toml"
done
for run in 1 2; do
  echo "run $run:"
  "$bench" "$work" "$rounds" | sed 's/^/  /'
done
