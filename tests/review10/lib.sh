# Shared by tests/review10's scripts, sourced with $1 = capsule after each
# script's own checks of what it needs. As root, where the sandbox's
# namespaces can be made (else exit 77). Sets capsule, root, W (0755,
# removed on exit, with serve ($spid) and any process whose command line
# names W: a stuck dry run's pid 1 outlives serve), caps, state, an empty
# CAPSULE_STATE_KEY. Gives agent ID CPU_MS BODY POLICY (a Covenant agent
# whose run.sh reads the request line then runs BODY, policy set for
# dispatch; exit 77 when the state cannot be set up), token USER (a new
# bearer token of USER's; exit 77 when none) and serve10 (serve --mcp-http
# on a free loopback port, waited for: port and url set; exit 77 when it
# does not start).
capsule=$(realpath "$1")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root"; exit 77; }
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review10.XXXXXX)
chmod 755 "$W"
spid=
left10() {
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
mkdir -m 700 "$state"
agent() {
  mkdir -p "$caps/agents/$1"
  printf '[agent]\nid = "%s"\nname = "%s"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = %s\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' \
    "$1" "$1" "$2" >"$caps/agents/$1/agent.toml"
  printf '#!/bin/sh\nIFS= read -r line; %s\n' "$3" >"$caps/agents/$1/run.sh"
  chmod -R a+rX "$caps" && chmod 755 "$caps/agents/$1/run.sh"
  "$capsule" policy set --caps "$caps" --state "$state" "$1" dispatch "$4" >/dev/null ||
    { echo "SKIP: cannot set up a state"; exit 77; }
}
token() {
  local t
  t=$("$capsule" access issue "t-$1" --user "$1" --state "$state" 2>/dev/null)
  [ -n "$t" ] || { echo "SKIP: cannot issue a token" >&2; exit 77; }
  echo "$t"
}
serve10() {
  # --rate high: floods take seconds (the rate limit is per token: not a defence here)
  "$capsule" serve --caps "$caps" --state "$state" --mcp-http 127.0.0.1:0 --rate 100000 2>"$W/serve.log" &
  spid=$!
  for _ in $(seq 600); do "$capsule" serve status --state "$state" >/dev/null 2>&1 && break; sleep 0.1; done
  port=$("$capsule" serve status --state "$state" --json 2>/dev/null | sed -n 's/.*"mcp_http":"127\.0\.0\.1:\([0-9]*\)".*/\1/p')
  [ -n "$port" ] || { tail -5 "$W/serve.log"; echo "SKIP: serve did not start"; exit 77; }
  url=http://127.0.0.1:$port/mcp
}
