#!/usr/bin/env bash
# A per-call Covenant agent (examples/covenant/agents/wordcount, POSIX sh)
# called through `capsule serve --mcp-http` on one kept connection, beside
# `capsule run` of the same agent from the same manifest, interleaved one
# by one in one run (bench/serve/covenant.py).
# Usage: bench/serve/covenant.sh [CAPSULE] [N]   (needs `make build`)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capsule=$(realpath "${1:-$root/build/capsule}")
n=${2:-100}
work=$(mktemp -d /var/tmp/capsule-bench-covenant.XXXXXX)
chmod 755 "$work"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/caps"
cp -r "$root/examples/covenant/agents/wordcount" "$work/caps/"
state=$work/state
"$capsule" policy set wordcount dispatch allow --caps "$work/caps" --state "$state" >/dev/null
"$capsule" token issue local tool.wordcount --state "$state" >/dev/null
bearer=$("$capsule" access issue bench --user bench --state "$state" 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$capsule" serve --caps "$work/caps" --state "$state" --mcp-http "127.0.0.1:$port" 2>"$work/serve.log" &
pids+=($!)
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/mcp" && break; sleep 0.1; done
/usr/bin/python3 "$root/bench/serve/covenant.py" "$capsule" "$work/caps/wordcount" "$state" "$port" "$bearer" "$n" |
  /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)
print("| calls | capsule run p50 ms | through serve p50 ms | serve - run p50 ms | run p90 ms | serve p90 ms |")
print("|---|---|---|---|---|---|")
print("| %d | %.2f | %.2f | %+.2f | %.2f | %.2f |" % (r["n"], r["run_p50"], r["serve_p50"],
      r["serve_p50"] - r["run_p50"], r["run_p90"], r["serve_p90"]))'
"$capsule" audit verify --state "$state" >/dev/null && echo "audit chain verifies"
