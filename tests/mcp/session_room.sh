#!/usr/bin/env bash
# serve --mcp-http's sessions are bounded (1,000 in all): a token holder
# (alice) opening sessions without end must not lock another user (bob)
# out for the hour an idle session lives. When serve holds as many as it
# allows, a new session takes the place of the least recently used idle
# one of the user holding the most: bob's sessions and his new one are
# served, alice's oldest gives way (404: her client starts a new one).
# As the user running the tests (root, or uid 65534 in CI).
# Usage: session_room.sh CAPSULE
. "$(dirname "$0")/two_users.sh" "$1" session-room
users
serve_http # (alice's 1,500 sessions in seconds)
python3 "$(dirname "$0")/session_room.py" "$port" "$alice" "$bob"
st=$?
n=$("$capsule" serve status --state "$state" --json | sed -n 's/.*"sessions":\([0-9]*\).*/\1/p')
if [ -n "$n" ] && [ "$n" -le 1000 ]; then echo "  ok   serve holds $n sessions (at most 1000)"
else echo "  FAIL serve holds ${n:-?} sessions"; st=1; fi
if grep -q '"session evicted' "$work/serve.log"; then echo "  ok   the evictions logged"
else echo "  FAIL no eviction logged"; st=1; fi
serve_end "$st"
