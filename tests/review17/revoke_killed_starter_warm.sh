#!/usr/bin/env bash
# OPEN (not in tests/review/run.sh's list: it fails on the build it was
# written against). The check after a call's run (call.c step_run,
# gw_grants_changed) is the caller's: a call whose process is killed
# (SIGTERM/SIGINT: an operator's Ctrl-C on `capsule call`, a client's
# cancel of a call run in a child) while its keeper starts never makes
# it, and the keeper (detached: it outlives its starter) serves on with
# a grant revoked meanwhile until its idle timeout. As
# revoke_slow_starting_warm.sh (the start lock held while the call waits
# at it and the revoke runs; a server 5 s to start), then the call's
# `capsule call` gets SIGTERM 1 s after the lock is let go. Fix idea: the
# keeper checks once published, e.g. the revoke leaves RUN/revoked/CAP
# with the time of its commit (written after it, before it lists the
# keepers) and the call hands its keeper the time it read the grants; a
# keeper that finds a revoke at or after that stops itself. Exits 1 while
# a keeper started with the revoked grant runs on, 0 when not, 77 when it
# cannot run here. As root.
# Usage: revoke_killed_starter_warm.sh CAPSULE
. "$(dirname "$0")/lib.sh" "$1" review17-revoke-killed-starter
selu_granted slow
hold_start_lock
began=$(date +%s%N)
wc_call --timeout 10 >"$work/call.out" 2>&1 &
caller=$!
pids+=($caller)
await_caller $caller
"$capsule" revoke "${C[@]}" text-tools --read "$secret" >"$work/revoke.out" 2>&1 ||
  { cat "$work/revoke.out"; echo "FAIL: revoke --read"; exit 1; }
# the lock let go 6 s after the call began: its keeper's server, 5 s to
# start, is ready past the call's deadline (10 s) but within its own
while [ $(($(date +%s%N) - began)) -lt 6000000000 ]; do sleep 0.1; done
kill $holder
sleep 1
kill -TERM $(pgrep -P $caller) 2>/dev/null # the call itself, not its shell
wait $caller
# the keeper (if any runs) has its 10 s from its start to become ready
revoked_alive wait
if [ -n "$alive" ]; then
  echo "FAIL: a keeper started with the revoked grant runs on (pid $alive, $(sed -n 's/^state=//p' "$state/run/$key.status"); the call said: $(head -c 200 "$work/call.out"))"
  fail=1
else
  echo "ok: the keeper of a call killed while it started, with the grants read before a revoke, does not run on"
fi
"$capsule" stop --state "$state" text-tools >/dev/null 2>&1
[ "$fail" = 0 ] && echo "PASS: a keeper whose call was killed does not run on with a grant revoked meanwhile"
exit "$fail"
