#!/usr/bin/env bash
# Approvals: `capsule approvals [--json]` lists what waits (capability,
# tool, arguments with control characters escaped, for whom, who asked);
# ids are random, not sequential; `approve ID` says what it approves; an
# approval expires (--approval-ttl) and is void when the tool's code, its
# manifest (grants) or its policy changes before the call runs.
# Usage: approvals.sh CAPSULE
set -u
source "$(dirname "$0")/../lib/gateway.sh"
work=$(mktemp -d /var/tmp/capsule-approvals.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
[ -n "${KEEP:-}" ] && trap - EXIT
caps=$work/caps
state=$work/state
mkdir -p "$caps/agents/echo"
printf '[agent]\nid = "echo"\nname = "echo"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' >"$caps/agents/echo/agent.toml"
printf '#!/bin/sh\nIFS= read -r line; printf "{\\"got\\":%%s}\\n" "$line"\n' >"$caps/agents/echo/run.sh"
chmod 755 "$caps/agents/echo/run.sh"

G=(--caps "$caps" --state "$state")
pending_id() { grep -oE 'approval [0-9a-f]{8} is pending' <<<"$out" | head -1 | cut -d' ' -f2; }
me="uid $(id -u) \\($(id -un)\\)"

"$capsule" policy set echo dispatch ask --caps "$caps" --state "$state" >/dev/null
echo "listing"
t approvals-empty 0 "^no pending approvals$" approvals --state "$state"
esc=$(printf '\033')
t ask-1 4 "approval [0-9a-f]{8} is pending" call "${G[@]}" --user alice echo dispatch "{\"text\": \"red${esc}[31m bell$(printf '\a') end\"}"
id1=$(pending_id)
t ask-2 4 "approval [0-9a-f]{8} is pending" call "${G[@]}" --user bob echo dispatch '{"text": "two"}'
id2=$(pending_id)
t ask-3 4 "approval [0-9a-f]{8} is pending" call "${G[@]}" --user bob echo dispatch '{"text": "three"}'
id3=$(pending_id)
if [ -n "$id1" ] && [ "$id1" != "$id2" ] && [ "$id2" != "$id3" ] && [ "$id1" != "$id3" ] &&
   ! [ "$((16#$id2 - 16#$id1))" = 1 -a "$((16#$id3 - 16#$id2))" = 1 ]; then ok ids-random
else bad "ids-random ($id1 $id2 $id3)"; fi
t approvals-list 0 "^$id1  echo.dispatch for user alice, asked by $me, valid until [0-9T:-]+Z" approvals --state "$state"
if grep -qF 'arguments: {"text": "red\x1b[31m bell\x07 end"}' <<<"$out" && ! grep -q "$esc" <<<"$out"; then
  ok approvals-escape-control-characters
else bad approvals-escape-control-characters; echo "$out" | cat -v | head -5 | sed 's/^/         /'; fi
if grep -q "^$id2  echo.dispatch for user bob" <<<"$out" && grep -q "^$id3  " <<<"$out"; then ok approvals-list-all
else bad approvals-list-all; fi
t approvals-json 0 '"asked_by"' approvals --json --state "$state"
if python3 -c '
import json, sys
a = json.loads(sys.stdin.read())
want = {"id", "capability", "tool", "user", "asked_by", "created", "expires", "arguments"}
assert len(a) == 3 and all(set(x) == want for x in a), a
assert a[0]["arguments"] == "{\"text\": \"red\x1b[31m bell\x07 end\"}", a[0]["arguments"]
assert a[1]["user"] == "bob" and a[1]["capability"] == "echo" and a[1]["tool"] == "dispatch"
' <<<"$out"; then ok approvals-json-columns; else bad approvals-json-columns; fi
t ask-bidi 4 "is pending" call "${G[@]}" --user carol echo dispatch "{\"text\": \"$(printf '\342\200\256')evil $(printf '\377')\"}"
t approvals-bidi 0 "for user carol" approvals --state "$state"
if grep -qF 'arguments: {"text": "\u{202e}evil \xff"}' <<<"$out"; then ok approvals-escape-bidi-and-bad-utf8
else bad approvals-escape-bidi-and-bad-utf8; grep carol -A1 <<<"$out" | cat -v | sed 's/^/         /'; fi

if command -v script >/dev/null; then # a terminal (a pty) to be asked on
  out=$(printf 'n\n' | script -qec "$capsule call ${G[*]} echo dispatch '{\"text\": \"x${esc}[2J\"}'" /dev/null 2>&1)
  if grep -qF 'with {"text": "x\x1b[2J"}' <<<"$out" && ! grep -q "$esc" <<<"$out" &&
     grep -q "not approved at the prompt" <<<"$out"; then ok prompt-escapes-control-characters
  else bad prompt-escapes-control-characters; echo "$out" | cat -v | head -3 | sed 's/^/         /'; fi
fi

echo "approve and deny say what they decide"
t approve-shows-what 0 "^approved $id2: echo.dispatch for user bob, asked by $me, valid until .*
  arguments: \{\"text\": \"two\"\}" approve "$id2" --state "$state"
if grep -q 'arguments: {"text":"two"}' <<<"$out"; then ok approve-shows-arguments; else bad approve-shows-arguments; fi
t approve-twice 1 "approval $id2 is approved, not pending" approve "$id2" --state "$state"
t deny-shows-what 0 "^denied $id3: echo.dispatch for user bob" deny "$id3" --state "$state"
t approved-runs 0 '"text":"two"' call "${G[@]}" --user bob echo dispatch '{"text": "two"}'
t approvals-after 0 "^$id1 " approvals --state "$state"
if ! grep -qE "^($id2|$id3) " <<<"$out"; then ok approvals-only-pending; else bad approvals-only-pending; fi

echo "expiry"
t ttl-ask 4 "is pending" call "${G[@]}" --approval-ttl 1 echo dispatch '{"text": "soon"}'
idt=$(pending_id)
sleep 2
t ttl-not-listed 0 "" approvals --state "$state"
if ! grep -q "^$idt " <<<"$out"; then ok expired-not-listed; else bad expired-not-listed; fi
t ttl-approve-expired 1 "approval $idt is expired, not pending" approve "$idt" --state "$state"
t ttl-new-request 4 "approval [0-9a-f]{8} is pending" call "${G[@]}" --approval-ttl 1 echo dispatch '{"text": "soon"}'
idt2=$(pending_id)
t ttl-approve 0 "approved $idt2" approve "$idt2" --state "$state"
sleep 2
t ttl-approved-expired 4 "approval [0-9a-f]{8} is pending \(approval $idt2 expired\)" call "${G[@]}" echo dispatch '{"text": "soon"}'

echo "void when the code, the manifest or the policy changes"
ask_approve() { # ask_approve NAME ARGS: a pending approval for ARGS, approved; its id in $idv
  t "$1-ask" 4 "is pending" call "${G[@]}" echo dispatch "$2"
  idv=$(pending_id)
  t "$1-approve" 0 "approved $idv" approve "$idv" --state "$state"
}
ask_approve code '{"text": "code"}'
printf '# edited\n' >>"$caps/agents/echo/run.sh"
t code-change-voids 4 "approval $idv is void: the tool's code, grants or policy changed" call "${G[@]}" echo dispatch '{"text": "code"}'
ask_approve manifest '{"text": "grants"}'
sed -i 's/memory_mb = 256/memory_mb = 300/' "$caps/agents/echo/agent.toml"
t manifest-change-voids 4 "approval $idv is void" call "${G[@]}" echo dispatch '{"text": "grants"}'
ask_approve policy '{"text": "policy"}'
"$capsule" policy set echo dispatch ask --caps "$caps" --state "$state" >/dev/null
t policy-change-voids 4 "approval [0-9a-f]{8} is pending" call "${G[@]}" echo dispatch '{"text": "policy"}'
if [ "$(pending_id)" != "$idv" ]; then ok policy-change-new-request; else bad policy-change-new-request; fi
ask_approve unchanged '{"text": "same"}'
t unchanged-runs 0 '"text":"same"' call "${G[@]}" echo dispatch '{"text": "same"}'

echo "approvals and policy come from the operator, never from inside a sandbox"
bindir=$(dirname "$capsule")
# inside: capsule itself, and a scratch directory the tool may write
# (not a state directory: the sandbox hides those whatever it grants)
inside() { # inside WHO SCRATCH VERB ARGS...: capsule VERB in a sandbox, CAPSULE_SANDBOX unset
  local who=$1 scratch=$2; shift 2
  local unset=(-u CAPSULE_SANDBOX)
  [ -n "${keep_marker:-}" ] && unset=()
  # LeakSanitizer (an ASan build) cannot work in a sandbox: it needs ptrace
  local run=("$capsule" run --allow-read "$bindir" --allow-rw "$scratch" -- env "${unset[@]}"
    ASAN_OPTIONS=detect_leaks=0 "$capsule" "$@")
  if [ "$who" = root ]; then "${run[@]}"; else setpriv --reuid=65534 --regid=65534 --clear-groups -- "${run[@]}"; fi
}
whos=(root)
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
   setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" 2>/dev/null; then whos+=(nobody); fi
t self-ask 4 "is pending" call "${G[@]}" echo dispatch '{"text": "self"}'
ids=$(pending_id)
for who in "${whos[@]}"; do
  scratch=$work/scratch-$who && mkdir -p "$scratch" && chmod 777 "$scratch"
  for verb in "approve $ids" "deny $ids" "policy set echo dispatch allow"; do
    out=$(inside "$who" "$scratch" $verb --state "$scratch/s" 2>&1 </dev/null); st=$?
    if [ $st = 4 ] && grep -q "refused: this process runs inside a capsule sandbox" <<<"$out" && [ ! -e "$scratch/s" ]; then
      ok "$who: inside-refused-${verb%% *}"
    else bad "$who: inside-refused-${verb%% *} (exit $st)"; echo "$out" | head -3 | sed 's/^/         /'; fi
  done
  # with the marker left as the sandbox sets it
  out=$(keep_marker=1 inside "$who" "$scratch" approve "$ids" --state "$scratch/s" 2>&1 </dev/null); st=$?
  if [ $st = 4 ] && grep -q "CAPSULE_SANDBOX is set" <<<"$out"; then ok "$who: inside-refused-marker"; else bad "$who: inside-refused-marker (exit $st)"; fi
done
t self-still-pending 0 "^$ids " approvals --state "$state"
t operator-approves 0 "approved $ids" approve "$ids" --state "$state"

finish approvals
