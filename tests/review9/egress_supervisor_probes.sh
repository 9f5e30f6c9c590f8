#!/bin/bash
# Attempts (held): the connect supervisor (below Landlock ABI 9) now
# accepts and serves the proxy connection it makes for the tool. From
# inside a proxy-mode sandbox, as the tool (uid 65534), each of these must
# still reach the proxy's allowlist (a CONNECT to a host not allowed gets
# 403) or nothing: 12 silent connections held first (more than the 8 the
# supervisor's threads serve) and then a request; TCP Fast Open
# (sendto MSG_FASTOPEN, which no seccomp trap or Landlock hook sees: the
# sweep serves it); an IPv4-mapped address on a dual-stack socket; a UDP
# socket connected to the proxy's port before a TCP one; a non-blocking
# connect (EINPROGRESS; before the fix it waited up to 100 ms for the
# sweep: the median of 20 is printed); TFO to a port nothing listens on.
# The run must also end once the tool exits holding silent connections.
# Runs with capsule as root, then as uid 65534.
# Exits 1 when an attempt gets past the allowlist or the run hangs.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root (then as uid 65534)"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; exit 77; }
[ -x /usr/bin/python3 ] || { echo "SKIP: no /usr/bin/python3 for the tool"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-r9sup.XXXXXX)
chmod 755 "$W"
trap 'rm -rf "$W"' EXIT
probe=$(cat <<'PY'
import socket, time
P = 3128
REQ = b"CONNECT evil.invalid:443 HTTP/1.1\r\nHost: evil.invalid:443\r\n\r\n"
out = []
def answer(s):
    s.settimeout(60)
    try:
        d = s.recv(200)
    except Exception as e:
        return "error " + type(e).__name__
    return d.split(b"\r\n")[0].decode(errors="replace") or "closed"
silent = []
for i in range(12):
    s = socket.socket(); s.connect(("127.0.0.1", P)); silent.append(s)
s = socket.socket(); s.connect(("127.0.0.1", P)); s.sendall(REQ)
out.append("after-12-silent: " + answer(s)); s.close()
try:
    s = socket.socket(); s.sendto(REQ, socket.MSG_FASTOPEN, ("127.0.0.1", P))
    out.append("tfo: " + answer(s)); s.close()
except OSError as e:
    out.append("tfo: refused %s" % e.errno)
try:
    s = socket.socket(socket.AF_INET6); s.connect(("::ffff:127.0.0.1", P)); s.sendall(REQ)
    out.append("mapped: " + answer(s)); s.close()
except OSError as e:
    out.append("mapped: refused %s" % e.errno)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.connect(("127.0.0.1", P)); u.close()
s = socket.socket(); s.connect(("127.0.0.1", P)); s.sendall(REQ)
out.append("after-udp: " + answer(s)); s.close()
times = []
for i in range(20):
    s = socket.socket(); s.setblocking(False); t = time.monotonic()
    try: s.connect(("127.0.0.1", P))
    except BlockingIOError: pass
    s.setblocking(True); s.sendall(REQ); a = answer(s); s.close()
    times.append(time.monotonic() - t)
out.append("nonblocking: " + a)
out.append("(non-blocking connect to answer, median of 20: %.1f ms)" % (sorted(times)[10] * 1000))
try:
    s = socket.socket(); s.sendto(b"x", socket.MSG_FASTOPEN, ("127.0.0.1", 9))
    s.settimeout(5); s.recv(1)
    out.append("tfo-port9: reached")
except OSError as e:
    out.append("tfo-port9: refused %s" % e.errno)
print("\n".join(out), flush=True)
PY
)
fail=0
check() { # WHO OUTPUT RC
  echo "--- capsule as $1 (exit $3)"; echo "$2"
  [ "$3" = 124 ] && { echo "VULNERABLE: the run did not end after the tool did"; fail=1; }
  for k in after-12-silent tfo mapped after-udp nonblocking; do
    grep -qx "$k: HTTP/1.1 403 Forbidden" <<<"$2" ||
      { echo "VULNERABLE: '$k' did not get the allowlist's 403"; fail=1; }
  done
  grep -q "^tfo-port9: refused" <<<"$2" || { echo "VULNERABLE: TFO reached a port nothing of capsule's serves"; fail=1; }
}
out=$(cd / && timeout 150 "$capsule" run --net proxy --allow-host example.com:443 -- python3 -c "$probe" 2>&1)
check root "$out" $?
mkdir -m 700 "$W/nobody" && chown 65534:65534 "$W/nobody"
out=$(cd / && timeout 150 setpriv --reuid 65534 --regid 65534 --clear-groups \
  env HOME="$W/nobody" XDG_STATE_HOME="$W/nobody/state" XDG_CONFIG_HOME="$W/nobody/config" \
  "$capsule" run --net proxy --allow-host example.com:443 -- python3 -c "$probe" 2>&1)
check "uid 65534" "$out" $?
[ "$fail" = 0 ] && echo "blocked"
exit "$fail"
