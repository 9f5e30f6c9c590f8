#!/usr/bin/env bash
# serve --mcp-http's sessions are bounded (1,000 in all): a token holder
# (alice) opening sessions without end must not lock another user (bob)
# out for the hour an idle session lives. When serve holds as many as it
# allows, a new session takes the place of the least recently used idle
# one of the user holding the most: bob's sessions and his new one are
# served, alice's oldest gives way (404: her client starts a new one).
# As the user running the tests (root, or uid 65534 in CI).
# Usage: session_room.sh CAPSULE
set -u
capsule=$(realpath "$1")
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-session-room.XXXXXX)
spid=
cleanup() {
  [ -n "$spid" ] && { kill "$spid"; wait "$spid"; } 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
export CAPSULE_STATE_KEY=
state=$work/state caps=$work/caps
mkdir -m 700 "$state" && mkdir -p "$caps"
alice=$("$capsule" access issue a --user alice --state "$state" 2>/dev/null)
bob=$("$capsule" access issue b --user bob --state "$state" 2>/dev/null)
[ -n "$alice" ] && [ -n "$bob" ] || { echo "SKIP: cannot issue tokens"; exit 77; }
# --rate high: alice's 1,500 sessions in seconds (the rate limit is per token)
"$capsule" serve --caps "$caps" --state "$state" --mcp-http 127.0.0.1:0 --rate 1000000 \
  2>"$work/serve.log" &
spid=$!
port=
for _ in $(seq 600); do
  port=$("$capsule" serve status --state "$state" --json 2>/dev/null |
    sed -n 's/.*"mcp_http":"127\.0\.0\.1:\([0-9]*\)".*/\1/p')
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { tail -5 "$work/serve.log"; echo "FAIL: serve did not start"; exit 1; }
python3 "$(dirname "$0")/session_room.py" "$port" "$alice" "$bob"
st=$?
n=$("$capsule" serve status --state "$state" --json | sed -n 's/.*"sessions":\([0-9]*\).*/\1/p')
if [ -n "$n" ] && [ "$n" -le 1000 ]; then echo "  ok   serve holds $n sessions (at most 1000)"
else echo "  FAIL serve holds ${n:-?} sessions"; st=1; fi
if grep -q '"session evicted' "$work/serve.log"; then echo "  ok   the evictions logged"
else echo "  FAIL no eviction logged"; st=1; fi
kill "$spid"
wait "$spid"
rc=$?
spid=
if [ "$rc" = 0 ]; then echo "  ok   serve stopped cleanly (exit 0)"
else echo "  FAIL serve exited $rc"; tail -5 "$work/serve.log"; st=1; fi
exit "$st"
