#!/usr/bin/env bash
# serve --mcp-http bounds a user's calls in flight across all its sessions
# (each session has 16 of its own, and a user may open hundreds): a token
# holder opening sessions and filling each with slow calls would otherwise
# run a sandbox for each, sixteen times a session. With
# CAPSULE_SERVE_USER_CALLS=3, alice's fourth call at once (over two
# sessions) is refused as a tool error naming the bound, bob's call meanwhile
# is served, and once alice's end a new one of hers runs. As the user
# running the tests (root, or uid 65534 in CI).
# Usage: user_calls.sh CAPSULE
set -u
capsule=$(realpath "$1")
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-user-calls.XXXXXX)
chmod 755 "$work"
spid=
cleanup() {
  [ -n "$spid" ] && { kill "$spid"; wait "$spid"; } 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
export CAPSULE_STATE_KEY=
state=$work/state caps=$work/caps
mkdir -m 700 "$state" && mkdir -p "$caps/agents/slow"
# a Covenant agent answering after 3 s: its calls stay in flight meanwhile
printf '[agent]\nid = "slow"\nname = "slow"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' >"$caps/agents/slow/agent.toml"
printf '#!/bin/sh\nIFS= read -r line; sleep 3; printf "{\\"got\\":%%s}\\n" "$line"\n' >"$caps/agents/slow/run.sh"
chmod -R a+rX "$work" && chmod 755 "$caps/agents/slow/run.sh"
"$capsule" policy set --caps "$caps" --state "$state" slow dispatch allow >/dev/null || { echo "FAIL: policy set"; exit 1; }
alice=$("$capsule" access issue a --user alice --state "$state" 2>/dev/null)
bob=$("$capsule" access issue b --user bob --state "$state" 2>/dev/null)
[ -n "$alice" ] && [ -n "$bob" ] || { echo "SKIP: cannot issue tokens"; exit 77; }
CAPSULE_SERVE_USER_CALLS=3 "$capsule" serve --caps "$caps" --state "$state" --mcp-http 127.0.0.1:0 \
  --rate 1000000 2>"$work/serve.log" &
spid=$!
port=
for _ in $(seq 600); do
  port=$("$capsule" serve status --state "$state" --json 2>/dev/null |
    sed -n 's/.*"mcp_http":"127\.0\.0\.1:\([0-9]*\)".*/\1/p')
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { tail -5 "$work/serve.log"; echo "FAIL: serve did not start"; exit 1; }
python3 "$(dirname "$0")/user_calls.py" "$port" "$alice" "$bob"
st=$?
kill "$spid"
wait "$spid"
rc=$?
spid=
if [ "$rc" = 0 ]; then echo "  ok   serve stopped cleanly (exit 0)"
else echo "  FAIL serve exited $rc"; tail -5 "$work/serve.log"; st=1; fi
exit "$st"
