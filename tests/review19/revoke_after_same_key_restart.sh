#!/usr/bin/env bash
# `capsule revoke` finds the keepers to stop by their status files
# (RUN/KEY.status); a keeper started while a revoke commits ends itself
# only when the count of revokes moved while it started (gw_grants_epoch).
# A Selu keeper that is stopping (here `capsule stop`; an idle timeout or
# a package change does the same) unpublishes its socket at once but
# unlinked RUN/KEY.status only once its server had ended, whose-ever it
# was by then (now a keeper without its socket writes or removes the file
# only under the start lock, and only while it is the one it wrote last).
# A call in between starts a new keeper of the same name (same grants, so
# the same KEY), which writes RUN/KEY.status; the old keeper then removes
# it. The new keeper is invisible to `capsule ps`, `capsule stop` and
# `capsule revoke`: a revoke made afterwards (racing no call) stops
# nothing, and the keeper serves on with the revoked grant until its idle
# timeout. Here the server ignores SIGTERM (sh traps it), so its sandbox's
# pid 1 kills it 2 s after the stop (a server's graceful shutdown takes
# such time too). Exits 1 while a keeper started with the revoked grant
# runs on, 0 when not, 77 when it cannot run here. As root.
# Usage: revoke_after_same_key_restart.sh CAPSULE
. "$(dirname "$0")/../review17/lib.sh" "$1" review19-revoke-same-key
. "$(dirname "$0")/lib.sh"
selu_granted
deaf_started
"$capsule" stop --state "$state" text-tools >"$work/stop.out" 2>&1 &
stopper=$!
pids+=($stopper)
for _ in $(seq 100); do [ -S "$state/run/$key.sock" ] || break; sleep 0.02; done
[ ! -S "$state/run/$key.sock" ] || { echo "FAIL: keeper 1 did not unpublish"; exit 1; }
a=$(wc_call --timeout 60)
grep -q '"words"' <<<"$a" || { echo "FAIL: second call: $a"; exit 1; }
new=$(sed -n 's/^pid=//p' "$state/run/$key.status" 2>/dev/null)
echo "keeper 2: pid ${new:-?}, RUN/$key (keeper 1 still stopping)"
wait $stopper
echo "capsule stop said: $(tr '\n' ' ' <"$work/stop.out")"
for _ in $(seq 50); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
echo "keeper 1 gone; RUN/$key.status: $([ -f "$state/run/$key.status" ] && echo present || echo GONE)"
echo "capsule ps: $("$capsule" ps --state "$state" 2>&1 | tr '\n' ' ')"
"$capsule" revoke "${C[@]}" text-tools --read "$secret" >"$work/revoke.out" 2>&1 ||
  { cat "$work/revoke.out"; echo "FAIL: revoke --read"; exit 1; }
echo "revoke said: $(tr '\n' ' ' <"$work/revoke.out")"
sleep 1
if [ -n "$new" ] && grep -qs '^State:[[:space:]]*[^Z]' "/proc/$new/status"; then
  sandbox_reads "$new"
  echo "FAIL: keeper 2 (pid $new) started with the grant the revoke removed serves on, listed nowhere${seen:+; its sandbox (pid $seen) still reads $secret/file}"
  kill "$new"
  exit 1
fi
echo "PASS: no keeper with the revoked grant"
