#!/bin/bash
# Finding (Selu workspaces, src/gateway/volumes.c gw_volume_usage): the
# workspace bound (limits.workspace_bytes, x-capsule.workspace_max_mb) is
# checked before each call by summing the volume with nftw(), whose
# result is ignored: an entry nftw cannot walk ends the walk early (a path
# longer than PATH_MAX: nftw returns -1 and the sum so far is taken) or is
# skipped (a directory the caller cannot read, FTW_DNR: unprivileged, the
# tool has the caller's uid and can chmod 000 its own directory). A tool
# keeps any amount of data in its workspace below such a directory and
# every later call passes the check.
# Here: the server's start script writes 3 MB under a 32-level chain of
# 200-byte names (and, unprivileged, under a chmod 000 directory), the
# bound is 1 MiB; the next call must be refused as over the bound.
# Exits 1 while the call passes, 0 blocked, 77 cannot run.
# Usage: volume_bound_hidden.sh CAPSULE [HOW: deep|unreadable]; without
# HOW both, the unreadable one as uid 65534 when run as root.
capsule=$(realpath "${1:-build/capsule}")
how=${2:-}
self=$(realpath "$0")
if [ -z "$how" ]; then
  bash "$self" "$capsule" deep; a=$?
  if [ "$(id -u)" = 0 ]; then
    (cd /tmp && setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/nonexistent bash "$self" "$capsule" unreadable); b=$?
  else
    bash "$self" "$capsule" unreadable; b=$?
  fi
  echo "deep: exit $a, unreadable: exit $b"
  [ $a = 1 ] || [ $b = 1 ] && exit 1
  [ $a = 0 ] || [ $b = 0 ] && exit 0
  exit 77
fi
fault=
for d in "$(dirname "$capsule")" "$(dirname "$capsule")/../.." "$(dirname "$0")/../../build"; do
  [ -x "$d/tests/gateway/selu_fault" ] && { fault=$(realpath "$d/tests/gateway/selu_fault"); break; }
done
[ -n "$fault" ] || { echo "SKIP: tests/gateway/selu_fault is not built"; exit 77; }
probe=$(mktemp -d) # its own state: the default one may belong to another capsule
XDG_STATE_HOME=$probe "$capsule" run -- /bin/true >/dev/null 2>&1; ok=$?
rm -rf "$probe"
[ "$ok" = 0 ] || { echo "SKIP: no sandbox here"; exit 77; }
[ "$how" = unreadable ] && [ "$(id -u)" = 0 ] && { echo "SKIP: root reads a chmod 000 directory anyway"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review6-vol.XXXXXX)
chmod 755 "$W"
export CAPSULE_STATE_KEY=
stop() { for p in $(sed -n 's/^pid=//p' "$W"/s/run/*.status 2>/dev/null); do kill "$p" 2>/dev/null; done; sleep 0.5; }
# unmount_under DIR: the Selu volumes capsule mounted below DIR as root
# (gateway/volume_fs.c), before it is removed
unmount_under() { grep -F " $1/" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m"; done; }
trap 'stop; unmount_under "$W"; chmod -R u+rwx "$W" 2>/dev/null; rm -rf "$W"' EXIT
mkdir -p "$W/caps/ws"
cp "$fault" "$W/caps/ws/server"
cat >"$W/caps/ws/start.sh" <<SH
cd /workspace || exit 1
if [ ! -e hidden ]; then
  mkdir hidden && cd hidden || exit 1
  if [ "$how" = deep ]; then
    # dash keeps a logical path: python3 descends by chdir
    python3 -c 'import os
n = "0" * 200
for i in range(32):
    os.mkdir(n); os.chdir(n)
open("big", "wb").write(bytes(3000000))' || exit 1
  else
    mkdir locked && head -c 3000000 /dev/zero >locked/big || exit 1
  fi
  [ "$how" = deep ] || chmod 000 /workspace/hidden/locked
fi
cd /
exec /pkg/server --protocol both
SH
cat >"$W/caps/ws/manifest.yaml" <<YAML
id: ws
image: example/ws:1.0
class: environment
filesystem: workspace
tools:
  - {name: read, description: Reads a file., recommended_policy: allow, input_schema: {type: object}}
x-capsule:
  command: ["/bin/sh", "$W/caps/ws/start.sh"]
  idle_timeout_ms: 20000
  workspace_max_mb: 1
YAML
sed -i "s|/pkg/server|$W/caps/ws/server|" "$W/caps/ws/start.sh"
call() { timeout 60 "$capsule" call --caps "$W/caps" --state "$W/s" --user mallory --session s1 ws read '{"path": "/workspace/none"}' 2>&1 </dev/null; }
out=$(call); echo "first call: $out"
ws=$W/s/volumes/workspaces/mallory/s1
held=$(du -sb "$ws" 2>/dev/null | cut -f1)
[ "$how" = unreadable ] && held=$( (cd "$ws" && chmod -R u+rx hidden && du -sb . | cut -f1; chmod 000 hidden/locked) )
echo "the workspace holds ${held:-?} bytes (bound 1048576)"
[ "${held:-0}" -gt 2000000 ] || { echo "SKIP: the tool did not fill its workspace"; exit 77; }
out=$(call); st=$?
echo "second call: exit $st: $out"
if [ "$st" != 0 ] && grep -qE 'over its bound|cannot be measured against its bound' <<<"$out"; then
  stop
  # and the operator can still remove it (a chmod 000 directory inside)
  out=$("$capsule" workspace rm s1 --user mallory --state "$W/s" 2>&1)
  [ -e "$ws" ] && { echo "workspace rm failed: $out"; exit 1; }
  echo blocked; exit 0
fi
echo "VULNERABLE: a workspace holding ${held} bytes passed its 1 MiB bound ($how)"; exit 1
