#!/usr/bin/env bash
# Issue 10 item 13 (CPU): child processes do not escape --cpu-ms. Where no
# cgroup counts the sandbox's CPU (uid 65534 on this host), the supervisor
# sums it over the sandbox's processes from /proc; as root the cgroup does.
# A tool forks 4 children that spin; each reports the CPU the children used
# so far into a granted file. The tool must be killed by the budget (exit
# 125) well before 4 s of CPU (the old code let them run to RLIMIT_CPU each:
# 6.5 s used against 0.5 s). As root and as uid 65534.
# Usage: cpu-children.sh CAPSULE PROBE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
probe=$hostile
work=$(mktemp -d /var/tmp/capsule-cpu.XXXXXX)
chmod 777 "$work"
trap 'rm -rf "$work"' EXIT
bindir=$(dirname "$probe")
pass=0 fail=0
for who in "${users[@]}"; do
  rm -f "$work/cpu"
  out=$(as_user "$who" timeout 60 "$capsule" run --cpu-ms 500 --allow-rw "$work" --allow-read "$bindir" -- "$probe" spin-children 4 "$work/cpu" 2>&1 </dev/null)
  status=$?
  used=$(cat "$work/cpu" 2>/dev/null || echo none)
  [ -n "$used" ] || used=0 # killed before the first report: under one report interval
  if [ "$status" = 125 ] && echo "$out" | grep -q 'killed: cpu budget' && [ "$used" != none ] &&
     [ "$used" -lt 4000 ] && ! echo "$out" | grep -q ESCAPED; then
    pass=$((pass + 1)); printf '  ok   %-6s 4 spinning children stopped by --cpu-ms 500 (%s ms used)\n' "$who" "$used"
  else
    fail=$((fail + 1)); printf '  FAIL %-6s children escaped --cpu-ms 500 (exit %s, %s ms used)\n' "$who" "$status" "$used"
    echo "$out" | head -5 | sed 's/^/         /'
  fi
done
echo "cpu children: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
