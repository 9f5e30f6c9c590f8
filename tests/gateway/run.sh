#!/usr/bin/env bash
# The gateway end to end: registry and `capsule list`, `capsule call` through
# policy (block by default, allow, ask with pending approvals, per-user
# overrides), argument validation, credentials (sealed, never on argv),
# the Covenant runtime, the audit chain (one record per call; edits, drops,
# reordering and truncation found by `audit verify`), and faults: a tool
# that crashes, hangs, writes garbage or 100 MB, a read-only or full state
# directory, many capsule processes on one state directory at once.
# Usage: run.sh CAPSULE
set -u
capsule=$(realpath "$1")
if ! "$capsule" run -- /bin/true 2>/dev/null; then
  echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77
fi
command -v sqlite3 >/dev/null || { echo "SKIP: sqlite3 is not installed (scripts/deps.sh test installs it)"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d /var/tmp/capsule-gateway.XXXXXX)
chmod 755 "$work"
mounts=()
trap 'for m in "${mounts[@]}"; do umount "$m" 2>/dev/null; done; rm -rf "$work"' EXIT
[ -n "${KEEP:-}" ] && trap - EXIT
caps=$work/caps
state=$work/state
export CAPSULE_STATE_KEY= # the key file in the state directory

agent() { # agent ID SCRIPT-BODY: a Covenant agent in sh
  mkdir -p "$caps/agents/$1"
  printf '[agent]\nid = "%s"\nname = "%s"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' "$1" "$1" >"$caps/agents/$1/agent.toml"
  printf '#!/bin/sh\n%s\n' "$2" >"$caps/agents/$1/run.sh"
  chmod 755 "$caps/agents/$1/run.sh"
}
cp -r "$root/examples/covenant/agents/wordcount" "$work/wc" && mkdir -p "$caps/agents" && mv "$work/wc" "$caps/agents/wordcount"
agent echo 'IFS= read -r line; printf "{\"got\":%s}\n" "$line"'
agent crash 'echo "about to fail" >&2; exit 3'
agent hang 'sleep 600'
agent garbage 'echo "this is not json"'
agent twolines 'echo "{}"; echo "{}"'
agent big 'head -c 104857600 /dev/zero | tr "\0" a'
mkdir -p "$caps/needs-key"
cat >"$caps/needs-key/manifest.yaml" <<'YAML'
id: needs-key
class: tool
image: example/needs-key:1.0
tool_source: manifest
tools:
  - name: lookup
    description: Looks something up.
    recommended_policy: allow
    input_schema:
      type: object
      properties: {q: {type: string}}
      required: [q]
credentials:
  - name: API_TOKEN
    scope: system
    description: The service's token.
YAML
mkdir -p "$caps/talk"
cat >"$caps/talk/manifest.json" <<'JSON'
{"id": "talk", "name": "Talk", "description": "Talos test tool.", "version": "1.0.0", "logName": "talk",
 "credentials": [{"name": "token", "label": "Token", "description": "a test token", "required": true}],
 "settings": [{"name": "greeting", "label": "Greeting", "type": "string", "default": "hello", "description": "d"}],
 "functions": [
  {"name": "hello", "description": "Greets.", "parameters": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}},
  {"name": "boom", "description": "Throws.", "parameters": {"type": "object"}},
  {"name": "env", "description": "Shows its environment.", "parameters": {"type": "object"}}]}
JSON
cat >"$caps/talk/index.js" <<'JS'
export async function hello({ who }, config) {
  return { text: `${config.greeting}, ${who}`, token_length: config.token.length };
}
export async function boom() { throw new Error('kaput'); }
export async function env() { return { env: Object.keys(process.env).sort() }; }
JS
cat >"$caps/needs-key/capability.proto" <<'PROTO'
syntax = "proto3";
PROTO

pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; }
# t NAME WANT-STATUS REGEX ARGS...: capsule ARGS (stdin from /dev/null)
t() {
  local name=$1 want=$2 regex=$3; shift 3
  local status
  out=$("$capsule" "$@" 2>&1 </dev/null) # left in $out for the caller
  status=$?
  if [ "$status" = "$want" ] && echo "$out" | grep -qE -- "$regex"; then ok "$name"
  else bad "$name (exit $status, want $want)"; echo "$out" | head -5 | sed 's/^/         /'; fi
}
G=(--caps "$caps" --state "$state")
calls=0 # every `capsule call` below adds exactly one audit record
c() { calls=$((calls + 1)); t "$@"; }

