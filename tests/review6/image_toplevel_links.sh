#!/bin/bash
# Attempt (Selu images, src/sandbox/mount_plan.c plan_image, mount.c
# mount_image/mount_grant): an image whose top-level entries `workspace`
# and `cache` are absolute symlinks to host paths, with a setuid-root
# copy of a shell and a device node. The links are recreated inside the
# sandbox's tmpfs root before pivot_root, where an absolute target still
# resolves against the host's tree: the session workspace and the cache
# must not be bound (nor directories created) at the host paths, the
# workspace must not be lost, and the setuid bit and the device must give
# the tool nothing. Exits 1 when the host path is touched or the
# workspace lands elsewhere, 0 held, 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
root=$(cd "$(dirname "$0")/../.." && pwd)
for tool in umoci skopeo python3; do
  command -v $tool >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done
fault=
for d in "$(dirname "$capsule")" "$(dirname "$capsule")/../.." "$root/build"; do
  [ -x "$d/tests/gateway/selu_fault" ] && { fault=$(realpath "$d/tests/gateway/selu_fault"); break; }
done
[ -n "$fault" ] || { echo "SKIP: tests/gateway/selu_fault is not built"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review6-img.XXXXXX)
T=/var/tmp/capsule-review6-target-$$
chmod 755 "$W"
export CAPSULE_STATE_KEY=
stop() { for p in $(sed -n 's/^pid=//p' "$W"/s/run/*.status 2>/dev/null); do kill "$p" 2>/dev/null; done; sleep 0.5; }
# unmount_under DIR: the Selu volumes capsule mounted below DIR as root
# (gateway/volume_fs.c), before it is removed
unmount_under() { grep -F " $1/" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m"; done; }
trap 'stop; unmount_under "$W"; rm -rf "$W" "$T"' EXIT
mkdir -p "$T/ws" && chmod 777 "$T" "$T/ws"
cp "$fault" "$W/server"
"$root/tests/image/mkimage.sh" "$W/layout" t1 "$W/server" /server --protocol both >/dev/null 2>&1 ||
  { echo "SKIP: cannot build the image with umoci"; exit 77; }
bad=0
# one image per link: the first bind that fails stops the run
try() { # NAME ENTRIES-JSON
  cp -a "$W/layout" "$W/layout-$1"
  python3 "$root/tests/image/addlayer.py" "$W/layout-$1" t1 "$2" || exit 2
  "${as[@]}" "$capsule" image import --state "$W/s" "$W/layout-$1" --tag "tests/$1:1" >/dev/null || { echo "SKIP: import failed"; exit 77; }
  mkdir -p "$W/caps/$1"
  cat >"$W/caps/$1/manifest.yaml" <<YAML
id: $1
image: tests/$1:1
class: environment
filesystem: workspace
cache: {enabled: true}
tools:
  - {name: write, description: Appends to a file., recommended_policy: allow, input_schema: {type: object}}
YAML
  local path
  for path in /workspace/planted /cache/planted; do
    out=$(timeout 60 "${as[@]}" "$capsule" call --caps "$W/caps" --state "$W/s" --user u --session s1 "$1" write \
      "{\"path\": \"$path\", \"text\": \"through the link\"}" 2>&1 </dev/null); st=$?
    echo "$1 $path: exit $st: $(head -1 <<<"$out")"
  done
  stop
}
as=()
for who in self nobody; do
  if [ "$who" = nobody ]; then
    [ "$(id -u)" = 0 ] || continue
    rm -rf "$W/s" "$W/caps" "$W"/layout-*; chown -R 65534:65534 "$W"
    as=(setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/nonexistent)
  fi
  try "ws-$who" "[{\"name\": \"workspace\", \"type\": \"symlink\", \"target\": \"$T/ws\"}, {\"name\": \"dev0\", \"type\": \"chardev\"}]"
  try "cache-$who" "[{\"name\": \"cache\", \"type\": \"symlink\", \"target\": \"$T/cache/sub\"}]"
  [ -e "$T/ws/planted" ] && { echo "VULNERABLE ($who): the tool's workspace write reached the host path $T/ws"; bad=1; }
  [ -e "$T/cache" ] && { echo "VULNERABLE ($who): $T/cache was created on the host"; bad=1; }
done
[ "$bad" = 1 ] && exit 1
echo "held (the call failed or wrote inside the sandbox only)"; exit 0
