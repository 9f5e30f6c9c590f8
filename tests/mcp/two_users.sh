# Shared by the scripts where two users (alice, bob) meet at serve
# --mcp-http's bounds (session_room.sh, conn_share.sh, user_calls.sh),
# sourced with $1 = capsule and $2 = a name for the work directory. Sets
# capsule, work (0755, removed on exit after serve ends), state (0700) and
# caps in it, an empty CAPSULE_STATE_KEY; skips (exit 77) without
# python3. users: alice's and bob's tokens (skips when none can be
# issued). serve_http [ENV=V...]: `capsule serve --mcp-http` on a
# loopback port of its own (--rate high: the bounds, not the rate limit,
# are tested) with ENV in its environment, its port in $port, its log
# $work/serve.log (fails when it does not start). serve_end STATUS: serve
# stopped (SIGTERM), failing STATUS unless it exits 0; exits with it.
set -u
capsule=$(realpath "$1")
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
work=$(mktemp -d "/var/tmp/capsule-$2.XXXXXX")
chmod 755 "$work"
spid=
cleanup() {
  [ -n "$spid" ] && { kill "$spid"; wait "$spid"; } 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
export CAPSULE_STATE_KEY=
state=$work/state caps=$work/caps
mkdir -m 700 "$state" && mkdir -p "$caps"
users() {
  alice=$("$capsule" access issue a --user alice --state "$state" 2>/dev/null)
  bob=$("$capsule" access issue b --user bob --state "$state" 2>/dev/null)
  [ -n "$alice" ] && [ -n "$bob" ] || { echo "SKIP: cannot issue tokens"; exit 77; }
}
serve_http() {
  env "$@" "$capsule" serve --caps "$caps" --state "$state" --mcp-http 127.0.0.1:0 --rate 1000000 \
    2>"$work/serve.log" &
  spid=$!
  port=
  for _ in $(seq 600); do
    port=$("$capsule" serve status --state "$state" --json 2>/dev/null |
      sed -n 's/.*"mcp_http":"127\.0\.0\.1:\([0-9]*\)".*/\1/p')
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { tail -5 "$work/serve.log"; echo "FAIL: serve did not start"; exit 1; }
}
serve_end() {
  local st=$1 rc
  kill "$spid"
  wait "$spid"
  rc=$?
  spid=
  if [ "$rc" = 0 ]; then echo "  ok   serve stopped cleanly (exit 0)"
  else echo "  FAIL serve exited $rc"; tail -5 "$work/serve.log"; st=1; fi
  exit "$st"
}
