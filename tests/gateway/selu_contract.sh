#!/usr/bin/env bash
# Selu capabilities as Selu's orchestrator runs them (selu-bot/selu):
# both gRPC contracts (the seed's CapabilityService and the orchestrator's
# Capability, told apart at the first health check; config_json with the
# declared credentials only; StreamInvoke; dynamic discovery and
# terminal_on_success through both), in C (tests/gateway/selu_fault.c) and
# in Node (examples/selu-node); sharing (an instance per user and session,
# or one shared one with max_concurrent calls at once); workspaces
# (per user and session at /workspace, kept across calls and restarts,
# never another's), temp and none; the cache (/cache per user and
# capability); `capsule workspace ls|rm`; the workspace bound. As root and
# as uid 65534. Usage: selu_contract.sh CAPSULE SELU_FAULT_SERVER
set -u
capsule=$(realpath "$1")
fault=$(realpath "$2")
if ! "$capsule" run -- /bin/true 2>/dev/null; then
  echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d /var/tmp/capsule-seluc.XXXXXX)
chmod 755 "$work"
export CAPSULE_STATE_KEY=
keepers_of() { sed -n 's/^pid=//p' "$1"/run/*.status 2>/dev/null; }
stop_all() { for p in $(keepers_of "$1"); do kill "$p" 2>/dev/null; done; sleep 0.5; }
# unmount_under DIR: the Selu volumes capsule mounted below DIR as root
# (gateway/volume_fs.c), before it is removed
unmount_under() { grep -F " $1/" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m"; done; }
trap 'stop_all "$work/root/s"; stop_all "$work/nobody/s"; unmount_under "$work"; rm -rf "$work"' EXIT
[ -n "${KEEP:-}" ] && trap - EXIT
pass=0 fail=0
ok() { echo "  ok   $1"; pass=$((pass + 1)); }
bad() { echo "  FAIL $1"; fail=$((fail + 1)); }

# cap DIR ID PROTOCOL [EXTRA-YAML]: the fault server, serving PROTOCOL
cap() {
  mkdir -p "$1/$2"
  cp "$fault" "$1/$2/server"
  cat >"$1/$2/manifest.yaml" <<YAML
id: $2
image: example/$2:1.0
tools:
  - {name: echo, description: Echoes., recommended_policy: allow, input_schema: {type: object}}
  - {name: env, description: An environment variable., recommended_policy: allow,
     input_schema: {type: object, properties: {name: {type: string}}, required: [name]}}
  - {name: instance, description: Its instance id., recommended_policy: allow, input_schema: {type: object}}
  - {name: write, description: Appends to a file., recommended_policy: allow, input_schema: {type: object}}
  - {name: read, description: Reads a file., recommended_policy: allow, input_schema: {type: object}}
  - {name: inflight, description: Calls at once., recommended_policy: allow, input_schema: {type: object}}
  - {name: done, description: Produces and ends the loop., recommended_policy: allow,
     terminal_on_success: true, input_schema: {type: object}}
  - {name: fail, description: Fails., recommended_policy: allow, input_schema: {type: object}}
x-capsule:
  command: ["./server", "--protocol", "$3"]
  idle_timeout_ms: 20000
  startup_timeout_ms: 5000
${4:-}
YAML
}

make_caps() {
  local c=$1
  cap "$c" p-service service
  cap "$c" p-capability capability 'credentials:
  - {name: SELU_TOKEN, scope: user, description: a per-user token}'
  cap "$c" p-none none
  cap "$c" p-stream capability '  invoke: stream'
  cap "$c" p-stream-service service '  invoke: stream'
  mkdir -p "$c/p-dyn" && cp "$fault" "$c/p-dyn/server"
  cat >"$c/p-dyn/manifest.yaml" <<'YAML'
id: p-dyn
image: example/p-dyn:1.0
tool_source: dynamic
tools: []
x-capsule: {command: ["./server", "--protocol", "capability"]}
YAML
  cap "$c" shared-one capability 'class: tool
filesystem: temp
sharing: {mode: shared, max_concurrent: 1, idle_timeout_seconds: 60}
credentials:
  - {name: SELU_TOKEN, scope: user, description: a per-user token}'
  cap "$c" excl both 'filesystem: temp'
  cap "$c" ws both 'class: environment
filesystem: workspace'
  sed -i 's/  idle_timeout_ms: 20000/  idle_timeout_ms: 20000\n  workspace_max_mb: 1/' "$c/ws/manifest.yaml"
  cap "$c" none both 'filesystem: none'
  cap "$c" cached both 'class: environment
cache: {enabled: true}'
  if [ -d "$root/examples/selu-node/node_modules/@grpc/grpc-js" ] && command -v node >/dev/null; then
    local p
    for p in service capability; do
      cp -r "$root/examples/selu-node" "$c/node-$p"
      # what its npm "prepare" copies, current (node_modules may predate a proto)
      cp "$root/proto/selu/capability/v1/capability.proto" "$c/node-$p/capability.proto"
      cp "$root/proto/selu/orchestrator/capability.proto" "$c/node-$p/orchestrator.proto"
      sed -i -e "s/^id: node-tools/id: node-$p/" \
        -e "s|command: \[\"node\", \"server.js\"\]|command: [\"node\", \"server.js\", \"--protocol\", \"$p\"]|" \
        "$c/node-$p/manifest.yaml"
    done
    cp -r "$c/node-capability" "$c/node-stream"
    for p in health invoke; do # a server answering garbage
      mkdir -p "$c/garbage-$p"
      cp -r "$root/examples/selu-node/node_modules" "$c/garbage-$p/node_modules"
      cp "$here/selu_garbage.js" "$c/garbage-$p/server.js"
      cat >"$c/garbage-$p/manifest.yaml" <<YAML
id: garbage-$p
image: example/garbage:1.0
tools:
  - {name: ok, description: Answers., recommended_policy: allow, input_schema: {type: object}}
x-capsule: {command: ["node", "server.js", "--$p"], startup_timeout_ms: 3000}
YAML
    done
    sed -i -e 's/^id: node-capability/id: node-stream/' -e 's/^x-capsule:/x-capsule:\n  invoke: stream/' \
      "$c/node-stream/manifest.yaml"
  fi
}

# suite WHO RUN...: every case, capsule run through RUN (as that user)
suite() {
  local who=$1; shift
  local dir=$work/$who
  local caps=$dir/caps state=$dir/s
  mkdir -p "$dir"
  make_caps "$caps"
  [ "$who" = root ] || chown -R 65534:65534 "$dir"
  # c NAME WANT REGEX ARGS...: one `capsule call`
  c() {
    local name=$1 want=$2 regex=$3; shift 3
    local out st
    out=$(timeout 60 "${run[@]}" "$capsule" call --caps "$caps" --state "$state" "$@" 2>&1 </dev/null)
    st=$?
    # under ASan: LeakSanitizer's own tracer crashing as it stops the
    # threads at exit ("Tracer caught signal 11", on a loaded machine, in
    # builds before and after this test's) is no report of a leak, and
    # its status (134) is not the call's: the call is judged by its output
    if [ "$st" = 134 ] && grep -q 'Tracer caught signal' <<<"$out" && ! grep -q 'ERROR: LeakSanitizer: detected' <<<"$out"; then
      echo "  note $who: $name: LeakSanitizer's tracer crashed at the exit; judged by the output"
      out=$(grep -v -e 'Tracer caught signal' -e '^==[0-9]*==' <<<"$out")
      st=$want
    fi
    if [ "$st" = "$want" ] && grep -qE -- "$regex" <<<"$out"; then ok "$who: $name"
    else bad "$who: $name (exit $st, want $want)"; head -5 <<<"$out" | sed 's/^/         /'; fi
  }
  local run=("$@")
  printf 'alice-token' | "${run[@]}" "$capsule" cred set p-capability SELU_TOKEN --scope user --user alice --state "$state"
  printf 'bob-token' | "${run[@]}" "$capsule" cred set shared-one SELU_TOKEN --scope user --user bob --state "$state"
  printf 'alice-shared' | "${run[@]}" "$capsule" cred set shared-one SELU_TOKEN --scope user --user alice --state "$state"
  local u
  for u in u1 u2 u3 u4; do
    printf 'token-%s' "$u" | "${run[@]}" "$capsule" cred set shared-one SELU_TOKEN --scope user --user "$u" --state "$state" >/dev/null
  done

  echo "$who: the two contracts"
  c service-context 0 '"context":\{"session_id":"s1","user_id":"alice"\},"protocol":"service"' --user alice --session s1 p-service echo '{}'
  c capability-request 0 '"context":\{"session_id":"s1","capability_id":"p-capability","thread_id":"t7"\},"protocol":"capability","config":\{"SELU_TOKEN":"alice-token"\},"streamed":false' \
    --user alice --session s1 --thread t7 p-capability echo '{"x": 1}'
  c capability-args 0 '"parameters":\{"x":1\}' --user alice --session s1 p-capability echo '{"x": 1}'
  if grep -q 'speaking selu.capability.v1.Capability;' "$state/logs/p-capability.log" &&
     grep -q 'speaking selu.capability.v1.CapabilityService;' "$state/logs/p-service.log"; then
    ok "$who: detected-at-health-check"; else bad "$who: detected-at-health-check"; fi
  c speaks-neither 1 'does not implement /selu.capability.v1.CapabilityService/Invoke' p-none echo '{}'
  c stream-invoke 0 '"protocol":"capability".*"streamed":true' p-stream echo '{}'
  c stream-on-seed-refused 1 'StreamInvoke is a call of the orchestrator.s Capability service' p-stream-service echo '{}'
  c failure-capability 1 'the tool failed: the tool failed on purpose' p-capability fail '{}' --user alice
  c terminal-service 0 '"terminal_on_success":true' --json p-service done '{}'
  c terminal-capability 0 '"terminal_on_success":true' --json --user alice p-capability done '{}'
  c dynamic-capability 0 '^\{"text":"HI"\}$' p-dyn dyn_upper '{"text": "hi"}'
  if [ -d "$caps/node-service" ]; then
    c node-service 0 '"protocol":"service","session_id":"n1","user_id":"alice"' --user alice --session n1 node-service whoami '{}'
    c node-capability 0 '"protocol":"capability","session_id":"n1","capability_id":"node-capability","thread_id":"","config":\{\}' --user alice --session n1 node-capability whoami '{}'
    c node-capability-dynamic 0 '^\{"greeting":"Hello, Ada"\}$' node-capability greet '{"name": "Ada"}'
    c node-stream-two-chunks 0 '"protocol":"capability".*"streamed":true' node-stream whoami '{}'
    # artifacts: in with --attach (UploadInputArtifact), out with --artifacts
    # (DownloadOutputArtifact), a hostile file name reduced to one component
    printf 'attached text' >"$dir/in.txt"
    mkdir -p "$dir/art"
    [ "$who" = root ] || chown 65534:65534 "$dir/in.txt" "$dir/art"
    c node-attach 0 '^\{"files":\[\{"filename":"in.txt","size_bytes":13,"text":"attached text"\}\]\}$' \
      --attach "$dir/in.txt" node-capability read_attachments '{}'
    c node-artifact-out 0 "\"artifact\":\\{\"filename\":\"../evil.txt\",\"mime_type\":\"text/plain\",\"path\":\"$dir/art/evil.txt\",\"size_bytes\":5\\}" \
      --artifacts "$dir/art" node-capability make_file '{"filename": "../evil.txt", "text": "hello"}'
    c node-artifact-not-replaced 0 "\"path\":\"$dir/art/1-evil.txt\"" \
      --artifacts "$dir/art" node-capability make_file '{"filename": "../evil.txt", "text": "again"}'
    if [ "$(cat "$dir/art/evil.txt")" = hello ] && [ "$(cat "$dir/art/1-evil.txt")" = again ] && [ ! -e "$dir/evil.txt" ]; then
      ok "$who: node-artifact-files"; else bad "$who: node-artifact-files"; fi
    c node-artifacts-need-capability 1 'has no artifacts: --attach and --artifacts need' \
      --artifacts "$dir/art" node-service make_file '{"filename": "x", "text": "x"}'
    c garbage-health 1 'did not become healthy .*the answer to /selu.capability.v1.Capability/Healthcheck is not a HealthResponse' garbage-health ok '{}'
    c garbage-invoke 1 'the Invoke answer is not an InvokeResponse' garbage-invoke ok '{}'
    c after-garbage-serves 0 '"protocol":"capability"' p-capability echo '{}' --user alice
    c node-stream-error 1 'the tool failed: sum: the sum is too large to represent' node-stream sum '{"numbers": [1e308, 1e308]}'
  else
    echo "  skip node: npm ci in examples/selu-node (scripts/deps.sh test does)"
  fi

  echo "$who: sharing"
  local a b
  # the answers compared, not what else the processes said (an ASan
  # build's leak check at exit may print there)
  a=$(timeout 60 "${run[@]}" "$capsule" call --caps "$caps" --state "$state" --user alice --session s1 shared-one instance '{}' 2>"$work/shared-a.err")
  b=$(timeout 60 "${run[@]}" "$capsule" call --caps "$caps" --state "$state" --user bob --session s2 shared-one instance '{}' 2>"$work/shared-b.err")
  if grep -q '"instance"' <<<"$a" && [ "$a" = "$b" ]; then ok "$who: shared-one-instance"; else
    bad "$who: shared-one-instance ($a / $b)"
    cat "$work/shared-a.err" "$work/shared-b.err" | head -10
  fi
  c shared-env 0 '"value":"true"' --user bob shared-one env '{"name": "SELU_SHARED"}'
  c shared-no-session-env 0 '^\{"value":null\}$' --user bob --session s2 shared-one env '{"name": "SELU_SESSION_ID"}'
  c shared-cred-not-in-env 0 '^\{"value":null\}$' --user bob shared-one env '{"name": "SELU_TOKEN"}'
  c shared-cred-per-call 0 '"config":\{"SELU_TOKEN":"bob-token"\}' --user bob shared-one echo '{}'
  c shared-cred-per-call-alice 0 '"config":\{"SELU_TOKEN":"alice-shared"\}' --user alice shared-one echo '{}'
  local i
  for i in 1 2 3 4; do
    timeout 60 "${run[@]}" "$capsule" call --caps "$caps" --state "$state" --user "u$i" --session "s$i" \
      shared-one inflight '{"ms": 300}' >"$dir/inflight.$i" 2>&1 &
  done
  wait
  if grep -q '"max_inflight":1}' "$dir/inflight.1" && ! grep -L '"max_inflight":1}' "$dir"/inflight.* | grep -q .; then
    ok "$who: max-concurrent-1-enforced"; else bad "$who: max-concurrent-1-enforced"; cat "$dir"/inflight.* | head -4; fi
  a=$(timeout 60 "${run[@]}" "$capsule" call --caps "$caps" --state "$state" --user alice --session s1 excl instance '{}' 2>&1)
  b=$(timeout 60 "${run[@]}" "$capsule" call --caps "$caps" --state "$state" --user alice --session s1 excl instance '{}' 2>&1)
  local d e
  d=$(timeout 60 "${run[@]}" "$capsule" call --caps "$caps" --state "$state" --user alice --session s2 excl instance '{}' 2>&1)
  e=$(timeout 60 "${run[@]}" "$capsule" call --caps "$caps" --state "$state" --user bob --session s1 excl instance '{}' 2>&1)
  if grep -q '"instance"' <<<"$a" && [ "$a" = "$b" ] && [ "$a" != "$d" ] && [ "$a" != "$e" ] && [ "$d" != "$e" ]; then
    ok "$who: exclusive-instance-per-user-and-session"; else bad "$who: exclusive-instance-per-user-and-session ($a $b $d $e)"; fi
  c exclusive-session-env 0 '"value":"s1"' --user alice --session s1 excl env '{"name": "SELU_SESSION_ID"}'
  c exclusive-capability-env 0 '"value":"excl"' --user alice --session s1 excl env '{"name": "SELU_CAPABILITY_ID"}'

  echo "$who: filesystem (temp: the instance's own /tmp; none: nothing)"
  c temp-write 0 '"written":true' --user alice --session s1 excl write '{"path": "/tmp/t", "text": "one"}'
  c temp-kept-in-session 0 '"text":"one"' --user alice --session s1 excl read '{"path": "/tmp/t"}'
  c temp-not-other-session 1 'No such file' --user alice --session s2 excl read '{"path": "/tmp/t"}'
  c none-no-tmp 1 'write /tmp/x' --user alice --session s1 none write '{"path": "/tmp/x", "text": "x"}'
  c none-no-workspace 1 'write /workspace/x' --user alice --session s1 none write '{"path": "/workspace/x", "text": "x"}'

  echo "$who: workspaces"
  local listed
  listed=$("${run[@]}" "$capsule" list --caps "$caps" --state "$state" 2>&1 | grep -E '^ws ')
  if grep -q ' ready$' <<<"$listed"; then ok "$who: workspace-listed-ready"; else bad "$who: workspace-listed-ready ($listed)"; fi
  c workspace-needs-session 1 'keeps a workspace per session .* give the session with --session ID' --user alice ws read '{"path": "/workspace/a"}'
  c workspace-write 0 '"written":true' --user alice --session s1 ws write '{"path": "/workspace/a", "text": "alice-s1"}'
  c workspace-read-same-session 0 '"text":"alice-s1"' --user alice --session s1 ws read '{"path": "/workspace/a"}'
  c workspace-not-other-session 1 'read /workspace/a: No such file' --user alice --session s2 ws read '{"path": "/workspace/a"}'
  c workspace-not-other-user 1 'read /workspace/a: No such file' --user bob --session s1 ws read '{"path": "/workspace/a"}'
  c workspace-state-hidden 1 'No such file|Permission denied' --user alice --session s1 ws read "{\"path\": \"$state/key\"}"
  # only capsule's own grant of a volume passes below the state: a manifest
  # naming another session's workspace as its x-capsule.workspace is refused
  cap "$caps" ws-steal both "class: environment
filesystem: workspace"
  sed -i "s|^x-capsule:|x-capsule:\n  workspace: $state/volumes/workspaces/alice/s1|" "$caps/ws-steal/manifest.yaml"
  [ "$who" = root ] || chown -R 65534:65534 "$caps/ws-steal"
  c workspace-manifest-into-state-refused 1 "at or below capsule's state directory" --user bob --session s1 ws-steal read '{"path": "/workspace/a"}'
  stop_all "$state"
  c workspace-kept-across-restart 0 '"text":"alice-s1"' --user alice --session s1 ws read '{"path": "/workspace/a"}'
  local ls
  ls=$("${run[@]}" "$capsule" workspace ls --json --state "$state" 2>&1)
  if grep -q '"kind":"workspace","user":"alice","name":"s1","bytes":"[1-9]' <<<"${ls//[[:space:]]/}" &&
     grep -q '"kind":"workspace","user":"bob","name":"s1"' <<<"${ls//[[:space:]]/}"; then
    ok "$who: workspace-ls-json"; else bad "$who: workspace-ls-json"; head -5 <<<"$ls"; fi
  ls=$("${run[@]}" "$capsule" workspace ls --state "$state" 2>&1)
  if grep -qE '^KIND +USER +NAME' <<<"$ls" && grep -qE '^workspace +alice +s1 ' <<<"$ls"; then ok "$who: workspace-ls"; else bad "$who: workspace-ls"; head -5 <<<"$ls"; fi
  # the bound (x-capsule.workspace_max_mb: 1): over it, the next call is refused
  local big
  big=$(head -c 1200000 /dev/zero | tr '\0' a)
  printf '{"path": "/workspace/big", "text": "%s"}' "$big" >"$dir/big.json"
  [ "$who" = root ] || chown 65534:65534 "$dir/big.json"
  out=$("${run[@]}" "$capsule" call --caps "$caps" --state "$state" --user carol --session s9 ws write - <"$dir/big.json" 2>&1)
  if [ "$who" = root ]; then # a quota: the write itself fails (docs/gateway.md, "Bounds")
    local held; held=$(du -sb "$state/volumes/workspaces/carol/s9" | cut -f1)
    if grep -qi 'no space left' <<<"$out" && [ "$held" -le 1048576 ]; then
      ok "$who: workspace-over-bound-quota"; else bad "$who: workspace-over-bound-quota ($held bytes: $out)"; fi
  else
    c workspace-over-bound-refused 1 'over its bound of 1048576 bytes' --user carol --session s9 ws read '{"path": "/workspace/a"}'
  fi
  stop_all "$state"
  out=$("${run[@]}" "$capsule" workspace rm s1 --user alice --state "$state" 2>&1)
  if grep -q 'removed the workspace s1 of user alice' <<<"$out" && [ ! -e "$state/volumes/workspaces/alice/s1" ]; then
    ok "$who: workspace-rm"; else bad "$who: workspace-rm ($out)"; fi
  c workspace-gone-after-rm 1 'read /workspace/a: No such file' --user alice --session s1 ws read '{"path": "/workspace/a"}'
  out=$("${run[@]}" "$capsule" workspace rm nosuch --user alice --state "$state" 2>&1); st=$?
  if [ "$st" = 1 ] && grep -q 'there is no workspace nosuch of user alice' <<<"$out"; then ok "$who: workspace-rm-missing"; else bad "$who: workspace-rm-missing ($st $out)"; fi

  echo "$who: cache (per user and capability, across sessions)"
  c cache-write 0 '"written":true' --user alice --session s1 cached write '{"path": "/cache/c", "text": "pkg"}'
  c cache-other-session 0 '"text":"pkg"' --user alice --session s2 cached read '{"path": "/cache/c"}'
  c cache-not-other-user 1 'read /cache/c: No such file' --user bob --session s1 cached read '{"path": "/cache/c"}'
  ls=$("${run[@]}" "$capsule" workspace ls --json --state "$state" 2>&1)
  if grep -q '"kind":"cache","user":"alice","name":"cached"' <<<"${ls//[[:space:]]/}"; then ok "$who: cache-listed"; else bad "$who: cache-listed"; fi
  stop_all "$state"
}

echo "as root"
suite root env
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
   setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" 2>/dev/null; then
  echo "as uid 65534"
  suite nobody setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$work/nobody"
else
  echo "  note: not root, or uid 65534 cannot reach $capsule: the unprivileged run is this one"
fi
echo "selu contract tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
