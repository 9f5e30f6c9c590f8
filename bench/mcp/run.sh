#!/usr/bin/env bash
# MCP over Streamable HTTP: tools/call calls/s through `capsule serve
# --mcp-http` (bearer token, policy, argument validation, the sandboxed
# tool's warm server, the audit record) beside the official TypeScript
# SDK's own server serving the same trivial tool with no policy at all
# (bench/mcp/sdk_server.mjs), the same light client for both in the same
# run: wrk (Debian's, one thread) with bench/mcp/call.lua, POSTing
# tools/call on one session initialized beforehand (curl), 1, 8 and 32
# connections, each side D seconds, twice, interleaved (the SDK server
# first in round 1, capsule first in round 2). So the servers are
# measured, not the client (the SDK's own Client spends ~3 ms of CPU a
# call: it capped both sides on 2 cores). capsule's tools:
# `test_simple_text` of examples/mcp-c (a tiny MCP server in C, kept warm
# by capsule), the same tool of examples/mcp-conformance (the SDK's own
# server behind capsule) and, when examples/selu-text builds, the warm
# Selu C server's `word_count`. For capsule's rows, the CPU (user and
# system, from /proc) serve and the warm servers' keepers spent a call.
# After mcp-c's row, its calls/s over the SDK server's in the same round
# and concurrency. Then each server's idle RSS (VmRSS).
# Usage: bench/mcp/run.sh [CAPSULE]   (D seconds a measure: D=4)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capsule=$(realpath "${1:-$root/build/capsule}")
d=${D:-4}
here=$root/bench/mcp
export NODE_PATH=$root/tests/node_modules
command -v wrk >/dev/null || { echo "bench/mcp: needs wrk (apt-get install wrk; scripts/deps.sh bench)" >&2; exit 2; }
[ -d "$root/tests/node_modules/@modelcontextprotocol/sdk" ] || { echo "bench/mcp: tests/node_modules lacks the SDK (scripts/deps.sh test)" >&2; exit 2; }
[ -d "$root/examples/mcp-conformance/node_modules/@modelcontextprotocol/sdk" ] || { echo "bench/mcp: examples/mcp-conformance lacks its modules (scripts/deps.sh test)" >&2; exit 2; }
make -s -C "$root/examples/mcp-c" >/dev/null || { echo "bench/mcp: examples/mcp-c does not build (libjansson-dev)" >&2; exit 2; }
work=$(mktemp -d /var/tmp/capsule-bench-mcp.XXXXXX)
chmod 755 "$work"
pids=()
keepers() {
  local f l
  for f in /proc/[0-9]*/fd/*; do
    l=$(readlink "$f" 2>/dev/null) || continue
    # serve itself holds STATE/audit-hwm.lock: not a keeper
    case $l in "$work"/*.mcp.lock* | "$work"/*.lock) f=${f#/proc/}; [ "${f%%/*}" = "${serve_pid:-}" ] || echo "${f%%/*}" ;; esac
  done | sort -u
}
trap 'for p in "${pids[@]}" $(keepers); do kill "$p" 2>/dev/null || true; done; "$capsule" stop --state "$work/state" text-tools >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
mkdir -p "$work/caps"
cp -a "$root/examples/mcp-conformance" "$work/caps/conformance"
cp -a "$root/examples/mcp-c" "$work/caps/mcp-c"
selu=
if make -s -C "$root/examples/selu-text" >/dev/null 2>&1; then cp -r "$root/examples/selu-text" "$work/caps/"; selu=1; fi
C=(--caps "$work/caps" --state "$work/state")
for cap in conformance mcp-c; do # discovery: an MCP server's tools are what it lists
  "$capsule" call "${C[@]}" "$cap" test_simple_text '{}' >/dev/null 2>&1 || true
  "$capsule" policy set "${C[@]}" "$cap" test_simple_text allow >/dev/null
done
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
H=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
session() { # URL [TOKEN]: a new session's id, initialized
  local auth=() id
  [ -n "${2:-}" ] && auth=(-H "Authorization: Bearer $2")
  id=$(curl -sS -m 60 -D - -o /dev/null "${H[@]}" "${auth[@]}" --data \
    '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}' \
    "$1" | tr -d '\r' | awk -F': ' 'tolower($1) == "mcp-session-id" {print $2}')
  [ -n "$id" ] || { echo "bench/mcp: $1 gave no session" >&2; return 1; }
  curl -sS -m 60 -o /dev/null "${H[@]}" "${auth[@]}" -H "Mcp-Session-Id: $id" -H 'MCP-Protocol-Version: 2025-06-18' \
    --data '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$1"
  echo "$id"
}
blast() { # SECONDS URL TOOL ARGS EXPECT CONC SESSION [TOKEN]
  MCP_SESSION=$7 MCP_TOOL=$3 MCP_ARGS=$4 MCP_EXPECT=$5 MCP_TOKEN=${8:-} \
    wrk -t1 -c"$6" -d"$1s" --timeout 30s -s "$here/call.lua" "$2" | tail -1
}
tck=$(getconf CLK_TCK)
cpu() { # PID...: their user and system CPU so far, in clock ticks
  local t=0 p
  for p in "$@"; do [ -r "/proc/$p/stat" ] && t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  echo "$t"
}
measure() { # NAME URL TOOL ARGS EXPECT CONC [TOKEN]
  local sid out s0 k0 ks n
  sid=$(session "$2" "${7:-}")
  blast 1 "$2" "$3" "$4" "$5" "$6" "$sid" "${7:-}" >/dev/null # warm-up (and a cold start)
  ks=$(keepers)
  s0=$(cpu "$serve_pid") k0=$(cpu $ks)
  out=$(blast "$d" "$2" "$3" "$4" "$5" "$6" "$sid" "${7:-}")
  n=$(sed -n 's/.* \([0-9]*\) ok,.*/\1/p' <<<"$out")
  rate=$(sed -n 's/^\([0-9]*\) calls\/s.*/\1/p' <<<"$out")
  if [ -n "${7:-}" ] && [ "${n:-0}" -gt 0 ]; then # capsule: its processes' CPU a call
    out="$out; CPU a call: serve $(( ($(cpu "$serve_pid") - s0) * 1000000 / tck / n )) us, keepers $(( ($(cpu $ks) - k0) * 1000000 / tck / n )) us"
  fi
  printf '%-44s conc %s: %s\n' "$1" "$6" "$out"
}
ratio() { # NAME: the last rate over the SDK server's in this round and concurrency
  [ "${sdk_rate:-0}" -gt 0 ] && [ -n "${rate:-}" ] &&
    awk -v a="$rate" -v b="$sdk_rate" -v n="$1" 'BEGIN {printf "  %s / SDK server: %.2fx\n", n, a / b}'
  true
}
simple='simple text response for testing'
for round in 1 2; do
  echo "round $round ($d s each):"
  for conc in 1 8 32; do
    # the pair's order turned every other round: each side measured first as often
    sdk() { measure "SDK server, test_simple_text" "http://127.0.0.1:$sport/mcp" test_simple_text '{}' "$simple" "$conc"; sdk_rate=${rate:-0}; }
    mcpc() { measure "capsule serve, mcp-c (warm MCP server, C)" "http://127.0.0.1:$cport/mcp" mcp-c__test_simple_text '{}' "$simple" "$conc" "$token"; mcpc_rate=${rate:-0}; }
    if [ $((round % 2)) = 1 ]; then sdk; mcpc; else mcpc; sdk; fi
    rate=$mcpc_rate
    ratio "capsule serve, mcp-c"
    measure "capsule serve, conformance (warm SDK server)" "http://127.0.0.1:$cport/mcp" conformance__test_simple_text '{}' "$simple" "$conc" "$token"
    [ -n "$selu" ] && [ "$conc" -le 8 ] && measure "capsule serve, text-tools (warm Selu, C)" "http://127.0.0.1:$cport/mcp" text-tools__word_count '{"text":"a b c"}' '"words' "$conc" "$token"
  done
done
echo "RSS after the run: capsule serve $(rss "$serve_pid") KiB, SDK server $(rss "$sdk_pid") KiB"
[ -s "$work/sdk.log" ] && grep -v '^listening' "$work/sdk.log" | head -20 >&2 || true