echo "registry and list"
t list-ready 0 "^wordcount  \(covenant, stdio-jsonl\)  ready" list "${G[@]}"
t list-policy-default 0 "dispatch +block \(default\)" list "${G[@]}"
t list-selu-image 0 "needs-key .*not ready: .*the image docker.io/example/needs-key:1.0 is not in capsule.s image store" list "${G[@]}"
t list-talos-credential 0 "talk  \(talos, talos-node\)  not ready: credential token is not set" list "${G[@]}"
t list-json 0 '"readiness": "ready"' list "${G[@]}" --json
mkdir -p "$work/dup/a" "$work/dup/b"
cp "$caps/agents/echo/agent.toml" "$work/dup/a/" && cp "$caps/agents/echo/agent.toml" "$work/dup/b/"
t duplicate-ids 1 'capability id "echo" is also used by .*/dup/a/agent.toml' list --caps "$work/dup" --state "$state"

echo "policy"
c blocked-by-default 4 "blocked by policy \(default\); allow it with .capsule policy set wordcount dispatch allow." call "${G[@]}" wordcount dispatch '{"text": "a b"}'
t policy-set 0 "" policy set wordcount dispatch allow --caps "$caps" --state "$state"
# the agent requires tool.wordcount (Covenant's capabilities.required): the
# caller (the local issuer) holds a token for it, or the call is refused
c no-token-refused 4 "the issuer [^ ]+@local \([1-9A-HJ-NP-Za-km-z]+\) does not hold the capability tool.wordcount that agent wordcount requires: no token grants it .*; grant it with .capsule token issue local tool.wordcount. on the same state" call "${G[@]}" wordcount dispatch '{"text": "one two three"}'
t token-issue 0 '"action":"tool.wordcount"' token issue local tool.wordcount --state "$state"
c allowed 0 '^\{"text":"3 words","sources":\[\]\}$' call "${G[@]}" wordcount dispatch '{"text": "one two three"}'
t user-override 0 "" policy set wordcount dispatch block --user mallory --caps "$caps" --state "$state"
c user-override-wins 4 "blocked by policy \(user\)" call "${G[@]}" --user mallory wordcount dispatch '{"text": "x"}'
c operator-default-for-others 0 '"1 words"' call "${G[@]}" --user alice wordcount dispatch '{"text": "x"}'
t policy-list 0 "wordcount +dispatch +block +mallory" policy list --state "$state"
t policy-bad 2 "allow, ask or block" policy set wordcount dispatch maybe --caps "$caps" --state "$state"

echo "ask and approvals (no terminal here)"
t set-ask 0 "" policy set echo dispatch ask --caps "$caps" --state "$state"
c ask-pending 4 "approval required: .*approval [0-9a-f]{8} is pending: .capsule approvals. shows it, .capsule approve [0-9a-f]{8}." call "${G[@]}" echo dispatch '{"text": "hi"}'
a1=$(grep -oE 'approval [0-9a-f]{8} is pending' <<<"$out" | cut -d' ' -f2)
c ask-still-pending 4 "approval $a1 is pending" call "${G[@]}" echo dispatch '{"text": "hi"}'
t approve 0 "approved $a1: echo.dispatch for user" approve "$a1" --state "$state"
c ask-approved-runs 0 '^\{"got":\{"id":"[0-9a-f-]{36}","text":"hi","issuer":\{"display":"root@local|[a-z]+@local' call "${G[@]}" echo dispatch '{"text": "hi"}'
c ask-approval-used-once 4 "approval [0-9a-f]{8} is pending" call "${G[@]}" echo dispatch '{"text": "hi"}'
a2=$(grep -oE 'approval [0-9a-f]{8} is pending' <<<"$out" | cut -d' ' -f2)
if [ -n "$a2" ] && [ "$a2" != "$a1" ]; then ok approval-new-id; else bad "approval-new-id ($a1 $a2)"; fi
t deny 0 "denied $a2: echo.dispatch" deny "$a2" --state "$state"
c ask-denied 4 "approval $a2 for this call was denied" call "${G[@]}" echo dispatch '{"text": "hi"}'
c ask-other-args 4 "approval [0-9a-f]{8} is pending" call "${G[@]}" echo dispatch '{"text": "other"}'
t approve-unknown 1 "no approval 0badc0de" approve 0badc0de --state "$state"
t approve-not-an-id 2 "8 hex digits" approve 1 --state "$state"

