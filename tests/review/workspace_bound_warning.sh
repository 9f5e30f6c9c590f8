#!/bin/bash
# Finding (Selu workspaces, src/gateway/volumes.c, selu.c): unprivileged,
# a workspace bound (x-capsule.workspace_max_mb) is a check before each
# call, not a quota (a quota needs root: loop devices), and only `capsule
# doctor` said so: `capsule call` ran the tool silently, as if the bound
# held. Now the call warns on stderr, once: "this host cannot enforce:
# ... workspace bound ...". As root, where the bound is a quota (loop
# devices, mkfs.ext4), no warning.
# Exits 1 while the unprivileged call is silent (or root's warns
# wrongly, or either warns twice), 0 said, 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: runs as root and as uid 65534"; exit 77; }
fault=
for d in "$(dirname "$capsule")" "$(dirname "$capsule")/../.." "$(dirname "$0")/../../build"; do
  [ -x "$d/tests/gateway/selu_fault" ] && { fault=$(realpath "$d/tests/gateway/selu_fault"); break; }
done
[ -n "$fault" ] || { echo "SKIP: tests/gateway/selu_fault is not built"; exit 77; }
nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
"${nobody[@]}" test -x "$capsule" -a -x "$fault" || { echo "SKIP: uid 65534 cannot reach the binaries"; exit 77; }
probe=$(mktemp -d)
XDG_STATE_HOME=$probe "$capsule" run -- /bin/true >/dev/null 2>&1; ok=$?
rm -rf "$probe"
[ "$ok" = 0 ] || { echo "SKIP: no sandbox here"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review-wsbound.XXXXXX)
chmod 755 "$W"
export CAPSULE_STATE_KEY=
stop() { for p in $(sed -n 's/^pid=//p' "$W"/s-*/run/*.status 2>/dev/null); do kill "$p" 2>/dev/null; done; sleep 0.5; }
unmount_under() { grep -F " $1/" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m"; done; }
trap 'stop; unmount_under "$W"; rm -rf "$W"' EXIT
mkdir -p "$W/caps/ws"
cp "$fault" "$W/caps/ws/server"
cat >"$W/caps/ws/manifest.yaml" <<YAML
id: ws
image: example/ws:1.0
class: environment
filesystem: workspace
tools:
  - {name: read, description: Reads a file., recommended_policy: allow, input_schema: {type: object}}
x-capsule:
  command: ["$W/caps/ws/server", "--protocol", "both"]
  idle_timeout_ms: 20000
  workspace_max_mb: 8
YAML
chmod -R a+rX "$W/caps"
mkdir -m 700 "$W/s-nobody" "$W/s-root"
chown 65534:65534 "$W/s-nobody"
rc=0
# call WHO: stderr of one call
call() {
  local pre=()
  [ "$1" = nobody ] && pre=("${nobody[@]}")
  (cd "$W" && timeout 120 "${pre[@]}" "$capsule" call --caps "$W/caps" --state "$W/s-$1" --session s1 \
    ws read '{"path": "/workspace/none"}' 2>&1 >/dev/null </dev/null)
}
out=$(call nobody)
echo "uid 65534: $out"
grep -q "No such file" <<<"$out" || { echo "SKIP: the call did not reach the tool"; exit 77; }
n=$(grep -c "cannot enforce: .*workspace bound of 8388608 bytes" <<<"$out")
if [ "$n" != 1 ]; then
  echo "OPEN: uid 65534's call said the unenforced workspace bound $n times (want once)"; rc=1
fi
if [ -e /dev/loop-control ] && command -v mkfs.ext4 >/dev/null; then
  out=$(call root)
  echo "root: $out"
  if grep -q "workspace bound" <<<"$out"; then
    echo "BROKEN: root's call warned, where the bound is a quota"; rc=1
  fi
fi
[ "$rc" = 0 ] && echo "said"
exit $rc
