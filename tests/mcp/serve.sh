#!/usr/bin/env bash
# `capsule serve`: MCP Streamable HTTP driven by the official TypeScript
# SDK client (tests/mcp/http.mjs: bearer tokens, Origin and Host checks,
# size limits, sessions bound to their token's user, calls, progress,
# elicitation over SSE, the unix socket), the calls audited as the token's
# user, reload through inotify, `serve status`, SIGTERM, and the refusal
# of a non-loopback address without TLS. As root and as uid 65534.
# Usage: serve.sh CAPSULE
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
work=$(mktemp -d /var/tmp/capsule-serve.XXXXXX)
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
mkdir -p "$caps/agents"
cp -r "$root/examples/covenant/agents/wordcount" "$caps/agents/wordcount"
agent asker 'IFS= read -r line; printf "{\"got\":%s}\n" "$line"'
agent blocked 'IFS= read -r line; printf "{\"got\":%s}\n" "$line"'
agent slow 'IFS= read -r line; sleep 3; echo "{\"done\":true}"'
agent hang 'IFS= read -r line; sleep 600'
sed -i 's/cpu_ms_per_task = 5000/cpu_ms_per_task = 120000/' "$caps/agents/hang/agent.toml" # no limit stops it first

# waits up to 20 s for a condition (a server starting, a reload): no
# timing is asserted, only that it happens
wait_for() { for _ in $(seq 1 600); do "$@" && return 0; sleep 0.1; done; return 1; }