echo "arguments"
for id in echo crash hang garbage twolines big; do "$capsule" policy set "$id" dispatch allow --caps "$caps" --state "$state"; done
c args-invalid 1 'args: /: missing required property "text" \(keyword /required\)' call "${G[@]}" echo dispatch '{"txt": 1}'
c args-not-json 1 "the arguments are not JSON" call "${G[@]}" echo dispatch '{"text": '
out=$(echo '{"text": "piped"}' | "$capsule" call "${G[@]}" echo dispatch - 2>&1); calls=$((calls + 1))
if echo "$out" | grep -q '"text":"piped"'; then ok args-from-pipe; else bad args-from-pipe; echo "$out" | head -3; fi
c unknown-capability 1 'no capability "nope" in .* \(it has: .*wordcount\)' call "${G[@]}" nope dispatch '{}'
c unknown-tool 1 'capability echo has no tool "nope" \(it has: dispatch\)' call "${G[@]}" echo nope '{}'

echo "credentials"
c credential-missing 1 "credential API_TOKEN is not set; set it with .capsule cred set needs-key API_TOKEN --scope system." call "${G[@]}" needs-key lookup '{"q": "x"}'
out=$(printf 'tok-%s\n' "$$" | "$capsule" cred set needs-key API_TOKEN --scope system --state "$state" 2>&1); st=$?
if [ $st = 0 ]; then ok cred-set-from-stdin; else bad "cred-set-from-stdin ($out)"; fi
t cred-list 0 "^needs-key +API_TOKEN +system" cred list --state "$state"
if ! sqlite3 "$state/state.db" "SELECT hex(sealed) FROM credentials" | grep -qi "$(printf 'tok-%s' "$$" | od -An -tx1 | tr -d ' \n')" &&
   ! grep -qa "tok-$$" "$state/state.db"; then ok cred-sealed-at-rest; else bad cred-sealed-at-rest; fi
c credential-found-image-not-stored 3 "the image docker.io/example/needs-key:1.0 is not in capsule's image store .*capsule image pull example/needs-key:1.0" call "${G[@]}" needs-key lookup '{"q": "x"}'
t cred-argv-refused 2 "" cred set needs-key API_TOKEN secret-on-argv --scope system --state "$state"
t cred-rm 0 "" cred rm needs-key API_TOKEN --scope system --state "$state"
t cred-rm-again 1 "no system credential API_TOKEN for capability needs-key" cred rm needs-key API_TOKEN --scope system --state "$state"

echo "Talos functions (a Node shim)"
if command -v node >/dev/null; then
  for f in hello boom env; do "$capsule" policy set talk "$f" allow --caps "$caps" --state "$state"; done
  c talos-missing-credential 1 "credential token is not set for user u1; set it with .capsule cred set talk token --scope user --user u1." call "${G[@]}" --user u1 talk hello '{"who": "Ada"}'
  printf 's3cret\n' | "$capsule" cred set talk token --scope user --user u1 --state "$state"
  c talos-call 0 '^\{"text":"hello, Ada","token_length":6\}$' call "${G[@]}" --user u1 talk hello '{"who": "Ada"}'
  c talos-throws 1 "the tool failed: plugin talk, function boom: kaput" call "${G[@]}" --user u1 talk boom '{}'
  out=$("$capsule" call "${G[@]}" --user u1 talk env '{}' 2>&1); calls=$((calls + 1))
  if echo "$out" | grep -q '"env":\[' && ! echo "$out" | grep -qi 'token'; then ok talos-credential-not-in-env
  else bad talos-credential-not-in-env; echo "$out" | head -3; fi
else
  echo "  note: node is not installed; the Talos cases are skipped"
fi

echo "faults"
c tool-crashes 1 "the agent failed with exit status 3; its stderr is in .*/logs/crash.log" call "${G[@]}" crash dispatch '{"text": "x"}'
if grep -q "about to fail" "$state/logs/crash.log"; then ok tool-stderr-logged; else bad tool-stderr-logged; fi
c tool-hangs 1 "the agent was stopped: wall clock exceeded" call "${G[@]}" --timeout 2 hang dispatch '{"text": "x"}'
c tool-garbage 1 "not one JSON object on one line .*a runtime failure" call "${G[@]}" garbage dispatch '{"text": "x"}'
c tool-two-lines 1 "not one JSON object on one line" call "${G[@]}" twolines dispatch '{"text": "x"}'
c tool-100mb 1 "the agent (failed|wrote more than|was stopped)" call "${G[@]}" big dispatch '{"text": "x"}'

