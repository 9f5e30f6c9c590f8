#!/usr/bin/env bash
# examples/mcp-c (a tiny MCP server in C, the trivial tool of
# bench/mcp/run.sh) as a sandboxed capability: its tools discovered,
# called through `capsule call` (the text, non-ASCII kept; arguments
# outside its schema refused), then through `capsule serve --mcp-http`
# on its warm keeper (curl: a session, calls answered), whose status
# file (`capsule ps`) shows the keeper serving and, once calls stop,
# idle; one audit record per call, `audit verify` passing. As root and
# as uid 65534.
# Usage: mcp_c.sh CAPSULE
set -u
. "$(dirname "$0")/../lib/mcp_c.sh" "$1" mcp-c
export CAPSULE_STATE=$(mktemp -d "$work/probe.XXXXXX")
t() { # t WHO NAME STATUS REGEX CMD...: exit status and output
  local who=$1 name=$2 want=$3 re=$4; shift 4
  local out st
  out=$("${wrap[@]}" "$capsule" "$@" 2>&1); st=$?
  if [ "$st" = "$want" ] && grep -Eq -- "$re" <<<"$out"; then ok "$who: $name"
  else bad "$who: $name (exit $st, wanted $want and /$re/)"; echo "$out" | head -5 | sed 's/^/         /'; fi
}
run_as() {
  mcpc_user "$1"
  t "$who" blocked-until-allowed 4 'blocked by policy' call "${C[@]}" mcp-c test_simple_text '{}'
  t "$who" tools-listed 0 '^ +echo +block' list "${C[@]}"
  "${wrap[@]}" "$capsule" policy set "${C[@]}" mcp-c test_simple_text allow >/dev/null
  "${wrap[@]}" "$capsule" policy set "${C[@]}" mcp-c echo allow >/dev/null
  t "$who" simple-text 0 'This is a simple text response for testing' call "${C[@]}" mcp-c test_simple_text '{}'
  t "$who" echo-non-ascii 0 'héllo wörld' call "${C[@]}" mcp-c echo '{"text":"héllo wörld"}'
  t "$who" echo-schema-refused 1 'missing required property "text"' call "${C[@]}" mcp-c echo '{}'
  local body
  token=$("${wrap[@]}" "$capsule" access issue t --state "$state" 2>/dev/null)
  mcpc_serve "$work/serve-$who.log"
  [ -n "$sid" ] && ok "$who: serve-session" || bad "$who: serve-session"
  local good=0
  for i in 1 2 3 4 5; do
    body=$(post "$url" "$token" "$sid" "{\"jsonrpc\":\"2.0\",\"id\":$i,\"method\":\"tools/call\",\"params\":{\"name\":\"mcp-c__echo\",\"arguments\":{\"text\":\"call $i\"}}}")
    grep -q "\"text\":\"call $i\"" <<<"$body" && ! grep -q '"isError":true' <<<"$body" && good=$((good + 1))
  done
  [ "$good" = 5 ] && ok "$who: serve-calls-answered" || bad "$who: serve-calls-answered ($good of 5; last: ${body:0:200})"
  body=$(post "$url" "$token" "$sid" '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"mcp-c__echo","arguments":{}}}')
  grep -q 'missing required property' <<<"$body" && grep -q '"isError":true' <<<"$body" && ok "$who: serve-schema-refused" || bad "$who: serve-schema-refused (${body:0:200})"
  # the tools as last discovered, changed: serve's compiled schemas follow the file
  local cache
  cache=$(find "$state" -name 'mcp-c.tools.json' | head -1)
  if [ -n "$cache" ] && python3 - "$cache" <<'PY'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
tools = d["tools"] if isinstance(d, dict) else d
for t in tools:
    if t["name"] == "echo":
        (t.get("inputSchema") or t.get("input_schema"))["properties"]["text"]["maxLength"] = 3
json.dump(d, open(p + ".new", "w"))
PY
  then
    mv "$cache.new" "$cache"
    body=$(post "$url" "$token" "$sid" '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mcp-c__echo","arguments":{"text":"long"}}}')
    grep -q '"isError":true' <<<"$body" && grep -qi 'maxLength' <<<"$body" && ok "$who: serve-schema-follows-cache" || bad "$who: serve-schema-follows-cache (${body:0:300})"
  else
    bad "$who: serve-schema-follows-cache (no mcp-c.tools.json under $state, or not rewritable)"
  fi
  # a revoked token stops on its next request, kept or not
  "${wrap[@]}" "$capsule" access revoke t --state "$state" >/dev/null 2>&1
  local code
  code=$(curl -sS -m 60 -o /dev/null -w '%{http_code}' "${H[@]}" -H "Authorization: Bearer $token" -H "Mcp-Session-Id: $sid" \
    -H 'MCP-Protocol-Version: 2025-06-18' --data '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"mcp-c__echo","arguments":{"text":"x"}}}' "$url")
  [ "$code" = 401 ] && ok "$who: serve-revoked-token-refused" || bad "$who: serve-revoked-token-refused (HTTP $code, not 401)"
  # the warm keeper lists itself; shown idle (0 leases) once the calls stopped
  local ps=""
  for _ in $(seq 1 100); do
    ps=$("${wrap[@]}" "$capsule" ps --state "$state" 2>&1)
    grep -Eq '^mcp-c +[0-9]+ +serving +mcp +0/' <<<"$ps" && break
    sleep 0.1
  done
  grep -Eq '^mcp-c +[0-9]+ +serving +mcp +0/' <<<"$ps" && ok "$who: keeper-shown-idle" || { bad "$who: keeper-shown-idle"; echo "$ps" | sed 's/^/         /'; }
  # four calls by `capsule call` (one blocked, one refused) and seven through serve (two refused)
  t "$who" audit-verifies 0 'audit log verified: [0-9]+ records' audit verify --state "$state"
  local n
  n=$("${wrap[@]}" "$capsule" audit --json --state "$state" 2>/dev/null | python3 -c '
import json, sys
print(sum(1 for r in json.load(sys.stdin) if r["capability"] == "mcp-c" and not r["decision"].startswith("policy")))')
  [ "$n" = 11 ] && ok "$who: audit-one-record-per-call" || bad "$who: audit-one-record-per-call ($n, not 11)"
  kill "${pids[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null
  pids=()
  "${wrap[@]}" "$capsule" stop --state "$state" mcp-c >/dev/null 2>&1 # its warm keeper
}
run_as root
if setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$root/examples/mcp-c/server" 2>/dev/null; then
  run_as nobody
else
  echo "  (uid 65534 cannot reach $root: skipped as nobody)"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
