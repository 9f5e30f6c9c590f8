#!/usr/bin/env bash
# The audit log as an operator reads it: a call whose capsule was killed
# mid-call leaves one "interrupted" record on the next start (the chain
# still verifies); --since, --tail and --follow; policy, credential and
# approval changes recorded as records of their own (never a credential's
# value); calls refused for bad arguments or a missing credential recorded
# as refused; `policy set` only for known capabilities and tools, and
# `policy rm`; a failed call shows the end of the tool's stderr; each
# `capsule run` a record (decision run) of its state directory.
# Usage: audit.sh CAPSULE
set -u
source "$(dirname "$0")/../lib/gateway.sh"
command -v jq >/dev/null || { echo "SKIP: jq is not installed"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-audit.XXXXXX)
chmod 755 "$work"
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
[ -n "${KEEP:-}" ] && trap - EXIT
caps=$work/caps
state=$work/state
G=(--caps "$caps" --state "$state")
agent() { # agent ID SCRIPT-BODY: a Covenant agent in sh
  mkdir -p "$caps/agents/$1"
  printf '[agent]\nid = "%s"\nname = "%s"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' "$1" "$1" >"$caps/agents/$1/agent.toml"
  printf '#!/bin/sh\n%s\n' "$2" >"$caps/agents/$1/run.sh"
  chmod 755 "$caps/agents/$1/run.sh"
}
agent slow 'echo started >&2; sleep 600'
agent echo 'IFS= read -r line; printf "{\"got\":%s}\n" "$line"'
# waits (bounded) until COMMAND succeeds
wait_for() { local i; for i in $(seq 300); do "$@" && return 0; sleep 0.1; done; return 1; }
audit_json() { "$capsule" audit --json --state "$state" 2>/dev/null; }

echo "a capsule killed mid-call"
"$capsule" policy set slow dispatch allow "${G[@]}" >/dev/null
"$capsule" call "${G[@]}" slow dispatch '{"text": "x"}' >/dev/null 2>&1 </dev/null &
cpid=$!
pids+=("$cpid")
if wait_for grep -q started "$state/logs/slow.log" 2>/dev/null; then ok slow-call-running
else bad slow-call-running; fi
kill -9 "$cpid"
wait "$cpid" 2>/dev/null
# the sandbox goes with its capsule (PR_SET_PDEATHSIG); until then its
# call is still in flight and not recorded
slow_recorded() { audit_json | jq -e '[.[] | select(.capability == "slow" and .outcome == "interrupted")] | length == 1' >/dev/null; }
if wait_for slow_recorded; then
  ok interrupted-recorded
else bad interrupted-recorded; fi
n=$(audit_json | jq '[.[] | select(.capability == "slow" and .tool == "dispatch" and .outcome == "interrupted" and .decision == "allow" and .user != "")] | length')
[ "$n" = 1 ] && ok interrupted-one-record || bad "interrupted-one-record ($n)"
audit_json >/dev/null
n=$(audit_json | jq '[.[] | select(.outcome == "interrupted")] | length')
[ "$n" = 1 ] && ok interrupted-not-repeated || bad "interrupted-not-repeated ($n)"
# recorded, its file kept empty as a spare for the next marker (or removed)
[ -z "$(ls -A "$state/run/calls" 2>/dev/null)" ] && ok marker-removed ||
  bad marker-removed "$(ls -A "$state/run/calls")"
