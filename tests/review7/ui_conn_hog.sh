#!/usr/bin/env bash
# Finding (the dashboard's listener, src/front/ui.c): 32 connections per
# client address, idle ones closed after 60 s. On loopback every local
# user is 127.0.0.1: uid 65534, without any token, held 40 connections
# that never finished their headers and the operator's own browser, signed
# in or not, was refused until they timed out (and again as soon as the
# attacker reconnected). Fixed (src/front/serve_conn.c): connections that
# have not shown a signed-in session hold at most 16 of the 64 slots:
# one more evicts the oldest pending one of the owner (the local user
# owning the client's socket, from sock_diag) holding most, so the flood
# evicts only itself; they time out after 10 s; a signed-in operator's
# connection leaves that share.
# Here uid 65534 keeps 80 half-sent requests open, reconnecting each one
# that is closed, while the operator (signed in before) loads a page and
# the login form. Exits 1 while the operator is locked out, 0 held, 77
# cannot run. (/mcp: mcp_conn_hog.sh.)
. "$(dirname "$0")/ui_lib.sh"
py=/usr/bin/python3
[ -x "$py" ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
ui_start
port=${U##*:}
jar=$work/jar
[ "$(sign_in "$jar" "$op")" = 303 ] || { echo "SKIP: cannot sign in"; exit 77; }
page=$(ui_base "$jar")
[ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" "$page")" = 200 ] || { echo "SKIP: no page"; exit 77; }
"${as_nobody[@]}" "$py" - "$port" 80 'GET /login HTTP/1.1' <"$(dirname "$0")/conn_hog.py" >"$work/hog.out" 2>&1 &
hog=$!
for _ in $(seq 1 300); do grep -q holding "$work/hog.out" && break; sleep 0.1; done
grep -q holding "$work/hog.out" || { kill "$hog"; echo "SKIP: the attacker could not connect"; exit 77; }
signed=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 -b "$jar" "$page")
login=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "$U/login")
alive=$(kill -0 "$hog" 2>/dev/null && echo yes || echo no)
kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null
echo "while uid 65534 holds 80 connections (attacker still running: $alive): the operator's signed-in page $signed, the login form $login"
[ "$alive" = yes ] || { cat "$work/hog.out"; echo "SKIP: the attacker ended early"; exit 77; }
[ "$signed" = 200 ] && [ "$login" = 200 ] && { echo held; exit 0; }
echo "OPEN: a local user without a token locks the operator out of the dashboard"
exit 1
