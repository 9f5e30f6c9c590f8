#!/usr/bin/env bash
# Calls cancelled by their 2026-07-28 stream's close (the call's process
# stopped, the pipeline's record written) must leave nothing behind in
# serve: 80 calls of a tool that sleeps 30 s, each closed by its client
# after 400 ms, 8 at a time; once each has its record, serve's descriptors
# and threads are as after 16 such calls (what serve keeps per call slot
# made), and no process of a call is left. Exits 1 when something stays, 0 when not, 77 cannot run.
# Usage: cancel_leaks.sh CAPSULE
set -u
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
. "$(dirname "$0")/lib.sh" "$1"
agent slow 60000 'sleep 30; printf "{\"got\":%s}\n" "$line"' allow
tok=$(token alice) || exit 77
serve10
url=http://127.0.0.1:$port/mcp
records() { "$capsule" audit --state "$state" 2>/dev/null | grep -c 'slow.dispatch'; }
settled() { # N: N records, and serve has no child left
  [ "$(records)" -ge "$1" ] && [ -z "$(ps -o pid=,comm= --ppid "$spid" | grep -v capsule-spawner)" ] # the warm Selu spawner stays
}
wait_for() { for _ in $(seq 1200); do "$@" && return 0; sleep 0.1; done; return 1; }
# warm: 16 calls, 8 at a time (what serve keeps per call slot is then made)
node "$root/tests/review10/cancel_leaks.mjs" "$url" "$tok" 16 >/dev/null
wait_for settled 16 || { echo "SKIP: the first cancelled calls left no record or a process"; exit 77; }
fds0=$(ls "/proc/$spid/fd" | wc -l) thr0=$(ls "/proc/$spid/task" | wc -l)
ls -l /proc/$spid/fd | tail -n +2 | awk '{print $NF}' | sort | uniq -c >"$W/fd0"
n=$(node "$root/tests/review10/cancel_leaks.mjs" "$url" "$tok" 80)
fail=0
wait_for settled 96 || { echo "  WORKS    after 120 s: $(records) records of 96, serve's children: $(ps -o pid=,args= --ppid "$spid" | head -3)"; fail=1; }
sleep 1
fds=$(ls "/proc/$spid/fd" | wc -l) thr=$(ls "/proc/$spid/task" | wc -l)
echo "$n calls closed by their clients: serve's descriptors $fds0 -> $fds, threads $thr0 -> $thr, $(records) records"
ls -l /proc/$spid/fd | tail -n +2 | awk '{print $NF}' | sort | uniq -c | diff "$W/fd0" - | grep "^[<>]" | head -5
[ "$fds" -le $((fds0 + 2)) ] || { echo "  WORKS    descriptors left: $(ls -l /proc/$spid/fd | tail -n +2 | awk '{print $NF}' | sort | uniq -c | sort -rn | head -3)"; fail=1; }
[ "$thr" -le $((thr0 + 1)) ] || { echo "  WORKS    threads left"; fail=1; }
[ "$fail" = 0 ] && { echo blocked; exit 0; }
exit 1
