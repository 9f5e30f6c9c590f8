#!/bin/bash
# Finding (tool logs, src/gateway/toollog.c + the relay in src/sandbox/
# spawn.c): a capability's stderr is appended to STATE/logs/ID.log, rotated
# between calls at 8 MiB, and bounded within one run only by the
# manifest's limits.disk_bytes; a capability whose manifest sets none (a
# nono or Covenant manifest wrapping a third-party MCP server, say) has a
# log without bound for the whole call: a hostile server writing to its
# stderr fills the disk holding the state at pipe speed (about 0.5 GB/s
# here) until the call's deadline (120 s by default). Here: 5 seconds.
# Exits 1 when one call's log passes 64 MiB, 0 bounded, 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
probe=$(mktemp -d) # its own state: the default one may belong to another capsule
XDG_STATE_HOME=$probe "$capsule" run -- /bin/true >/dev/null 2>&1; ok=$?
rm -rf "$probe"
[ "$ok" = 0 ] || { echo "SKIP: no sandbox here"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review6-log.XXXXXX)
trap 'rm -rf "$W"' EXIT
export CAPSULE_STATE_KEY=
mkdir -p "$W/caps/noisy"
line=$(printf 'A%.0s' $(seq 200))
printf '{"version": "0.1.0", "network": {"mode": "blocked"}, "x-capsule": {"mcp_server": ["/bin/sh", "-c", "yes %s >&2"]}}\n' \
  "$line" >"$W/caps/noisy/capability.json"
timeout 60 "$capsule" call --caps "$W/caps" --state "$W/s" --timeout 5 noisy x '{}' >/dev/null 2>&1 </dev/null
bytes=$(cat "$W"/s/logs/noisy.log* 2>/dev/null | wc -c)
echo "the log holds $bytes bytes after one 5 s call"
if [ "$bytes" -gt $((64 << 20)) ]; then
  echo "VULNERABLE: a tool's stderr is written to the state's disk without bound"; exit 1
fi
echo bounded; exit 0
