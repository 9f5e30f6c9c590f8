#!/bin/bash
# Finding (Selu workspaces, src/gateway/volumes.c, selu.c): unprivileged,
# a workspace bound (x-capsule.workspace_max_mb) is a check before each
# call, not a quota (a quota needs root: loop devices), and only `capsule
# doctor` said so: `capsule call` ran the tool silently, as if the bound
# held. Now the call warns on stderr, once: "this host cannot enforce:
# ... workspace bound ...". Through `capsule serve`, a warning line in
# serve's JSON log, once a call. As root, where the bound is a quota (loop
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
# a cache (no session needed, so callable through serve's MCP) under the same bound
mkdir -p "$W/caps/wc"
cp "$fault" "$W/caps/wc/server"
sed -e 's/^id: ws/id: wc/' -e 's|example/ws:|example/wc:|' -e 's/^filesystem: workspace/filesystem: none\ncache: {enabled: true}/' \
  -e "s|/caps/ws/server|/caps/wc/server|" "$W/caps/ws/manifest.yaml" >"$W/caps/wc/manifest.yaml"
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
# the same call through a running `capsule serve` (serve runs the
# pipeline): the warning is a line of serve's JSON log, once a call
# (before, serve's calls said nothing)
"${nobody[@]}" "$capsule" serve --caps "$W/caps" --state "$W/s-nobody" 2>"$W/serve.log" </dev/null &
server=$!
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; stop; unmount_under "$W"; rm -rf "$W"' EXIT
for _ in $(seq 1 300); do
  grep -q '"msg":"serving"' "$W/serve.log" 2>/dev/null && break
  sleep 0.1
done
if grep -q '"msg":"serving"' "$W/serve.log"; then
  out=$(cd "$W" && timeout 120 "${nobody[@]}" "$capsule" call --caps "$W/caps" --state "$W/s-nobody" \
    wc read '{"path": "/cache/none"}' 2>&1 </dev/null)
  echo "uid 65534 through serve: $out"
  for _ in $(seq 1 100); do # the line is written before the answer; allow a slow log
    grep -q '"msg":"this host cannot enforce"' "$W/serve.log" && break
    sleep 0.1
  done
  grep -q '"session started","socket"' "$W/serve.log" ||
    { echo "OPEN: the call did not go through serve"; cat "$W/serve.log"; rc=1; }
  n=$(grep -c '"level":"warning","msg":"this host cannot enforce","detail":"wc.s workspace bound of 8388608 bytes' "$W/serve.log")
  if [ "$n" != 1 ]; then
    echo "OPEN: serve logged the unenforced workspace bound $n times (want once)"; cat "$W/serve.log"; rc=1
  fi
  kill "$server"; wait "$server" 2>/dev/null; server=
else
  echo "OPEN: capsule serve did not start"; cat "$W/serve.log"; rc=1
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
