#!/usr/bin/env bash
# Issue 10 item 21: a command that exits before pid 1 of the sandbox sets up
# its signal handling must still be reaped (pid 1 once lost that SIGCHLD
# and polled forever). A test build holds pid 1 between its fork and its
# first look at its children (CAPSULE_TEST_DELAY_INIT_MS), so /bin/true has
# long exited by then. As root and as uid 65534. Usage: init-race.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
pass=0 fail=0
for who in "${users[@]}"; do
  for i in 1 2; do
    # a generous bound: the run takes well under a second when it works
    CAPSULE_TEST_DELAY_INIT_MS=300 as_user "$who" timeout 10 "$capsule" run -- /bin/sh -c 'exit 7' </dev/null
    status=$?
    if [ "$status" = 7 ]; then
      pass=$((pass + 1)); printf '  ok   %-6s exit before init is ready (%s)\n' "$who" "$i"
    else
      fail=$((fail + 1)); printf '  FAIL %-6s exit before init is ready (%s): exit %s (124: hung)\n' "$who" "$i" "$status"
    fi
  done
done
echo "init race: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