run_as() {
  local who=$1 state=$work/state-$1 wrap=()
  mkdir -p "$state" && chmod 700 "$state"
  if [ "$who" = nobody ]; then chown 65534:65534 "$state"; wrap=(setpriv --reuid=65534 --regid=65534 --clear-groups --); fi
  echo "as $who:"
  C() { "${wrap[@]}" "$capsule" "$@"; }
  for t in wordcount slow hang; do C policy set --caps "$caps" --state "$state" "$t" dispatch allow >/dev/null; done
  C policy set --caps "$caps" --state "$state" asker dispatch ask >/dev/null
  C token issue local tool.wordcount --state "$state" >/dev/null # wordcount requires it (Covenant)
  local t1 t2
  t1=$(C access issue alice --user alice --state "$state" 2>/dev/null)
  t2=$(C access issue bob --user bob --state "$state" 2>/dev/null)
  local port server=
  # port 0: a free one, which `serve status` names (no collision to retry)
  "${wrap[@]}" "$capsule" serve --caps "$caps" --state "$state" --mcp-http "127.0.0.1:0" --rate 100000 2>"$work/serve-$who.log" &
  server=$!
  pids+=("$server")
  wait_for C serve status --state "$state" >/dev/null 2>&1 || server=
  [ -n "$server" ] && ok "$who: serve-starts" || { bad "$who: serve-starts"; cat "$work/serve-$who.log"; return; }
  port=$(C serve status --state "$state" --json | sed -n 's/.*"mcp_http":"127\.0\.0\.1:\([0-9]*\)".*/\1/p')
  [ -n "$port" ] && [ "$port" != 0 ] && C serve status --state "$state" | grep -q "^mcp_http  *127.0.0.1:$port\$" &&
    ok "$who: status-names-bound-port" || { bad "$who: status-names-bound-port ($port)"; C serve status --state "$state"; return; }
  C serve status --state "$state" --json | grep -q '"state":"serving"' && ok "$who: status-json" || bad "$who: status-json"
  [ "$(stat -c %a "$state/serve.sock")" = 600 ] && ok "$who: socket-0600" || bad "$who: socket-0600"
  C serve --caps "$caps" --state "$state" >/dev/null 2>"$work/second.err"
  [ $? = 1 ] && grep -q "already runs" "$work/second.err" && ok "$who: one-serve-per-state" || bad "$who: one-serve-per-state"
  while IFS= read -r line; do
    case $line in
      "ok "*) ok "$who: ${line#ok }" ;;
      *) bad "$who: $line" ;;
    esac
  done < <(cd "$root/tests" && node "$here/http.mjs" "http://127.0.0.1:$port/mcp" "$t1" "$t2" "$state/serve.sock" 2>"$work/http-$who.err")
  [ -s "$work/http-$who.err" ] && tail -20 "$work/http-$who.err" | sed 's/^/         /'
  local audit
  slow_done() { [ "$(C audit --state "$state" | grep -Ec ' alice slow\.dispatch allow [0-9]+ms ok')" = 3 ]; }
  wait_for slow_done && ok "$who: disconnected-call-audited" || bad "$who: disconnected-call-audited"
  slow_stopped() { C audit --state "$state" | grep -Eq ' alice hang\.dispatch allow [0-9]+ms (the agent failed with exit status 143|interrupted)'; }
  wait_for slow_stopped && ok "$who: modern-stream-close-cancels" || bad "$who: modern-stream-close-cancels"
  audit=$(C audit --state "$state")
  grep -Eq ' alice wordcount\.dispatch allow [0-9]+ms ok' <<<"$audit" && ok "$who: audited-as-token-user" || bad "$who: audited-as-token-user"
  grep -Eq ' bob asker\.dispatch ask-approved ' <<<"$audit" && ok "$who: elicited-as-token-user" || bad "$who: elicited-as-token-user"
  # a Covenant call runs its pipeline in serve, on serve's state
  # connection; only its run step is a child (docs/serve.md "Where a call
  # runs"): while it runs, serve has a child, and no child holds the state
  # database open
  local hdr=(-H "Authorization: Bearer $t1" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
  local sid
  sid=$(curl -s -D - -o /dev/null "${hdr[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}' \
    "http://127.0.0.1:$port/mcp" | tr -d '\r' | sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: //p')
  curl -s -o "$work/apart-$who.out" "${hdr[@]}" -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-11-25' \
    -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow__dispatch","arguments":{"text":"apart"}}}' \
    "http://127.0.0.1:$port/mcp" &
  local caller=$! kids=
  serve_kids() { kids=$(ps -o pid=,comm= --ppid "$server" | awk '$2 != "capsule-spawner" {print $1}'); [ -n "$kids" ]; } # not the warm Selu spawner, always there
  if wait_for serve_kids; then
    # a child seen right after its fork still holds what serve held,
    # until its close_range a moment later: a descriptor that lasts is one
    local opened= k
    holds() { ls -l "/proc/$1/fd/" 2>/dev/null | grep -q 'state\.db'; }
    for k in $kids; do
      holds "$k" && { sleep 0.5; holds "$k"; } && opened="$opened $k"
    done
    [ -z "$opened" ] && ok "$who: call-run-apart-no-state-open" || bad "$who: call-run-apart-no-state-open (children with state.db open:$opened)"
  else
    bad "$who: call-run-apart-no-state-open (no child of serve ran the call)"
  fi
  wait "$caller"
  grep -q '"isError":false' "$work/apart-$who.out" && ok "$who: call-run-apart-answered" || { bad "$who: call-run-apart-answered"; cat "$work/apart-$who.out"; }
  # a Talos function without OAuth runs apart too: its setting, read in
  # serve before the fork, reaches the handler in the child
  mkdir -p "$caps/adder"
  printf '%s\n' '{"id": "adder", "name": "Adder", "description": "Adds.", "version": "1.0.0",' \
    ' "settings": [{"name": "bonus", "label": "Bonus", "type": "number", "default": "0"}],' \
    ' "functions": [{"name": "add", "description": "Adds.", "parameters": {"type": "object", "properties": {"a": {"type": "number"}}}}]}' \
    >"$caps/adder/manifest.json"
  echo 'export async function add({ a }, config) { return { sum: a + Number(config.bonus) }; }' >"$caps/adder/index.mjs"
  chmod -R a+rX "$caps/adder"
  C policy set --caps "$caps" --state "$state" adder add allow >/dev/null
  C config set --caps "$caps" --state "$state" adder bonus 100 >/dev/null
  talos_listed() { curl -s "${hdr[@]}" -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-11-25' \
    -d '{"jsonrpc":"2.0","id":3,"method":"tools/list"}' "http://127.0.0.1:$port/mcp" | grep -q adder__add; }
  wait_for talos_listed
  curl -s -o "$work/talos-$who.out" "${hdr[@]}" -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-11-25' \
    -d '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"adder__add","arguments":{"a":1}}}' \
    "http://127.0.0.1:$port/mcp"
  grep -q '"structuredContent":{"sum":101}' "$work/talos-$who.out" && ok "$who: talos-run-apart-settings" ||
    { bad "$who: talos-run-apart-settings"; cat "$work/talos-$who.out"; }
  # a 2025 HTTP session offered prompts (adder's prompt.md) and their
  # changes: its GET stream is told the tools' and the prompts' lists
  # changed on the reload below
  printf 'Add numbers with adder__add.\n' >"$caps/adder/prompt.md"
  chmod a+r "$caps/adder/prompt.md"
  prompts_offered() {
    curl -s -D "$work/init2-$who.h" -o "$work/init2-$who.out" "${hdr[@]}" \
      -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}' \
      "http://127.0.0.1:$port/mcp"
    grep -q '"prompts":{"listChanged":true}' "$work/init2-$who.out"
  }
  wait_for prompts_offered && grep -q '"tools":{"listChanged":true}' "$work/init2-$who.out" &&
    ok "$who: http-lists-changes-declared" || { bad "$who: http-lists-changes-declared"; cat "$work/init2-$who.out"; }
  local sid2 getter
  sid2=$(tr -d '\r' <"$work/init2-$who.h" | sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: //p')
  curl -s -N -o "$work/get-$who.out" "${hdr[@]}" -H "Mcp-Session-Id: $sid2" -H 'MCP-Protocol-Version: 2025-11-25' \
    "http://127.0.0.1:$port/mcp" &
  getter=$!
  wait_for test -s "$work/get-$who.out" || bad "$who: get-stream-opens (no priming event)"
  # a capability added while serving: an open session on the socket is
  # told its list changed and lists it; a new session lists it
  rm -f "$work/ready-$who"
  (cd "$root/tests" && node "$here/listen.mjs" "$state/serve.sock" "$work/ready-$who" added__dispatch >"$work/listen-$who.out" 2>&1) &
  local listener=$!
  wait_for test -e "$work/ready-$who" || bad "$who: listener-ready"
  agent added 'IFS= read -r line; echo "{}"'
  C policy set --caps "$caps" --state "$state" added dispatch allow >/dev/null
  listed() { printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}' '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' |
    (cd "$root/tests" && node -e 'const c = require("net").createConnection(process.argv[1]); let o = ""; c.on("data", d => { o += d; if (o.split("\n").length > 2) c.end(); }); c.on("close", () => process.exit(/added__dispatch/.test(o) ? 0 : 1)); process.stdin.pipe(c, {end: false});' "$state/serve.sock"); }
  wait_for listed && ok "$who: reload-on-change" || bad "$who: reload-on-change"
  wait "$listener"
  grep -qx added__dispatch "$work/listen-$who.out" && ok "$who: list-changed-notified" || { bad "$who: list-changed-notified"; head -3 "$work/listen-$who.out"; }
  get_told() { grep -q 'notifications/tools/list_changed' "$work/get-$who.out" && grep -q 'notifications/prompts/list_changed' "$work/get-$who.out"; }
  wait_for get_told && ok "$who: http-get-stream-lists-changed" || { bad "$who: http-get-stream-lists-changed"; cat "$work/get-$who.out"; }
  # the token revoked while its session's GET stream is open: the stream
  # ends (at its next keep-alive, within about a second) and carries
  # nothing more; the next change is told to no one of that token
  C access revoke alice --state "$state" >/dev/null
  local told_before
  told_before=$(grep -c 'list_changed' "$work/get-$who.out")
  ended() { ! kill -0 "$getter" 2>/dev/null; }
  wait_for ended && ok "$who: revoked-token-stream-ends" || bad "$who: revoked-token-stream-ends (the GET stream is still open)"
  agent added2 'IFS= read -r line; echo "{}"'
  sleep 1.5 # the reload's notifications, were they still sent
  [ "$(grep -c 'list_changed' "$work/get-$who.out")" = "$told_before" ] && ok "$who: revoked-token-told-nothing" ||
    { bad "$who: revoked-token-told-nothing"; tail -5 "$work/get-$who.out"; }
  kill "$getter" 2>/dev/null
  grep -q '"msg":"registry loaded"' "$work/serve-$who.log" && ok "$who: json-logs" || bad "$who: json-logs"
  kill -TERM "$server"
  wait "$server"; local st=$?
  [ $st = 0 ] && ok "$who: sigterm-exits-0" || bad "$who: sigterm-exits-0 ($st)"
  C serve status --state "$state" >/dev/null; [ $? = 1 ] && ok "$who: status-stopped" || bad "$who: status-stopped"
  [ ! -e "$state/serve.sock" ] && ok "$who: socket-removed" || bad "$who: socket-removed"
  C serve --caps "$caps" --state "$state" --mcp-http "0.0.0.0:$port" 2>"$work/insecure.err"
  [ $? = 2 ] && grep -q "not a loopback address" "$work/insecure.err" && ok "$who: non-loopback-needs-tls" || bad "$who: non-loopback-needs-tls"
  rm -rf "$caps/agents/added" "$caps/agents/added2" "$caps/adder"
}

