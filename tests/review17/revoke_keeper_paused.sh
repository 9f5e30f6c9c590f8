#!/usr/bin/env bash
# A revoke that commits after a call read the grants and the count of
# revokes (gw_call.grants_epoch), after the call checked that count just
# before it started a warm server's keeper, and that looks for the
# capability's keepers before the new keeper's status is out finds none to
# stop. The keeper itself must then see the count of revokes moved
# (gateway/instance.h, gw_grants_epoch) and end, even when its call was
# killed meanwhile, leaving nobody else to check. The keeper is held just
# before its status by a test hook (CAPSULE_TEST_KEEPER_PAUSE, in builds
# with test hooks: skipped elsewhere); the revoke runs then, the call is
# killed (mode `killed`) or waits, and the keeper is let go. Both modes run.
# Exits 1 while a keeper started with the revoked grant runs on, 0 when
# not, 77 when it cannot run here. As root.
# Usage: revoke_keeper_paused.sh CAPSULE
. "$(dirname "$0")/lib.sh" "$1" review17-revoke-keeper-paused
selu_granted
for mode in waits killed; do
  "$capsule" grant "${C[@]}" text-tools --read "$secret" >/dev/null || { echo "FAIL: grant --read"; exit 1; }
  rm -f "$work/pause.pid"
  touch "$work/pause"
  CAPSULE_TEST_KEEPER_PAUSE=$work/pause wc_call --timeout 20 >"$work/call.out" 2>&1 &
  caller=$!
  pids+=($caller)
  for _ in $(seq 300); do [ -s "$work/pause.pid" ] && break; kill -0 $caller 2>/dev/null || break; sleep 0.1; done
  if [ ! -s "$work/pause.pid" ]; then
    rm -f "$work/pause"
    wait $caller
    grep -q '"words"' "$work/call.out" && skip "this build has no test hooks (the keeper did not pause)"
    cat "$work/call.out"
    echo "FAIL: ($mode) no keeper started"
    exit 1
  fi
  keeper=$(cat "$work/pause.pid")
  [ ! -f "$state/run/$key.status" ] || { echo "FAIL: ($mode) the keeper's status is out before its pause"; exit 1; }
  "$capsule" revoke "${C[@]}" text-tools --read "$secret" >"$work/revoke.out" 2>&1 ||
    { cat "$work/revoke.out"; echo "FAIL: ($mode) revoke --read"; exit 1; }
  [ "$mode" = killed ] && kill -TERM $(pgrep -P $caller) 2>/dev/null && sleep 0.5
  rm -f "$work/pause"
  wait $caller
  # the keeper's status comes and goes: until it is gone (a zombie counts as gone)
  for _ in $(seq 100); do
    grep -qs '^State:[[:space:]]*[^Z]' "/proc/$keeper/status" || break
    sleep 0.1
  done
  revoked_alive wait
  if [ -n "$alive" ]; then
    echo "FAIL: ($mode) a keeper started with the revoked grant runs on (pid $alive; the call said: $(head -c 200 "$work/call.out"))"
    fail=1
  elif grep -qs '^State:[[:space:]]*[^Z]' "/proc/$keeper/status"; then
    echo "FAIL: ($mode) the keeper (pid $keeper) is still there"
    fail=1
  else
    echo "ok: ($mode) the keeper started with the grants read before a revoke ended itself"
  fi
  if [ "$mode" = waits ]; then
    grep -q "revoked while its server started" "$work/call.out" &&
      echo "ok: (waits) the call says why: $(head -c 160 "$work/call.out")" ||
      { echo "FAIL: (waits) the call did not say the grants were revoked: $(head -c 300 "$work/call.out")"; fail=1; }
  fi
  "$capsule" stop --state "$state" text-tools >/dev/null 2>&1
done
[ "$fail" = 0 ] && echo "PASS: a keeper that a revoke missed ends itself, its call waiting or killed"
exit "$fail"
