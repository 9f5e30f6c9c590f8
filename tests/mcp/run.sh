#!/usr/bin/env bash
# `capsule mcp` driven by the official MCP TypeScript SDK client
# (tests/mcp/client.mjs): tools/list (names, pagination, collisions,
# blocked tools left out, annotations), tools/call (allowed, validation
# failure, blocked, ask through the approval queue and through
# elicitation, progress, cancellation), one capability under its tools'
# own names, a capability added and removed while it runs (the registry
# reloaded, the client told, a call in flight finishing), and raw
# malformed input (parse errors, batches, a huge message, bad ids and
# params, unknown methods, version negotiation).
# Then the audit: one record per call, the elicited decisions, the
# cancelled call. As root and as uid 65534.
# Usage: run.sh CAPSULE
set -u
capsule=$(realpath "$1")
# `capsule run` (the probe, the sandbox checks) on a state of its own, not the caller's default
export CAPSULE_STATE=$(mktemp -d /var/tmp/capsule-probe.XXXXXX)
trap 'rm -rf "$CAPSULE_STATE"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if ! "$capsule" run -- /bin/true 2>/dev/null; then
  echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77
fi
command -v node >/dev/null || { echo "SKIP: node is not installed (scripts/deps.sh test)"; exit 77; }
[ -d "$root/tests/node_modules/@modelcontextprotocol/sdk" ] ||
  { echo "SKIP: @modelcontextprotocol/sdk is not installed (cd tests && npm ci)"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-mcp.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work" "$CAPSULE_STATE"' EXIT
[ -n "${KEEP:-}" ] && trap - EXIT
export CAPSULE_STATE_KEY=
pass=0 fail=0
ok() { echo "  ok   $1"; pass=$((pass + 1)); }
bad() { echo "  FAIL $1"; fail=$((fail + 1)); }

caps=$work/caps
agent() { # agent ID SCRIPT-BODY: a Covenant agent in sh
  mkdir -p "$caps/agents/$1"
  printf '[agent]\nid = "%s"\nname = "%s"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' "$1" "$1" >"$caps/agents/$1/agent.toml"
  printf '#!/bin/sh\n%s\n' "$2" >"$caps/agents/$1/run.sh"
  chmod 755 "$caps/agents/$1/run.sh"
}
mkdir -p "$caps/agents"
cp -r "$root/examples/covenant/agents/wordcount" "$caps/agents/wordcount"
agent asker 'IFS= read -r line; printf "{\"got\":%s}\n" "$line"'
agent blocked 'IFS= read -r line; printf "{\"got\":%s}\n" "$line"'
agent slow 'IFS= read -r line; sleep 3; echo "{\"done\":true}"'
agent hang 'IFS= read -r line; sleep 600'
# a Talos plugin with 123 tools: two pages, two names that collide, one
# too long for hosts (MCP names: at most 64 characters)
long=long_$(printf 'x%.0s' $(seq 1 75))
mkdir -p "$caps/many"
{
  printf '{"id": "many", "name": "Many", "description": "d", "version": "1.0.0", "logName": "many", "functions": ['
  for i in $(seq 1 120); do printf '{"name": "fn%03d", "description": "f", "parameters": {"type": "object"}},' "$i"; done
  printf '{"name": "do.it", "description": "x", "parameters": {"type": "object"}},'
  printf '{"name": "do_it", "description": "y", "parameters": {"type": "object"}},'
  printf '{"name": "%s", "description": "z", "parameters": {"type": "object"}}]}\n' "$long"
} >"$caps/many/manifest.json"
{
  for i in $(seq 1 120); do printf 'export async function fn%03d() { return { n: %d }; }\n' "$i" "$i"; done
  printf 'async function dot() { return { which: "dot" }; }\nexport { dot as "do.it" };\n'
  printf 'export async function do_it() { return { which: "underscore" }; }\n'
  printf 'export async function %s() { return { which: "long" }; }\n' "$long"
} >"$caps/many/index.js"
printf 'Use fn001 to count.\nNever call do.it twice.\n' >"$caps/many/prompt.md" # Talos: a prompt
chmod -R a+rX "$caps"

run_as() { # run_as WHO: the client checks, then the audit
  local who=$1 state=$work/state-$1 wrap=()
  mkdir -p "$state"
  if [ "$who" = nobody ]; then
    chown 65534:65534 "$state"
    wrap=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  fi
  chmod 700 "$state"
  for t in wordcount slow hang; do
    "${wrap[@]}" "$capsule" policy set --caps "$caps" --state "$state" "$t" dispatch allow >/dev/null
  done
  "${wrap[@]}" "$capsule" policy set --caps "$caps" --state "$state" asker dispatch ask >/dev/null
  # the capability client.mjs adds while capsule mcp runs (its reload)
  "${wrap[@]}" "$capsule" policy set --force --caps "$caps" --state "$state" added dispatch allow >/dev/null
  # wordcount requires tool.wordcount: the caller's token for it (Covenant)
  "${wrap[@]}" "$capsule" token issue local tool.wordcount --state "$state" >/dev/null
  for f in $(seq 1 120 | xargs printf 'fn%03d ') do.it do_it "$long"; do
    "${wrap[@]}" "$capsule" policy set --caps "$caps" --state "$state" many "$f" allow >/dev/null
  done
  echo "as $who:"
  while IFS= read -r line; do
    case $line in
      "ok "*) ok "$who: ${line#ok }" ;;
      *) bad "$who: $line" ;;
    esac
  done < <(cd "$root/tests" && node "$here/client.mjs" "$capsule" "$caps" "$state" "${wrap[@]}" 2>"$work/client-$who.err")
  [ -s "$work/client-$who.err" ] && sed 's/^/         /' "$work/client-$who.err" | tail -20
  local audit
  audit=$("${wrap[@]}" "$capsule" audit --json --state "$state" 2>&1)
  count() { # count CAP DECISION [OUTCOME-REGEX]
    node -e 'const [cap, dec, re] = process.argv.slice(1); const a = JSON.parse(require("fs").readFileSync(0, "utf8"));
      console.log(a.filter(r => r.capability === cap && r.decision === dec && (!re || new RegExp(re).test(r.outcome))).length)' "$@" <<<"$audit"
  }
  [ "$(count wordcount allow '^ok$')" = 3 ] && ok "$who: audit-allowed-calls" || bad "$who: audit-allowed-calls ($(count wordcount allow '^ok$'))"
  [ "$(count wordcount refused 'invalid arguments')" = 1 ] && ok "$who: audit-validation" || bad "$who: audit-validation"
  [ "$(count blocked block)" = 1 ] && ok "$who: audit-blocked" || bad "$who: audit-blocked"
  [ "$(count asker approval-pending)" = 1 ] && ok "$who: audit-ask-pending" || bad "$who: audit-ask-pending"
  [ "$(count asker ask-approved '^ok$')" = 1 ] && ok "$who: audit-elicit-accepted" || bad "$who: audit-elicit-accepted"
  [ "$(count asker ask-denied)" = 1 ] && ok "$who: audit-elicit-declined" || bad "$who: audit-elicit-declined"
  local hang_ok hang_all
  hang_all=$(count hang allow) hang_ok=$(count hang allow '^ok$')
  [ "$hang_all" = 1 ] && [ "$hang_ok" = 0 ] && ok "$who: audit-cancelled" || bad "$who: audit-cancelled ($hang_all records, $hang_ok ok)"
  "${wrap[@]}" "$capsule" audit verify --state "$state" >/dev/null 2>&1 && ok "$who: audit-verifies" || bad "$who: audit-verifies"
}

run_as root
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
   [ -z "${ASAN_OPTIONS:-}" ] &&
   setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" 2>/dev/null &&
   setpriv --reuid=65534 --regid=65534 --clear-groups -- test -r "$here/client.mjs" 2>/dev/null; then
  run_as nobody
else
  echo "  (uid 65534: skipped in a sanitizer build, whose runtime cannot map its shadow memory"
  echo "   under the sandbox's RLIMIT_DATA fallback, or uid 65534 cannot reach $capsule)"
fi
echo "mcp: $pass passed, $fail failed"
[ "$fail" = 0 ]