tls() { # HTTPS with --tls-cert/--tls-key: a client trusting the certificate talks; plain HTTP does not
  command -v openssl >/dev/null && command -v curl >/dev/null || { echo "  (no openssl or curl: TLS skipped)"; return; }
  local state=$work/state-tls port server= t
  mkdir -p "$state" && chmod 700 "$state"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/key.pem" -out "$work/cert.pem" \
    -days 2 -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
  t=$("$capsule" access issue tls --state "$state" 2>/dev/null)
  for _ in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 20000))
    "$capsule" serve --caps "$caps" --state "$state" --mcp-http "127.0.0.1:$port" --tls-cert "$work/cert.pem" \
      --tls-key "$work/key.pem" --rate 1 2>"$work/serve-tls.log" &
    server=$!
    pids+=("$server")
    if wait_for "$capsule" serve status --state "$state" >/dev/null 2>&1; then break; fi
    server=
  done
  [ -n "$server" ] || { bad "tls: serve-starts"; cat "$work/serve-tls.log"; return; }
  local init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}'
  curl -s --cacert "$work/cert.pem" -X POST "https://127.0.0.1:$port/mcp" -H "Authorization: Bearer $t" -d "$init" |
    grep -q '"protocolVersion":"2025-11-25"' && ok "tls: https-initialize" || bad "tls: https-initialize"
  curl -s -o /dev/null "http://127.0.0.1:$port/mcp" -H "Authorization: Bearer $t" -d "$init" && bad "tls: plain-http-refused" || ok "tls: plain-http-refused"
  # --rate 1: a burst of 2, then one a second; 10 requests at once cannot all pass
  local codes
  codes=$(for _ in $(seq 1 10); do curl -s -o /dev/null -w '%{http_code}\n' --cacert "$work/cert.pem" -X POST \
    "https://127.0.0.1:$port/mcp" -H "Authorization: Bearer $t" -d "$init"; done)
  grep -qx 429 <<<"$codes" && grep -qx 200 <<<"$codes" && ok "tls: rate-limited-429" || bad "tls: rate-limited-429 ($(echo $codes))"
  "$capsule" serve --caps "$caps" --state "$work/state-tls2" --mcp-http "127.0.0.1:1" --tls-cert "$work/cert.pem" 2>"$work/tls.err"
  [ $? = 2 ] && grep -q "go together" "$work/tls.err" && ok "tls: cert-without-key-refused" || bad "tls: cert-without-key-refused"
  kill -TERM "$server"; wait "$server"
}

run_as root
tls
# a sanitizer build's runtime cannot map its shadow memory under the
# sandbox's RLIMIT_DATA fallback (unprivileged: no cgroup): the plain build
# covers uid 65534
if [ "$(id -u)" = 0 ] && [ -z "${ASAN_OPTIONS:-}" ] &&
  setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" 2>/dev/null; then run_as nobody; fi
echo "serve: $pass passed, $fail failed"
for f in "${failed[@]}"; do echo "FAILED: $f"; done # again at the end: a log cut short names them
[ "$fail" = 0 ]
