#!/bin/bash
# Investigated (issue 10, below Landlock ABI 9): as root a read-write
# grant is an idmapped mount, so a root-owned 0600 unix socket inside it
# appears owned by the tool's uid; is it connectable? The connect
# supervisor (src/sandbox/supervise.c) reaches only sockets granted by
# path (device and inode) or on the private /tmp and /dev/shm, whatever
# the owner looks like: refused (EACCES). Tried from inside, as root (the
# idmapped grant) and as uid 65534 (a plain bind mount): the path, a hard
# link and a symlink made in the grant, a relative path, the socket
# renamed, an O_PATH descriptor's /proc/self/fd and /proc/thread-self/fd
# (RESOLVE_NO_MAGICLINKS), a hard link into /tmp (another file system).
# And the socket granted by path stays reachable (the grant works).
# Exits 1 when the root-only socket answers without its grant, 0
# blocked (a regression test), 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: runs as root and as uid 65534"; exit 77; }
py=/usr/bin/python3
[ -x "$py" ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
probe=$(mktemp -d)
XDG_STATE_HOME=$probe "$capsule" run -- /bin/true >/dev/null 2>&1; ok=$?
rm -rf "$probe"
[ "$ok" = 0 ] || { echo "SKIP: no sandbox here"; exit 77; }
d=$(mktemp -d /var/tmp/capsule-review-rwsock.XXXXXX)
chmod 755 "$d"
srv=
trap '[ -n "$srv" ] && kill "$srv"; rm -rf "$d"' EXIT
cat >"$d/serve.py" <<'PY'
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o600); s.listen(16)
print("ready", flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"root-secret\n"); c.close()
PY
cat >"$d/probe.py" <<'PY'
import os, socket, sys
d, name = sys.argv[1], sys.argv[2]
def attempt(label, path):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        print("ESCAPED", label, s.recv(64))
    except OSError as e:
        print("refused", label, e.errno)
attempt("direct", f"{d}/root.sock")
for how, fn in (("hardlink", os.link), ("symlink", os.symlink)):
    try:
        fn(f"{d}/root.sock", f"{d}/{name}-{how}.sock"); attempt(how, f"{d}/{name}-{how}.sock")
    except OSError as e:
        print("refused", how, "made no", e.errno)
os.chdir(d); attempt("relative", "root.sock")
fd = os.open(f"{d}/root.sock", os.O_PATH)
attempt("proc-self-fd", f"/proc/self/fd/{fd}")
attempt("proc-thread-self-fd", f"/proc/thread-self/fd/{fd}")
try:
    os.rename(f"{d}/root.sock", f"{d}/{name}.sock"); attempt("renamed", f"{d}/{name}.sock")
    os.rename(f"{d}/{name}.sock", f"{d}/root.sock")
except OSError as e:
    print("refused rename", e.errno)
try:
    os.link(f"{d}/root.sock", "/tmp/l.sock"); attempt("link-into-tmp", "/tmp/l.sock")
except OSError as e:
    print("refused link-into-tmp", e.errno)
PY
mkdir -m 777 "$d/rw" "$d/st"
"$py" "$d/serve.py" "$d/rw/root.sock" >"$d/serve.out" &
srv=$!
for _ in $(seq 1 100); do grep -q ready "$d/serve.out" && break; sleep 0.1; done
[ -S "$d/rw/root.sock" ] || { echo "SKIP: the root service did not start"; exit 77; }
rc=0
for who in root nobody; do
  pre=()
  [ $who = nobody ] && pre=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  out=$(cd "$d" && timeout 120 "${pre[@]}" env HOME="$d" "$capsule" --state "$d/st/state-$who" run \
    --allow-read "$d" --allow-rw "$d/rw" -- "$py" "$d/probe.py" "$d/rw" "$who" 2>&1 </dev/null)
  echo "$who: $(grep -c '^refused' <<<"$out") refused"
  if grep -q '^ESCAPED' <<<"$out" || [ "$(grep -c '^refused' <<<"$out")" -lt 8 ]; then
    echo "$out" | sed 's/^/    /'
    echo "VULNERABLE ($who): the root-only socket in a read-write grant answered"
    rc=1
  fi
done
# granted by path, as root (the idmapped grant maps the caller's socket
# to the tool): reached, as the grant says
out=$(cd "$d" && timeout 120 env HOME="$d" "$capsule" --state "$d/st/state-root" run --allow-read "$d" \
  --allow-rw "$d/rw/root.sock" -- "$py" -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(s.recv(64).decode().strip())' \
  "$d/rw/root.sock" 2>&1 </dev/null)
[ "$out" = root-secret ] || { echo "BROKEN: the socket granted by path is not reached: $out"; rc=1; }
[ "$rc" = 0 ] && echo blocked
exit $rc
