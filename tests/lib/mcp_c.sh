# Shared by the scripts that call examples/mcp-c's tools through `capsule
# serve --mcp-http` (tests/mcp: mcp_c.sh, audit_group.sh, state_fresh.sh,
# keeper_pool.sh),
# sourced with $1 = capsule and $2 = a name for the work directory. Skips
# (exit 77) without curl or libjansson-dev; builds examples/mcp-c. Sets
# capsule, root, work (0755; removed on exit after the processes in pids
# and the warm servers' keepers, which hold files below it, are ended), an
# empty CAPSULE_STATE_KEY. Gives ok/bad (counting pass/fail), H and post
# URL TOKEN SESSION BODY (the answer's body), mcpc_user WHO (state, caps,
# C and wrap for root or uid 65534, mcp-c copied in, "as WHO:" said) and
# mcpc_serve LOG [ARGS...] (serve on a random loopback port as ${wrap[@]}
# with ARGS, waited for; then a 2025-06-18 session initialized with
# $token: port, url, sid, serve_pid set; fails when no session comes) and
# mcpc_verify LABEL (`audit verify` on $state as ${wrap[@]}: ok or bad).
capsule=$(realpath "$1")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
pkg-config --exists jansson 2>/dev/null || { echo "SKIP: libjansson-dev is not installed (scripts/deps.sh build)"; exit 77; }
make -s -C "$root/examples/mcp-c" >/dev/null || { echo "FAIL: examples/mcp-c does not build"; exit 1; }
work=$(mktemp -d "/var/tmp/capsule-$2.XXXXXX")
chmod 755 "$work"
pids=()
mcpc_cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  # the warm servers' keepers (they hold STATE/run/*.mcp.lock) end with their state
  local f
  for f in /proc/[0-9]*/fd/*; do
    case $(readlink "$f" 2>/dev/null) in "$work"/*) f=${f#/proc/}; kill "${f%%/*}" 2>/dev/null ;; esac
  done
  sleep 0.5
  rm -rf "$work"
}
trap mcpc_cleanup EXIT
export CAPSULE_STATE_KEY=
pass=0 fail=0
ok() { echo "  ok   $1"; pass=$((pass + 1)); }
bad() { echo "  FAIL $1"; fail=$((fail + 1)); }
H=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
post() { # URL TOKEN SESSION BODY: the answer's body
  curl -sS -m 120 "${H[@]}" -H "Authorization: Bearer $2" -H "Mcp-Session-Id: $3" \
    -H 'MCP-Protocol-Version: 2025-06-18' --data "$4" "$1"
}
mcpc_user() {
  who=$1 state=$work/state-$1 caps=$work/caps-$1
  wrap=()
  mkdir -p "$state" "$caps" && chmod 700 "$state"
  cp -a "$root/examples/mcp-c" "$caps/mcp-c"
  if [ "$who" = nobody ]; then
    chown -R 65534:65534 "$state" "$caps"
    wrap=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  fi
  C=(--caps "$caps" --state "$state")
  echo "as $who:"
}
mcpc_serve() {
  local log=$1 try
  shift
  # below the usual ephemeral range (32768-60999), where a busy machine's
  # loopback connections hold ports; another port when it is taken anyway
  for try in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 12000))
    url=http://127.0.0.1:$port/mcp
    "${wrap[@]}" "$capsule" serve "${C[@]}" --mcp-http "127.0.0.1:$port" "$@" 2>"$log" &
    serve_pid=$!
    pids+=("$serve_pid")
    for _ in $(seq 1 600); do
      "${wrap[@]}" "$capsule" serve status --state "$state" >/dev/null 2>&1 && break
      kill -0 "$serve_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$serve_pid" 2>/dev/null || ! grep -q 'cannot listen' "$log" || continue
    break
  done
  sid=$(curl -sS -m 60 -D - -o /dev/null "${H[@]}" -H "Authorization: Bearer $token" --data \
    '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}' \
    "$url" | tr -d '\r' | awk -F': ' 'tolower($1) == "mcp-session-id" {print $2}')
  [ -n "$sid" ] || { head -5 "$log"; return 1; }
  post "$url" "$token" "$sid" '{"jsonrpc":"2.0","method":"notifications/initialized"}' >/dev/null
}
mcpc_verify() {
  local v
  v=$("${wrap[@]}" "$capsule" audit verify --state "$state" 2>&1) && grep -q 'audit log verified' <<<"$v" &&
    ok "$1: audit verify passes" || bad "$1: audit verify: $v"
}
