#!/usr/bin/env bash
# The Selu runtime end to end: `capsule call` on gRPC capabilities kept warm
# (tests/gateway/selu_fault.c, a server whose tools and start-up misbehave
# on request, and the examples), through policy, validation and
# credentials; reuse, idle stop, restart after death, the concurrency
# limit, dynamic tool discovery, terminal_on_success, and the faults: a
# server that crashes, hangs, answers garbage or 100 MB, never becomes
# healthy or dies between calls. Every call leaves one audit record and the
# chain verifies. Usage: selu.sh CAPSULE SELU_FAULT_SERVER
set -u
capsule=$(realpath "$1")
fault=$(realpath "$2")
if ! "$capsule" run -- /bin/true 2>/dev/null; then
  echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d /var/tmp/capsule-selu.XXXXXX)
chmod 755 "$work"
caps=$work/caps
state=$work/s # short: keepers' unix sockets live under it
export CAPSULE_STATE_KEY=
# the keepers (their status files name their pids: their titles hide the
# call's arguments); their sandboxes die with them
keepers_of() { sed -n 's/^pid=//p' "$1"/run/*.status 2>/dev/null; }
stop_instances() { for p in $(keepers_of "$state"); do kill "$p" 2>/dev/null; done; true; }
trap 'stop_instances; rm -rf "$work"' EXIT
[ -n "${KEEP:-}" ] && trap - EXIT

# cap ID MODE [EXTRA-YAML]: a Selu capability served by the fault server
cap() {
  mkdir -p "$caps/$1"
  cp "$fault" "$caps/$1/server"
  cat >"$caps/$1/manifest.yaml" <<YAML
id: $1
image: example/$1:1.0
tools:
  - {name: ok, description: Answers ok., recommended_policy: allow, input_schema: {type: object}}
  - {name: echo, description: Echoes., recommended_policy: allow, input_schema: {type: object}}
  - {name: env, description: Reads an environment variable., recommended_policy: allow,
     input_schema: {type: object, properties: {name: {type: string}}, required: [name]}}
  - {name: pid, description: Its process id., recommended_policy: allow, input_schema: {type: object}}
  - {name: instance, description: Its instance id., recommended_policy: allow, input_schema: {type: object}}
  - {name: crash, description: Exits mid-call., recommended_policy: allow, input_schema: {type: object}}
  - {name: hang, description: Never answers., recommended_policy: allow, input_schema: {type: object}}
  - {name: garbage, description: Answers not JSON., recommended_policy: allow, input_schema: {type: object}}
  - {name: big, description: Answers n bytes., recommended_policy: allow,
     input_schema: {type: object, properties: {bytes: {type: integer}}}}
  - {name: fail, description: Fails., recommended_policy: allow, input_schema: {type: object}}
  - {name: sleep, description: Sleeps., recommended_policy: allow,
     input_schema: {type: object, properties: {ms: {type: integer, maximum: 10000}}, required: [ms]}}
  - {name: spin, description: Burns CPU., recommended_policy: allow,
     input_schema: {type: object, properties: {ms: {type: integer}}, required: [ms]}}
  - {name: done, description: Produces and ends the loop., recommended_policy: allow,
     terminal_on_success: true, input_schema: {type: object}}
  - {name: guarded, description: Not allowed by default., input_schema: {type: object}}
x-capsule:
  command: ["./server", "--mode", "$2"]
  idle_timeout_ms: 3000
  startup_timeout_ms: 2000
${3:-}
YAML
}
cap selu-ok normal 'resources: {max_memory_mb: 512}'
cap selu-cred normal 'credentials:
  - {name: SELU_TOKEN, scope: user, description: a per-user token}'
cap selu-unhealthy unhealthy
cap selu-nolisten nolisten
cap selu-dies exit-after-call
cap selu-slow slow-start
cap selu-bound normal # idle for long: only the bound on a user's instances ends them
sed -i 's|idle_timeout_ms: 3000|idle_timeout_ms: 120000|' "$caps/selu-bound/manifest.yaml"
cap selu-one normal '  max_concurrency: 1'
cap selu-cpu normal 'resources: {max_cpu_seconds: 1, max_cpu_fraction: 1.0}'
sed -i 's/idle_timeout_ms: 3000/idle_timeout_ms: 600/' "$caps/selu-one/manifest.yaml"
sed -i 's/startup_timeout_ms: 2000/startup_timeout_ms: 8000/' "$caps/selu-slow/manifest.yaml"
mkdir -p "$caps/selu-dyn" && cp "$fault" "$caps/selu-dyn/server"
cat >"$caps/selu-dyn/manifest.yaml" <<'YAML'
id: selu-dyn
image: example/selu-dyn:1.0
tool_source: dynamic
tools: []
x-capsule: {command: ["./server", "--mode", "normal"], idle_timeout_ms: 3000}
YAML
mkdir -p "$caps/selu-baddyn" && cp "$fault" "$caps/selu-baddyn/server"
sed -e 's/selu-dyn/selu-baddyn/' -e 's/"normal"/"bad-discovery"/' "$caps/selu-dyn/manifest.yaml" >"$caps/selu-baddyn/manifest.yaml"
# an interpreted server: the command names an interpreter and a script
cap selu-interp normal
sed -i 's|command: \["./server", "--mode", "normal"\]|command: ["sh", "start.sh"]|' "$caps/selu-interp/manifest.yaml"
# idle for long: an edit, not the idle clock, ends it (idle-edit-stops-keeper)
sed -i 's|idle_timeout_ms: 3000|idle_timeout_ms: 120000|' "$caps/selu-interp/manifest.yaml"
printf 'export VERSION="$(cat version.txt)"; exec ./server --mode normal\n' >"$caps/selu-interp/start.sh"
echo 1 >"$caps/selu-interp/version.txt"
mkdir -p "$caps/selu-interp/lib/deeper" # as node_modules: a change deep in the tree counts
cp -r "$root/examples/selu-text" "$caps/text" 2>/dev/null
if [ -d "$root/examples/selu-node/node_modules/@grpc/grpc-js" ]; then
  cp -r "$root/examples/selu-node" "$caps/node"
  # what its npm "prepare" copies, current (node_modules may predate a proto)
  cp "$root/proto/selu/capability/v1/capability.proto" "$caps/node/capability.proto"
  cp "$root/proto/selu/orchestrator/capability.proto" "$caps/node/orchestrator.proto"
fi

pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; }
calls=0
# c NAME WANT-STATUS REGEX ARGS...: one `capsule call` (one audit record)
c() {
  local name=$1 want=$2 regex=$3; shift 3
  local out status
  calls=$((calls + 1))
  out=$(timeout 60 "$capsule" call --caps "$caps" --state "$state" "$@" 2>&1 </dev/null)
  status=$?
  if [ "$status" = "$want" ] && echo "$out" | grep -qE -- "$regex"; then ok "$name"
  else bad "$name (exit $status, want $want)"; echo "$out" | head -5 | sed 's/^/         /'; fi
}

echo "calls"
c ok 0 '^\{"ok":true\}$' selu-ok ok '{}'
# the fault server speaks both contracts: capsule asks the orchestrator's
# first (tests/gateway/selu_contract.sh tests each alone)
c echo-context 0 '"tool":"echo".*"session_id":"s-42","capability_id":"selu-ok".*"protocol":"capability"' --user alice --session s-42 selu-ok echo '{"a": 1}'
c session-generated 0 '"session_id":"[0-9a-f]{8}-[0-9a-f]{4}-4' selu-ok echo '{}'
c args-invalid 1 'args: /: missing required property "name"' selu-ok env '{}'
c blocked-by-default 4 'blocked by policy \(default\)' selu-ok guarded '{}'
c unknown-tool 1 'has no tool "nope" \(it has: ok, echo' selu-ok nope '{}'
c tool-fails 1 'the tool failed: the tool failed on purpose' selu-ok fail '{}'
c terminal 0 '^\{"result":.*,"terminal_on_success":true\}$' --json selu-ok done '{}'
c not-terminal 0 '"terminal_on_success":false\}$' --json selu-ok ok '{}'

echo "warm instances"
p1=$("$capsule" call --caps "$caps" --state "$state" selu-ok pid '{}' 2>&1); calls=$((calls + 1))
p2=$("$capsule" call --caps "$caps" --state "$state" selu-ok pid '{}' 2>&1); calls=$((calls + 1))
if [ -n "$p1" ] && [ "$p1" = "$p2" ] && echo "$p1" | grep -q '"pid"'; then ok reused; else bad "reused ($p1 / $p2)"; fi
# exclusive (Selu's default): an instance per user and session; the calls
# above without --session share one, alice's session s-42 has its own
n=$(ls "$state/run"/*.sock 2>/dev/null | wc -l)
if [ "$n" = 2 ]; then ok instance-per-session-sockets; else bad "instance-per-session-sockets ($n)"; fi
private=1
for s in "$state/run"/*.sock; do
  [ "$(stat -c %a "$state/run")" = 700 ] && [ "$(stat -c %a "$s")" = 700 ] || [ "$(stat -c %a "$s")" = 600 ] || private=0
done
if [ "$private" = 1 ]; then ok sockets-private; else bad sockets-private; fi
sleep 3.6
n=$(ls "$state/run"/*.sock 2>/dev/null | wc -l)
if [ "$n" = 0 ] && grep -q "idle for 3000 ms: stopping the server" "$state/logs/selu-ok.log"; then ok idle-stop
else bad "idle-stop ($n sockets left)"; fi
p3=$("$capsule" call --caps "$caps" --state "$state" selu-ok pid '{}' 2>&1); calls=$((calls + 1))
if echo "$p3" | grep -q '"pid"'; then ok restarts-after-idle; else bad "restarts-after-idle ($p3)"; fi

echo "capsule's state is out of every sandbox's sight"
"$capsule" call --caps "$caps" --state "$state" selu-ok ok '{}' >/dev/null 2>&1; calls=$((calls + 1))
out=$("$capsule" run --state "$state" --allow-read "$work" -- /bin/sh -c "ls -a $state/run; cat $state/key | wc -c" 2>&1)
if ls "$state/run"/*.sock >/dev/null 2>&1 && ! echo "$out" | grep -qE '\.sock|salt|^32$'; then ok state-masked-in-run
else bad state-masked-in-run; echo "$out" | head -5 | sed 's/^/         /'; fi
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  # unprivileged: the sandbox's uid is the caller's, so only the mask keeps
  # a sandbox granted the state's parent from the key and the sockets
  nb=(setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$work/nb")
  mkdir -p "$work/nb" && chown 65534:65534 "$work/nb"
  "${nb[@]}" "$capsule" policy set selu-ok pid allow --caps "$caps" --state "$work/nb/s" >/dev/null
  out=$("${nb[@]}" "$capsule" call --caps "$caps" --state "$work/nb/s" selu-ok pid '{}' 2>&1)
  if echo "$out" | grep -q '"pid"'; then ok unprivileged-instance; else bad unprivileged-instance; echo "$out" | head -3 | sed 's/^/         /'; fi
  out=$("${nb[@]}" "$capsule" run --state "$work/nb/s" --allow-read "$work/nb" -- /bin/sh -c "ls -a $work/nb/s/run; cat $work/nb/s/key | wc -c" 2>&1)
  if ls "$work/nb/s/run"/*.sock >/dev/null 2>&1 && ! echo "$out" | grep -qE '\.sock|salt|^32$'; then ok unprivileged-state-masked
  else bad unprivileged-state-masked; echo "$out" | head -5 | sed 's/^/         /'; fi
  for p in $(keepers_of "$work/nb/s"); do kill "$p" 2>/dev/null; done
fi
mkdir -p "$work/shared/run" && chmod 777 "$work/shared/run"
"$capsule" policy set selu-ok ok allow --caps "$caps" --state "$work/shared" >/dev/null 2>&1
out=$("$capsule" call --caps "$caps" --state "$work/shared" selu-ok ok '{}' 2>&1)
if echo "$out" | grep -q "is not a private directory of this user's"; then ok run-dir-not-private-refused
else bad run-dir-not-private-refused; echo "$out" | head -3 | sed 's/^/         /'; fi

echo "credentials (environment variables, per the seed; instances per credential set)"
c cred-missing 1 'credential SELU_TOKEN is not set for user alice; set it with .capsule cred set selu-cred SELU_TOKEN --scope user --user alice.' --user alice selu-cred env '{"name": "SELU_TOKEN"}'
printf 'alice-secret' | "$capsule" cred set selu-cred SELU_TOKEN --scope user --user alice --state "$state"
printf 'bob-secret' | "$capsule" cred set selu-cred SELU_TOKEN --scope user --user bob --state "$state"
c cred-alice 0 '"value":"alice-secret"' --user alice selu-cred env '{"name": "SELU_TOKEN"}'
c cred-bob 0 '"value":"bob-secret"' --user bob selu-cred env '{"name": "SELU_TOKEN"}'
if grep -rqa 'alice-secret' "$state/run" "$state/logs"; then bad cred-not-in-files; else ok cred-not-in-files; fi
printf 'alice-new' | "$capsule" cred set selu-cred SELU_TOKEN --scope user --user alice --state "$state"
c cred-change-restarts 0 '"value":"alice-new"' --user alice selu-cred env '{"name": "SELU_TOKEN"}'

echo "concurrency (max_concurrency 1: calls wait their turn)"
start=$(date +%s%N)
for i in 1 2 3; do
  "$capsule" call --caps "$caps" --state "$state" selu-one sleep '{"ms": 400}' >"$work/par.$i" 2>&1 &
done
wait; calls=$((calls + 3))
ms=$(( ($(date +%s%N) - start) / 1000000 ))
if grep -q '"slept"\|ms' "$work/par.1" && ! grep -q capsule "$work/par.1" "$work/par.2" "$work/par.3" && [ "$ms" -ge 1150 ]; then
  ok "serialized (3 x 400 ms took $ms ms)"; else bad "serialized ($ms ms)"; cat "$work"/par.* | head -5; fi
for i in $(seq 1 6); do
  "$capsule" call --caps "$caps" --state "$state" selu-ok sleep '{"ms": 300}' >"$work/par4.$i" 2>&1 &
done
wait; calls=$((calls + 6))
if ! grep -l "capsule call" "$work"/par4.* >/dev/null 2>&1; then ok "six-at-once"; else bad six-at-once; cat "$work"/par4.* | head; fi

echo "dynamic tools"
t_list=$("$capsule" list --caps "$caps" --state "$state" 2>&1)
if echo "$t_list" | grep -q "tools are discovered through list_tools on the first call"; then ok list-before-discovery; else bad list-before-discovery; fi
c dynamic-call 0 '^\{"text":"HELLO"\}$' selu-dyn dyn_upper '{"text": "hello"}'
c dynamic-validated 1 'missing required property "text"' selu-dyn dyn_upper '{}'
c dynamic-unknown 1 'has no tool "nope" \(it has: dyn_upper\)' selu-dyn nope '{}'
c dynamic-bad-answer 1 "selu-baddyn's list_tools answer: tool no_schema has no input_schema object" selu-baddyn no_schema '{}'
t_list=$("$capsule" list --caps "$caps" --state "$state" 2>&1)
if echo "$t_list" | grep -qE "dyn_upper +allow \(recommended_policy\)"; then ok list-after-discovery; else bad list-after-discovery; echo "$t_list" | grep -A2 selu-dyn; fi

echo "faults"
c crash 1 'went away during the call' selu-ok crash '{}'
c after-crash-restarts 0 '^\{"ok":true\}$' selu-ok ok '{}'
c hang 1 'hang .*no answer within [0-9]+ ms \(the deadline\)' --timeout 2 selu-ok hang '{}'
c after-hang-serves 0 '^\{"ok":true\}$' selu-ok ok '{}'
c garbage 1 'answered success with a result that is not JSON' selu-ok garbage '{}'
c big-100mb 1 'larger than the output cap|more than the output cap' selu-ok big '{"bytes": 104857600}'
c after-big-serves 0 '^\{"ok":true\}$' selu-ok ok '{}'
c never-healthy 1 'did not become healthy within 2000 ms \(its health check \(selu.capability.v1.Capability\) answered not ready\)' selu-unhealthy ok '{}'
c never-listens 1 'did not become healthy within 2000 ms \(nothing listened on port 50051\)' selu-nolisten ok '{}'
c slow-start-waits 0 '^\{"ok":true\}$' selu-slow ok '{}'
if [ "$(id -u)" = 0 ]; then # a cgroup counts the server's CPU (v1 or v2)
  c cpu-within-budget 0 '^\{"spun_ms":200\}$' selu-cpu spin '{"ms": 200}'
  c cpu-over-budget 1 'the server was stopped: cpu budget exceeded: [0-9]+ ms used, 1000 ms per call' selu-cpu spin '{"ms": 5000}'
  c cpu-after-restarts 0 '^\{"spun_ms":100\}$' selu-cpu spin '{"ms": 100}'
fi
c dies-between-calls-1 0 '^\{"ok":true\}$' selu-dies ok '{}'
sleep 0.3
c dies-between-calls-2 0 '^\{"ok":true\}$' selu-dies ok '{}'
c dies-between-calls-3 0 '^\{"ok":true\}$' selu-dies ok '{}'

echo "examples"
if [ -x "$caps/text/capability" ]; then
  c example-c 0 '^\{"words":3,"lines":1,"chars":11\}$' text-tools word_count '{"text": "one two tre"}'
  c example-c-reverse 0 '^\{"text":"cba"\}$' text-tools reverse '{"text": "abc"}'
else
  echo "  skip example-c: build it with make -C examples/selu-text (make build does)"
fi
if [ -d "$caps/node" ]; then
  c example-node-dynamic 0 '^\{"greeting":"Hello, Ada"\}$' node-tools greet '{"name": "Ada"}'
  c example-node-sum 0 '^\{"sum":6.5\}$' node-tools sum '{"numbers": [1, 2, 3.5]}'
else
  echo "  skip example-node: npm ci in examples/selu-node (scripts/deps.sh test does)"
fi

echo "warm instances a user (CAPSULE_SELU_MAX_WARM): a session each"
bound_call() { CAPSULE_SELU_MAX_WARM=2 timeout 60 "$capsule" call --caps "$caps" --state "$state" --session "$1" selu-bound "$2" "$3" 2>&1 </dev/null; }
bound_ps() { "$capsule" ps --state "$state" --json 2>/dev/null | tr -d ' \n' | tr '{' '\n' | grep '"capability":"selu-bound"'; }
bound_call a ok '{}' >/dev/null
first=$(bound_ps | grep -o '"pid":"[0-9]*"' | grep -o '[0-9][0-9]*')
bound_call b ok '{}' >/dev/null
bound_call c ok '{}' >/dev/null # the third session's: the least recently idle gives way
if [ "$(bound_ps | grep -c .)" = 2 ] && [ -n "$first" ] && ! kill -0 "$first" 2>/dev/null; then
  ok bound-evicts-least-recent
else
  bad "bound-evicts-least-recent ($(bound_ps | grep -c .) instances; the first's keeper ${first:-unknown})"
fi
bound_call d sleep '{"ms": 8000}' >/dev/null & # two busy ones: the idle two give way
bound_call e sleep '{"ms": 8000}' >/dev/null &
for _ in $(seq 300); do [ "$(bound_ps | grep -c '"leases":"1/')" = 2 ] && break; sleep 0.1; done
out=$(bound_call f ok '{}')
if [ "$(bound_ps | grep -c '"leases":"1/')" = 2 ] && grep -q 'none is idle' <<<"$out"; then
  ok bound-refuses-when-busy
else
  bad "bound-refuses-when-busy ($out)"
fi
wait
"$capsule" stop --state "$state" selu-bound >/dev/null 2>&1
calls=$((calls + 6))

echo "instance key: the package's contents and grants, not only ./ programs"
# the instance says which version it started with (VERSION, from version.txt)
version() { "$capsule" call --caps "$caps" --state "$state" selu-interp env '{"name": "VERSION"}' 2>&1; }
v1=$(version); v2=$(version)
if [ "$v1" = '{"value":"1"}' ] && [ "$v2" = "$v1" ]; then ok interp-started; else bad "interp-started ($v1 / $v2)"; fi
p1=$("$capsule" call --caps "$caps" --state "$state" selu-interp pid '{}' 2>&1)
p2=$("$capsule" call --caps "$caps" --state "$state" selu-interp pid '{}' 2>&1)
if echo "$p1" | grep -q '"pid"' && [ "$p1" = "$p2" ]; then ok interp-reused; else bad "interp-reused ($p1 / $p2)"; fi
echo 2-edited >"$caps/selu-interp/version.txt" # a file the server reads, not the command
v3=$(version)
if [ "$v3" = '{"value":"2-edited"}' ]; then ok interp-data-edit-restarts; else bad "interp-data-edit-restarts ($v3)"; fi
printf 'export VERSION="edited-$(cat version.txt)"; exec ./server --mode normal\n' >"$caps/selu-interp/start.sh"
v4=$(version)
if [ "$v4" = '{"value":"edited-2-edited"}' ]; then ok interp-script-edit-restarts; else bad "interp-script-edit-restarts ($v4)"; fi
# the keeper watches the tree (inotify): a file added two levels down is a
# new instance at the next call, and the new one is reused after
p3=$("$capsule" call --caps "$caps" --state "$state" selu-interp instance '{}' 2>&1)
echo x >"$caps/selu-interp/lib/deeper/added.js"
p4=$("$capsule" call --caps "$caps" --state "$state" selu-interp instance '{}' 2>&1)
p5=$("$capsule" call --caps "$caps" --state "$state" selu-interp instance '{}' 2>&1)
if echo "$p4" | grep -q '"instance"' && [ "$p3" != "$p4" ] && [ "$p4" = "$p5" ]; then
  ok interp-deep-edit-restarts
else
  bad "interp-deep-edit-restarts ($p3 / $p4 / $p5)"
fi
# an edit with no call in stops the instance's keeper then, not at its idle
# timeout (no call would reach that server again)
kpid=$("$capsule" ps --state "$state" | awk '$1 == "selu-interp" {print $2; exit}')
echo y >"$caps/selu-interp/lib/deeper/added.js"
for _ in $(seq 300); do [ -n "$kpid" ] && kill -0 "$kpid" 2>/dev/null || break; sleep 0.1; done
if [ -n "$kpid" ] && ! kill -0 "$kpid" 2>/dev/null; then ok idle-edit-stops-keeper; else bad "idle-edit-stops-keeper (keeper ${kpid:-not found} still runs 30 s after the edit)"; fi
calls=$((calls + 9))

echo "audit"
# policy and credential changes are records of their own (decision: the kind)
n=$("$capsule" audit --json --state "$state" | grep -c '"decision": "\(allow\|ask-approved\|ask-denied\|approval-pending\|block\|error\|refused\)"')
if [ "$n" = "$calls" ]; then ok "one-record-per-call ($n)"; else bad "one-record-per-call ($n records, $calls calls)"; fi
if "$capsule" audit verify --state "$state" >/dev/null 2>&1; then ok audit-verify; else bad audit-verify; fi
echo "selu tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
