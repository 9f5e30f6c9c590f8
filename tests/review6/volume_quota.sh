#!/bin/bash
# Finding (Selu workspaces, src/gateway/volumes.c): the workspace bound
# (limits.workspace_bytes, x-capsule.workspace_max_mb) was a check before
# each call, not a quota: within one call (or the server's start) a tool
# writes as much as the disk holds, each file below RLIMIT_FSIZE.
# Here: a bound of 8 MiB; the server's start script writes four 4 MB
# files into /workspace. As root the workspace is a file system of its
# own of the bound's size (gateway/volume_fs.c): the writes past it fail
# with ENOSPC and the host's disk holds at most the bound; `capsule
# workspace rm` unmounts it and removes its image.
# Exits 1 while more than the bound lands on the host, 0 blocked, 77
# cannot run (not root: unprivileged, the bound stays a check, said in
# docs/gateway.md).
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: a quota needs root (loop devices)"; exit 77; }
[ -e /dev/loop-control ] && command -v mkfs.ext4 >/dev/null || { echo "SKIP: no loop devices or mkfs.ext4"; exit 77; }
fault=
for d in "$(dirname "$capsule")" "$(dirname "$capsule")/../.." "$(dirname "$0")/../../build"; do
  [ -x "$d/tests/gateway/selu_fault" ] && { fault=$(realpath "$d/tests/gateway/selu_fault"); break; }
done
[ -n "$fault" ] || { echo "SKIP: tests/gateway/selu_fault is not built"; exit 77; }
probe=$(mktemp -d)
XDG_STATE_HOME=$probe "$capsule" run -- /bin/true >/dev/null 2>&1; ok=$?
rm -rf "$probe"
[ "$ok" = 0 ] || { echo "SKIP: no sandbox here"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review6-quota.XXXXXX)
chmod 755 "$W"
export CAPSULE_STATE_KEY=
ws=$W/s/volumes/workspaces/mallory/s1
stop() { for p in $(sed -n 's/^pid=//p' "$W"/s/run/*.status 2>/dev/null); do kill "$p" 2>/dev/null; done; sleep 0.5; }
# unmount_under DIR: the Selu volumes capsule mounted below DIR as root
# (gateway/volume_fs.c), before it is removed
unmount_under() { grep -F " $1/" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m"; done; }
trap 'stop; unmount_under "$W"; rm -rf "$W"' EXIT
mkdir -p "$W/caps/ws"
cp "$fault" "$W/caps/ws/server"
cat >"$W/caps/ws/start.sh" <<SH
cd /workspace || exit 1
for i in 1 2 3 4; do
  head -c 4000000 /dev/zero >fill-\$i 2>/dev/null && echo "wrote fill-\$i" >>/tmp/log
done
cd /
exec $W/caps/ws/server --protocol both
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
  workspace_max_mb: 8
YAML
out=$(timeout 60 "$capsule" call --caps "$W/caps" --state "$W/s" --user mallory --session s1 ws read '{"path": "/workspace/none"}' 2>&1 </dev/null)
echo "call: $out"
held=$(du -sb --apparent-size "$ws" 2>/dev/null | cut -f1)
used=$(du -sk "$ws" 2>/dev/null | cut -f1)
echo "the workspace holds ${held:-?} bytes (${used:-?} KiB on disk; bound 8388608): $(ls "$ws" 2>&1 | tr '\n' ' ')"
[ -n "$held" ] && [ "$held" -gt 0 ] || { echo "SKIP: the tool wrote nothing"; exit 77; }
if [ "$held" -gt 8388608 ]; then
  echo "VULNERABLE: a workspace bounded at 8 MiB holds $held bytes on the host"; exit 1
fi
# a second call of the session: the same file system, mounted once (and
# not waiting on a lock the loop device kept)
out=$(timeout 60 "$capsule" call --caps "$W/caps" --state "$W/s" --user mallory --session s1 ws read '{"path": "/workspace/none"}' 2>&1 </dev/null); st=$?
[ "$st" != 124 ] && grep -q "No such file" <<<"$out" || { echo "BROKEN: the second call (exit $st): $out"; exit 1; }
[ "$(grep -cF " $ws " /proc/mounts)" = 1 ] || { echo "BROKEN: the workspace is mounted more than once"; exit 1; }
img=$W/s/volumes/images/workspaces/mallory/s1.img
[ "$(stat -c %s "$img" 2>/dev/null)" = 8388608 ] || { echo "BROKEN: no 8 MiB image at $img"; exit 1; }
mountpoint -q "$ws" || { echo "BROKEN: the workspace is not a mount point"; exit 1; }
stop
out=$("$capsule" workspace rm s1 --user mallory --state "$W/s" 2>&1)
if [ -e "$ws" ] || [ -e "$img" ] || mountpoint -q "$ws" 2>/dev/null; then
  echo "BROKEN: workspace rm left the mount or the image: $out"; exit 1
fi
echo blocked; exit 0
