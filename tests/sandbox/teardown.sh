#!/usr/bin/env bash
# When `capsule run` returns, nothing of the tool runs any more, though
# capsule no longer waits for the sandbox's pid 1 to finish its own exit
# (pid 1 kills and reaps every other process, then reports the command's
# status): a background process the tool left is gone (not even a zombie),
# a writer in a read-write grant has stopped, and the run's cgroups and run
# directory are removed. The exit status is the command's. As root and as
# uid 65534.
# Usage: teardown.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
work=$(mktemp -d /var/tmp/capsule-teardown.XXXXXX)
chmod 1777 "$work"
trap 'pkill -KILL -f "^sleep 2000\.$$" 2>/dev/null; rm -rf "$work"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$1" "$2"; }
bad() { fail=$((fail + 1)); printf '  FAIL %-6s %s\n' "$1" "$2"; }

for who in "${users[@]}"; do
  tmp="$work/tmp-$who" dir="$work/rw-$who"
  mkdir -p "$tmp" "$dir" && chmod 1777 "$tmp" "$dir"
  tag="2000.$$$RANDOM"
  # a background sleep, then the command exits 7 at once
  TMPDIR=$tmp as_user "$who" "$capsule" run --memory 64M --pids 16 -- \
    sh -c "sleep $tag & exit 7" </dev/null >/dev/null 2>&1
  rc=$?
  [ "$rc" = 7 ] && ok "$who" "the command's exit status" || bad "$who" "exit status $rc, want 7"
  # no wait here: the process was reaped before capsule returned
  if pgrep -f "^sleep $tag\$" >/dev/null; then
    bad "$who" "a background process of the tool outlived capsule run"
    pkill -KILL -f "^sleep $tag\$"
  else
    ok "$who" "a background process is gone when capsule run returns"
  fi
  if [ -z "$(ls -A "$tmp")" ]; then ok "$who" "the run directory is removed"
  else bad "$who" "the run directory is left: $(ls -A "$tmp")"; fi
  # a writer in a read-write grant, still writing when the command exits
  # started directly (not through as_user, whose subshell $! would name):
  # $! is capsule itself, whose pid names its cgroups
  as=(); [ "$who" = root ] || as=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  TMPDIR=$tmp "${as[@]}" "$capsule" run --allow-rw "$dir" -- \
    sh -c "(while :; do echo x >>'$dir/f'; done) & while [ ! -s '$dir/f' ]; do :; done; exit 0" \
    </dev/null >/dev/null 2>&1 &
  cpid=$!
  wait "$cpid"
  size=$(stat -c %s "$dir/f" 2>/dev/null || echo none)
  sleep 0.5 # room for a writer that outlived the run to show itself
  if [ "$size" != none ] && [ "$(stat -c %s "$dir/f")" = "$size" ]; then
    ok "$who" "a writer in a read-write grant has stopped when capsule run returns"
  else
    bad "$who" "the grant changed after capsule run returned ($size, then $(stat -c %s "$dir/f" 2>/dev/null))"
  fi
  if [ -z "$(find /sys/fs/cgroup -maxdepth 4 -type d -name "capsule-$cpid" 2>/dev/null)" ]; then
    ok "$who" "the run's cgroups are removed"
  else
    bad "$who" "cgroups of the run remain: $(find /sys/fs/cgroup -maxdepth 4 -type d -name "capsule-$cpid")"
  fi
done
echo "teardown: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
