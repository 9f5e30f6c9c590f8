#!/bin/bash
# Finding (--net unrestricted): docs/sandbox.md says abstract unix sockets
# "never leave" the sandbox (Landlock scoping, ABI 6; the connect()
# supervisor answers EPERM for the host's abstract names). Both only stop
# the tool connecting OUT. With the host's network namespace the tool
# shares the host's abstract namespace, so it can bind() a name a host
# service uses (an X server's @/tmp/.X11-unix/X0, a dbus-daemon's
# unix:abstract=..., a containerd shim's socket) before that service does:
# the service then fails with EADDRINUSE, and the host's clients connect
# to the tool, which reads what they send and answers as the service.
# Root and uid 65534. Exits 1 when a host client reaches the tool's listener.
capsule=$(realpath "${1:-build/capsule}")
command -v python3 >/dev/null && command -v socat >/dev/null || { echo "SKIP: python3/socat"; exit 77; }
fail=0
for who in root nobody; do
  pre=()
  if [ "$who" = nobody ]; then
    [ "$(id -u)" = 0 ] || continue
    pre=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  fi
  name="capsule-review2-squat-$$-$who"
  (cd /tmp && "${pre[@]}" "$capsule" run --net unrestricted --timeout 10 -- python3 -c "
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind('\0$name'); s.listen(1)
c, _ = s.accept(); c.recv(100); c.sendall(b'ANSWERED-BY-THE-TOOL\n')
" >/dev/null 2>&1) &
  pid=$!
  got=
  for _ in $(seq 40); do
    got=$(printf 'host client data\n' | timeout 3 socat - "ABSTRACT-CONNECT:$name" 2>/dev/null) && [ -n "$got" ] && break
    sleep 0.2
  done
  wait "$pid" 2>/dev/null
  echo "$who: a host client connecting to @$name got: ${got:-nothing}"
  [ "$got" = ANSWERED-BY-THE-TOOL ] && fail=1
done
if [ "$fail" = 1 ]; then
  echo "VULNERABLE: the tool serves a name in the host's abstract namespace"; exit 1
fi
echo blocked; exit 0
