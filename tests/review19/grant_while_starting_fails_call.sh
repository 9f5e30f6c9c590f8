#!/usr/bin/env bash
# A false positive of an earlier check: just before it started a warm
# server's keeper, a call read the grants afresh and failed when they gave
# other rights than those it read first, saying "a revoke ran meanwhile".
# A `capsule grant` that only ADDS a right (no revoke, nothing to take
# back) while the call waits to start its keeper failed the call all the
# same. Now only a revoke moves what the call compares (the count of
# revokes, gw_call.grants_epoch). The call is held at its instance's start
# lock (review17 lib.sh's hold_start_lock), its grants read; another path
# is granted; the lock is let go. Exits 1 when the call fails, 0 when it
# answers, 77 when it cannot run here. As root.
# Usage: grant_while_starting_fails_call.sh CAPSULE
. "$(dirname "$0")/../review17/lib.sh" "$1" review19-grant-while-starting
selu_granted
other=$work/other
mkdir -p "$other" && chmod a+rX "$other"
hold_start_lock
wc_call --timeout 30 >"$work/call.out" 2>&1 &
caller=$!
pids+=($caller)
await_caller $caller
"$capsule" grant "${C[@]}" text-tools --read "$other" >/dev/null || { echo "FAIL: grant --read $other"; exit 1; }
kill "$holder"
wait $caller
echo "the call said: $(head -c 300 "$work/call.out")"
"$capsule" stop --state "$state" text-tools >/dev/null 2>&1
if grep -q '"words"' "$work/call.out"; then
  echo "PASS: a grant added while the call started its server did not fail it"
  exit 0
fi
echo "FAIL: the call failed though nothing was revoked (a grant was only added)"
exit 1
