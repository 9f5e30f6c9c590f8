#!/usr/bin/env bash
# Covenant in depth: capability tokens (issue, import, trust, revoke; forged,
# expired, revoked, untrusted, wrong-scope and malformed ones refused),
# `capsule dispatch` routing as covenant-router scores intents, the request
# line the agent reads, budgets (spent by CPU, empty bucket refused, a row
# edited in the database refused), an agent id with '@', and the audit log
# exported and verified in Covenant's format (Covenant's own frozen vectors
# too). As root, and as uid 65534 with a state of its own.
# Usage: run.sh CAPSULE
set -u
capsule=$(realpath "$1")
if ! "$capsule" run -- /bin/true 2>/dev/null; then
  echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77
fi
for tool in sqlite3 python3; do
  command -v $tool >/dev/null || { echo "SKIP: $tool is not installed (scripts/deps.sh test installs it)"; exit 77; }
done
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /var/tmp/capsule-covenant.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
[ -n "${KEEP:-}" ] && trap - EXIT
export CAPSULE_STATE_KEY= COVENANT_HOME=
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; }
# t NAME WANT-STATUS REGEX ARGS...: capsule ARGS as $as (stdin from /dev/null)
as=()
t() {
  local name=$1 want=$2 regex=$3; shift 3
  local status
  out=$("${as[@]}" "$capsule" "$@" 2>&1 </dev/null)
  status=$?
  if [ "$status" = "$want" ] && echo "$out" | grep -qE -- "$regex"; then ok "$name"
  else bad "$name (exit $status, want $want)"; echo "$out" | head -5 | sed 's/^/         /'; fi
}

# agent DIR ID REQUIRED OPTIONAL BUDGET BODY: a Covenant agent in sh
agent() {
  mkdir -p "$1/$2"
  cat >"$1/$2/agent.toml" <<TOML
[agent]
id = "$2"
name = "$2"
version = "0.1.0"
runtime = "rust-bin"
entry = "run.sh"
[capabilities]
required = [$3]
optional = [$4]
[resources]
cpu_ms_per_task = 20000
memory_mb = 64
network = "off"
[settlement]
budget_credits_per_hour = $5
TOML
  printf '#!/bin/sh\n%s\n' "$6" >"$1/$2/run.sh"
  chmod 755 "$1/$2/run.sh"
}
echo_line='IFS= read -r line; printf "{\"got\":%s}\n" "$line"'
# burns 1.2 s of its own CPU (utime, field 14 of /proc/PID/stat, in ticks of 1/100 s)
burn='IFS= read -r line; t=0; while [ "$t" -lt 120 ]; do i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; read -r _ _ _ _ _ _ _ _ _ _ _ _ _ t _ </proc/$$/stat; done; echo "{\"text\":\"burnt\"}"'

