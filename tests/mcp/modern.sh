#!/usr/bin/env bash
# `capsule serve`'s MCP HTTP in the sessionless 2026-07-28 form, in raw
# HTTP from node (tests/mcp/modern.mjs): client capabilities from each
# request's _meta, policy `ask` as input_required (accept, decline,
# cancel, replays and forgeries), the approval queue without elicitation,
# one audit row per decided call. As root and as uid 65534.
# Usage: modern.sh CAPSULE
set -u
capsule=$(realpath "$1")
export CAPSULE_STATE=$(mktemp -d /var/tmp/capsule-probe.XXXXXX)
trap 'rm -rf "$CAPSULE_STATE"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if ! "$capsule" run -- /bin/true 2>/dev/null; then
  echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77
fi
command -v node >/dev/null || { echo "SKIP: node is not installed (scripts/deps.sh test)"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-modern.XXXXXX)
chmod 755 "$work"
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$work" "$CAPSULE_STATE"' EXIT
export CAPSULE_STATE_KEY=
pass=0 fail=0 failed=()
ok() { echo "  ok   $1"; pass=$((pass + 1)); }
bad() { echo "  FAIL $1"; fail=$((fail + 1)); failed+=("$1"); }

caps=$work/caps
agent() {
  mkdir -p "$caps/agents/$1"
  printf '[agent]\nid = "%s"\nname = "%s"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' "$1" "$1" >"$caps/agents/$1/agent.toml"
  printf '#!/bin/sh\n%s\n' "$2" >"$caps/agents/$1/run.sh"
  chmod 755 "$caps/agents/$1/run.sh"
  chmod -R a+rX "$caps"
}
agent asker 'IFS= read -r line; printf "{\"got\":%s}\n" "$line"'
agent echo 'IFS= read -r line; printf "{\"got\":%s}\n" "$line"'

# waits up to 60 s for a condition: no timing is asserted, only that it happens
wait_for() { for _ in $(seq 1 600); do "$@" && return 0; sleep 0.1; done; return 1; }

run_as() {
  local who=$1 state=$work/state-$1 wrap=()
  mkdir -p "$state" && chmod 700 "$state"
  if [ "$who" = nobody ]; then chown 65534:65534 "$state"; wrap=(setpriv --reuid=65534 --regid=65534 --clear-groups --); fi
  echo "as $who:"
  C() { "${wrap[@]}" "$capsule" "$@"; }
  C policy set --caps "$caps" --state "$state" asker dispatch ask >/dev/null
  C policy set --caps "$caps" --state "$state" echo dispatch allow >/dev/null
  C policy set --caps "$caps" --state "$state" --force added dispatch allow >/dev/null # added later
  local t1 t2 port server
  t1=$(C access issue alice --user alice --state "$state" 2>/dev/null)
  t2=$(C access issue bob --user bob --state "$state" 2>/dev/null)
  "${wrap[@]}" "$capsule" serve --caps "$caps" --state "$state" --mcp-http "127.0.0.1:0" --rate 100000 2>"$work/serve-$who.log" &
  server=$!
  pids+=("$server")
  wait_for C serve status --state "$state" >/dev/null 2>&1 || { bad "$who: serve-starts"; cat "$work/serve-$who.log"; return; }
  port=$(C serve status --state "$state" --json | sed -n 's/.*"mcp_http":"127\.0\.0\.1:\([0-9]*\)".*/\1/p')
  local sync=$work/sync-$who
  mkdir -p "$sync" && chmod 777 "$sync"
  (cd "$root/tests" && node "$here/modern.mjs" "http://127.0.0.1:$port/mcp" "$t1" "$t2" "$sync" \
    >"$work/modern-$who.out" 2>"$work/modern-$who.err") &
  local client=$!
  pids+=("$client")
  # a capability added while a subscriptions/listen stream is open
  if wait_for test -e "$sync/listening"; then # made aside, then moved in: one change
    caps=$work/aside agent added 'IFS= read -r line; echo "{}"'
    mv "$work/aside/agents/added" "$caps/agents/added"
  fi
  # serve stopped while one is open: the client sees its graceful end
  wait_for test -e "$sync/stop" || bad "$who: client-reached-stop"
  kill -TERM "$server"
  wait "$client"
  wait "$server"
  while IFS= read -r line; do
    case $line in
      "ok "*) ok "$who: ${line#ok }" ;;
      *) bad "$who: $line" ;;
    esac
  done <"$work/modern-$who.out"
  [ -s "$work/modern-$who.err" ] && tail -20 "$work/modern-$who.err" | sed 's/^/         /'
  rm -rf "$caps/agents/added"
  # one row per decided call: the queued one pending, the accepted one
  # run, the declined and the cancelled ones denied; none for a question
  # asked, a replay or a forged state
  local audit
  audit=$(C audit --json --state "$state" 2>&1)
  count() { # count DECISION [OUTCOME-REGEX]
    node -e 'const [dec, re] = process.argv.slice(1); const a = JSON.parse(require("fs").readFileSync(0, "utf8"));
      console.log(a.filter(r => r.capability === "asker" && r.decision === dec && (!re || new RegExp(re).test(r.outcome))).length)' "$@" <<<"$audit"
  }
  [ "$(count approval-pending)" = 1 ] && ok "$who: audit-ask-queued" || bad "$who: audit-ask-queued ($(count approval-pending))"
  [ "$(count ask-approved '^ok$')" = 1 ] && ok "$who: audit-ask-accepted" || bad "$who: audit-ask-accepted ($(count ask-approved))"
  [ "$(count ask-denied)" = 2 ] && ok "$who: audit-ask-declined-cancelled" || bad "$who: audit-ask-declined-cancelled ($(count ask-denied))"
  local all
  all=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(0, "utf8")).filter(r => r.capability === "asker" && r.decision !== "policy-set").length)' <<<"$audit")
  [ "$all" = 4 ] && ok "$who: audit-one-row-per-decided-call" || { bad "$who: audit-one-row-per-decided-call ($all rows)"; C audit --state "$state" | sed "s/^/         /"; }
  C audit verify --state "$state" >/dev/null 2>&1 && ok "$who: audit-verifies" || bad "$who: audit-verifies"
}

run_as root
if [ "$(id -u)" = 0 ] && [ -z "${ASAN_OPTIONS:-}" ] &&
  setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" 2>/dev/null; then run_as nobody; fi
echo "mcp-modern: $pass passed, $fail failed"
for f in "${failed[@]}"; do echo "FAILED: $f"; done
[ "$fail" = 0 ]
