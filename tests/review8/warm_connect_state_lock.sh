#!/usr/bin/env bash
# Finding (serve's warm path, src/front/mcp_run.c + gateway/call.c
# run_mcp): a call to a third-party MCP server whose keeper was alive runs
# its pipeline in a thread of serve on serve's one state connection, under
# serve's state lock, which it lets go only around the exchange with the
# warm server. Reaching the keeper (gw_mcp_keeper_connect) ran with the
# lock HELD: when the keeper's socket was gone by then (the keeper ending:
# its server exited, it idled out) the thread waited up to 10 s for a
# starting keeper's socket, or started a keeper itself and waited for its
# server's initialize (up to 65 s, a hostile server's choice), and every
# other call, sign-in check and dashboard page of serve stood still
# meanwhile. The window (a keeper still listed as serving, its socket
# gone) is widened here by removing the socket of a live keeper: call A
# (the MCP server's tool) then waits 10 s for the socket; call B, made 2 s
# after it, a Covenant agent's with arguments its schema refuses (checked
# under the state lock; no sandbox, so it is quick on a loaded machine),
# must not wait for A. As root and
# as uid 65534. Exits 1 when B ends after A (it waited for A's lock), 0
# blocked, 77 skip. Usage: warm_connect_state_lock.sh CAPSULE
set -u
capsule=$(realpath "${1:-build/capsule}")
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: no curl"; exit 77; }
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review8-lock.XXXXXX)
chmod 755 "$W"
pids=()
keepers() { # the keepers holding a lock under $W
  local f l
  for f in /proc/[0-9]*/fd/*; do
    l=$(readlink "$f" 2>/dev/null) || continue
    case $l in "$W"/*.mcp.lock*) f=${f#/proc/}; echo "${f%%/*}" ;; esac
  done | sort -u
}
trap 'for p in "${pids[@]}" $(keepers); do kill "$p" 2>/dev/null; done; sleep 0.5; rm -rf "$W"' EXIT
export CAPSULE_STATE_KEY=
caps=$W/caps
mkdir -p "$caps/w" "$caps/agents/quick"
cat >"$caps/w/capability.json" <<'JSON'
{"version": "0.1.0", "network": {"mode": "blocked"}, "x-capsule": {"mcp_server": ["python3", "server.py"]}}
JSON
cat >"$caps/w/server.py" <<'PY'
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    meth = m.get("method")
    if meth == "initialize":
        res = {"protocolVersion": m["params"].get("protocolVersion", "2025-06-18"),
               "capabilities": {"tools": {}}, "serverInfo": {"name": "w", "version": "1"}}
    elif meth == "tools/list":
        res = {"tools": [{"name": "hi", "description": "Says hi.", "inputSchema": {"type": "object"}}]}
    elif meth == "tools/call":
        res = {"content": [{"type": "text", "text": "hi"}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": res}), flush=True)
PY
printf '[agent]\nid = "quick"\nname = "quick"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' >"$caps/agents/quick/agent.toml"
printf '#!/bin/sh\nIFS= read -r line; echo "{\\"quick\\":true}"\n' >"$caps/agents/quick/run.sh"
chmod -R a+rX "$caps" && chmod 755 "$caps/agents/quick/run.sh"
wait_for() { for _ in $(seq 1 600); do "$@" && return 0; sleep 0.1; done; return 1; }

fail=0
scenario() {
  local who=$1; shift
  local st=$W/st-$who
  mkdir -m 700 "$st"
  [ "$who" = nobody ] && chown 65534:65534 "$st"
  run() { "${wrap[@]}" "$capsule" "$@"; }
  local wrap=("$@")
  run call --caps "$caps" --state "$st" w hi '{}' >/dev/null 2>&1 # discovers the tools
  run policy set --caps "$caps" --state "$st" w hi allow >/dev/null &&
    run policy set --caps "$caps" --state "$st" quick dispatch allow >/dev/null || { echo "FAIL $who: setup"; fail=1; return; }
  local token port server sid hdr
  token=$(run access issue t --user alice --state "$st" 2>/dev/null)
  hdr=(-H "Authorization: Bearer $token" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
  start_serve() { # serve, and a session on it
    "${wrap[@]}" "$capsule" serve --caps "$caps" --state "$st" --mcp-http 127.0.0.1:0 --rate 100000 2>>"$W/serve-$who.log" &
    server=$!
    pids+=("$server")
    wait_for run serve status --state "$st" >/dev/null 2>&1
    port=$(run serve status --state "$st" --json 2>/dev/null | sed -n 's/.*"mcp_http":"127\.0\.0\.1:\([0-9]*\)".*/\1/p')
    [ -n "$port" ] || { cat "$W/serve-$who.log"; echo "SKIP: serve did not start"; exit 77; }
    sid=$(curl -s -D - -o /dev/null "${hdr[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}' \
      "http://127.0.0.1:$port/mcp" | tr -d '\r' | sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: //p')
  }
  start_serve
  call() { # ID TOOL OUT [ARGS]
    curl -s --max-time 120 -o "$3" "${hdr[@]}" -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-11-25' \
      -d "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"tools/call\",\"params\":{\"name\":\"$2\",\"arguments\":${4:-{\}}}}" "http://127.0.0.1:$port/mcp"
  }
  call 2 w__hi "$W/first-$who" # starts the keeper (in a child)
  call 3 w__hi "$W/warm-$who"  # on the warm server
  grep -q '"text":"hi"' "$W/warm-$who" || { cat "$W/first-$who" "$W/warm-$who"; echo "SKIP: the MCP server did not answer"; exit 77; }
  ls "$st"/run/*.mcp.sock >/dev/null 2>&1 || { echo "SKIP: no keeper socket"; exit 77; }
  # a new serve: no kept connection to the keeper (gateway/mcp_keeper_pool.c),
  # which stays warm; A must reach it through its socket
  kill "$server" 2>/dev/null
  wait "$server" 2>/dev/null
  start_serve
  rm -f "$st"/run/*.mcp.sock # the keeper lives on, listed as serving: the window held open
  : >"$W/order-$who"
  (call 4 w__hi "$W/a-$who"; echo A >>"$W/order-$who") &
  local a=$!
  sleep 2 # A is waiting for the socket by now
  (call 5 quick__dispatch "$W/b-$who"; echo B >>"$W/order-$who") &
  local b=$!
  wait "$a" "$b"
  echo "$who: A: $(grep -o '"result":.*' "$W/a-$who" | head -c 300)"
  echo "$who: B: $(grep -o '"result":.*' "$W/b-$who" | head -c 300)"
  local order
  order=$(tr -d '\n' <"$W/order-$who")
  if ! grep -q 'do not match the tool' "$W/b-$who"; then echo "FAIL $who: call B did not answer"; fail=1
  elif [ "$order" = AB ]; then echo "VULNERABLE $who: B (another capability) waited for A's wait on the keeper under serve's state lock"; fail=1
  else echo "  ok   $who: B answered while A waited ($order)"; fi
  kill "$server" 2>/dev/null
  wait "$server" 2>/dev/null
  for p in $(keepers); do kill "$p" 2>/dev/null; done
}
scenario root
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  scenario nobody setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$W"
fi
[ "$fail" = 0 ] && echo blocked
exit "$fail"
