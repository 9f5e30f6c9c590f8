#!/usr/bin/env bash
# Finding (`serve --mcp-http`, src/front/serve_http.c), as ui_conn_hog.sh
# for the dashboard: 64 connections per client address (512 in all),
# idle ones closed after 60 s. On loopback every local user is 127.0.0.1:
# uid 65534, without any token, held 100 half-sent requests and every MCP
# client with a valid token was refused until they timed out. Fixed
# (src/front/serve_conn.c): connections without a valid bearer token yet
# hold at most 64 of the 512 slots (one more evicts the oldest pending
# one of the owner holding most: the local user owning the client's
# socket) and idle out after 10 s; on loopback the share is
# the only per-address bound. Here uid 65534 keeps 100 half-sent requests
# open, reconnecting each one closed, while a client with a token
# initializes. Exits 1 while it is locked out, 0 held, 77 cannot run.
. "$(dirname "$0")/ui_lib.sh"
py=/usr/bin/python3
[ -x "$py" ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
command -v ss >/dev/null || { echo "SKIP: no ss (iproute2) to find the port"; exit 77; }
"$capsule" serve --caps "$caps" --state "$state" --mcp-http 127.0.0.1:0 2>"$work/serve.log" &
server=$!
# its port (asked for 0): the listening socket of serve's pid
port=
for _ in $(seq 1 200); do
  port=$(ss -Hltnp 2>/dev/null | awk -v p="pid=$server," 'index($0, p) {n = split($4, a, ":"); print a[n]; exit}')
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/serve.log"; echo "SKIP: serve --mcp-http did not start"; exit 77; }
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}'
mcp() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 30 -H "Authorization: Bearer $op" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -d "$init" "http://127.0.0.1:$port/mcp"
}
[ "$(mcp)" = 200 ] || { cat "$work/serve.log"; echo "SKIP: no MCP answer on port $port"; exit 77; }
"${as_nobody[@]}" "$py" - "$port" 100 'POST /mcp HTTP/1.1' <"$(dirname "$0")/conn_hog.py" >"$work/hog.out" 2>&1 &
hog=$!
for _ in $(seq 1 300); do grep -q holding "$work/hog.out" && break; sleep 0.1; done
grep -q holding "$work/hog.out" || { kill "$hog"; echo "SKIP: the attacker could not connect"; exit 77; }
code=$(mcp)
alive=$(kill -0 "$hog" 2>/dev/null && echo yes || echo no)
kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null
echo "while uid 65534 holds 100 connections (attacker still running: $alive): an MCP client with a token: $code"
[ "$alive" = yes ] || { cat "$work/hog.out"; echo "SKIP: the attacker ended early"; exit 77; }
[ "$code" = 200 ] && { echo held; exit 0; }
echo "OPEN: a local user without a token locks the MCP clients out of /mcp"
exit 1
