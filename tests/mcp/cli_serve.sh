#!/usr/bin/env bash
# `capsule call` with and without a running `capsule serve` on the same
# state (docs/serve.md, "The CLI and a running serve"): alone, then
# through serve's unix socket (a session serve logs as the caller's user,
# known by SO_PEERCRED), with the same output and exit codes (a result,
# blocked: 4, an unknown capability: 1, policy ask without a terminal: a
# pending approval, 4, then the approved call), the terminal's answer to
# ask through serve's elicitation (`script` gives the call a terminal),
# `list` through serve printing what it prints alone (text and --json),
# CAPSULE_SERVE=off and another --caps running alone, and alone again
# once serve has stopped; the audit names the caller. As root and as uid
# 65534.
# Usage: cli_serve.sh CAPSULE
set -u
# shellcheck source=../lib/serve.sh
. "$(dirname "$0")/../lib/serve.sh" "$1" cliserve
expect() { # NAME WANT_RC GOT_RC [GREP_PATTERN FILE]
  if [ "$2" = "$3" ] && { [ $# -lt 5 ] || grep -q -- "$4" "$5"; }; then ok "$1"; else
    bad "$1 (exit $3, wanted $2)"; [ $# -ge 5 ] && cat "$5"; fi
}
caps=$work/caps
mkdir -p "$caps/agents" "$work/other"
cp -r "$root/examples/covenant/agents/wordcount" "$caps/agents/wordcount"
chmod -R a+rX "$caps" "$work/other"

run_as() {
  local who=$1 state=$work/state-$1 wrap=() name
  mkdir -p "$state" && chmod 700 "$state"
  if [ "$who" = nobody ]; then chown 65534:65534 "$state"; wrap=(setpriv --reuid=65534 --regid=65534 --clear-groups --); fi
  name=$("${wrap[@]}" id -un)
  echo "as $who:"
  C() { "${wrap[@]}" "$capsule" "$@"; }
  call() { C call --caps "$caps" --state "$state" "$@" </dev/null >"$work/out" 2>"$work/err"; }
  C policy set --caps "$caps" --state "$state" wordcount dispatch allow >/dev/null
  call wordcount dispatch '{"text":"one two"}'
  expect "$who: no-token-refused" 4 $? 'capsule token issue local tool.wordcount' "$work/err"
  C token issue local tool.wordcount --state "$state" >/dev/null # wordcount requires it (Covenant)
  call wordcount dispatch '{"text":"one two"}'
  expect "$who: alone" 0 $? '"2 words"' "$work/out"
  local server
  serve_start --caps "$caps" --state "$state" && ok "$who: serve-starts" || { bad "$who: serve-starts"; return; }
  sessions() { grep -c '"session started"' "$work/serve-$who.log"; }
  call wordcount dispatch '{"text":"one two three"}'
  expect "$who: through-serve" 0 $? '"3 words"' "$work/out"
  [ "$(sessions)" = 1 ] && grep -q "\"session started\".*\"user\":\"$name\"" "$work/serve-$who.log" &&
    ok "$who: serve-session-is-the-callers" || bad "$who: serve-session-is-the-callers"
  call --json wordcount dispatch '{"text":"a"}'
  expect "$who: through-serve-json" 0 $? '"terminal_on_success":' "$work/out"
  call wordcount dispatch '{"text": 5}'
  expect "$who: through-serve-invalid-arguments" 1 $? "do not match" "$work/err"
  call nosuch dispatch '{}'
  expect "$who: through-serve-unknown-capability" 1 $? 'no capability "nosuch"' "$work/err"
  C policy set --caps "$caps" --state "$state" wordcount dispatch block >/dev/null
  call wordcount dispatch '{"text":"a"}'
  expect "$who: through-serve-blocked" 4 $? "blocked by policy" "$work/err"
  C policy set --caps "$caps" --state "$state" wordcount dispatch ask >/dev/null
  setsid "${wrap[@]}" "$capsule" call --caps "$caps" --state "$state" wordcount dispatch '{"text":"p q"}' </dev/null >"$work/out" 2>"$work/err"
  expect "$who: through-serve-ask-pending" 4 $? "approval .* is pending" "$work/err"
  local id
  id=$(C approvals --state "$state" --json | sed -n 's/.*"id": *"\([0-9a-f]*\)".*/\1/p' | head -1)
  # approve through serve (its state connection; the session the caller's), as alone
  local before_approve
  before_approve=$(sessions)
  C approve --state "$state" "$id" >"$work/out" 2>"$work/err"
  expect "$who: approve-through-serve" 0 $? "^approved $id: wordcount.dispatch for user $name, asked by " "$work/out"
  [ "$(sessions)" = $((before_approve + 1)) ] && ok "$who: approve-went-through-serve" ||
    bad "$who: approve-went-through-serve ($(sessions) sessions, $before_approve before)"
  grep -q '^  arguments: {"text":"p q"}$' "$work/out" && grep -q '^repeat the call to run it (once)$' "$work/out" &&
    ok "$who: approve-through-serve-output" || { bad "$who: approve-through-serve-output"; cat "$work/out"; }
  C approve --state "$state" "$id" >"$work/out" 2>"$work/err"
  expect "$who: approve-through-serve-not-pending" 1 $? "approval $id is approved, not pending; nothing changed" "$work/err"
  C deny --state "$state" 0badf00d >"$work/out" 2>"$work/err"
  expect "$who: deny-through-serve-unknown" 1 $? "no approval 0badf00d; " "$work/err"
  C audit --state "$state" --json | grep -q "\"approval $id for user $name\"" &&
    ok "$who: approve-through-serve-audited" || bad "$who: approve-through-serve-audited"
  setsid "${wrap[@]}" "$capsule" call --caps "$caps" --state "$state" wordcount dispatch '{"text":"p q"}' </dev/null >"$work/out" 2>"$work/err"
  expect "$who: through-serve-approved" 0 $? '"2 words"' "$work/out"
  grep -q '"2 words"' "$work/out" || sed 's/^/         /' "$work/err"
  if command -v script >/dev/null; then
    local cmd="${wrap[*]} $capsule call --caps $caps --state $state wordcount dispatch '{\"text\":\"t u v\"}'"
    (sleep 1; echo y) | script -qec "$cmd" /dev/null >"$work/out" 2>&1
    expect "$who: through-serve-ask-terminal-yes" 0 $? '"3 words"' "$work/out"
    grep -q "Allow this call? \[y/N\]" "$work/out" && ok "$who: asked-on-the-terminal" || bad "$who: asked-on-the-terminal"
    (sleep 1; echo n) | script -qec "$cmd" /dev/null >"$work/out" 2>&1
    expect "$who: through-serve-ask-terminal-no" 4 $? "declined" "$work/out"
  fi
  C policy set --caps "$caps" --state "$state" wordcount dispatch allow >/dev/null
  # list through serve (its registry, state and remembered readiness; the
  # session the caller's): the same text and JSON as alone
  local before_list
  before_list=$(sessions)
  C list --caps "$caps" --state "$state" >"$work/list-serve" 2>"$work/err"
  expect "$who: list-through-serve" 0 $? '^  dispatch  *allow (operator)$' "$work/list-serve"
  C list --caps "$caps" --state "$state" --json >"$work/list-serve.json" 2>>"$work/err"
  [ "$(sessions)" = $((before_list + 2)) ] && ok "$who: list-went-through-serve" ||
    bad "$who: list-went-through-serve ($(sessions) sessions, $before_list before)"
  CAPSULE_SERVE=off C list --caps "$caps" --state "$state" >"$work/list-alone" 2>>"$work/err"
  CAPSULE_SERVE=off C list --caps "$caps" --state "$state" --json >"$work/list-alone.json" 2>>"$work/err"
  cmp -s "$work/list-serve" "$work/list-alone" && cmp -s "$work/list-serve.json" "$work/list-alone.json" &&
    grep -q '"readiness": "ready"' "$work/list-serve.json" && ok "$who: list-through-serve-as-alone" ||
    { bad "$who: list-through-serve-as-alone"; diff "$work/list-serve" "$work/list-alone"; diff "$work/list-serve.json" "$work/list-alone.json"; }
  local before
  before=$(sessions)
  CAPSULE_SERVE=off call wordcount dispatch '{"text":"x"}'
  expect "$who: serve-off-alone" 0 $? '"1 words"' "$work/out"
  cp -r "$caps/agents" "$work/other/" && chmod -R a+rX "$work/other"
  C policy set --caps "$work/other" --state "$state" wordcount dispatch allow >/dev/null
  C call --caps "$work/other" --state "$state" wordcount dispatch '{"text":"x"}' </dev/null >"$work/out" 2>"$work/err"
  expect "$who: other-caps-alone" 0 $? '"1 words"' "$work/out"
  [ "$(sessions)" = "$before" ] && ok "$who: alone-touches-no-serve" || bad "$who: alone-touches-no-serve"
  kill "$server"; wait "$server" 2>/dev/null
  call wordcount dispatch '{"text":"after serve"}'
  expect "$who: alone-after-serve-stopped" 0 $? '"2 words"' "$work/out"
  # a sandboxed process that reaches serve's socket (here a grant on it:
  # --socket outside the state) cannot approve: it cannot read STATE/serve.key
  if [ -x /usr/bin/python3 ]; then
    local sockdir=$work/sock-$who sid_
    mkdir -p "$sockdir" && chmod 700 "$sockdir"
    [ "$who" = nobody ] && chown 65534:65534 "$sockdir"
    "${wrap[@]}" "$capsule" serve --caps "$caps" --state "$state" --socket "$sockdir/s.sock" 2>>"$work/serve-$who.log" &
    server=$!
    pids+=("$server")
    wait_for C serve status --state "$state" >/dev/null 2>&1
    C policy set --caps "$caps" --state "$state" wordcount dispatch ask >/dev/null
    setsid "${wrap[@]}" "$capsule" call --caps "$caps" --state "$state" wordcount dispatch '{"text":"r s"}' </dev/null >/dev/null 2>&1
    id=$(C approvals --state "$state" --json | sed -n 's/.*"id": *"\([0-9a-f]*\)".*/\1/p' | head -1)
    local probe='import socket, json, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rw")
for m in [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}}},
          {"jsonrpc": "2.0", "method": "notifications/initialized"},
          {"jsonrpc": "2.0", "id": 2, "method": "capsule/approve", "params": {"approval": sys.argv[2], "approve": True, "key": "0" * 64}}]:
    f.write(json.dumps(m) + "\n"); f.flush()
for line in f:
    m = json.loads(line)
    if m.get("id") == 2: print(json.dumps(m)); break'
    C run --allow-rw "$sockdir/s.sock" -- /usr/bin/python3 -c "$probe" "$sockdir/s.sock" "$id" >"$work/out" 2>"$work/err"
    if grep -q 'capsule/approve refused' "$work/out" && C approvals --state "$state" | grep -q "^$id "; then
      ok "$who: sandboxed-approve-refused"
    else bad "$who: sandboxed-approve-refused (id $id)"; cat "$work/out" "$work/err" | head -5; fi
    C approve --state "$state" "$id" >"$work/out" 2>&1
    expect "$who: operator-approves-after" 0 $? "^approved $id" "$work/out"
    # nor answer its own call's question: elicitation declared without the
    # key (which it cannot read) is not honoured, the call is queued
    local elicit='import socket, json, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rw")
meta = {"dev.capsule/key": "0" * 64} if len(sys.argv) > 2 else {}
for m in [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "_meta": meta}},
          {"jsonrpc": "2.0", "method": "notifications/initialized"},
          {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "wordcount__dispatch", "arguments": {"text": "self approved " + str(len(sys.argv))}}}]:
    f.write(json.dumps(m) + "\n"); f.flush()
