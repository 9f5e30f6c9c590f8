#!/usr/bin/env bash
# A hole left by the fix of revoke_starting_warm.sh (src/gateway/
# instance.c start_keeper, call.c step_run): a call rechecks the grants
# after its run only when its process's count of keepers started moved,
# and start_keeper counted a keeper only once it said it was ready. A
# keeper outlives its starter and waits for its server up to the call's
# whole deadline from its own start, so a call that gave up waiting
# (ETIMEDOUT: its deadline began before it waited at the start lock) left
# a keeper that became ready later, named by the grants it read before a
# revoke, and nothing rechecked them: the server ran on with the revoked
# grant until its idle timeout. Made deterministic as revoke_starting_warm
# does (the start lock held while the call waits at it and the revoke
# runs), with a server whose start takes 5 s, the call's deadline 10 s and
# the lock let go 6 s after the call began. Exits 1 while a keeper started
# with the revoked grant runs on, 0 when not, 77 when it cannot run here.
# As root.
# With `killed`: the call's process is killed (SIGTERM, 1 s after the
# lock is let go: an operator's Ctrl-C on `capsule call`, a client's
# cancel of a call run in a child) while its keeper would start. The call
# reads the count of revokes before its first state read and starts no
# keeper once it moved (gw_call.grants_epoch), and the keeper checks it
# again once its status is out (revoke_keeper_paused.sh holds it there).
# Usage: revoke_slow_starting_warm.sh CAPSULE [killed]
killed=${2:-}
. "$(dirname "$0")/lib.sh" "$1" review17-revoke-slow-starting
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
if [ -n "$killed" ]; then
  sleep 1
  kill -TERM $(pgrep -P $caller) 2>/dev/null # the call itself, not its shell
fi
wait $caller
# the keeper (if any runs) has its 10 s from its start to become ready
revoked_alive wait
if [ -n "$alive" ]; then
  echo "FAIL: a keeper started with the revoked grant runs on (pid $alive, $(sed -n 's/^state=//p' "$state/run/$key.status"); the call said: $(head -c 200 "$work/call.out"))"
  fail=1
else
  echo "ok: the keeper a call ${killed:+killed while it started}${killed:-gave up waiting for}, started with the grants read before a revoke, does not run on"
fi
"$capsule" stop --state "$state" text-tools >/dev/null 2>&1
[ "$fail" = 0 ] && echo "PASS: a keeper its call gave up waiting for does not run on with a grant revoked meanwhile"
exit "$fail"
