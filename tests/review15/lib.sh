# Shared by the fifteenth review's scripts: review 14's lib.sh (capsule,
# work, caps, state, C, skip, probe_cap, serve_http, call: see there),
# and r15, this directory; sanitized (below). Usage: . lib.sh CAPSULE NAME
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
