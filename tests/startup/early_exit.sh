#!/usr/bin/env bash
# A command that ends before the sandbox's pid 1 has set up its signal
# handling is still reaped: pid 1's fork is held at its return for 300 ms
# (strace's delay injection), so the command has exited, and its SIGCHLD
# been discarded, before pid 1 blocks signals. Without the fix pid 1 waited
# forever. Root and uid 65534. Usage: early_exit.sh CAPSULE
set -u
# LeakSanitizer cannot run under strace: this checks the release build
[ -z "${ASAN_OPTIONS:-}" ] || { echo "SKIP: not meaningful in a sanitizer build"; exit 77; }
capsule=$(realpath "$1")
command -v strace >/dev/null || { echo "SKIP: strace is not installed"; exit 77; }
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: no sandbox on this host"; exit 77; }
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; }
as_user() {
  local who=$1; shift
  if [ "$who" = root ]; then "$@"; else setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; fi
}
users=(root)
[ "$(id -u)" = 0 ] && setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" 2>/dev/null &&
  users+=(nobody)
for who in "${users[@]}"; do
  # pid 1 forks the command with glibc's fork (the clone system call);
  # capsule's own clone of the sandbox is clone3, not delayed
  out=$(as_user "$who" timeout 10 strace -f -qq -o /dev/null -e trace=clone \
    -e inject=clone:delay_exit=300000 "$capsule" run -- /bin/sh -c 'exit 7' 2>&1)
  status=$?
  if [ "$status" = 7 ]; then ok "$who: reaped, exit status 7"
  else bad "$who: exit $status (124: pid 1 hung) $out"; fi
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