for line in f:
    m = json.loads(line)
    if m.get("method") == "elicitation/create":
        print("ELICITED"); f.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"action": "accept", "content": {}}}) + "\n"); f.flush()
    if m.get("id") == 3: print(json.dumps(m)); break'
    local n_pending
    for forged in "" forged; do
      n_pending=$(C approvals --state "$state" --json | grep -c '"id"')
      C run --allow-rw "$sockdir/s.sock" -- /usr/bin/python3 -c "$elicit" "$sockdir/s.sock" $forged >"$work/out" 2>"$work/err"
      if ! grep -q ELICITED "$work/out" && ! grep -q '2 words' "$work/out" &&
        [ "$(C approvals --state "$state" --json | grep -c '"id"')" -gt "$n_pending" ]; then
        ok "$who: sandboxed-elicitation-ignored${forged:+-$forged}"
      else bad "$who: sandboxed-elicitation-ignored${forged:+-$forged}"; cat "$work/out" "$work/err" | head -5; fi
    done
    kill "$server"; wait "$server" 2>/dev/null
    [ ! -e "$state/serve.key" ] && ok "$who: key-removed-at-exit" || bad "$who: key-removed-at-exit"
    C policy set --caps "$caps" --state "$state" wordcount dispatch allow >/dev/null
  fi
  C audit --state "$state" --json >"$work/audit"
  local n_calls
  n_calls=$(grep -c '"tool": "dispatch"' "$work/audit")
  grep -q "\"user\": \"$name\"" "$work/audit" && [ "$n_calls" -ge 12 ] && ok "$who: audited-as-the-caller" ||
    bad "$who: audited-as-the-caller ($n_calls records)"
}

run_as root
if [ -z "${ASAN_OPTIONS:-}" ]; then
  chown -R 65534:65534 "$caps" "$work/other"
  run_as nobody
else
  echo "  (uid 65534: skipped in a sanitizer build, whose runtime cannot map its shadow memory"
  echo "   under the sandbox's RLIMIT_DATA fallback: the MCP suites skip likewise)"
fi
echo "$pass passed, $fail failed"
[ $fail = 0 ]
