#!/usr/bin/env bash
# Descriptors of `capsule serve` (its unix socket and HTTP listeners, the
# sessions' connections) must not reach a tool it runs: a Covenant agent
# called through serve's unix socket lists its own descriptors and pid 1's;
# it may hold its stdin, stdout and stderr alone. As root and as uid 65534.
# Usage: serve_fds.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
[ -x /usr/bin/python3 ] || { echo "SKIP: /usr/bin/python3 is not installed"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-serve-fds.XXXXXX)
chmod 755 "$work"
spid=
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; rm -rf "$work"' EXIT
export CAPSULE_STATE_KEY=
pass=0 fail=0
a=$work/caps/agents/fds
mkdir -p "$a"
printf '[agent]\nid = "fds"\nname = "fds"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' >"$a/agent.toml"
cp "$hostile" "$a/hostile"
printf '#!/bin/sh\nexec "$(dirname "$0")/hostile" agent-fds\n' >"$a/run.sh"
chmod 755 "$a/run.sh"
chmod -R a+rX "$work/caps"
for who in "${users[@]}"; do
  st=$work/state-$who
  mkdir -p "$st" && chmod 700 "$st"
  [ "$who" = nobody ] && chown 65534:65534 "$st"
  as_user "$who" "$capsule" policy set --caps "$work/caps" --state "$st" fds dispatch allow >/dev/null
  mkdir -p "$work/run-$who" && chmod 700 "$work/run-$who"
  [ "$who" = nobody ] && chown 65534:65534 "$work/run-$who"
  sock=$work/run-$who/sock
  (exec_as_user "$who" "$capsule" serve --caps "$work/caps" --state "$st" --socket "$sock" --mcp-http 127.0.0.1:0 >"$work/serve-$who.log" 2>&1) &
  spid=$!
  for _ in $(seq 1 200); do [ -S "$sock" ] && break; sleep 0.1; done # up to 20 s; no timing asserted
  out=$(as_user "$who" /usr/bin/python3 - "$sock" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rw")
def rpc(o):
    f.write(json.dumps(o) + "\n"); f.flush()
    for line in f:
        m = json.loads(line)
        if m.get("id") == o.get("id"):
            return m
rpc({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
f.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"); f.flush()
r = rpc({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "fds__dispatch", "arguments": {"text": "x"}}})
print(json.dumps(r["result"]["structuredContent"]))
PY
)
  kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; spid=
  echo "$who: $out"
  extra=$(python3 -c '
import json, sys
d = json.loads(sys.argv[1])
print(d["extra"].strip() + (" and pid 1s" if d["init_fds_visible"] else ""))' "$out" 2>&1)
  if [ -n "$out" ] && [ -z "${extra// /}" ]; then
    pass=$((pass + 1)); echo "  ok   $who: the tool holds 0-2 alone; pid 1's descriptors out of sight"
  else
    fail=$((fail + 1)); echo "  FAIL $who: descriptors reached the tool: ${extra:-no answer}"
    tail -3 "$work/serve-$who.log"
  fi
done
echo "serve descriptors: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
