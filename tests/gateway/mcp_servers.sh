#!/usr/bin/env bash
# Third-party MCP servers as capabilities (x-capsule.mcp_server): the
# reference servers from npm (@modelcontextprotocol/server-filesystem and
# server-everything, installed in examples/mcp-filesystem by
# scripts/deps.sh), each started in its capability's sandbox for every
# exchange; their tools discovered with tools/list, blocked until a policy
# allows them, validated, audited; the sandbox, not the server, decides
# what they reach; server requests (sampling) refused; servers that crash,
# babble or hang. As root and as uid 65534.
# Usage: mcp_servers.sh CAPSULE
set -u
source "$(dirname "$0")/../lib/gateway.sh"
here=$(cd "$(dirname "$0")" && pwd)
example=$here/../../examples/mcp-filesystem
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
[ -d "$example/node_modules/@modelcontextprotocol/server-filesystem" ] ||
  { echo "SKIP: examples/mcp-filesystem's modules are not installed (scripts/deps.sh test)"; exit 77; }
command -v jq >/dev/null || { echo "SKIP: jq is not installed"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-mcp.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT

# caps WHO: a capabilities directory of WHO's with the servers
setup() {
  local who=$1 caps=$work/$1/caps data=$work/$1/data
  mkdir -p "$caps" "$data"
  echo "hello from the data" >"$data/hello.txt"
  echo "secret outside the grant" >"$work/$1/outside.txt"
  chmod 644 "$work/$1/outside.txt"
  cp -a "$example" "$caps/fs"
  rm -f "$caps/fs/capability.json"
  # the server is told it may read all of the test's directory; the grant is the data only
  printf '{"version": "0.1.0", "filesystem": {"grants": [{"path": "%s", "access": "readwrite"}]},
 "network": {"mode": "blocked"},
 "x-capsule": {"mcp_server": ["node", "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", "%s"]}}\n' \
    "$data" "$work" >"$caps/fs/capability.json"
  mkdir -p "$caps/every"
  cp -a "$example/node_modules" "$caps/every/node_modules"
  printf '{"version": "0.1.0", "network": {"mode": "blocked"},
 "x-capsule": {"mcp_server": ["node", "node_modules/@modelcontextprotocol/server-everything/dist/index.js", "stdio"]}}\n' \
    >"$caps/every/capability.json"
  mkdir -p "$caps/crash" "$caps/babble"
  printf '{"version": "0.1.0", "x-capsule": {"mcp_server": ["/bin/sh", "-c", "echo dying >&2; exit 3"]}}\n' \
    >"$caps/crash/capability.json"
  printf '{"version": "0.1.0", "x-capsule": {"mcp_server": ["/bin/sh", "-c", "echo not json; echo {\\"jsonrpc\\": 1}; sleep 600"]}}\n' \
    >"$caps/babble/capability.json"
  [ "$who" = root ] || chown -R 65534:65534 "$work/$who"
}

