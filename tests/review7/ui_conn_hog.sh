#!/usr/bin/env bash
# Open (documented, not in review-attacks): the dashboard's listener
# allows 32 connections per client address and closes an idle one after
# 60 s. On loopback every local user is 127.0.0.1: uid 65534, without
# any token, holds 32 connections that never finish their headers and
# the operator's own browser is refused until they time out (and again
# as soon as the attacker reconnects). /mcp has the same shape (64).
# Exits 1 while the operator is locked out, 0 held, 77 cannot run.
. "$(dirname "$0")/ui_lib.sh"
py=/usr/bin/python3
[ -x "$py" ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
ui_start
port=${U##*:}
"${as_nobody[@]}" "$py" -c '
import socket, sys, time
held = []
for _ in range(40):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    s.sendall(b"GET /login HTTP/1.1\r\nHost: x\r\n")  # never finished
    held.append(s)
time.sleep(30)' "$port" &
hog=$!
sleep 2
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$U/login")
kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null
echo "the operator's GET /login while uid 65534 holds 40 connections: $code"
[ "$code" = 200 ] && { echo held; exit 0; }
echo "OPEN: a local user without a token locks the operator out of the dashboard"
exit 1
