#!/usr/bin/env bash
# SSE resumability (src/front/serve_replay.c): each 2025 session keeps its
# streams' last 256 events or 1 MiB after they are sent, and serve holds up
# to 1,000 sessions (any user may open them all), for an hour each when
# idle: 1 GiB of serve's memory for the replays alone, from one token
# holder calling a tool whose answer is large (an echo: the argument,
# twice). alice opens 300 sessions, each with one call answered about
# 850 KB, and leaves them. Exits 1 when serve's resident memory grew by
# more than 150 MiB (255 MB of answers kept), 0 when not, 77 cannot run.
# Usage: replay_memory.sh CAPSULE
set -u
capsule=$(realpath "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root"; exit 77; }
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
# an ASan build keeps what is freed (its quarantine): not this measure
grep -qa __asan_init "$capsule" && { echo "SKIP: an ASan build (its quarantine holds freed memory)"; exit 77; }
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review10.XXXXXX)
chmod 755 "$W"
spid=
trap '[ -n "$spid" ] && { kill -9 "$spid"; wait "$spid"; } 2>/dev/null; rm -rf "$W"' EXIT
export CAPSULE_STATE_KEY=
caps=$W/caps state=$W/state
mkdir -p "$caps/agents/slow" && mkdir -m 700 "$state"
printf '[agent]\nid = "slow"\nname = "slow"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' >"$caps/agents/slow/agent.toml"
# past the 50 ms within which an answer comes as JSON: an SSE stream
printf '#!/bin/sh\nIFS= read -r line; sleep 0.1; printf "{\\"got\\":%%s}\\n" "$line"\n' >"$caps/agents/slow/run.sh"
chmod -R a+rX "$caps" && chmod 755 "$caps/agents/slow/run.sh"
"$capsule" policy set --caps "$caps" --state "$state" slow dispatch allow >/dev/null ||
  { echo "SKIP: cannot set up a state"; exit 77; }
tok=$("$capsule" access issue a --user alice --state "$state" 2>/dev/null)
[ -n "$tok" ] || { echo "SKIP: cannot issue a token"; exit 77; }
"$capsule" serve --caps "$caps" --state "$state" --mcp-http 127.0.0.1:0 --rate 100000 2>"$W/serve.log" &
spid=$!
for _ in $(seq 600); do "$capsule" serve status --state "$state" >/dev/null 2>&1 && break; sleep 0.1; done
port=$("$capsule" serve status --state "$state" --json 2>/dev/null | sed -n 's/.*"mcp_http":"127\.0\.0\.1:\([0-9]*\)".*/\1/p')
[ -n "$port" ] || { tail -5 "$W/serve.log"; echo "SKIP: serve did not start"; exit 77; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$spid/status"; }
url=http://127.0.0.1:$port/mcp
node "$root/tests/review10/replay_memory.mjs" "$url" "$tok" 8 >/dev/null # warm: the first calls' allocations
before=$(rss)
n=$(node "$root/tests/review10/replay_memory.mjs" "$url" "$tok" 300)
after=$(rss)
grown=$(((after - before) / 1024))
echo "300 sessions, $n large answers read: serve's RSS ${before} kB -> ${after} kB (+$grown MiB)"
[ "${n:-0}" -ge 200 ] || { tail -3 "$W/serve.log"; echo "SKIP: too few large answers came ($n)"; exit 77; }
[ "$grown" -le 150 ] && { echo blocked; exit 0; }
exit 1
