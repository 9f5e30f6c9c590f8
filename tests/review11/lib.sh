# Shared by tests/review11's scripts, sourced with $1 = capsule. As root,
# where the sandbox's namespaces can be made (else exit 77). Sets capsule,
# root, W (0755, removed on exit with serve ($spid), the warm servers'
# keepers and any process whose command line names W), caps, state and an
# empty CAPSULE_STATE_KEY. Gives conformance (the MCP conformance example
# as capability "conformance", its tools discovered and allowed; exit 77
# when Node or its modules are missing), token USER (a new bearer token of
# USER's; exit 77 when none) and serve11 [ARGS...] (serve --mcp-http on a
# free loopback port with ARGS, waited for: port and url set; exit 77 when
# it does not start).
capsule=$(realpath "$1")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root"; exit 77; }
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review11.XXXXXX)
chmod 755 "$W"
spid=
left11() {
  local f l
  for f in /proc/[0-9]*/cmdline; do
    { tr '\0' ' ' <"$f"; } 2>/dev/null | grep -qF "$W/" && { f=${f#/proc/}; echo "${f%%/*}"; }
  done
  for f in /proc/[0-9]*/fd/*; do # the keepers: they hold their locks in the run directory
    l=$(readlink "$f" 2>/dev/null) || continue
    case $l in "$W"/*) f=${f#/proc/}; echo "${f%%/*}" ;; esac
  done
}
cleanup11() {
  [ -n "$spid" ] && { kill -9 "$spid"; wait "$spid"; } 2>/dev/null
  for p in $(left11 | sort -u | grep -vx "$$"); do kill -9 "$p" 2>/dev/null; done
  rm -rf "$W"
}
trap cleanup11 EXIT
export CAPSULE_STATE_KEY=
caps=$W/caps state=$W/state
mkdir -m 700 "$state"
mkdir -p "$caps"
conformance() {
  local ex=$root/examples/mcp-conformance t tools
  command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
  [ -d "$ex/node_modules/@modelcontextprotocol/sdk" ] ||
    { echo "SKIP: examples/mcp-conformance's modules are not installed (scripts/deps.sh test)"; exit 77; }
  cp -a "$ex" "$caps/conformance"
  chmod -R a+rX "$caps"
  "$capsule" call --caps "$caps" --state "$state" conformance test_simple_text '{}' >/dev/null 2>&1
  tools=$("$capsule" list --caps "$caps" --state "$state" --json 2>/dev/null |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const c of JSON.parse(s))for(const t of c.tools||[])console.log(t.name)})')
  [ -n "$tools" ] || { echo "SKIP: the conformance server's tools were not discovered"; exit 77; }
  for t in $tools; do "$capsule" policy set --caps "$caps" --state "$state" conformance "$t" allow >/dev/null; done
}
token() {
  local t
  t=$("$capsule" access issue "t-$1" --user "$1" --state "$state" 2>/dev/null)
  [ -n "$t" ] || { echo "SKIP: cannot issue a token" >&2; exit 77; }
  echo "$t"
}
serve11() {
  # --rate high: the rate limit is per token, not a defence here
  "$capsule" serve --caps "$caps" --state "$state" --mcp-http 127.0.0.1:0 --rate 100000 "$@" 2>"$W/serve.log" &
  spid=$!
  for _ in $(seq 600); do "$capsule" serve status --state "$state" >/dev/null 2>&1 && break; sleep 0.1; done
  port=$("$capsule" serve status --state "$state" --json 2>/dev/null | sed -n 's/.*"mcp_http":"127\.0\.0\.1:\([0-9]*\)".*/\1/p')
  [ -n "$port" ] || { tail -5 "$W/serve.log"; echo "SKIP: serve did not start"; exit 77; }
  url=http://127.0.0.1:$port/mcp
}