suite() { # WHO
  local who=$1 caps=$work/$1/caps data=$work/$1/data state=$work/$1/state
  local C=("$capsule")
  [ "$who" = root ] || C=(setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/nonexistent "$capsule")
  local G=(--caps "$caps" --state "$state")
  echo "as $who"
  run() { (cd /tmp && "${C[@]}" "$@" 2>&1 </dev/null); }
  out=$(run list "${G[@]}")
  grep -q "fs  (nono, mcp-stdio)  ready" <<<"$out" && grep -q "discovered through tools/list on the first call" <<<"$out" &&
    ok "$who: list: ready, tools discovered on the first call" || { bad "$who: list before discovery"; echo "$out" | head -5; }
  out=$(run call "${G[@]}" fs read_text_file "{\"path\": \"$data/hello.txt\"}"); st=$?
  [ $st = 4 ] && grep -q "blocked by policy (default)" <<<"$out" && ok "$who: a discovered tool is blocked until allowed" ||
    { bad "$who: blocked by default (exit $st)"; echo "$out" | head -3; }
  out=$(run list "${G[@]}")
  grep -qE "^  read_text_file +block \(default\)" <<<"$out" && grep -qE "^  list_allowed_directories " <<<"$out" &&
    ok "$who: list shows the server's tools" || { bad "$who: list after discovery"; echo "$out" | head -5; }
  run policy set "${G[@]}" fs read_text_file allow >/dev/null
  out=$(run call "${G[@]}" fs read_text_file "{\"path\": \"$data/hello.txt\"}"); st=$?
  [ $st = 0 ] && [ "$(jq -r .content <<<"$out")" = "hello from the data" ] &&
    ok "$who: tools/call through the sandboxed server" || { bad "$who: call (exit $st)"; echo "$out" | head -3; }
  out=$(run call "${G[@]}" fs read_text_file "{\"path\": \"$work/$who/outside.txt\"}"); st=$?
  [ $st = 1 ] && ! grep -q "secret outside" <<<"$out" && grep -q "the tool failed: .*ENOENT" <<<"$out" &&
    ok "$who: the server allows it, the sandbox does not: a file outside the grant stays unread" ||
    { bad "$who: outside the grant (exit $st)"; echo "$out" | head -3; }
  out=$(run call "${G[@]}" fs read_text_file '{"nopath": 1}'); st=$?
  [ $st = 1 ] && grep -q "do not match the tool's input schema" <<<"$out" &&
    ok "$who: arguments validated against the server's inputSchema" || { bad "$who: validation (exit $st)"; echo "$out" | head -3; }
  # not discovered yet: --force
  for tool in echo structuredContent sampleLLM printEnv; do run policy set "${G[@]}" --force every $tool allow >/dev/null; done
  out=$(run call "${G[@]}" every echo '{"message": "hi"}'); st=$?
  [ $st = 0 ] && [ "$out" = '"Echo: hi"' ] && ok "$who: server-everything echo (it never exits: stopped after its answer)" ||
    { bad "$who: everything echo (exit $st)"; echo "$out" | head -3; }
  out=$(run call "${G[@]}" every structuredContent '{"location": "Paris"}'); st=$?
  [ $st = 0 ] && jq -e '.temperature | numbers' <<<"$out" >/dev/null && ok "$who: structuredContent is the result" ||
    { bad "$who: structuredContent (exit $st)"; echo "$out" | head -3; }
  out=$(run call "${G[@]}" every sampleLLM '{"prompt": "x"}'); st=$?
  [ $st = 1 ] && grep -q "capsule does not offer sampling/createMessage" <<<"$out" &&
    ok "$who: a sampling request from the server is refused, not left hanging" || { bad "$who: sampling (exit $st)"; echo "$out" | head -3; }
  out=$(CAPSULE_STATE_KEY= run call "${G[@]}" every printEnv '{}'); st=$?
  [ $st = 0 ] && jq -e 'has("CAPSULE_SANDBOX") and (has("CAPSULE_STATE_KEY") | not) and (has("HOME"))' <<<"$out" >/dev/null &&
    ok "$who: the server sees the sandbox's environment only" || { bad "$who: printEnv (exit $st)"; echo "$out" | head -3; }
  out=$(run call "${G[@]}" crash anything '{}'); st=$?
  [ $st = 1 ] && grep -q "exited before it answered" <<<"$out" && grep -q "dying" <<<"$out" &&
    ok "$who: a server that exits: a clear error and its stderr" || { bad "$who: crash (exit $st)"; echo "$out" | head -4; }
  out=$(run call "${G[@]}" --timeout 3 babble anything '{}'); st=$?
  [ $st = 1 ] && grep -q "did not answer in time" <<<"$out" &&
    ok "$who: a server that babbles and hangs: stopped at the deadline" || { bad "$who: babble (exit $st)"; echo "$out" | head -4; }
  out=$(run audit --json --state "$state")
  jq -e '[.[] | select(.capability == "fs" and .tool == "read_text_file")] | length >= 3' <<<"$out" >/dev/null &&
    ok "$who: every call audited" || bad "$who: audit"
}

setup root
suite root
if id nobody >/dev/null 2>&1; then setup nobody; suite nobody; fi
finish "MCP servers as capabilities"
