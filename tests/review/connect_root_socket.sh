#!/bin/bash
# Below Landlock ABI 9 capsule performs the tool's connect() to a unix
# socket itself (src/sandbox/supervise.c). As root, the thread doing it
# must be the tool's host ids, not root: a 0600 socket of another user
# (uid 1, which the idmapped read-write grant does not map to the tool, as
# it maps the caller's root-owned files), granted read-write by path, must
# still refuse the tool (root would pass), and a 0666 one must see the
# tool's uid in SO_PEERCRED, not 0. Run as root (the case where
# capsule's ids differ from the tool's). Exits non-zero when the tool's
# connect to the root-only socket succeeds or a peer sees uid 0.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: runs as root"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 serves the sockets"; exit 77; }
d=$(mktemp -d /var/tmp/capsule-review-sock.XXXXXX)
chmod 755 "$d"
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$d"' EXIT
serve() { # SOCKET MODE LOG OWNER
  python3 - "$@" <<'PY' &
import os, socket, struct, sys
path, mode, log, owner = sys.argv[1], int(sys.argv[2], 8), sys.argv[3], int(sys.argv[4])
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path); os.chmod(path, mode); os.chown(path, owner, owner); s.listen(8)
while True:
    c, _ = s.accept()
    pid, uid, gid = struct.unpack("3i", c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    with open(log, "a") as f:
        f.write("%d\n" % uid)
    c.close()
PY
}
serve "$d/private.sock" 600 "$d/private.log" 1
serve "$d/open.sock" 666 "$d/open.log" 0
for _ in $(seq 50); do [ -S "$d/private.sock" ] && [ -S "$d/open.sock" ] && break; sleep 0.1; done
client='import socket, sys
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(p); print(p, "connected")
    except OSError as e:
        print(p, "refused", e.errno)'
out=$("$capsule" run --allow-rw "$d/private.sock" --allow-rw "$d/open.sock" -- \
  python3 -c "$client" "$d/private.sock" "$d/open.sock" 2>&1 </dev/null)
echo "$out"
for _ in $(seq 50); do [ -s "$d/open.log" ] && break; sleep 0.1; done
echo "peer uids: private [$(tr '\n' ' ' 2>/dev/null <"$d/private.log")] open [$(tr '\n' ' ' 2>/dev/null <"$d/open.log")]"
rc=0
if grep -q "private.sock connected" <<<"$out" || [ -s "$d/private.log" ]; then
  echo "VULNERABLE: the tool reached another user's 0600 socket through capsule (as root)"; rc=1
fi
if grep -qx 0 "$d/open.log" 2>/dev/null; then
  echo "VULNERABLE: a peer sees uid 0 for the tool's connect"; rc=1
fi
grep -q "open.sock connected" <<<"$out" || { echo "FAIL: the granted 0666 socket was not reached"; rc=1; }
exit $rc
