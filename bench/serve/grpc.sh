#!/usr/bin/env bash
# A warm Selu tool (the C example, examples/selu-text, word_count) called
# over one kept gRPC connection through `capsule serve --grpc` (the
# orchestrator's Capability service: token check, policy, validation, the
# warm instance's lease, audit) beside the same server binary called
# directly on host loopback, calls interleaved one by one in one run.
# With BEFORE (another capsule build), a serve of that build on a state of
# its own is called in the same rotation (direct, serve, before's serve...),
# so two builds are compared under the same load. With RELAY=1, a bare
# byte relay (socat, unix socket to the direct server's TCP port) too: the
# floor of what a second hop adds here before any work is done on it.
# Usage: bench/serve/grpc.sh [CAPSULE] [N] [BEFORE]   (needs `make build`
# and the test modules: scripts/deps.sh test)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capsule=$(realpath "${1:-$root/build/capsule}")
n=${2:-300}
before=${3:+$(realpath "$3")}
work=$(mktemp -d /var/tmp/capsule-bench-serve.XXXXXX)
chmod 755 "$work"
pids=()
# the warm instances' keepers outlive serve (and write below the state): stopped first
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null; for s in "$work/state" "$work/before"; do "$capsule" stop --state "$s" text-tools >/dev/null 2>&1 || true; done; pkill -f "$work/caps/" 2>/dev/null || true; rm -rf "$work"' EXIT
make -s -C "$root/examples/selu-text" >/dev/null
mkdir -p "$work/caps"
cp -r "$root/examples/selu-text" "$work/caps/"
serve() { # CAPSULE STATE SOCKET: a serve --grpc; its token in STATE.token
  "$1" policy set text-tools word_count allow --caps "$work/caps" --state "$2" >/dev/null
  "$1" access issue bench --user bench --state "$2" 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1 >"$2.token"
  "$1" serve --caps "$work/caps" --state "$2" --grpc "unix:$3" </dev/null >/dev/null 2>"$2.log" &
  pids+=($!)
  for _ in $(seq 100); do [ -S "$3" ] && break; sleep 0.1; done
}
serve "$capsule" "$work/state" "$work/grpc.sock"
token=$(cat "$work/state.token")
other=()
if [ -n "$before" ]; then
  serve "$before" "$work/before" "$work/before.sock"
  other=("unix:$work/before.sock" "$(cat "$work/before.token")")
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$work/caps/selu-text/capability" "127.0.0.1:$port" >/dev/null 2>&1 &
pids+=($!)
if [ -n "${RELAY:-}" ]; then # a bare relay (socat, a byte copy) to the direct server, in the rotation
  command -v socat >/dev/null || { echo "bench/serve/grpc.sh: RELAY needs socat (apt-get install socat)" >&2; exit 2; }
  socat "UNIX-LISTEN:$work/relay.sock,fork" "TCP:127.0.0.1:$port" &
  pids+=($!)
  for _ in $(seq 100); do [ -S "$work/relay.sock" ] && break; sleep 0.1; done
  export RELAY_TARGET=unix:$work/relay.sock
fi
node "$root/bench/serve/grpc.mjs" "$root/proto/selu/orchestrator/capability.proto" \
  "127.0.0.1:$port" "unix:$work/grpc.sock" "$token" "$n" "${other[@]}" | node -e '
let s = ""; process.stdin.on("data", d => s += d).on("end", () => {
  const r = JSON.parse(s);
  console.log("| calls | build | direct p50 ms | serve p50 ms | added p50 ms | direct p90 ms | serve p90 ms | direct p99 ms | serve p99 ms |");
  console.log("|---|---|---|---|---|---|---|---|---|");
  const f = (k) => r[k].toFixed(2);
  const row = (name, k) => console.log(`| ${r.n} | ${name} | ${f("direct_p50")} | ${f(k + "_p50")} | ${(r[k + "_p50"] - r.direct_p50).toFixed(2)} | ${f("direct_p90")} | ${f(k + "_p90")} | ${f("direct_p99")} | ${f(k + "_p99")} |`);
  row("this", "serve");
  if (r.other_p50 !== undefined) row("before", "other");
  if (r.relay_p50 !== undefined) row("a bare relay (socat)", "relay");
});'
"$capsule" audit verify --state "$work/state" >/dev/null && echo "audit chain verifies"
