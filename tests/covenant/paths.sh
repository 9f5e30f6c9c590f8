#!/usr/bin/env bash
# A Covenant agent with capabilities.required is refused on every path that
# invokes it until its caller holds a capability token for each action, with
# an error naming `capsule token issue local ACTION`; with the token it
# runs; revoked, it is refused again. The paths: `capsule call`, `capsule
# dispatch`, `capsule mcp` on stdio, `capsule call` through serve's unix
# socket, serve's MCP Streamable HTTP and gRPC (both services) with an
# access token (tests/covenant/paths.mjs). As root and as uid 65534.
# Usage: paths.sh CAPSULE PROTO ORCHESTRATOR_PROTO
set -u
capsule=$(realpath "$1") proto=$(realpath "$2") orch=$(realpath "$3")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export CAPSULE_STATE=$(mktemp -d /var/tmp/capsule-probe.XXXXXX) CAPSULE_STATE_KEY= COVENANT_HOME=
trap 'rm -rf "$CAPSULE_STATE"' EXIT
if ! "$capsule" run -- /bin/true 2>/dev/null; then
  echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77
fi
command -v node >/dev/null || { echo "SKIP: node is not installed (scripts/deps.sh test)"; exit 77; }
[ -d "$root/tests/node_modules/@modelcontextprotocol/sdk" ] ||
  { echo "SKIP: @modelcontextprotocol/sdk is not installed (scripts/deps.sh test)"; exit 77; }
[ -d "$root/examples/selu-node/node_modules/@grpc/grpc-js" ] ||
  { echo "SKIP: examples/selu-node's modules are not installed (scripts/deps.sh test)"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-covenant-paths.XXXXXX)
chmod 755 "$work"
server=
trap '[ -n "$server" ] && kill -9 "$server" 2>/dev/null; rm -rf "$work" "$CAPSULE_STATE"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; }
wait_for() { for _ in $(seq 1 600); do "$@" && return 0; sleep 0.1; done; return 1; }

caps=$work/caps
mkdir -p "$caps/agents/needy"
cat >"$caps/agents/needy/agent.toml" <<'TOML'
[agent]
id = "needy"
name = "needy"
version = "0.1.0"
runtime = "rust-bin"
entry = "run.sh"
[capabilities]
required = ["tool.needy"]
[resources]
cpu_ms_per_task = 20000
memory_mb = 64
network = "off"
TOML
printf '#!/bin/sh\nIFS= read -r line; printf "{\\"got\\":%%s}\\n" "$line"\n' >"$caps/agents/needy/run.sh"
chmod -R a+rX "$caps" && chmod 755 "$caps/agents/needy/run.sh"
fix='capsule token issue local tool\.needy. on the same state'

