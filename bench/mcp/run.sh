#!/usr/bin/env bash
# MCP over Streamable HTTP: tools/call calls/s through `capsule serve
# --mcp-http` (bearer token, policy, argument validation, the sandboxed
# tool, the audit record) beside the official TypeScript SDK's own server
# serving the same trivial tool with no policy at all (bench/mcp/
# sdk_server.mjs), the same client (bench/mcp/client.mjs, the SDK's
# Client) in the same run, one caller and 8 callers on one session, each
# side twice, interleaved. capsule's tools: `test_simple_text` of
# examples/mcp-conformance (the SDK's own server behind capsule, kept
# warm) and, when examples/selu-text builds, the warm Selu C server's
# `word_count`. Then each server's idle RSS (VmRSS) right after start.
# Usage: bench/mcp/run.sh [CAPSULE]   (N calls per measure: N=500)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capsule=$(realpath "${1:-$root/build/capsule}")
n=${N:-500}
here=$root/bench/mcp
export NODE_PATH=$root/tests/node_modules
[ -d "$root/tests/node_modules/@modelcontextprotocol/sdk" ] || { echo "bench/mcp: tests/node_modules lacks the SDK (scripts/deps.sh test)" >&2; exit 2; }
[ -d "$root/examples/mcp-conformance/node_modules/@modelcontextprotocol/sdk" ] || { echo "bench/mcp: examples/mcp-conformance lacks its modules (scripts/deps.sh test)" >&2; exit 2; }
work=$(mktemp -d /var/tmp/capsule-bench-mcp.XXXXXX)
chmod 755 "$work"
pids=()
keepers() {
  local f l
  for f in /proc/[0-9]*/fd/*; do
    l=$(readlink "$f" 2>/dev/null) || continue
    case $l in "$work"/*.mcp.lock* | "$work"/*.lock) f=${f#/proc/}; echo "${f%%/*}" ;; esac
  done | sort -u
}
trap 'for p in "${pids[@]}" $(keepers); do kill "$p" 2>/dev/null; done; "$capsule" stop --state "$work/state" text-tools >/dev/null 2>&1; rm -rf "$work"' EXIT
mkdir -p "$work/caps"
cp -a "$root/examples/mcp-conformance" "$work/caps/conformance"
selu=
if make -s -C "$root/examples/selu-text" >/dev/null 2>&1; then cp -r "$root/examples/selu-text" "$work/caps/"; selu=1; fi
C=(--caps "$work/caps" --state "$work/state")
"$capsule" call "${C[@]}" conformance test_simple_text '{}' >/dev/null 2>&1 || true # discovery
"$capsule" policy set "${C[@]}" conformance test_simple_text allow >/dev/null
[ -n "$selu" ] && "$capsule" policy set "${C[@]}" text-tools word_count allow >/dev/null
token=$("$capsule" access issue bench --state "$work/state")
port() { echo $((20000 + RANDOM % 20000)); }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
cport=$(port)
"$capsule" serve "${C[@]}" --mcp-http "127.0.0.1:$cport" --rate 1000000 2>"$work/serve.log" &
pids+=($!)
serve_pid=$!
sport=$(port)
node "$here/sdk_server.mjs" "$sport" >"$work/sdk.log" 2>&1 &
pids+=($!)
sdk_pid=$!
for _ in $(seq 1 100); do
  "$capsule" serve status --state "$work/state" >/dev/null 2>&1 && grep -q listening "$work/sdk.log" && break
  sleep 0.1
done
sleep 1
echo "idle RSS: capsule serve $(rss "$serve_pid") KiB, SDK server $(rss "$sdk_pid") KiB"
measure() { # NAME URL TOOL ARGS CONC [TOKEN]
  printf '%-44s conc %s: %s calls/s\n' "$1" "$5" "$(node "$here/client.mjs" "$2" "$3" "$4" "$n" "$5" "${6:-}")"
}
for round in 1 2; do
  echo "round $round ($n calls each):"
  for conc in 1 8; do
    measure "SDK server, test_simple_text" "http://127.0.0.1:$sport/mcp" test_simple_text '{}' "$conc"
    measure "capsule serve, conformance (warm MCP server)" "http://127.0.0.1:$cport/mcp" conformance__test_simple_text '{}' "$conc" "$token"
    [ -n "$selu" ] && measure "capsule serve, text-tools (warm Selu, C)" "http://127.0.0.1:$cport/mcp" text-tools__word_count '{"text":"a b c"}' "$conc" "$token"
  done
done
echo "RSS after the run: capsule serve $(rss "$serve_pid") KiB, SDK server $(rss "$sdk_pid") KiB"
[ -s "$work/sdk.log" ] && grep -v '^listening' "$work/sdk.log" | head -20 >&2 || true
