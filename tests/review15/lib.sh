# Shared by the fifteenth review's scripts: review 14's lib.sh (capsule,
# work, caps, state, C, skip, probe_cap, serve_http, call: see there),
# and r15, this directory; sanitized and netns_serve (below). Usage:
# . lib.sh CAPSULE NAME
r15=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$r15/../review14/lib.sh" "$@"
# sanitized: fails the script (exit 1) when capsule's logs (serve's, the
# capabilities') hold a sanitizer report (an ASan build's)
sanitized() {
  local f
  for f in "$work/serve.log" "$work"/state/logs/*; do
    [ -f "$f" ] && grep -q -E 'runtime error|Sanitizer' "$f" &&
      { grep -m 5 -E 'runtime error|Sanitizer|^ +#[0-4] ' "$f"; echo "FAIL: capsule's sanitizer report in $f"; exit 1; }
  done
  return 0
}
# netns_serve SETUP ADDR PY: in a network namespace of its own (unshare
# -n) with lo up, SETUP run (bash; 77 when it fails), capsule serve
# --mcp-http ADDR (port 0) on $state started (its environment: SERVE_ENV,
# words), then `python3 PY PORT TOKEN` (TOKEN: $token); its exit status,
# 77 (skip) when the set-up did not work
netns_serve() {
  export capsule state caps work token NS_SETUP=$1 NS_ADDR=$2 NS_PY=$3 SERVE_ENV=${SERVE_ENV:-}
  command -v unshare >/dev/null && command -v ip >/dev/null || skip "unshare or ip is not installed"
  unshare -n bash -c '
    ip link set lo up && eval "$NS_SETUP" || exit 77
    env $SERVE_ENV "$capsule" serve --caps "$caps" --state "$state" --mcp-http "$NS_ADDR" --insecure 2>"$work/serve.log" &
    spid=$!
    trap "kill $spid 2>/dev/null; wait $spid 2>/dev/null" EXIT
    for _ in $(seq 1 600); do
      "$capsule" serve status --state "$state" >/dev/null 2>&1 && break
      kill -0 $spid 2>/dev/null || break
      sleep 0.1
    done
    port=$("$capsule" serve status --state "$state" --json 2>/dev/null | sed -n "s/.*\"mcp_http\": *\"[^\"]*:\([0-9]*\)\".*/\1/p")
    [ -n "$port" ] || { cat "$work/serve.log"; exit 77; }
    /usr/bin/python3 "$NS_PY" "$port" "$token"
  '
  local rc=$?
  [ $rc = 77 ] && skip "the namespace, serve or the set-up could not be made"
  return $rc
}
