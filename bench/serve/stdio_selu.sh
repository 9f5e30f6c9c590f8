#!/usr/bin/env bash
# A warm Selu tool (examples/selu-text's word_count) called over `capsule
# mcp` on stdio, N calls on one kept process, this build beside another
# (e.g. main's) interleaved one by one in one run (bench/serve/stdio_selu.py).
# Usage: bench/serve/stdio_selu.sh [CAPSULE] [OTHER_CAPSULE] [N]
#   (needs `make -s -C examples/selu-text`)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capsule=$(realpath "${1:-$root/build/capsule}")
other=${2:-}
n=${3:-200}
[ -x "$root/examples/selu-text/capability" ] ||
  { echo "examples/selu-text is not built: make -s -C examples/selu-text" >&2; exit 1; }
work=$(mktemp -d /var/tmp/capsule-bench-stdio-selu.XXXXXX)
chmod 755 "$work"
args=()
cleanup() {
  for s in "$work"/state*; do "$capsule" stop --state "$s" text-tools >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/caps"
cp -r "$root/examples/selu-text" "$work/caps/selu-text"
i=0
for c in "$capsule" ${other:+"$(realpath "$other")"}; do
  i=$((i + 1))
  "$c" policy set --caps "$work/caps" --state "$work/state$i" text-tools word_count allow >/dev/null
  args+=("$work/state$i" "$c")
done
/usr/bin/python3 "$root/bench/serve/stdio_selu.py" "$work/caps" "$n" "${args[@]}" |
  /usr/bin/python3 -c '
import json, sys
print("| capsule | calls | p50 ms | p90 ms |")
print("|---|---|---|---|")
for r in json.load(sys.stdin):
    print("| %s | %d | %.2f | %.2f |" % (r["capsule"], r["n"], r["p50"], r["p90"]))'
for s in "$work"/state*; do
  "$capsule" audit verify --state "$s" >/dev/null && echo "audit chain verifies ($(basename "$s"))"
done
