# Shared by tests/front/serve_mcp_selu.sh and serve_selu_added.sh (a Selu
# tool called over MCP through `capsule serve --mcp-http`): sourced with
# $1 = capsule and $2 = a name for the work directory. What
# tests/lib/gateway.sh gives, then skips (exit 77) without jq, curl or a
# built examples/selu-text; sets root and work (0755; the script removes
# it). Gives wait_for COND... (60 s at most: nothing about timing is
# asserted), start_serve (serve on a port of its choosing with C and
# $token, its log appended to $work/serve.log: spid, url, H and sid, a
# 2025-06-18 session initialized; fails without one), trace_forks (as
# root with strace: serve's threads traced for fork and clone from now;
# traced yes or no) and traced_forks (the trace ended: forks, what serve
# forked meanwhile, and threads, the threads it started).
source "$(dirname "${BASH_SOURCE[0]}")/gateway.sh" "$1"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
command -v jq >/dev/null || { echo "SKIP: jq is not installed"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
[ -x "$root/examples/selu-text/capability" ] ||
  { echo "SKIP: examples/selu-text is not built (make build builds it)"; exit 77; }
work=$(mktemp -d "/var/tmp/capsule-$2.XXXXXX")
chmod 755 "$work"
wait_for() { for _ in $(seq 600); do "$@" && return 0; sleep 0.1; done; return 1; }
start_serve() {
  "$capsule" serve "${C[@]}" --mcp-http 127.0.0.1:0 --rate 100000 2>>"$work/serve.log" &
  spid=$!
  wait_for "$capsule" serve status --state "$state" >/dev/null 2>&1 || return 1
  port=$("$capsule" serve status --state "$state" --json | jq -r '.mcp_http' | sed 's/.*://')
  H=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream'
    -H "Authorization: Bearer $token")
  url=http://127.0.0.1:$port/mcp
  sid=$(curl -sS -m 60 -D - -o /dev/null "${H[@]}" --data \
    '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}' \
    "$url" | tr -d '\r' | awk -F': ' 'tolower($1) == "mcp-session-id" {print $2}')
  curl -sS -m 60 -o /dev/null "${H[@]}" -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-06-18' \
    --data '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$url"
  [ -n "$sid" ]
}
trace_forks() {
  traced=no
  [ "$(id -u)" = 0 ] && command -v strace >/dev/null || return 0
  local tids
  tids=$(ls "/proc/$spid/task" | sed 's/^/-p /')
  # shellcheck disable=SC2086
  strace -f -qq -e trace=fork,vfork,clone,clone3 -o "$work/strace.out" $tids 2>"$work/strace.err" &
  tracer=$!
  attached() { grep -q "^TracerPid:[[:space:]]*$tracer" "/proc/$spid/status"; }
  if wait_for attached; then traced=yes; else kill "$tracer" 2>/dev/null; wait "$tracer" 2>/dev/null; fi
}
traced_forks() {
  kill "$tracer"
  wait "$tracer" 2>/dev/null
  forks=$(grep -E 'fork\(|clone3?\(' "$work/strace.out" | grep -v CLONE_THREAD)
  threads=$(grep -c CLONE_THREAD "$work/strace.out")
}
