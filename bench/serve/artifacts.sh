#!/usr/bin/env bash
# serve --grpc's artifact calls with the Node Selu example (node-tools):
# a 16 MiB UploadInputArtifact and DownloadOutputArtifact (p50 of 5), and
# a warm read_attachments call without and with one 5-byte attachment
# (p50 of N: the attachment is uploaded to the tool's instance each call).
# Usage: bench/serve/artifacts.sh [CAPSULE] [N]   (needs `make build` and
# examples/selu-node's modules: scripts/deps.sh test)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capsule=$(realpath "${1:-$root/build/capsule}")
n=${2:-30}
work=$(mktemp -d /var/tmp/capsule-bench-artifacts.XXXXXX)
chmod 755 "$work"
spid=
trap '[ -z "$spid" ] || kill "$spid" 2>/dev/null || true; wait 2>/dev/null; rm -rf "$work"' EXIT
caps=$work/caps state=$work/state
mkdir -p "$caps"
cp -r "$root/examples/selu-node" "$caps/node-tools"
cp "$root/proto/selu/capability/v1/capability.proto" "$caps/node-tools/capability.proto"
cp "$root/proto/selu/orchestrator/capability.proto" "$caps/node-tools/orchestrator.proto"
"$capsule" policy set --caps "$caps" --state "$state" --force node-tools read_attachments allow >/dev/null 2>&1
token=$("$capsule" access issue bench --user bench --state "$state" 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1)
"$capsule" serve --caps "$caps" --state "$state" --grpc "unix:$work/grpc.sock" 2>"$work/serve.log" &
spid=$!
for _ in $(seq 100); do [ -S "$work/grpc.sock" ] && break; sleep 0.1; done
node "$root/bench/serve/artifacts.mjs" "$root/proto/selu/orchestrator/capability.proto" \
  "unix:$work/grpc.sock" "$token" "$n"
