#!/usr/bin/env bash
# The gRPC server's limits on a peer, in raw HTTP/2 (python3): a
# connection that has had 33 calls refused for their token is ended with
# GOAWAY(ENHANCE_YOUR_CALM); a remote address holds at most 64
# connections (the 65th and later are closed as they come), in a network
# namespace of the test's own where the server listens on 10.77.0.1, an
# address that is not loopback (loopback clients are exempt); a server
# out of descriptors (ulimit -n 40, 60 clients) rests its listener
# instead of spinning on it (its CPU while the clients wait), and accepts
# again once they are gone.
# Usage: grpc_limits.sh DRIVER
set -u
driver=$1
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
command -v ip >/dev/null && command -v unshare >/dev/null ||
  { echo "SKIP: ip and unshare are needed (a network namespace)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/peer.py" <<'PY'
import socket, struct, sys
mode, host, port, token = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].encode()
def frame(t, flags, sid, payload):
    return struct.pack('>I', len(payload))[1:] + bytes([t, flags]) + struct.pack('>I', sid) + payload
def lit(name, value):  # a literal header field without indexing, new name
    return b'\x00' + bytes([len(name)]) + name + bytes([len(value)]) + value
def health(sid, tok):  # the orchestrator's Healthcheck, its empty message
    block = (b'\x83\x86' + lit(b':authority', b'capsule') +
             lit(b':path', b'/selu.capability.v1.Capability/Healthcheck') +
             lit(b'content-type', b'application/grpc') + lit(b'authorization', b'Bearer ' + tok))
    return frame(1, 4, sid, block) + frame(0, 1, sid, b'\x00\x00\x00\x00\x00')
start = b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' + frame(4, 0, 0, b'')
def frames(s):  # yields (type, payload) until the end
    buf = b''
    while True:
        while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], 'big'):
            n = int.from_bytes(buf[:3], 'big')
            yield buf[3], buf[9:9 + n]
            buf = buf[9 + n:]
        try:
            got = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            return
        if not got:
            return
        buf += got
def answered(s):  # the server's SETTINGS, then an answer's HEADERS
    kinds = set()
    for t, p in frames(s):
        kinds.add(t)
        if t == 1 and len(kinds) > 1:
            return True
    return False
if mode == 'exhaust':  # holds 60 connections for 3 s, then calls once
    import time
    held = [socket.create_connection((host, port), timeout=10) for _ in range(60)]
    time.sleep(3)
    for s in held:
        s.close()
    time.sleep(0.5)
    s = socket.create_connection((host, port), timeout=10)
    s.sendall(start + health(1, token))
    print('ok accepts-again-after-exhaustion' if answered(s) else 'FAIL accepts-again-after-exhaustion')
elif mode == 'refusals':
    s = socket.create_connection((host, port), timeout=10)
    s.sendall(start + b''.join(health(1 + 2 * i, b'wrong') for i in range(40)))
    code = None
    for t, p in frames(s):
        if t == 7:  # GOAWAY: last stream id, error code
            code = int.from_bytes(p[4:8], 'big')
            break
    print('ok refused-tokens-end-the-connection' if code == 11 else f'FAIL refused-tokens: GOAWAY {code}')
else:
    conns = []
    for i in range(70):
        s = socket.create_connection((host, port), timeout=10)
        try:
            s.sendall(start + health(1, token))
        except OSError:
            pass
        conns.append(s)
    answered_n = closed = 0
    for s in conns:
        if answered(s):
            answered_n += 1
        else:
            closed += 1
    print('ok per-address-cap (64 answered, 6 closed)' if (answered_n, closed) == (64, 6)
          else f'FAIL per-address-cap: {answered_n} answered, {closed} closed')
PY
pass=0 fail=0
report() {
  while IFS= read -r line; do
    case $line in
    ok\ *) pass=$((pass + 1)); echo "  $line" ;;
    FAIL\ *) fail=$((fail + 1)); echo "  $line" ;;
    *) [ -n "$line" ] && echo "         $line" ;;
    esac
  done
}
# serve ADDRESS MODE HOST: the driver on ADDRESS, the peer's MODE against it
serve() {
  "$driver" "$1" t0k3n >"$work/out" 2>"$work/err" &
  local d=$! port=
  for _ in $(seq 100); do
    port=$(sed -n 's/^port //p' "$work/out")
    [ -n "$port" ] && break
    sleep 0.1
  done
  if [ -n "$port" ]; then timeout 60 python3 "$work/peer.py" "$2" "$3" "$port" t0k3n 2>&1
  else echo "FAIL $2: the driver did not start: $(cat "$work/err")"; fi
  kill -TERM "$d" 2>/dev/null
  wait "$d"
}
report < <(serve 127.0.0.1:0 refusals 127.0.0.1)
# out of descriptors: the driver's CPU (clock ticks, /proc) over 2 s while
# 60 clients wait on 40 descriptors; a listener polled in a loop spins a
# CPU (about 100 ticks a second), one that rests takes next to none
( ulimit -n 40; exec "$driver" 127.0.0.1:0 t0k3n ) >"$work/out" 2>"$work/err" &
d=$! port=
for _ in $(seq 100); do
  port=$(sed -n 's/^port //p' "$work/out")
  [ -n "$port" ] && break
  sleep 0.1
done
if [ -n "$port" ]; then
  timeout 60 python3 "$work/peer.py" exhaust 127.0.0.1 "$port" t0k3n >"$work/exhaust" 2>&1 &
  p=$!
  sleep 0.7
  ticks() { awk '{print $14 + $15}' "/proc/$d/stat"; }
  t0=$(ticks); sleep 2; t1=$(ticks)
  wait "$p"
  report <"$work/exhaust"
  if [ $((t1 - t0)) -lt 40 ]; then report <<<"ok out-of-descriptors-no-spin ($((t1 - t0)) ticks in 2 s)"
  else report <<<"FAIL out-of-descriptors-no-spin: $((t1 - t0)) ticks in 2 s"; fi
else report <<<"FAIL out-of-descriptors: the driver did not start: $(cat "$work/err")"; fi
kill -TERM "$d" 2>/dev/null
wait "$d"
export -f serve
export driver work
ns=(unshare -n)
[ "$(id -u)" = 0 ] || ns=(unshare -rn)
if "${ns[@]}" true 2>/dev/null; then
  report < <("${ns[@]}" bash -c 'ip link set lo up && ip addr add 10.77.0.1/32 dev lo && serve 10.77.0.1:0 cap 10.77.0.1')
else
  echo "  skip per-address-cap: no network namespace here"
fi
echo "grpc limits: $pass passed, $fail failed"
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
