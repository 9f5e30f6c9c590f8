#!/usr/bin/env bash
# serve --mcp-http's connections (512 in all, 64 of them pending, not
# yet showing a token): a token holder (alice) keeping 600 keep-alive
# connections, each having made a request, must not lock another user
# (bob) out. Past 447 trusted connections, the least recently used one
# of the user holding the most is shut down. As the user running the
# tests (root, or uid 65534 in CI).
# Usage: conn_share.sh CAPSULE
. "$(dirname "$0")/two_users.sh" "$1" conn-share
users
# 600 connections of the client, more than 512 of serve's
ulimit -n 2048 2>/dev/null || [ "$(ulimit -n)" -ge 1024 ] || { echo "SKIP: fewer than 1024 descriptors"; exit 77; }
serve_http # (alice's 900 requests in seconds)
python3 "$(dirname "$0")/conn_share.py" "$port" "$alice" "$bob"
serve_end $?
