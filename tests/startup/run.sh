#!/usr/bin/env bash
# What start-up loads: the capsule executable does not link libgrpc and its
# dependencies (absl, protobuf-c, libstdc++); the Selu gRPC client is a
# module opened on the first Selu call. A copy of capsule outside the build
# tree without the module fails a Selu call with a message naming the
# module (no crash), and works once the module is installed where capsule
# looks: the libdir/capsule directory relative to the executable, or beside
# it. Usage: run.sh CAPSULE SELU_FAULT_SERVER MODULE RELDIR
set -u
capsule=$(realpath "$1")
fault=$(realpath "$2")
module=$(realpath "$3")
reldir=$4
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; }

heavy='libgrpc|libgpr|libprotobuf-c|libabsl|libstdc\+\+|libupb|libre2|libcares'
libs=$(LD_TRACE_LOADED_OBJECTS=1 "$capsule" 2>&1)
if echo "$libs" | grep -qE "$heavy"; then
  bad "capsule loads gRPC's libraries at start-up: $(echo "$libs" | grep -cE "$heavy") of them"
else ok "no gRPC libraries at start-up ($(echo "$libs" | wc -l) objects)"; fi
if ldd "$module" 2>/dev/null | grep -q libgrpc; then ok "the module links libgrpc"
else bad "the module does not link libgrpc"; fi

if ! "$capsule" run -- /bin/true 2>/dev/null; then
  echo "SKIP: this host cannot create the sandbox's namespaces (the Selu calls)"
  [ "$fail" = 0 ] || exit 1
  exit 77
fi
work=$(mktemp -d /var/tmp/capsule-startup.XXXXXX)
chmod 755 "$work"
state=$work/s
export CAPSULE_STATE_KEY=
stop_instances() { pkill -f -- "--state $state" 2>/dev/null; true; }
trap 'stop_instances; rm -rf "$work"' EXIT
mkdir -p "$work/caps/selu-ok" "$work/prefix/bin"
cp "$fault" "$work/caps/selu-ok/server"
cat >"$work/caps/selu-ok/manifest.yaml" <<'YAML'
id: selu-ok
image: example/selu-ok:1.0
tools:
  - {name: ok, description: Answers ok., recommended_policy: allow, input_schema: {type: object}}
x-capsule: {command: ["./server", "--mode", "normal"], idle_timeout_ms: 1000, startup_timeout_ms: 3000}
YAML
copy=$work/prefix/bin/capsule
cp "$capsule" "$copy"
call() { timeout 60 "$copy" call --caps "$work/caps" --state "$state" selu-ok ok '{}' 2>&1 </dev/null; }

out=$(call); status=$?
if [ "$status" = 1 ] && echo "$out" | grep -q "capsule-selu-rpc.so"; then ok "no module: the call fails and names it"; echo "$out" | sed "s/^/         /"
else bad "no module (exit $status): $(echo "$out" | head -3)"; fi
stop_instances; sleep 0.2

mkdir -p "$work/prefix/bin/$reldir"
cp "$module" "$work/prefix/bin/$reldir/"
out=$(call); status=$?
if [ "$status" = 0 ] && [ "$out" = '{"ok":true}' ]; then ok "installed in bin/$reldir: the call works"
else bad "installed module (exit $status): $(echo "$out" | head -3)"; fi
stop_instances; sleep 0.2
rm -f "$work/prefix/bin/$reldir/$(basename "$module")"

cp "$module" "$work/prefix/bin/"
out=$(call); status=$?
if [ "$status" = 0 ] && [ "$out" = '{"ok":true}' ]; then ok "module beside the executable: the call works"
else bad "module beside the executable (exit $status): $(echo "$out" | head -3)"; fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
