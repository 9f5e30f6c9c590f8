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
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
# an ASan build keeps what is freed (its quarantine): not this measure
grep -qa __asan_init "$1" && { echo "SKIP: an ASan build (its quarantine holds freed memory)"; exit 77; }
. "$(dirname "$0")/lib.sh" "$1"
# past the 50 ms within which an answer comes as JSON: an SSE stream
agent slow 5000 'sleep 0.1; printf "{\"got\":%s}\n" "$line"' allow
tok=$(token alice) || exit 77
serve10
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