echo "concurrency: 8 capsule processes at once on one state directory"
pids=()
for i in $(seq 8); do
  "$capsule" call "${G[@]}" --user "u$i" wordcount dispatch "{\"text\": \"p $i\"}" >"$work/par.$i" 2>&1 & pids+=($!)
done
okp=0
for p in "${pids[@]}"; do wait "$p" && okp=$((okp + 1)); done
calls=$((calls + 8))
if [ "$okp" = 8 ]; then ok parallel-calls; else bad "parallel-calls ($okp of 8)"; cat "$work"/par.* | head -5; fi

echo "audit"
# policy and credential changes are records of their own (decision: the kind)
records=$(sqlite3 "$state/state.db" "SELECT count(*) FROM audit WHERE decision NOT IN ('policy-set', 'policy-rm', 'cred-set', 'cred-rm', 'approve', 'deny', 'token-issue', 'capability-check')")
total=$(sqlite3 "$state/state.db" "SELECT count(*) FROM audit")
if [ "$records" = "$calls" ]; then ok "one-record-per-call ($records)"; else bad "one-record-per-call ($records records, $calls calls)"; fi
t audit-verify 0 "audit log verified: $total records" audit verify --state "$state"
t audit-list 0 "wordcount.dispatch allow" audit --state "$state"
t audit-json 0 '"decision": "approval-pending"' audit --json --state "$state"
cp -r "$state" "$work/s1"; sqlite3 "$work/s1/state.db" "UPDATE audit SET outcome = 'edited' WHERE seq = 3"
t audit-edited 1 "audit record 3 was edited" audit verify --state "$work/s1"
cp -r "$state" "$work/s2"; sqlite3 "$work/s2/state.db" "DELETE FROM audit WHERE seq = 4"
t audit-dropped 1 "audit record 5 follows 3" audit verify --state "$work/s2"
cp -r "$state" "$work/s3"; sqlite3 "$work/s3/state.db" "UPDATE audit SET seq = -seq WHERE seq IN (5, 6); UPDATE audit SET seq = 6 WHERE seq = -5; UPDATE audit SET seq = 5 WHERE seq = -6"
t audit-reordered 1 "audit record 5 does not follow" audit verify --state "$work/s3"
cp -r "$state" "$work/s4"; sqlite3 "$work/s4/state.db" "DELETE FROM audit WHERE seq = (SELECT max(seq) FROM audit)"
t audit-truncated 1 "gap: the audit log holds $((total - 1)) records but capsule wrote $total" audit verify --state "$work/s4"
cp -r "$state" "$work/s5"; rm "$work/s5/key"; head -c 32 /dev/urandom >"$work/s5/key"; chmod 600 "$work/s5/key"
t audit-other-key 1 "audit record 1 was edited" audit verify --state "$work/s5"

echo "state directory faults"
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$work/ro" "$work/full"
  mount -t tmpfs -o ro,size=1m tmpfs "$work/ro" && mounts+=("$work/ro")
  t state-read-only 1 "cannot create the state directory|cannot create .*/key|Read-only" call --caps "$caps" --state "$work/ro/state" wordcount dispatch '{"text": "x"}'
  mount -t tmpfs -o size=320k tmpfs "$work/full" && mounts+=("$work/full")
  "$capsule" policy set echo dispatch allow --caps "$caps" --state "$work/full/s" >/dev/null
  head -c 10M /dev/zero >"$work/full/filler" 2>/dev/null
  out=$("$capsule" call --caps "$caps" --state "$work/full/s" echo dispatch "{\"text\": \"$(head -c 60000 /dev/zero | tr '\0' x)\"}" 2>&1); st=$?
  if [ $st = 1 ] && echo "$out" | grep -qE "disk is full|withheld|cannot"; then ok state-disk-full
  else bad "state-disk-full (exit $st)"; echo "$out" | head -3 | sed 's/^/         /'; fi
  rm -f "$work/full/filler"
  t state-full-then-verifies 0 "audit log verified" audit verify --state "$work/full/s"
else
  echo "  note: the read-only and full state directory cases need root (tmpfs mounts)"
fi
echo "gateway tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
