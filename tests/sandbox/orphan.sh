#!/usr/bin/env bash
# Issue 10 item 5: a sandbox does not outlive capsule. `capsule run --
# sleep` is killed with SIGKILL (no chance to clean up); the sleep must be
# gone soon after (PR_SET_PDEATHSIG armed after the last id change, and pid 1
# watching the supervisor's pipe), and the next start removes the run
# directory and cgroups the killed capsule left. As root and as uid 65534.
# Usage: orphan.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
work=$(mktemp -d /var/tmp/capsule-orphan.XXXXXX)
chmod 1777 "$work"
trap 'pkill -KILL -f "sleep 1000\.$$" 2>/dev/null; rm -rf "$work"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$1" "$2"; }
bad() { fail=$((fail + 1)); printf '  FAIL %-6s %s\n' "$1" "$2"; }

# wait_for SECONDS CMD...: polls CMD until it succeeds (a generous bound,
# not a timing assertion)
wait_for() {
  local n=$(($1 * 10)); shift
  while [ "$n" -gt 0 ]; do "$@" && return 0; sleep 0.1; n=$((n - 1)); done
  return 1
}
running() { pgrep -f "^sleep $1\$" >/dev/null; }
gone() { ! running "$1"; }
no_rundir() { [ -z "$(ls -A "$work/tmp-$1")" ]; }
no_cgroup() { [ -z "$(find /sys/fs/cgroup -maxdepth 4 -type d -name "capsule-$1" 2>/dev/null)" ]; }

# a test build can leave PR_SET_PDEATHSIG unarmed: pid 1 watching capsule's
# pipe must then stop the sandbox alone
rounds=(normal)
[ "${CAPSULE_TEST_HOOKS:-1}" = 1 ] && rounds+=(backstop)
for round in "${rounds[@]}"; do
if [ "$round" = backstop ]; then export CAPSULE_TEST_NO_PDEATHSIG=1; echo "without PR_SET_PDEATHSIG (the backstop alone):"; fi
for who in "${users[@]}"; do
  mkdir -p "$work/tmp-$who" && chmod 1777 "$work/tmp-$who"
  tag="1000.$$$RANDOM"
  # started directly (not through the as_user function, whose subshell
  # would be what $! names): $! is capsule itself
  as=(); [ "$who" = root ] || as=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  TMPDIR="$work/tmp-$who" "${as[@]}" "$capsule" run -- sleep "$tag" </dev/null >/dev/null 2>&1 &
  cpid=$!
  if ! wait_for 20 running "$tag"; then bad "$who" "the sandboxed sleep did not start"; continue; fi
  kill -KILL "$cpid"
  wait "$cpid" 2>/dev/null
  if wait_for 10 gone "$tag"; then ok "$who" "the tool dies with a SIGKILLed capsule"
  else bad "$who" "the tool outlived capsule (still running 10 s after kill -9)"; pkill -KILL -f "^sleep $tag\$"; fi
  # the sandbox is gone by now, so its lock is free: the leftovers stay
  # until a capsule starts
  wait_for 10 gone "$tag"
  [ -n "$(ls -A "$work/tmp-$who")" ] || bad "$who" "no run directory was left to clean (the test proves nothing)"
  TMPDIR="$work/tmp-$who" as_user "$who" "$capsule" run -- /bin/true </dev/null
  if no_rundir "$who"; then ok "$who" "the next start removes the dead run directory"
  else bad "$who" "the dead run directory is still there: $(ls -A "$work/tmp-$who")"; fi
  if no_cgroup "$cpid"; then ok "$who" "the next start removes the dead sandbox's cgroups"
  else bad "$who" "cgroups of the dead sandbox remain: $(find /sys/fs/cgroup -maxdepth 4 -type d -name "capsule-$cpid")"; fi
done
done
echo "orphan: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
