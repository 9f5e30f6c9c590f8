#!/usr/bin/env bash
# Resumable streams of `capsule serve --mcp-http` (Last-Event-ID), driven
# by the official TypeScript SDK client (tests/mcp/resume.mjs): a call's
# SSE answer cut mid-call and resumed (every progress notification and the
# result once, one audit record), the session's GET stream cut while
# resources/updated notifications are sent (examples/mcp-c's `touch`) and
# resumed, another session's or an unknown event id refused. As root and
# as uid 65534.
# Usage: resume.sh CAPSULE
set -u
capsule=$(realpath "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/tests/mcp
command -v node >/dev/null || { echo "SKIP: node is not installed (scripts/deps.sh test)"; exit 77; }
[ -d "$root/tests/node_modules/@modelcontextprotocol/sdk" ] ||
  { echo "SKIP: @modelcontextprotocol/sdk is not installed (cd tests && npm ci)"; exit 77; }
export CAPSULE_STATE=$(mktemp -d /var/tmp/capsule-probe.XXXXXX)
work=$(mktemp -d /var/tmp/capsule-resume.XXXXXX)
chmod 755 "$work"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; sleep 0.5; rm -rf "$work" "$CAPSULE_STATE"' EXIT
if ! "$capsule" run -- /bin/true 2>/dev/null; then
  echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77
fi
# the GET stream's part needs examples/mcp-c (libjansson-dev); without it, skipped alone
resources=0
if pkg-config --exists jansson 2>/dev/null && make -s -C "$root/examples/mcp-c" >/dev/null 2>&1; then
  resources=1
else
  echo "  (libjansson-dev is not installed: the GET stream's checks skipped)"
fi
export CAPSULE_STATE_KEY=
pass=0 fail=0 failed=()
ok() { echo "  ok   $1"; pass=$((pass + 1)); }
bad() { echo "  FAIL $1"; fail=$((fail + 1)); failed+=("$1"); }
wait_for() { for _ in $(seq 1 600); do "$@" && return 0; sleep 0.1; done; return 1; }

run_as() {
  local who=$1 state=$work/state-$1 caps=$work/caps-$1 wrap=()
  mkdir -p "$state" "$caps/agents/ticker" && chmod 700 "$state"
  # a Covenant agent that runs 6 s: capsule's progress every second
  printf '[agent]\nid = "ticker"\nname = "ticker"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 60000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' >"$caps/agents/ticker/agent.toml"
  printf '#!/bin/sh\nIFS= read -r line\nsleep 6\necho "{\\"done\\":true}"\n' >"$caps/agents/ticker/run.sh"
  chmod 755 "$caps/agents/ticker/run.sh"
  [ "$resources" = 1 ] && cp -a "$root/examples/mcp-c" "$caps/mcp-c"
  chmod -R a+rX "$caps"
  if [ "$who" = nobody ]; then
    chown -R 65534:65534 "$state" "$caps"
    wrap=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  fi
  echo "as $who:"
  C() { "${wrap[@]}" "$capsule" "$@"; }
  local G=(--caps "$caps" --state "$state")
  C policy set "${G[@]}" ticker dispatch allow >/dev/null
  if [ "$resources" = 1 ]; then
    C call "${G[@]}" mcp-c test_simple_text '{}' >/dev/null 2>&1 # discovers its tools
    C policy set "${G[@]}" mcp-c touch allow >/dev/null
  fi
  local token port
  token=$(C access issue t --state "$state" 2>/dev/null)
  "${wrap[@]}" "$capsule" serve "${G[@]}" --mcp-http 127.0.0.1:0 --rate 100000 2>"$work/serve-$who.log" &
  pids+=($!)
  wait_for C serve status --state "$state" >/dev/null 2>&1
  port=$(C serve status --state "$state" --json 2>/dev/null | sed -n 's/.*"mcp_http":"127\.0\.0\.1:\([0-9]*\)".*/\1/p')
  [ -n "$port" ] && ok "$who: serve-starts" || { bad "$who: serve-starts"; head -5 "$work/serve-$who.log"; return; }
  (cd "$root/tests" && timeout 600 node "$here/resume.mjs" "http://127.0.0.1:$port/mcp" "$token" "$resources" \
    >"$work/node-$who.out" 2>"$work/node-$who.err")
  while IFS= read -r line; do
    case $line in
      "ok "*) ok "$who: ${line#ok }" ;;
      *) bad "$who: $line" ;;
    esac
  done <"$work/node-$who.out"
  [ -s "$work/node-$who.err" ] && tail -20 "$work/node-$who.err" | sed 's/^/         /'
  grep -q '^ok all-checks-ran' "$work/node-$who.out" || bad "$who: the client ended before its last check"
  local n
  n=$(C audit --json --state "$state" 2>/dev/null | python3 -c '
import json, sys
print(sum(1 for r in json.load(sys.stdin) if r["capability"] == "ticker" and not r["decision"].startswith("policy")))')
  [ "$n" = 1 ] && ok "$who: resumed-call-one-audit-record" || bad "$who: resumed-call-one-audit-record ($n records)"
  kill "${pids[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null
  pids=()
  [ "$resources" = 1 ] && C stop --state "$state" mcp-c >/dev/null 2>&1
}
run_as root
if [ "$(id -u)" = 0 ] && [ -z "${ASAN_OPTIONS:-}" ] &&
  setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" 2>/dev/null; then
  run_as nobody
else
  echo "  (uid 65534 cannot reach $capsule, or a sanitizer build: skipped as nobody)"
fi
echo "resume: $pass passed, $fail failed"
for f in "${failed[@]}"; do echo "FAILED: $f"; done
[ "$fail" = 0 ]