suite() { # suite WHO WRAP...: every path, without the token, with it, revoked
  local who=$1; shift
  local wrap=("$@") state=$work/state-$who
  mkdir -p "$state" && chmod 700 "$state"
  [ "$who" = root ] || chown 65534:65534 "$state"
  C() { "${wrap[@]}" "$capsule" "$@"; }
  # t NAME WANT REGEX ARGS...: capsule ARGS, stdin from /dev/null
  t() {
    local name=$1 want=$2 regex=$3; shift 3
    local out st
    out=$(C "$@" 2>&1 </dev/null); st=$?
    if [ "$st" = "$want" ] && grep -qE -- "$regex" <<<"$out"; then ok "$who: $name"
    else bad "$who: $name (exit $st, want $want)"; head -5 <<<"$out" | sed 's/^/         /'; fi
  }
  mcp_stdio() { # the answer to one tools/call over `capsule mcp`
    { printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}' \
        '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"needy__dispatch","arguments":{"text":"hello"}}}'
      # stdin stays open until the answer is out (EOF cancels a call in flight)
      for _ in $(seq 1 1200); do grep -q '"id":2' "$work/mcp.out" 2>/dev/null && break; sleep 0.1; done; } |
      C mcp --caps "$caps" --state "$state" >"$work/mcp.out" 2>&1
    grep '"id":2' "$work/mcp.out"
  }
  local G=(--caps "$caps" --state "$state")
  C policy set needy dispatch allow "${G[@]}" >/dev/null
  local access
  access=$(C access issue paths --user alice --state "$state" 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1)
  [ -n "$access" ] && ok "$who: access-token" || bad "$who: access-token"

  paths() { # paths refused|runs: every path once
    local want=$1 code=4 re=$fix mcp_re="$fix.*\"isError\":true"
    [ "$want" = runs ] && code=0 re='"got":\{"id":"[0-9a-f-]{36}","text":"hello","issuer":\{"display":"[^"]+@local","pubkey":"'"$me"'"' mcp_re='\\"text\\":\\"hello\\"'
    CAPSULE_SERVE=off t "call $want" $code "$re" call needy dispatch '{"text": "hello"}' "${G[@]}"
    t "dispatch $want" $code "$re" dispatch --agent needy "hello" "${G[@]}"
    local answer
    answer=$(mcp_stdio)
    if grep -qE -- "$mcp_re" <<<"$answer" && { [ "$want" = runs ] || ! grep -q '"got"' <<<"$answer"; }; then ok "$who: mcp-stdio $want"
    else bad "$who: mcp-stdio $want"; head -c 600 <<<"$answer" | sed 's/^/         /'; echo; fi
    # serve: its unix socket (capsule call goes through it), HTTP and gRPC
    local port
    for _ in 1 2 3 4 5; do
      port=$((20000 + RANDOM % 20000))
      "${wrap[@]}" "$capsule" serve "${G[@]}" --mcp-http "127.0.0.1:$port" --grpc "unix:$state/grpc.sock" 2>"$work/serve-$who.log" &
      server=$!
      wait_for C serve status --state "$state" >/dev/null 2>&1 && wait_for test -S "$state/grpc.sock" && break
      kill -9 "$server" 2>/dev/null; wait "$server" 2>/dev/null; server=
    done
    if [ -z "$server" ]; then bad "$who: serve-starts"; tail -5 "$work/serve-$who.log"; return; fi
    t "call-through-serve $want" $code "$re" call needy dispatch '{"text": "hello"}' "${G[@]}"
    grep -q '"session started"' "$work/serve-$who.log" && ok "$who: call went through serve ($want)" ||
      bad "$who: call went through serve ($want)"
    local line
    while IFS= read -r line; do
      case $line in
      ok\ *) ok "$who: ${line#ok }" ;;
      FAIL\ *) bad "$who: ${line#FAIL }" ;;
      *) [ -n "$line" ] && echo "         $line" ;;
      esac
    done < <(cd "$root/tests" && node "$here/paths.mjs" "http://127.0.0.1:$port/mcp" "unix:$state/grpc.sock" \
      "$proto" "$orch" "$access" "$want" 2>&1)
    kill -TERM "$server"; wait "$server" 2>/dev/null; server=
  }
  local me
  me=$(C token key --state "$state" 2>/dev/null)
  echo "$who: without the token"
  paths refused
  t refusal-audited 0 "needy.dispatch +capability-denied .*tool.needy" audit --state "$state"
  t refusal-audited-as-token-user 0 " alice needy.dispatch +capability-denied " audit --state "$state"
  echo "$who: with the token"
  t issue 0 '"action":"tool.needy"' token issue local tool.needy --state "$state"
  local sig
  sig=$(C token list --json --state "$state" | grep -o '"id": *"[1-9A-HJ-NP-Za-km-z]*"' | head -1 | grep -o '[1-9A-HJ-NP-Za-km-z]\{20,\}')
  paths runs
  echo "$who: the token revoked"
  t revoke 0 "revoked" token revoke "$sig" --state "$state"
  t revoked-call-refused 4 "its token ${sig:0:12}.* is revoked" call needy dispatch '{"text": "hello"}' "${G[@]}"
}

suite root
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && [ -z "${ASAN_OPTIONS:-}" ] &&
   setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" 2>/dev/null; then
  mkdir -p "$work/nobody" && chown 65534:65534 "$work/nobody"
  suite nobody setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$work/nobody"
else
  echo "  note: the uid 65534 run needs root and setpriv (and no ASan)"
fi
echo "covenant paths tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
