#!/usr/bin/env bash
# What start-up loads: the capsule executable links neither libgrpc and its
# dependencies (absl, protobuf-c, libstdc++) nor OpenSSL nor nghttp2; the
# Selu gRPC client (nghttp2 and protobuf-c, never libgrpc), the gRPC
# server of serve --grpc (nghttp2 and OpenSSL, never libgrpc) and the egress
# proxy are modules opened on first use (the first
# Selu call, the first sandbox in proxy mode). A copy of capsule outside
# the build tree without a module fails what needs it with a message naming
# the module (no crash), and works once the module is installed where
# capsule looks: the libdir/capsule directory relative to the executable,
# or beside it.
# Usage: run.sh CAPSULE SELU_FAULT_SERVER SELU_MODULE PROXY_MODULE RELDIR GRPC_SERVE_MODULE
set -u
# a sanitizer build links its runtime (libstdc++, exported __odr_asan symbols)
# and LeakSanitizer cannot run under strace: these check the release build
[ -z "${ASAN_OPTIONS:-}" ] || { echo "SKIP: not meaningful in a sanitizer build"; exit 77; }
capsule=$(realpath "$1")
fault=$(realpath "$2")
module=$(realpath "$3")
proxy_module=$(realpath "$4")
reldir=$5
serve_module=$(realpath "$6")
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; }

heavy='libgrpc|libgpr|libprotobuf-c|libabsl|libstdc\+\+|libupb|libre2|libcares|libssl|libcrypto|libnghttp2'
libs=$(LD_TRACE_LOADED_OBJECTS=1 "$capsule" 2>&1)
if echo "$libs" | grep -qE "$heavy"; then
  bad "capsule loads gRPC's or OpenSSL's libraries at start-up: $(echo "$libs" | grep -E "$heavy" | awk '{print $1}' | tr '\n' ' ')"
else ok "no gRPC or OpenSSL libraries at start-up ($(echo "$libs" | wc -l) objects)"; fi
# the libraries every verb needs are linked in where their archives exist
for lib in libsqlite3 libsodium libyaml libpcre2-8; do
  archive=$(cc -print-file-name="$lib.a" 2>/dev/null)
  [ -f "$archive" ] || continue
  if echo "$libs" | grep -q "$lib[.-]"; then bad "$lib is loaded at start-up though $archive exists"
  else ok "$lib linked in"; fi
done
module_libs=$(ldd "$module" 2>/dev/null)
if echo "$module_libs" | grep -q libnghttp2 && ! echo "$module_libs" | grep -qE 'libgrpc|libgpr|libabsl'; then
  ok "the Selu module links nghttp2, not libgrpc ($(echo "$module_libs" | wc -l) objects)"
else bad "the Selu module's libraries: $(echo "$module_libs" | awk '{print $1}' | tr '\n' ' ')"; fi
serve_libs=$(ldd "$serve_module" 2>/dev/null)
if echo "$serve_libs" | grep -q libnghttp2 && echo "$serve_libs" | grep -q libssl &&
  ! echo "$serve_libs" | grep -qE 'libgrpc|libgpr|libabsl'; then
  ok "the gRPC server module links nghttp2 and OpenSSL, not libgrpc ($(echo "$serve_libs" | wc -l) objects)"
else bad "the gRPC server module's libraries: $(echo "$serve_libs" | awk '{print $1}' | tr '\n' ' ')"; fi
if ldd "$proxy_module" 2>/dev/null | grep -q libssl; then ok "the proxy module links libssl"
else bad "the proxy module does not link libssl"; fi
exports=$(nm -D --defined-only "$proxy_module" "$module" "$serve_module" | awk 'NF == 3 {print $3}' | sort | tr '\n' ' ')
if [ "$exports" = "grpc_serve_module_v1 proxy_module_v1 selu_rpc_module_v3 " ]; then ok "each module exports its table alone"
else bad "the modules export: $exports"; fi

if ! "$capsule" run -- /bin/true 2>/dev/null; then
  echo "SKIP: this host cannot create the sandbox's namespaces (the Selu calls)"
  [ "$fail" = 0 ] || exit 1
  exit 77
fi
work=$(mktemp -d /var/tmp/capsule-startup.XXXXXX)
export XDG_STATE_HOME=$work/xdg-state # the default state of its own: not the host's, which another capsule may have migrated
chmod 755 "$work"
state=$work/s
export CAPSULE_STATE_KEY=
# the keepers (their status files name their pids: their titles hide the
# call's arguments); their sandboxes die with them
keepers_of() { sed -n 's/^pid=//p' "$1"/run/*.status 2>/dev/null; }
# and waited for: a keeper told to stop stays published until its server
# has exited, and a call reaching it then would find the server gone
stop_instances() {
  local p ps
  ps=$(keepers_of "$state")
  for p in $ps; do kill "$p" 2>/dev/null; done
  for p in $ps; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  done
  true
}
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
printf '{"version": "0.1.0", "network": {"mode": "proxy", "allow_domains": ["example.com"]}}\n' \
  >"$work/proxy.json"
proxied() { timeout 60 "$copy" run --config "$work/proxy.json" -- /bin/sh -c 'echo $HTTP_PROXY' 2>&1 </dev/null; }

out=$(proxied); status=$?
if [ "$status" != 0 ] && echo "$out" | grep -q "capsule-proxy.so"; then ok "no proxy module: proxy mode fails and names it"
else bad "no proxy module (exit $status): $(echo "$out" | head -3)"; fi
if out=$(timeout 60 "$copy" run -- /bin/echo plain 2>&1) && [ "$out" = plain ]; then
  ok "no proxy module: a sandbox without the proxy runs"
else bad "no proxy module, no proxy: $out"; fi
mkdir -p "$work/prefix/bin/$reldir"
cp "$proxy_module" "$work/prefix/bin/$reldir/"
out=$(proxied); status=$?
if [ "$status" = 0 ] && [ "$out" = "http://127.0.0.1:3128" ]; then ok "proxy module installed: proxy mode works"
else bad "proxy module installed (exit $status): $(echo "$out" | head -3)"; fi

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
