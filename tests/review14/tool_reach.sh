#!/usr/bin/env bash
# Review 14: what a sandboxed tool reaches of capsule's own sockets and
# descriptors. A hostile third-party MCP server (probe/server.py) behind
# `serve --mcp-http`, in each network mode (blocked, proxy with one host,
# unrestricted: the host's network namespace), started cold by its first
# call and then answering warm from its keeper, and once more cold through
# `capsule call`, lists its descriptors beyond stdio, looks for the state
# directory, its run directory (the warm MCP keepers' and Selu instance
# keepers' sockets), serve's socket STATE/serve.sock, and tries to
# connect (stream and seqpacket) to each of them and to every unix socket
# the kernel lists under the state (/proc/net/unix: in unrestricted mode
# the host's table). Held: no descriptor beyond stdio, none of those
# paths exists for it, no connect succeeds (the state is masked inside
# every sandbox, docs/sandbox.md). Exits 1 when a tool reaches one, 0
# held, 77 cannot run here. As root.
# Usage: tool_reach.sh CAPSULE
. "$(dirname "$0")/lib.sh" "$1" review14-reach
modes=(blocked proxy unrestricted)
for m in "${modes[@]}"; do
  probe_cap "p$m"
  case $m in
  proxy) sed -i 's|"mode": "blocked"|"mode": "proxy", "allow_domains": ["example.com"]|' "$caps/p$m/capability.json" ;;
  unrestricted) sed -i 's|"mode": "blocked"|"mode": "unrestricted"|' "$caps/p$m/capability.json" ;;
  esac
  printf '%s\n' "$state" "$state/run" "$state/serve.sock" >"$caps/p$m/targets"
done
serve_http
# judge WHERE TEXT: the probe's report held, or why not
judge() {
  local r=${2#*PROBE: } why=
  [ "$r" = "$2" ] && why="no report: $(head -c 300 <<<"$2")"
  r=${r%%\"*}
  local fds=${r#fds=} seen=${r#* seen=} conn=${r#* connected=}
  fds=${fds%% *} seen=${seen%% *}
  [ -n "$why" ] && [ -f "$work/answers" ] && why="$why (answers: $(tail -n 2 "$work/answers" | head -c 400))"
  [ -z "$why" ] && [ -n "$fds" ] && why="descriptors $fds"
  [ -z "$why" ] && grep -q "$state" <<<"$seen" && why="sees $seen"
  [ -z "$why" ] && [ -n "$conn" ] && why="connects to $conn"
  if [ -z "$why" ]; then
    echo "ok: $1"
  else
    echo "FAIL: $1: $why"
    fail=1
  fi
}
for m in "${modes[@]}"; do
  for i in cold warm; do
    judge "p$m through serve ($i)" "$(call "p$m" probe '{}')"
  done
  out=$("$capsule" call "${C[@]}" "p$m" probe '{}' 2>&1)
  judge "p$m through capsule call" "$(grep -o 'PROBE: [^"]*' <<<"$out" | head -1)"
done
[ "$fail" = 0 ] && echo "PASS: no tool reaches capsule's sockets or descriptors"
exit "$fail"
