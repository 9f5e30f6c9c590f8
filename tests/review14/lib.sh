# Shared by the fourteenth review's scripts: CAPSULE, a work directory
# (0755, removed on exit after serve and the warm servers' keepers that
# hold files below it are ended), caps and state in it, C (--caps --state),
# an empty CAPSULE_STATE_KEY, fail=0; probe_cap NAME: the hostile MCP
# server probe/server.py installed as capability NAME (its tools
# discovered and allowed); serve_http: `capsule serve --mcp-http` on a
# loopback port (ARGS... added) with a 2025-06-18 session (skips when
# none comes);
# call CAP TOOL ARGS: the tool's text ("WORD:..."; asked up to three
# times while no tool answers), every answer kept in $work/answers.
# skip WHY ends a script with 77 (1 when an ASan build of capsule said
# why); later_egress WHY: the probe's request after its call seen
# answered by its proxy (else skip WHY); later_rows: the egress rows of
# that request's host, said and set in rows; proxied_probe [ARGS...]: p in
# proxy mode behind serve_http, warm; retired_after_later: its request
# after a call made, then its keeper retired and a new one started.
# Usage: . lib.sh CAPSULE NAME
set -u
capsule=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root"; exit 77; }
[ -x /usr/bin/python3 ] || { echo "SKIP: /usr/bin/python3 is not installed"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
work=$(mktemp -d "/var/tmp/capsule-$2.XXXXXX")
chmod 755 "$work"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait "${pids[@]}" 2>/dev/null
  local f # the warm servers' keepers hold files below the work directory
  for f in /proc/[0-9]*/fd/*; do
    case $(readlink "$f" 2>/dev/null) in "$work"/*) f=${f#/proc/}; kill "${f%%/*}" 2>/dev/null ;; esac
  done
  sleep 0.5
  rm -rf "$work"
}
trap cleanup EXIT
# skip WHY: 77, unless capsule itself reported a sanitizer error (an
# ASan build's report in serve's log or a capability's): then that fails
skip() {
  local f
  for f in "$work/serve.log" "$work"/state/logs/*; do
    [ -f "$f" ] && grep -q -E 'runtime error|Sanitizer' "$f" &&
      { grep -m 5 -E 'runtime error|Sanitizer|^ +#[0-4] ' "$f"; echo "FAIL: capsule's sanitizer report in $f ($1)"; exit 1; }
  done
  echo "SKIP: $1"
  exit 77
}
export CAPSULE_STATE_KEY=
caps=$work/caps state=$work/state
mkdir -p "$caps" && mkdir -m 700 "$state"
C=(--caps "$caps" --state "$state")
fail=0
probe_cap() {
  mkdir -p "$caps/$1"
  cp "$here/probe/server.py" "$here/probe/capability.json" "$caps/$1/"
  echo / >"$caps/$1/targets"
  chmod -R a+rX "$caps"
  "$capsule" call "${C[@]}" "$1" net '{}' >/dev/null 2>&1 # its tools discovered
  local t
  for t in cat net probe later hang; do "$capsule" policy set "${C[@]}" "$1" "$t" allow >/dev/null || exit 1; done
}
serve_http() {
  local token _
  token=$("$capsule" access issue t --state "$state" 2>/dev/null)
  [ -n "$token" ] || { echo "FAIL: access issue"; exit 1; }
  for _ in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 12000))
    "$capsule" serve "${C[@]}" --mcp-http "127.0.0.1:$port" "$@" 2>"$work/serve.log" &
    pids+=($!)
    for _ in $(seq 1 600); do
      "$capsule" serve status --state "$state" >/dev/null 2>&1 && break
      kill -0 "${pids[-1]}" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "${pids[-1]}" 2>/dev/null && break
    grep -q 'cannot listen' "$work/serve.log" || { cat "$work/serve.log"; skip "serve did not start"; }
  done
  H=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream'
    -H "Authorization: Bearer $token")
  url=http://127.0.0.1:$port/mcp
  sid=$(curl -sS -m 60 -D - -o /dev/null "${H[@]}" --data \
    '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"r14","version":"1"}}}' \
    "$url" | tr -d '\r' | awk -F': ' 'tolower($1) == "mcp-session-id" {print $2}')
  [ -n "$sid" ] || { cat "$work/serve.log"; skip "no MCP session"; }
  post '{"jsonrpc":"2.0","method":"notifications/initialized"}' >/dev/null
}
post() {
  curl -sS -m 120 "${H[@]}" -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-06-18' \
    --data "$1" "$url"
}
call() { # once more when no tool answered (a server starting on a loaded machine)
  local a _
  for _ in 1 2 3; do
    a=$(post '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"'"$1__$2"'","arguments":'"$3"'}}' |
      tee -a "$work/answers" | grep -o '"text":"[A-Z]*:.*' | head -1)
    [ -n "$a" ] && break
    sleep 1
  done
  echo "$a"
}
later_egress() {
  local log= _
  for _ in $(seq 1 600); do # the server says when its proxy answered (60 s at most)
    log=$(grep -l 'LATER-EGRESS-DONE' "$state"/logs/* 2>/dev/null | head -1)
    [ -n "$log" ] && break
    sleep 0.1
  done
  [ -n "$log" ] || skip "$1"
  grep -o 'LATER-EGRESS-DONE.*' "$log" | head -1
}
# proxied_probe [SERVE_ARGS...]: the probe as capability p in proxy mode
# (example.com allowed) behind serve_http, its keeper started by a first
# call that finds its proxy (else skip)
proxied_probe() {
  command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"
  probe_cap p
  sed -i 's|"mode": "blocked"|"mode": "proxy", "allow_domains": ["example.com"]|' "$caps/p/capability.json"
  serve_http "$@"
  local a
  a=$(call p net '{}')
  grep -q 'PROXY:http' <<<"$a" || skip "the server has no egress proxy ($a)"
}
# retired_after_later: p's "later" called (its request after its call
# seen), then its package touched so the keeper retires, and one more call
# (a new keeper); else skip
retired_after_later() {
  local a
  a=$(call p later '{}')
  grep -q 'LATER:ok' <<<"$a" || skip "no answer from later ($a)"
  later_egress "the server's request after its call was not seen"
  touch "$caps/p/server.py" # its keeper retires; the next call starts a new one
  sleep 1
  a=$(call p net '{}')
  grep -q 'PROXY:http' <<<"$a" || skip "no call after the change ($a)"
}
later_rows() {
  rows=$(sqlite3 "$state/state.db" "SELECT COUNT(*) FROM egress WHERE host = 'denied-later.invalid'" 2>&1)
  echo "egress rows for denied-later.invalid: $rows"
}
