#!/usr/bin/env bash
# The 2026-07-28 form's policy `ask` (src/front/mcp_ask.c): a requestState
# answered is remembered until it expires (10 minutes) so a replayed
# answer is refused, in one table of 4,096 shared by every user; with it
# full, an answer is not taken and its client is asked again. alice, a
# token holder with an `ask` tool of her own, answers (declines) 4,200
# questions (about a minute at the default --rate of 200 a second): bob's
# human then accepts his call and is asked again, every time, for the
# next 10 minutes. Exits 1 when bob's accepted call does not run, 0 when
# it does, 77 when it cannot run here.
# Usage: ask_spent_flood.sh CAPSULE
set -u
capsule=$(realpath "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root"; exit 77; }
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review10.XXXXXX)
chmod 755 "$W"
spid=
trap '[ -n "$spid" ] && { kill -9 "$spid"; wait "$spid"; } 2>/dev/null; rm -rf "$W"' EXIT
export CAPSULE_STATE_KEY=
caps=$W/caps state=$W/state
mkdir -p "$caps/agents/asker" && mkdir -m 700 "$state"
printf '[agent]\nid = "asker"\nname = "asker"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' >"$caps/agents/asker/agent.toml"
printf '#!/bin/sh\nIFS= read -r line; printf "{\\"got\\":%%s}\\n" "$line"\n' >"$caps/agents/asker/run.sh"
chmod -R a+rX "$caps" && chmod 755 "$caps/agents/asker/run.sh"
"$capsule" policy set --caps "$caps" --state "$state" asker dispatch ask >/dev/null ||
  { echo "SKIP: cannot set up a state"; exit 77; }
ta=$("$capsule" access issue a --user alice --state "$state" 2>/dev/null)
tb=$("$capsule" access issue b --user bob --state "$state" 2>/dev/null)
[ -n "$ta" ] && [ -n "$tb" ] || { echo "SKIP: cannot issue tokens"; exit 77; }
# --rate high: the flood takes seconds instead of a minute (the rate limit is per token: not a defence here)
"$capsule" serve --caps "$caps" --state "$state" --mcp-http 127.0.0.1:0 --rate 100000 2>"$W/serve.log" &
spid=$!
for _ in $(seq 600); do "$capsule" serve status --state "$state" >/dev/null 2>&1 && break; sleep 0.1; done
port=$("$capsule" serve status --state "$state" --json 2>/dev/null | sed -n 's/.*"mcp_http":"127\.0\.0\.1:\([0-9]*\)".*/\1/p')
[ -n "$port" ] || { tail -5 "$W/serve.log"; echo "SKIP: serve did not start"; exit 77; }
r=$(node "$root/tests/review10/ask_spent_flood.mjs" "http://127.0.0.1:$port/mcp" "$ta" "$tb" 4200)
echo "bob's accepted call after alice's flood: $r"
case $r in
bob-ran) echo blocked; exit 0 ;;
no-state) echo "SKIP: bob was not asked (no input_required)"; exit 77 ;;
*) exit 1 ;;
esac
