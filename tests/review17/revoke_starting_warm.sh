#!/usr/bin/env bash
# Review 17's open point (src/gateway/call.c, then step_run): a call that read a capability's grants, then
# started its warm server's keeper after a `capsule revoke` of one of them
# had committed and looked for keepers to stop, left that server running
# with the revoked grant until its idle timeout: the revoke found no
# keeper (none had published its status yet), and no later call reaches
# the server (its name digests the grants), so nothing stopped it.
# Made deterministic here: the Selu instance's start lock (RUN/KEY.lock,
# which a starting call takes) is held by this script, so the call, its
# grants read, waits at it; the revoke then runs, the lock is let go, and
# the call starts a keeper named by the grants before. Now a call reads
# the count of the capability's revokes before its first state read
# (gateway/instance.h, gw_grants_epoch) and starts no keeper once it
# moved (the call fails, asking to be made again). Exits 1 while a
# keeper started with the revoked grant runs on, 0 when not, 77 when it
# cannot run here. As root.
# Usage: revoke_starting_warm.sh CAPSULE
. "$(dirname "$0")/lib.sh" "$1" review17-revoke-starting
selu_granted
hold_start_lock
wc_call >"$work/call.out" 2>&1 &
caller=$!
pids+=($caller)
await_caller $caller
"$capsule" revoke "${C[@]}" text-tools --read "$secret" >"$work/revoke.out" 2>&1 ||
  { cat "$work/revoke.out"; echo "FAIL: revoke --read"; exit 1; }
kill $holder
wait $caller
# whatever the call answered, no keeper named by the revoked grant may run on
revoked_alive
if [ -n "$alive" ]; then
  echo "FAIL: a keeper started with the revoked grant runs on (pid $alive; the call said: $(head -c 200 "$work/call.out"))"
  fail=1
else
  echo "ok: the keeper a call started with the grants read before a revoke was stopped"
fi
a=$(wc_call)
if ! grep -q '"words"' <<<"$a"; then
  echo "FAIL: the next call failed: $a"
  fail=1
elif [ "$(statuses)" = "$key" ]; then
  echo "FAIL: the next call leased the instance named by the revoked grant"
  fail=1
else
  echo "ok: the next call starts an instance without the grant"
fi
"$capsule" stop --state "$state" text-tools >/dev/null 2>&1
[ "$fail" = 0 ] && echo "PASS: a keeper started with a grant revoked meanwhile does not run on"
exit "$fail"