spares_empty() { for f in "$1"/run/spares/*; do [ ! -s "$f" ] || return 1; done; }
spares_empty "$state" && ok spares-empty || bad spares-empty "$(ls -la "$state/run/spares")"
t interrupted-verifies 0 "^audit log verified: [0-9]+ records" audit verify --state "$state"
t interrupted-text 0 "slow.dispatch allow [0-9]+ms interrupted$" audit --state "$state"
# a marker never named (its capsule killed while making it): removed once
# old and unlocked, without a record; a fresh one is left to its maker
mkdir -p "$state/run/calls"
: >"$state/run/calls/.old" && touch -d '1 hour ago' "$state/run/calls/.old"
: >"$state/run/calls/.fresh"
before=$(audit_json | jq length)
[ ! -e "$state/run/calls/.old" ] && [ -e "$state/run/calls/.fresh" ] && [ "$(audit_json | jq length)" = "$before" ] &&
  ok unnamed-marker-dropped || bad unnamed-marker-dropped
rm -f "$state/run/calls/.fresh"
# the same unprivileged: uid 65534 with a state of its own
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
   setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" 2>/dev/null; then
  nb=(setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$work/nb")
  mkdir -p "$work/nb" && chown 65534:65534 "$work/nb"
  ns=$work/nb/state
  "${nb[@]}" "$capsule" policy set slow dispatch allow --caps "$caps" --state "$ns" >/dev/null
  "${nb[@]}" "$capsule" call --caps "$caps" --state "$ns" slow dispatch '{"text": "x"}' >/dev/null 2>&1 </dev/null &
  npid=$!
  pids+=("$npid")
  wait_for grep -q started "$ns/logs/slow.log" 2>/dev/null
  # setpriv execs capsule: npid is capsule itself
  kill -9 "$npid"; wait "$npid" 2>/dev/null
  nb_recorded() { "${nb[@]}" "$capsule" audit --json --state "$ns" 2>/dev/null | jq -e '[.[] | select(.outcome == "interrupted")] | length == 1' >/dev/null; }
  if wait_for nb_recorded; then ok nobody-interrupted-recorded; else bad nobody-interrupted-recorded; fi
  out=$("${nb[@]}" "$capsule" audit verify --state "$ns" 2>&1) && ok nobody-interrupted-verifies || bad "nobody-interrupted-verifies: $out"
fi

echo "--since, --tail, --follow"
"$capsule" policy set echo dispatch allow "${G[@]}" >/dev/null
for i in 1 2 3; do "$capsule" call "${G[@]}" echo dispatch "{\"n\": $i}" >/dev/null 2>&1; done
total=$(audit_json | jq length)
t tail-2 0 "" audit --json --tail 2 --state "$state"
n=$(jq length <<<"$out"); last=$(jq '.[-1].seq' <<<"$out")
[ "$n" = 2 ] && [ "$last" = "$total" ] && ok tail-last-two || bad "tail-last-two ($n, $last of $total)"
t tail-text 0 "" audit --tail 1 --state "$state"
[ "$(wc -l <<<"$out")" = 1 ] && grep -q "^$total " <<<"$out" && ok tail-text-one-line || bad tail-text-one-line
t since-future 0 '^\[\]$' audit --json --since 2999-01-01T00:00:00Z --state "$state"
t since-past 0 "" audit --json --since 2000-01-01 --state "$state"
[ "$(jq length <<<"$out")" = "$total" ] && ok since-past-all || bad since-past-all
t since-relative 0 "" audit --json --since 1h --state "$state"
[ "$(jq length <<<"$out")" = "$total" ] && ok since-relative-all || bad since-relative-all
# an offset: the same instant as the future Z time above, one hour ahead
t since-offset 0 '^\[\]$' audit --json --since 2999-01-01T01:00:00.5+01:00 --state "$state"
t since-bad 2 "--since takes a time in RFC 3339" audit --since yesterday --state "$state"
t tail-bad 2 "--tail takes a number" audit --tail -3 --state "$state"
"$capsule" audit --json --follow --state "$state" >"$work/follow" 2>&1 &
fpid=$!
pids+=("$fpid")
# calls until --follow shows one (a call made before it read the log's end
# is not new to it): the first record it shows is a new one
for i in $(seq 20); do
  "$capsule" call "${G[@]}" echo dispatch "{\"n\": \"new$i\"}" >/dev/null 2>&1
  wait_for grep -q . "$work/follow" && break
done
kill "$fpid" 2>/dev/null; wait "$fpid" 2>/dev/null
first=$(head -1 "$work/follow" | jq .seq)
if [ -n "$first" ] && [ "$first" -gt "$total" ]; then ok follow-from-end
else bad "follow-from-end (first $first of $total)"; head -3 "$work/follow"; fi
total=$(audit_json | jq length)
"$capsule" audit --json --follow --tail 1 --state "$state" >"$work/follow2" 2>&1 &
fpid=$!
pids+=("$fpid")
wait_for grep -q . "$work/follow2"
kill "$fpid" 2>/dev/null; wait "$fpid" 2>/dev/null
[ "$(jq -s 'map(.seq)' -c "$work/follow2")" = "[$total]" ] && ok follow-tail || bad follow-tail

echo "changes are records of their own"
last_record() { audit_json | jq -c '.[-1]'; }
"$capsule" policy set echo dispatch block --user mallory "${G[@]}" >/dev/null 2>&1
r=$(last_record)
if jq -e --arg me "$(id -un)" '.decision == "policy-set" and .capability == "echo" and .tool == "dispatch" and .user == $me and (.outcome | test("block for user mallory"))' <<<"$r" >/dev/null; then
  ok policy-set-audited; else bad "policy-set-audited: $r"; fi
secret=s3cr3t-VALUE-42
printf '%s' "$secret" | "$capsule" cred set echo API_KEY --scope system "${G[@]}" >/dev/null 2>&1
r=$(last_record)
jq -e '.decision == "cred-set" and .capability == "echo" and .tool == "API_KEY" and (.outcome | test("system credential"))' <<<"$r" >/dev/null &&
  ok cred-set-audited || bad "cred-set-audited: $r"
"$capsule" cred rm echo API_KEY --scope system "${G[@]}" </dev/null >/dev/null 2>&1
r=$(last_record)
jq -e '.decision == "cred-rm" and .tool == "API_KEY"' <<<"$r" >/dev/null && ok cred-rm-audited || bad "cred-rm-audited: $r"
! audit_json | grep -q "$secret" && ! "$capsule" audit --state "$state" | grep -q "$secret" &&
  ok cred-value-never-audited || bad cred-value-never-audited
"$capsule" policy set echo dispatch ask "${G[@]}" >/dev/null 2>&1
"$capsule" call "${G[@]}" --user bob echo dispatch '{"n": "ask"}' </dev/null >"$work/ask" 2>&1
id=$(grep -oE 'approval [0-9a-f]{8} is pending' "$work/ask" | head -1 | cut -d' ' -f2)
"$capsule" approve "$id" --state "$state" >/dev/null 2>&1
r=$(last_record)
jq -e --arg id "$id" '.decision == "approve" and .capability == "echo" and .tool == "dispatch" and (.outcome | test("approval " + $id + " for user bob"))' <<<"$r" >/dev/null &&
  ok approve-audited || bad "approve-audited: $r"
"$capsule" call "${G[@]}" --user bob echo dispatch '{"n": "ask2"}' </dev/null >"$work/ask" 2>&1
id=$(grep -oE 'approval [0-9a-f]{8} is pending' "$work/ask" | head -1 | cut -d' ' -f2)
"$capsule" deny "$id" --state "$state" >/dev/null 2>&1
r=$(last_record)
jq -e '.decision == "deny"' <<<"$r" >/dev/null && ok deny-audited || bad "deny-audited: $r"
t changes-verify 0 "^audit log verified" audit verify --state "$state"

echo "refused calls"
mkdir -p "$caps/strict"
cat >"$caps/strict/manifest.yaml" <<'YAML'
id: strict
class: tool
image: example/strict:1.0
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
printf 'syntax = "proto3";\n' >"$caps/strict/capability.proto"
"$capsule" call "${G[@]}" strict lookup '{"q": 5}' >/dev/null 2>&1
r=$(last_record)
jq -e '.capability == "strict" and .decision == "refused" and .outcome == "invalid arguments"' <<<"$r" >/dev/null &&
  ok invalid-arguments-refused || bad "invalid-arguments-refused: $r"
"$capsule" call "${G[@]}" strict lookup '{"q": "x"}' >/dev/null 2>&1
r=$(last_record)
jq -e '.capability == "strict" and .decision == "refused" and .outcome == "missing credential"' <<<"$r" >/dev/null &&
  ok missing-credential-refused || bad "missing-credential-refused: $r"

echo "policy set names what the registry holds; policy rm; confirmations"
t policy-set-confirms 0 '^policy set: echo.dispatch allow \(operator default\)$' policy set echo dispatch allow "${G[@]}"
t policy-set-user-confirms 0 '^policy set: echo.dispatch block for user mallory$' policy set echo dispatch block --user mallory "${G[@]}"
t policy-unknown-capability 1 'no capability "ehco" in .*\(it has: echo, slow, strict\)' policy set ehco dispatch allow "${G[@]}"
t policy-unknown-tool 1 'capability echo has no tool "dispach" \(it has: dispatch\)' policy set echo dispach allow "${G[@]}"
t policy-strict-tool 0 '^policy set: strict.lookup ask' policy set strict lookup ask "${G[@]}"
t policy-caps-unreadable 1 "cannot read the capabilities directory $work/nocaps: No such file or directory; .*--force" policy set echo dispatch allow --caps "$work/nocaps" --state "$state"
t policy-caps-unreadable-force 0 '^policy set: later.tool allow' policy set later tool allow --force --caps "$work/nocaps" --state "$state"
t policy-unknown-not-stored 0 "" policy list --json --state "$state"
[ "$(jq '[.[] | select(.capability == "ehco" or .tool == "dispach")] | length' <<<"$out")" = 0 ] &&
  ok policy-unknown-not-stored-none || bad policy-unknown-not-stored-none
t policy-rm-user 0 "^policy removed: echo.dispatch user mallory's override" policy rm echo dispatch --user mallory --state "$state"
t policy-rm-user-gone 0 "" policy list --json --state "$state"
[ "$(jq '[.[] | select(.user == "mallory")] | length' <<<"$out")" = 0 ] && ok policy-rm-user-removed || bad policy-rm-user-removed
t policy-rm-default 0 "^policy removed: later.tool operator default" policy rm later tool --state "$state"
t policy-rm-missing 1 "no operator default for later.tool" policy rm later tool --state "$state"
t policy-rm-usage 2 "policy rm CAPABILITY TOOL" policy rm echo --state "$state"
r=$(last_record)
jq -e '.decision == "policy-rm" and .capability == "later" and .tool == "tool"' <<<"$r" >/dev/null && ok policy-rm-audited || bad "policy-rm-audited: $r"
out=$(printf 'v' | "$capsule" cred set echo API_KEY --scope user --user bob "${G[@]}" 2>&1)
[ "$out" = "credential set: API_KEY (user credential for user bob, of capability echo)" ] && ok cred-set-confirms || bad "cred-set-confirms: $out"
t cred-rm-confirms 0 '^credential removed: API_KEY \(user credential for user bob, of capability echo\)$' cred rm echo API_KEY --scope user --user bob "${G[@]}"

echo "a failed call shows the end of the tool's stderr"
agent noisy 'for i in $(seq 15); do echo "noise $i" >&2; done; printf "evil \033[31m red\n" >&2; exit 3'
agent quiet 'echo "only line" >&2; exit 2'
"$capsule" policy set noisy dispatch allow "${G[@]}" >/dev/null
"$capsule" policy set quiet dispatch allow "${G[@]}" >/dev/null
t failed-shows-stderr 1 "^    evil \\\\x1b\[31m red$" call "${G[@]}" noisy dispatch '{"text": "x"}'
esc=$(printf '\033')
if ! grep -q "$esc" <<<"$out"; then ok failed-stderr-escaped; else bad failed-stderr-escaped; fi
[ "$(grep -c '^    noise' <<<"$out")" = 9 ] && ! grep -q '^    noise 6$' <<<"$out" && grep -q '^    noise 7$' <<<"$out" &&
  grep -q "the tool's stderr in this call (its last 10 lines):" <<<"$out" && ok failed-last-ten-lines ||
  { bad failed-last-ten-lines; echo "$out" | head -14 | sed 's/^/         /'; }
t quiet-first-call 1 "" call "${G[@]}" quiet dispatch '{"text": "x"}'
"$capsule" call "${G[@]}" quiet dispatch '{"text": "x"}' >/dev/null 2>&1
t failed-only-this-call 1 "the tool's stderr in this call:" call "${G[@]}" quiet dispatch '{"text": "x"}'
[ "$(grep -c '^    ' <<<"$out")" = 1 ] && grep -q '^    only line$' <<<"$out" && ok failed-stderr-this-call-only ||
  { bad failed-stderr-this-call-only; echo "$out" | sed 's/^/         /'; }
t refused-no-stderr 1 "" call "${G[@]}" quiet dispatch '{"nottext": 1}'
! grep -q "the tool's stderr" <<<"$out" && ok refused-shows-no-stderr || bad refused-shows-no-stderr

echo "capsule run sessions"
rstate=$work/runstate
(cd "$work" && "$capsule" run --state "$rstate" -- /bin/sh -c 'exit 3' >/dev/null 2>&1)
(cd "$work" && "$capsule" run --state "$rstate" --memory 16M -- /bin/sh -c 'x=a; while :; do x="$x$x"; done' >/dev/null 2>&1)
printf '{"version": "0.1.0", "name": "demo-run"}\n' >"$work/run-manifest.json"
(cd "$work" && "$capsule" run --state "$rstate" --config "$work/run-manifest.json" -- /bin/true >/dev/null 2>&1)
runs=$("$capsule" audit --json --state "$rstate" 2>/dev/null)
jq -e 'length == 3 and ([.[] | .decision] | unique) == ["run"]' <<<"$runs" >/dev/null &&
  ok run-sessions-recorded || { bad run-sessions-recorded; echo "$runs" | head -5; }
jq -e '.[0].tool == "sh" and .[0].capability == "run" and .[0].outcome == "exit 3" and
  .[0].user != "" and (.[0].args_sha256 | length) == 64' <<<"$runs" >/dev/null &&
  ok run-record-fields || bad run-record-fields "$(jq -c '.[0]' <<<"$runs")"
jq -e '.[1].outcome | startswith("killed: memory")' <<<"$runs" >/dev/null &&
  ok run-killed-recorded || bad run-killed-recorded "$(jq -c '.[1]' <<<"$runs")"
jq -e '.[2].tool == "true" and .[2].outcome == "exit 0"' <<<"$runs" >/dev/null &&
  ok run-manifest-recorded || bad run-manifest-recorded "$(jq -c '.[2]' <<<"$runs")"
[ -z "$(ls "$rstate/run/calls" 2>/dev/null)" ] && "$capsule" audit verify --state "$rstate" >/dev/null 2>&1 &&
  ok run-markers-recorded-and-chain-verifies || bad run-markers-recorded-and-chain-verifies
# the recorded markers' files became spares; with every slot filled, the
# next runs take them (no new file), and a spare is never recorded: one
# record per run, each once
[ -n "$(ls -A "$rstate/run/spares" 2>/dev/null)" ] && spares_empty "$rstate" &&
  ok run-markers-kept-as-spares || bad run-markers-kept-as-spares "$(ls -lia "$rstate/run/spares")"
for i in $(seq 0 63); do [ -e "$rstate/run/spares/$i" ] || : >"$rstate/run/spares/$i"; done
spare_inodes=$(stat -c %i "$rstate"/run/spares/* 2>/dev/null | sort)
for i in 1 2 3 4 5; do (cd "$work" && "$capsule" run --state "$rstate" -- /bin/true >/dev/null 2>&1); done
marker_inodes=$(stat -c %i "$rstate"/run/calls/* 2>/dev/null | sort)
[ -n "$marker_inodes" ] && [ -n "$(comm -12 <(echo "$spare_inodes") <(echo "$marker_inodes"))" ] &&
  ok run-marker-took-a-spare || bad run-marker-took-a-spare "spares $spare_inodes; markers $marker_inodes"
runs=$("$capsule" audit --json --state "$rstate" 2>/dev/null)
jq -e 'length == 8 and ([.[3:][] | select(.tool == "true" and .outcome == "exit 0")] | length) == 5' \
  <<<"$runs" >/dev/null && "$capsule" audit verify --state "$rstate" >/dev/null 2>&1 &&
  ok spare-runs-recorded-once || bad spare-runs-recorded-once "$(jq -c '.[] | [.tool, .outcome]' <<<"$runs")"
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
  nstate=$work/nobody-state
  mkdir -p "$nstate" && chown 65534:65534 "$nstate" && chmod 700 "$nstate"
  (cd /tmp && setpriv --reuid=65534 --regid=65534 --clear-groups env CAPSULE_STATE_KEY= \
    HOME=/nonexistent "$capsule" run --state "$nstate" -- /bin/true >/dev/null 2>&1)
  nruns=$(cd /tmp && setpriv --reuid=65534 --regid=65534 --clear-groups env CAPSULE_STATE_KEY= \
    HOME=/nonexistent "$capsule" audit --json --state "$nstate" 2>&1)
  jq -e 'length == 1 and .[0].decision == "run" and .[0].user == "nobody"' <<<"$nruns" >/dev/null &&
    ok run-recorded-as-nobody || bad run-recorded-as-nobody "$nruns"
fi

finish audit
