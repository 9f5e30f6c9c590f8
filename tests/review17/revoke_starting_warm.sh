#!/usr/bin/env bash
# Review 17's open point (src/gateway/call.c step_run, gateway/grants.c
# gw_grants_changed): a call that read a capability's grants, then
# started its warm server's keeper after a `capsule revoke` of one of them
# had committed and looked for keepers to stop, left that server running
# with the revoked grant until its idle timeout: the revoke found no
# keeper (none had published its status yet), and no later call reaches
# the server (its name digests the grants), so nothing stopped it.
# Made deterministic here: the Selu instance's start lock (RUN/KEY.lock,
# which a starting call takes) is held by this script, so the call, its
# grants read, waits at it; the revoke then runs, the lock is let go, and
# the call starts a keeper named by the grants before. Now a call that
# started a warm server checks the grants again after its run and stops
# the capability's warm servers when they changed. Exits 1 while a
# keeper started with the revoked grant runs on, 0 when not, 77 when it
# cannot run here. As root.
# Usage: revoke_starting_warm.sh CAPSULE
. "$(dirname "$0")/lib.sh" "$1" review17-revoke-starting
[ -x "$root/examples/selu-text/capability" ] || skip "examples/selu-text is not built"
secret=$work/secret
mkdir -p "$secret" "$caps/selu-text" && echo s3cret >"$secret/file" && chmod -R a+rX "$secret"
cp -r "$root/examples/selu-text/." "$caps/selu-text/"
sed -i 's/max_memory_mb: 64/max_memory_mb: 1024/' "$caps/selu-text/manifest.yaml"
chmod -R a+rX "$caps"
wc_call() { "$capsule" call "${C[@]}" text-tools word_count '{"text":"a b"}' 2>&1; }
"$capsule" grant "${C[@]}" text-tools --read "$secret" >/dev/null || { echo "FAIL: grant --read"; exit 1; }
a=$(wc_call)
grep -q '"words"' <<<"$a" || skip "no warm Selu instance here: $(head -c 200 <<<"$a")"
# the instance's name (KEY) with the grant: its status, then its lock once stopped
statuses() { for f in "$state"/run/*.status; do [ -f "$f" ] && basename "$f" .status; done | grep -v '\.mcp$'; }
key=$(statuses)
[ "$(wc -w <<<"$key")" = 1 ] || { echo "FAIL: one instance expected, found: $key"; exit 1; }
"$capsule" stop --state "$state" text-tools >/dev/null 2>&1
[ -f "$state/run/$key.lock" ] || { echo "FAIL: no start lock $state/run/$key.lock after the first start"; exit 1; }
[ -z "$(statuses)" ] || { echo "FAIL: the instance did not stop"; exit 1; }
# hold the start lock: the next call with the grant stops there, its grants read
python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "r+"); fcntl.flock(f, fcntl.LOCK_EX); print("held", flush=True); time.sleep(600)' \
  "$state/run/$key.lock" >"$work/holder.out" &
holder=$!
pids+=($holder)
for _ in $(seq 100); do grep -q held "$work/holder.out" && break; sleep 0.1; done
wc_call >"$work/call.out" 2>&1 &
caller=$!
pids+=($caller)
# the call has the lock file open once it waits at it (any process but the holder)
waiting() {
  local f p
  for f in /proc/[0-9]*/fd/*; do
    [ "$(readlink "$f" 2>/dev/null)" = "$state/run/$key.lock" ] || continue
    p=${f#/proc/}
    p=${p%%/*}
    [ "$p" != "$holder" ] && return 0
  done
  return 1
}
for _ in $(seq 600); do waiting && break; kill -0 $caller 2>/dev/null || break; sleep 0.1; done
waiting || { cat "$work/call.out"; echo "FAIL: the call never reached the start lock"; exit 1; }
"$capsule" revoke "${C[@]}" text-tools --read "$secret" >"$work/revoke.out" 2>&1 ||
  { cat "$work/revoke.out"; echo "FAIL: revoke --read"; exit 1; }
kill $holder
wait $caller
# whatever the call answered, no keeper named by the revoked grant may run on
alive=
if [ -f "$state/run/$key.status" ]; then
  pid=$(sed -n 's/^pid=//p' "$state/run/$key.status")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && alive=$pid
fi
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
