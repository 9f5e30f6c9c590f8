#!/usr/bin/env bash
# serve's main thread built a session's tool table with each capability's
# readiness dry run (gw_ready: a sandbox) made right there, in a process
# with threads (libmicrohttpd's, the calls' own), by a raw clone3 that
# glibc's malloc does not see: a clone made while another thread held an
# arena's lock left the sandbox's pid 1 waiting forever on it in its own
# fork(), and serve's main thread waiting for that pid 1: every session of
# every user stalled, for good. Each 2026-07-28 request is a session of its
# own, so plain concurrent tools/call by one token holder found it within
# a few hundred calls (a 2025 client, at each initialize; the dashboard and
# the gRPC process made the same dry run). Exits 1 when a call gets no
# answer within 120 s, 0 when all 1,500 are answered, 77 cannot run.
# Usage: ready_clone_hang.sh CAPSULE
set -u
capsule=$(realpath "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root"; exit 77; }
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review10.XXXXXX)
chmod 755 "$W"
spid=
left10() { # the processes whose command line names $W (a stuck dry run's pid 1 outlives serve)
  local f
  for f in /proc/[0-9]*/cmdline; do
    { tr '\0' ' ' <"$f"; } 2>/dev/null | grep -qF "$W/" && { f=${f#/proc/}; echo "${f%%/*}"; }
  done | grep -vx "$$"
}
cleanup10() {
  [ -n "$spid" ] && { kill -9 "$spid"; wait "$spid"; } 2>/dev/null
  for p in $(left10); do kill -9 "$p" 2>/dev/null; done
  rm -rf "$W"
}
trap cleanup10 EXIT
export CAPSULE_STATE_KEY=
caps=$W/caps state=$W/state
mkdir -p "$caps/agents/echo" && mkdir -m 700 "$state"
printf '[agent]\nid = "echo"\nname = "echo"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' >"$caps/agents/echo/agent.toml"
printf '#!/bin/sh\nIFS= read -r line; printf "{\\"got\\":%%s}\\n" "$line"\n' >"$caps/agents/echo/run.sh"
chmod -R a+rX "$caps" && chmod 755 "$caps/agents/echo/run.sh"
"$capsule" policy set --caps "$caps" --state "$state" echo dispatch allow >/dev/null ||
  { echo "SKIP: cannot set up a state"; exit 77; }
tok=$("$capsule" access issue a --user alice --state "$state" 2>/dev/null)
[ -n "$tok" ] || { echo "SKIP: cannot issue a token"; exit 77; }
"$capsule" serve --caps "$caps" --state "$state" --mcp-http 127.0.0.1:0 --rate 100000 2>"$W/serve.log" &
spid=$!
for _ in $(seq 600); do "$capsule" serve status --state "$state" >/dev/null 2>&1 && break; sleep 0.1; done
port=$("$capsule" serve status --state "$state" --json 2>/dev/null | sed -n 's/.*"mcp_http":"127\.0\.0\.1:\([0-9]*\)".*/\1/p')
[ -n "$port" ] || { tail -5 "$W/serve.log"; echo "SKIP: serve did not start"; exit 77; }
r=$(node "$root/tests/review10/ready_clone_hang.mjs" "http://127.0.0.1:$port/mcp" "$tok" "${R10_CALLS:-1500}")
echo "1,500 concurrent tools/call: $r"
case $r in
done*) echo blocked; exit 0 ;;
*) echo "serve stopped answering (its main thread waits on a dry run's pid 1)"; exit 1 ;;
esac
