# Shared by the sandbox suites (tests/escape, tests/sandbox, tests/egress,
# tests/cli); sourced with $1 = capsule, $2 = the hostile tool. Sets
# capsule, hostile, users (root, plus the unprivileged uid 65534 when it
# can reach both binaries), and as_user WHO CMD... Skips (exit 77) where
# namespaces cannot be created. Gives ok/bad WHO NAME (counting pass and
# fail; a suite may define its own) and check WHO NAME WANT-STATUS REGEX
# ARGS...: capsule ARGS as WHO from $dir (default $work), stdout and
# stderr together, within $check_timeout seconds (default 60).
capsule=$(realpath "$1")
hostile=$(realpath "$2")
if ! "$capsule" run -- /bin/true 2>/dev/null; then
  echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77
fi

as_user() {
  local who=$1; shift
  if [ "$who" = root ]; then "$@"; else setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; fi
}
# exec_as_user WHO CMD...: as as_user, replacing the (sub)shell, so that a
# `( exec_as_user ... ) &` leaves $! the command's own pid (killing a
# subshell that waits for it would leave the command running)
exec_as_user() {
  local who=$1; shift
  if [ "$who" = root ]; then exec "$@"; else exec setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; fi
}

users=(root)
# a clone under a 0700 home directory cannot be run by uid 65534
if [ "$(id -u)" = 0 ] && setpriv --reuid=65534 --regid=65534 --clear-groups -- \
     test -x "$capsule" -a -x "$hostile" 2>/dev/null; then
  users+=(nobody)
elif [ "$(id -u)" = 0 ]; then
  echo "note: uid 65534 cannot reach $capsule; the unprivileged half is skipped"
fi

pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$1" "$2"; }
bad() { fail=$((fail + 1)); printf '  FAIL %-6s %s\n' "$1" "$2"; }
check() {
  local who=$1 name=$2 want=$3 regex=$4; shift 4
  local out status
  out=$(cd "${dir:-$work}" && as_user "$who" timeout "${check_timeout:-60}" "$capsule" "$@" 2>&1 </dev/null)
  status=$?
  if [ "$status" = "$want" ] && echo "$out" | grep -qE -- "$regex"; then ok "$who" "$name"
  else bad "$who" "$name (exit $status, want $want)"; echo "$out" | head -8 | sed 's/^/         /'; fi
}
