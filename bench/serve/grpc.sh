#!/usr/bin/env bash
# A warm Selu tool (the C example, examples/selu-text, word_count) called
# over one kept gRPC connection through `capsule serve --grpc` (the
# orchestrator's Capability service: token check, policy, validation, the
# warm instance's lease, audit) beside the same server binary called
# directly on host loopback, calls interleaved one by one in one run.
# Usage: bench/serve/grpc.sh [CAPSULE] [N]   (needs `make build` and the
# test modules: scripts/deps.sh test)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capsule=$(realpath "${1:-$root/build/capsule}")
n=${2:-300}
work=$(mktemp -d /var/tmp/capsule-bench-serve.XXXXXX)
chmod 755 "$work"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; pkill -f "$work/caps/" 2>/dev/null; rm -rf "$work"' EXIT
make -s -C "$root/examples/selu-text" >/dev/null
mkdir -p "$work/caps"
cp -r "$root/examples/selu-text" "$work/caps/"
state=$work/state
"$capsule" policy set text-tools word_count allow --caps "$work/caps" --state "$state" >/dev/null
token=$("$capsule" access issue bench --user bench --state "$state" 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$work/caps/selu-text/capability" "127.0.0.1:$port" >/dev/null 2>&1 &
pids+=($!)
"$capsule" serve --caps "$work/caps" --state "$state" --grpc "unix:$work/grpc.sock" 2>"$work/serve.log" &
pids+=($!)
for _ in $(seq 100); do [ -S "$work/grpc.sock" ] && break; sleep 0.1; done
node "$root/bench/serve/grpc.mjs" "$root/proto/selu/orchestrator/capability.proto" \
  "127.0.0.1:$port" "unix:$work/grpc.sock" "$token" "$n" | node -e '
let s = ""; process.stdin.on("data", d => s += d).on("end", () => {
  const r = JSON.parse(s);
  console.log("| calls | direct p50 ms | serve p50 ms | added p50 ms | direct p90 ms | serve p90 ms |");
  console.log("|---|---|---|---|---|---|");
  console.log(`| ${r.n} | ${r.direct_p50.toFixed(2)} | ${r.serve_p50.toFixed(2)} | ${(r.serve_p50 - r.direct_p50).toFixed(2)} | ${r.direct_p90.toFixed(2)} | ${r.serve_p90.toFixed(2)} |`);
});'
"$capsule" audit verify --state "$state" >/dev/null && echo "audit chain verifies"
