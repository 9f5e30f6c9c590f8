#!/usr/bin/env bash
# serve --mcp-http's connections (512 in all, 64 of them pending, not
# yet showing a token): a token holder (alice) keeping 600 keep-alive
# connections, each having made a request, must not lock another user
# (bob) out. Past 447 trusted connections, the least recently used one
# of the user holding the most is shut down. As the user running the
# tests (root, or uid 65534 in CI).
# Usage: conn_share.sh CAPSULE
set -u
capsule=$(realpath "$1")
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-conn-share.XXXXXX)
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
# 600 connections of the client, more than 512 of serve's
ulimit -n 2048 2>/dev/null || [ "$(ulimit -n)" -ge 1024 ] || { echo "SKIP: fewer than 1024 descriptors"; exit 77; }
# --rate high: alice's 900 requests in seconds (the rate limit is per token)
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
python3 "$(dirname "$0")/conn_share.py" "$port" "$alice" "$bob"
st=$?
kill "$spid"
wait "$spid"
rc=$?
spid=
if [ "$rc" = 0 ]; then echo "  ok   serve stopped cleanly (exit 0)"
else echo "  FAIL serve exited $rc"; tail -5 "$work/serve.log"; st=1; fi
exit "$st"
