# Shared by the scripts that run `capsule serve` on states of their own
# (tests/mcp: cli_serve.sh, warm_watch.sh), sourced with $1 = capsule and
# $2 = a name for the work directory. Sets capsule, root, CAPSULE_STATE (a
# state of the test's own), work (0755; it and CAPSULE_STATE removed on
# exit, the processes in pids ended first), an empty CAPSULE_STATE_KEY;
# skips (exit 77) where the sandbox's namespaces cannot be created. Gives
# ok/bad (counting pass/fail), wait_for CMD... (up to 60 s) and
# serve_start ARGS...: capsule serve ARGS as the caller's ${wrap[@]}, its
# stderr in $work/serve-$who.log, its pid in $server (and pids); fails
# unless `capsule serve status --state $state` answers within 60 s.
capsule=$(realpath "$1")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export CAPSULE_STATE=$(mktemp -d /var/tmp/capsule-probe.XXXXXX)
work=$(mktemp -d "/var/tmp/capsule-$2.XXXXXX")
chmod 755 "$work"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; sleep 0.5; rm -rf "$work" "$CAPSULE_STATE"' EXIT
if ! "$capsule" run -- /bin/true 2>/dev/null; then
  echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77
fi
export CAPSULE_STATE_KEY=
pass=0 fail=0
ok() { echo "  ok   $1"; pass=$((pass + 1)); }
bad() { echo "  FAIL $1"; fail=$((fail + 1)); }
wait_for() { for _ in $(seq 1 600); do "$@" && return 0; sleep 0.1; done; return 1; }
serve_start() {
  "${wrap[@]}" "$capsule" serve "$@" 2>"$work/serve-$who.log" &
  server=$!
  pids+=("$server")
  wait_for "${wrap[@]}" "$capsule" serve status --state "$state" >/dev/null 2>&1
}
