#!/usr/bin/env bash
# serve's pending HTTP connections (front/serve_conn.c): on loopback a
# connection's owner is the local user owning the client's socket
# (sock_diag). A user given subordinate ids (/etc/subuid, as rootless
# containers are) can make sockets as up to 65,536 uids: each was an owner
# holding one, so 128 unauthenticated connections from 128 of them evicted
# another user's pending connection by age, as one IPv6 /64 did
# (pending_v6_prefix.sh). Now a uid in a user's subordinate range counts as
# that user. Run in a network namespace of its own (unshare -n), serve on
# 127.0.0.1 with CAPSULE_TEST_SUBUID naming a file of the test's (a build
# with test hooks) that gives nobody 300000-365535. Exits 0 when the
# client's request is answered. Usage: pending_subuid.sh CAPSULE
set -u
. "$(dirname "$0")/lib.sh" "$1" r15-subuid
token=$("$capsule" access issue sub --user alice --state "$state" 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1)
[ -n "$token" ] || { echo "FAIL: access issue"; exit 1; }
echo "nobody:300000:65536" >"$work/subuid"
SERVE_ENV="CAPSULE_TEST_SUBUID=$work/subuid" netns_serve true "127.0.0.1:0" "$r15/pending_subuid.py"
rc=$?
sanitized
exit $rc
