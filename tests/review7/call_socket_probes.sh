#!/usr/bin/env bash
# Attempts on `capsule call` through serve and serve's unix socket that are
# blocked today, kept as regression tests: uid 65534 connecting to root's
# serve socket put in /tmp (mode 0600), or calling with root's state;
# capsule/call and capsule/approve over HTTP with a valid token (only the
# unix socket offers them); a capsule/call naming another user in its params (the caller is who
# SO_PEERCRED says: the audit names root). Exits 1 when one works, 0 when
# all are blocked, 77 cannot run.
. "$(dirname "$0")/ui_lib.sh"
py=/usr/bin/python3
[ -x "$py" ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
sock=$(mktemp -u /tmp/capsule-review7-sock.XXXXXX)
"$capsule" policy set --caps "$caps" --state "$state" asker dispatch allow >/dev/null
tok=$("$capsule" access issue agent --user alice --state "$state" 2>/dev/null)
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$capsule" serve --caps "$caps" --state "$state" --socket "$sock" --mcp-http "127.0.0.1:$port" 2>"$work/serve.log" &
server=$!
trap '[ -n "$server" ] && { kill -9 "$server"; wait "$server"; } 2>/dev/null; rm -f "$sock"; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do
  http=127.0.0.1:$port
  [ -S "$sock" ] && curl -s -o /dev/null "http://$http/" && break
  sleep 0.1
done
[ -S "$sock" ] && [ -n "$http" ] || { cat "$work/serve.log"; echo "SKIP: serve did not start"; exit 77; }
fail=0
check() { if [ "$2" = "$3" ]; then echo "  blocked  $1 ($3)"; else echo "  WORKS    $1 (got $3, want $2)"; fail=1; fi; }
# 1. uid 65534 and root's socket in /tmp
r=$("${as_nobody[@]}" "$py" -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print("connected")
except OSError as e:
    print("refused")' "$sock")
check "uid 65534 connects to root's socket in /tmp" refused "$r"
r=$("${as_nobody[@]}" "$capsule" call --caps "$caps" --state "$state" asker dispatch '{"text":"x"}' 2>&1 </dev/null)
grep -q '"got"' <<<"$r" && r=ran || r=refused
check "uid 65534 calls with root's state" refused "$r"
# 2. capsule/call over HTTP, with a valid token
hdr=(-H "Authorization: Bearer $tok" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
sid=$(curl -s -D - -o /dev/null "${hdr[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}' \
  "http://$http/mcp" | tr -d '\r' | grep -i '^Mcp-Session-Id:' | cut -d' ' -f2)
[ -n "$sid" ] || { echo "SKIP: no HTTP session"; exit 77; }
curl -s -o /dev/null "${hdr[@]}" -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-06-18' \
  -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' "http://$http/mcp"
r=$(curl -s "${hdr[@]}" -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-06-18' \
  -d '{"jsonrpc":"2.0","id":2,"method":"capsule/call","params":{"capability":"asker","tool":"dispatch","arguments":{"text":"x"}}}' "http://$http/mcp")
grep -q -- '-32601' <<<"$r" && ! grep -q '"outcome"' <<<"$r" && r=refused || r="$r"
check "capsule/call over HTTP" refused "$r"
# capsule/approve (approve and deny through serve) is the unix socket's alone too
r=$(curl -s "${hdr[@]}" -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-06-18' \
  -d '{"jsonrpc":"2.0","id":3,"method":"capsule/approve","params":{"approval":"0badf00d","approve":true}}' "http://$http/mcp")
grep -q -- '-32601' <<<"$r" && ! grep -q '"was"' <<<"$r" && r=refused || r="$r"
check "capsule/approve over HTTP" refused "$r"
# 3. a capsule/call naming someone else: the audit names root
"$py" - "$sock" <<'PY' >/dev/null
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rwb")
def send(m): f.write((json.dumps(m) + "\n").encode()); f.flush()
send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}, "user": "alice"}})
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send({"jsonrpc": "2.0", "id": 2, "method": "capsule/call", "params": {"capability": "asker", "tool": "dispatch", "arguments": {"text": "as-alice"}, "user": "alice", "_meta": {"user": "alice"}}})
for line in f:
    if json.loads(line).get("id") == 2:
        print(line.decode()); break
PY
r=$("$capsule" audit --state "$state" 2>/dev/null | grep 'asker.dispatch allow' | tail -1 | awk '{print $3}')
check "capsule/call with params.user alice: the audit's user" root "$r"
[ "$fail" = 0 ] && { echo blocked; exit 0; }
exit 1