suite() { # suite WHO: every case with a state of WHO's own
  local who=$1 home=$work/$1
  local caps=$home/caps state=$home/state
  mkdir -p "$home"
  agent "$caps" research '"tool.web_search"' '"memory.write"' 0 "$echo_line"
  agent "$caps" renderer '"tool.gpu_inference"' '' 0 "$echo_line"
  agent "$caps" alpha '"intent.subscribe"' '' 0 "$echo_line"
  agent "$caps" beta '"intent.subscribe"' '' 0 "$echo_line"
  agent "$caps" burn '"intent.delegate"' '' 3 "$burn"
  agent "$caps" cheap '' '' 5 "$echo_line"
  local scratch='IFS= read -r line; if [ -e /tmp/mark ]; then seen=yes; else seen=no; fi; if echo x >/tmp/mark 2>/dev/null; then w=yes; else w=no; fi; echo "{\"seen\":\"$seen\",\"wrote\":\"$w\"}"'
  agent "$caps" eph '' '' 0 "$scratch"
  printf '[sandbox]\nfilesystem = "ephemeral"\n' >>"$caps/eph/agent.toml"
  agent "$caps" ropkg '' '' 0 "$scratch"
  printf '[sandbox]\nfilesystem = "read-only-package"\n' >>"$caps/ropkg/agent.toml"
  [ "$who" = root ] || chown -R 65534:65534 "$home"
  local G=(--caps "$caps" --state "$state")
  for a in research renderer alpha beta burn cheap eph ropkg; do
    "${as[@]}" "$capsule" policy set "$a" dispatch allow "${G[@]}" >/dev/null
  done

  echo "$who: tokens"
  t key-made 0 "made the local issuer key" token key "${G[@]}"
  local me
  me=$("${as[@]}" "$capsule" token key "${G[@]}" 2>/dev/null)
  t key-stable 0 "^$me\$" token key "${G[@]}"
  t no-token-refused 4 "does not hold the capability tool.web_search that agent research requires: no token grants it" \
    dispatch --agent research "find papers" "${G[@]}"
  t refusal-audited 0 "research.dispatch +capability-denied .*tool.web_search" audit "${G[@]}"
  t check-audited 0 '"missing_actions":\["tool.web_search"\],"passed":false' audit "${G[@]}"
  t issue 0 '"action":"tool.web_search"' token issue local tool.web_search "${G[@]}"
  local sig=${out%%$'\n'*}
  t dispatch-runs 0 '"got":\{"id":"[0-9a-f-]{36}","text":"find papers","issuer":\{"display":"[^"]+@local","pubkey":"'"$me"'"\},"issued_at":[0-9]{13},"priority":"high","parent":"p-1"\}' \
    dispatch --agent research --priority high --parent p-1 "find papers" "${G[@]}"
  t optional-recorded 0 '"optional_missing":\["memory.write"\]' audit "${G[@]}"
  t list 0 "tool.web_search +\{\} +never +active" token list "${G[@]}"
  t list-json 0 '"status": "active"' token list --json "${G[@]}"

  # forged: the token's JSON edited in the database (its row HMAC no longer matches)
  sqlite3 "$state/state.db" "UPDATE covenant_tokens SET token = replace(token, '\"scope\":{}', '\"scope\":{\"x\":1}')"
  t forged-row-refused 4 "its token ${sig:0:12} is tampered" dispatch --agent research "find papers" "${G[@]}"
  t forged-row-listed 0 "tampered" token list "${G[@]}"
  t forged-row-audited 0 "research.dispatch +capability-denied .*tampered" audit "${G[@]}"
  local broken
  broken=$(sqlite3 "$state/state.db" "SELECT signature FROM covenant_tokens LIMIT 1")
  sqlite3 "$state/state.db" "UPDATE covenant_tokens SET token = 'not json' WHERE signature = '$broken'"
  t garbage-row-listed 0 "^${broken:0:12} .*tampered" token list "${G[@]}"
  # forged: a signature that does not verify, refused at import
  local other=$home/other
  local them
  them=$("${as[@]}" "$capsule" token key --state "$other" 2>/dev/null)
  [[ "$them" =~ ^[1-9A-HJ-NP-Za-km-z]{43,44}$ ]] && ok other-key || bad "other-key ($them)"
  t other-issue 0 '"action":"tool.web_search"' token issue "$me" tool.web_search --state "$other"
  echo "$out" | tail -1 >"$home/foreign.json"
  python3 - "$home/foreign.json" "$home/forged.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["capability"]["action"] = "tool.gpu_inference"   # the signature was over another action
json.dump(t, open(sys.argv[2], "w"))
PY
  t forged-import-refused 1 "signature does not verify against its granted_by key" token import "$home/forged.json" "${G[@]}"
  t malformed-import-refused 1 "the token is not JSON" token import /dev/null "${G[@]}"
  # untrusted: a valid token from another issuer counts only once trusted
  t import-foreign 0 '^[1-9A-HJ-NP-Za-km-z]{80,90}$' token import "$home/foreign.json" "${G[@]}"
  t untrusted-refused 4 "is untrusted" dispatch --agent research "find papers" "${G[@]}"
  t untrusted-audited 0 "research.dispatch +capability-denied .*is untrusted" audit "${G[@]}"
  t trust 0 "trusted $them" token trust "$them" "${G[@]}"
  t trusted-runs 0 '"got"' dispatch --agent research "find papers" "${G[@]}"
  t trust-list 0 "$them" token trust "${G[@]}"
  # a trust root added behind capsule's back is no root
  sqlite3 "$state/state.db" "INSERT INTO covenant_trust VALUES ('$me', 'x', 'not-a-mac')"
  t forged-root-ignored 0 "^$me +\(the local issuer\)" token trust "${G[@]}"
  # revoked
  local fsig=$(sqlite3 "$state/state.db" "SELECT signature FROM covenant_tokens WHERE token LIKE '%${them}%'")
  t revoke 0 "revoked $fsig" token revoke "${fsig:0:10}" "${G[@]}"
  t revoked-refused 4 "is revoked" dispatch --agent research "find papers" "${G[@]}"
  t revoked-audited 0 "research.dispatch +capability-denied .*is revoked" audit "${G[@]}"
  t revoke-twice 1 "was revoked already" token revoke "$fsig" "${G[@]}"
  t revoke-unknown 1 "no token's id starts with" token revoke 11111111 "${G[@]}"
  t revoke-glob-refused 1 "a token id is its signature \(base58\)" token revoke '********' "${G[@]}"
  # expired
  t issue-expired 0 '"expires_at":1577836800000' token issue local tool.gpu_inference --expires 2020-01-01T00:00:00Z "${G[@]}"
  t expired-refused 4 "is expired" dispatch --agent renderer "generate an image" "${G[@]}"
  t expired-audited 0 "renderer.dispatch +capability-denied .*is expired" audit "${G[@]}"
  t issue-unexpired 0 '"expires_at":[0-9]{13}' token issue local tool.gpu_inference --expires 7d "${G[@]}"
  t unexpired-runs 0 '"got"' dispatch --agent renderer "generate an image" "${G[@]}"
  # wrong scope
  t issue-scoped 0 '"scope":\{"agent_id":"beta","version":1\}' token issue local intent.subscribe --scope '{"version": 1, "agent_id": "beta"}' "${G[@]}"
  t wrong-scope-refused 4 "its scope names another agent \(agent_id\), not alpha" dispatch --agent alpha "hello" "${G[@]}"
  t wrong-scope-audited 0 "alpha.dispatch +capability-denied .*its scope names another agent" audit "${G[@]}"
  t right-scope-runs 0 '"got"' dispatch --agent beta "hello" "${G[@]}"
  # malformed
  t bad-action 1 "outside Covenant's namespaces" token issue local network.fetch "${G[@]}"
  t bad-action-space 1 "a space or a control" token issue local "tool.a b" "${G[@]}"
  t bad-action-empty-name 1 "names nothing after the namespace" token issue local tool. "${G[@]}"
  t bad-scope-version 1 "unsupported scope version 2" token issue local memory.write --scope '{"version": 2}' "${G[@]}"
  t bad-scope-unversioned 1 "non-empty scopes must set version 1" token issue local memory.write --scope '{"tiers": ["working"]}' "${G[@]}"
  t bad-scope-tiers 1 "tiers contains an unsupported value" token issue local memory.write --scope '{"version": 1, "tiers": ["archive"]}' "${G[@]}"
  t bad-scope-tool 1 "tool must match action suffix" token issue local tool.call.echo --scope '{"version": 1, "tool": "search"}' "${G[@]}"
  t bad-scope-json 1 "--scope is not JSON" token issue local tool.x --scope '{' "${G[@]}"
  t bad-subject 2 "SUBJECT is .local. or a base58" token issue 0OIl tool.x "${G[@]}"
  t bad-expires 2 "--expires takes a duration" token issue local tool.x --expires tomorrow "${G[@]}"
  # a key file as the issuer
  t keygen 0 '^[1-9A-HJ-NP-Za-km-z]{43,44}$' token keygen "$home/issuer.key"
  local kf=$out
  t keyfile-refused 4 "\($kf\) does not hold the capability tool.web_search" dispatch --issuer "$home/issuer.key" --agent research "find" "${G[@]}"
  t keyfile-grant 0 "" token issue "$kf" tool.web_search "${G[@]}"
  t keyfile-runs 0 "\"pubkey\":\"$kf\"" dispatch --issuer "$home/issuer.key" --agent research "find" "${G[@]}"
  chmod 600 "$home/foreign.json"
  [ "$who" = root ] || chown 65534:65534 "$home/foreign.json"
  t keyfile-garbage 1 "is not an Ed25519 private key" dispatch --issuer "$home/foreign.json" --agent research "find" "${G[@]}"
  chmod 644 "$home/issuer.key"
  t keyfile-open-to-others 1 "is a private key that others may read or write \(mode 0644\); .chmod 600" dispatch --issuer "$home/issuer.key" --agent research "find" "${G[@]}"
  chmod 600 "$home/issuer.key"

  echo "$who: routing (covenant-router's cases)"
  t reissue-same-refused 1 "exists already: the same subject, action, scope and expiry" token issue local tool.web_search "${G[@]}"
  t reissue 0 "" token issue local tool.web_search --expires 30d "${G[@]}"
  t grant-subscribe 0 "" token issue local intent.subscribe "${G[@]}"
  t route-research 0 "routed to research \(score [0-9]+\)" dispatch "find recent papers on agent memory" "${G[@]}"
  t route-higher-score 0 "routed to research" dispatch "find papers and summarize them" "${G[@]}"
  t route-renderer 0 "routed to renderer" dispatch "generate an image of a cat" "${G[@]}"
  t route-tie-by-id 0 "routed to alpha \(score 1\)" dispatch "ping" "${G[@]}"
  t route-case 0 "routed to renderer" dispatch "GENERATE AN IMAGE" "${G[@]}"
  t route-none 1 "no agent in .* matches the intent" dispatch "zzz no keywords here" "${G[@]}"
  COVENANT_HOME=$caps t covenant-home 0 "routed to research" dispatch "find papers" --state "$state"
  t agent-at-refused 1 "an agent id never contains '@'" dispatch --agent "research@agent" "find" "${G[@]}"
  t agent-at-audited 0 "dispatch-refused .*contains '@'" audit "${G[@]}"
  t call-stays 0 '"got"' call research dispatch '{"text": "direct"}' "${G[@]}"
  t bad-priority 2 "--priority takes low, normal or high" dispatch --priority urgent "x" "${G[@]}"

  echo "$who: budgets"
  t grant-burn 0 "" token issue local intent.delegate "${G[@]}"
  t budget-full 0 "^burn +3 +3 +-" budget show burn "${G[@]}"
  t budget-unenforced 0 "^alpha +0 \(not enforced\)" budget show "${G[@]}"
  t burn-runs 0 '"burnt"' dispatch --agent burn "delegate this" "${G[@]}"
  # 1.2 s of CPU costs 2 credits (one per started CPU second)
  t budget-spent-by-cpu 0 "^burn +3 +1 +[0-9]+" budget show burn "${G[@]}"
  t budget-set-0 0 "agent burn: 0 of 3 credits left" budget set burn 0 "${G[@]}"
  t empty-bucket-refused 4 "agent burn's budget is spent: 0 of 3 credits left" dispatch --agent burn --priority low "delegate" "${G[@]}"
  t empty-bucket-audited 0 '"agent_display":"burn@agent","requested":1,"tokens_remaining":0,"refill_eta_ms":[0-9]+,"priority":"low"' audit "${G[@]}"
  t budget-set-2 0 "agent burn: 2 of 3 credits left" budget set burn 2 "${G[@]}"
  t budget-set-capped 0 "agent burn: 3 of 3 credits left" budget set burn 99 "${G[@]}"
  sqlite3 "$state/state.db" "UPDATE covenant_budgets SET tokens = 3, capacity = 1000000 WHERE agent = 'burn'"
  t edited-row-refused 4 "budget row in .* was changed outside capsule" dispatch --agent burn "delegate" "${G[@]}"
  t edited-row-show 1 "changed outside capsule" budget show burn "${G[@]}"
  t edited-row-audited 0 "burn.dispatch .*budget row in .* was changed outside capsule" audit "${G[@]}"
  [ "$(sqlite3 "$state/state.db" "SELECT tokens, capacity FROM covenant_budgets WHERE agent = 'burn'")" = "3|1000000" ] \
    && ok edited-row-untouched || bad edited-row-untouched
  t edited-row-reset 0 "agent burn: 1 of 3 credits left" budget set burn 1 "${G[@]}"
  t reset-runs 0 '"burnt"' dispatch --agent burn "delegate" "${G[@]}"
  # the last credit, two dispatches at once: exactly one runs
  t budget-set-1 0 "agent cheap: 1 of 5 credits left" budget set cheap 1 "${G[@]}"
  "${as[@]}" "$capsule" dispatch --agent cheap "a" "${G[@]}" >"$home/race.1" 2>&1 &
  local p1=$!
  "${as[@]}" "$capsule" dispatch --agent cheap "b" "${G[@]}" >"$home/race.2" 2>&1 &
  local p2=$!
  local s1=0 s2=0
  wait $p1 || s1=$?
  wait $p2 || s2=$?
  if [ "$((s1 + s2))" = 4 ] && [ "$s1" != "$s2" ] && grep -q "budget is spent" "$home/race.1" "$home/race.2"; then
    ok last-credit-spent-once
  else bad "last-credit-spent-once (exits $s1 and $s2)"; cat "$home/race.1" "$home/race.2" | head -4 | sed 's/^/         /'; fi
  t budget-unknown 1 'no Covenant agent "nope"' budget set nope 1 "${G[@]}"
  t budget-unenforced-set 1 "is not enforced" budget set alpha 1 "${G[@]}"
  t budget-bad-credits 2 "CREDITS is a whole number" budget set burn 1.5 "${G[@]}"

  echo "$who: sandbox.filesystem (sandbox.backend: gvisor.sh)"
  t ephemeral-writes 0 '"seen":"no","wrote":"yes"' dispatch --agent eph "x" "${G[@]}"
  t ephemeral-fresh-each-dispatch 0 '"seen":"no","wrote":"yes"' dispatch --agent eph "x" "${G[@]}"
  t read-only-package 0 '"seen":"no","wrote":"no"' dispatch --agent ropkg "x" "${G[@]}"

  echo "$who: audit in Covenant's format"
  t export 0 "exported [0-9]+ events to .*; [0-9]+ records have no Covenant kind" audit export --format covenant "$home/export" "${G[@]}"
  for kind in capability_check capability_granted capability_revoked budget_exhausted intent_dispatched; do
    grep -q "\"type\":\"$kind\"" "$home/export/events.jsonl" && ok "export-has-$kind" || bad "export-has-$kind"
  done
  # the same keys in the same order as Covenant writes them (its frozen vectors)
  python3 - "$home/export/events.jsonl" "$here"/fixtures/*.v1*.json <<'PY' && ok export-wire-shape || bad export-wire-shape
import json, sys
golden = {}
for f in sys.argv[2:]:
    for r in json.load(open(f))["records"]:
        e = json.loads(r["canonical_json"])
        golden[e["kind"]["type"]] = (list(e), list(e["kind"]), list(e["issuer"]))
seen = set()
for line in open(sys.argv[1]):
    e = json.loads(line)
    t = e["kind"]["type"]
    if t in golden:
        assert (list(e), list(e["kind"]), list(e["issuer"])) == golden[t], (t, line)
        seen.add(t)
assert {"capability_check", "capability_granted", "capability_revoked", "budget_exhausted",
        "intent_dispatched"} <= seen, seen
PY
  t export-verifies 0 "covenant audit verified: [0-9]+ events, root [0-9a-f]{64}" audit verify --format covenant "$home/export"
  t export-again-refused 1 "it exists: export into a new directory" audit export --format covenant "$home/export" "${G[@]}"
  cp -a "$home/export" "$home/edited"
  sed -i '2s/@local"/@elsewhere"/' "$home/edited/events.jsonl"
  t edited-event-found 1 "chain entry 1 mismatch" audit verify --format covenant "$home/edited"
  cp -a "$home/export" "$home/short"
  sed -i '$d' "$home/short/events.jsonl"
  t dropped-event-found 1 "dangling chain anchor" audit verify --format covenant "$home/short"
  t verify-missing 1 "cannot|No such file" audit verify --format covenant "$home/nowhere"
  t bad-format 2 "--format takes covenant" audit export --format splunk "$home/x" "${G[@]}"
  t capsule-chain-still-verifies 0 "audit log verified" audit verify "${G[@]}"
}

suite root

echo "Covenant's own audit files"
mkdir -p "$work/covenant"
root=$(python3 "$here/fixtures/covenant_pair.py" "$here/fixtures/provenance-records.v1.json" "$work/covenant")
t covenant-pair-verifies 0 "verified: 6 events, root $root" audit verify --format covenant "$work/covenant"
sed -i 's/"research@agent"/"mallory@agent"/' "$work/covenant/events.jsonl"
t covenant-pair-edit-found 1 "chain entry 0 mismatch" audit verify --format covenant "$work/covenant"
mkdir -p "$work/kinds"
python3 "$here/fixtures/covenant_pair.py" "$here/fixtures/audit-kinds.v1.subset.json" "$work/kinds" >/dev/null
t covenant-kinds-verify 0 "verified: 10 events" audit verify --format covenant "$work/kinds"

if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
   setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" 2>/dev/null; then
  mkdir -p "$work/nobody" && chown 65534:65534 "$work/nobody"
  as=(setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$work/nobody")
  suite nobody
else
  echo "  note: the uid 65534 run needs root and setpriv"
fi
echo "covenant tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
