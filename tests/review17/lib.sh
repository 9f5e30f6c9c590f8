# Shared by the seventeenth review's scripts: review 14's lib.sh (capsule,
# work, caps, state, C, skip, probe_cap, serve_http, call: see there).
# Usage: . lib.sh CAPSULE NAME
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../review14/lib.sh" "$@"
# The revoke races' set-up (revoke_*starting*_warm.sh): selu_granted
# [SLOW]: examples/selu-text as capability text-tools (SLOW: its server
# takes 5 s to start), granted --read $secret, started once by a call
# (else skip) and stopped, its instance's name in $key and its start lock
# RUN/$key.lock left; wc_call [ARGS...]: a call of it. hold_start_lock:
# that lock held by a process of this script's ($holder), so a call that
# starts the instance waits at it, its grants read; await_caller PID: until
# a process other than the holder has the lock open (the call waits
# there), or fail.
statuses() { for f in "$state"/run/*.status; do [ -f "$f" ] && basename "$f" .status; done | grep -v '\.mcp$' | grep -v '~'; }
wc_call() { "$capsule" call "${C[@]}" "$@" text-tools word_count '{"text":"a b"}' 2>&1; }
selu_granted() {
  [ -x "$root/examples/selu-text/capability" ] || skip "examples/selu-text is not built"
  secret=$work/secret
  mkdir -p "$secret" "$caps/selu-text" && echo s3cret >"$secret/file" && chmod -R a+rX "$secret"
  cp -r "$root/examples/selu-text/." "$caps/selu-text/"
  sed -i 's/max_memory_mb: 64/max_memory_mb: 1024/' "$caps/selu-text/manifest.yaml"
  if [ -n "${1:-}" ]; then
    sed -i 's|command: \["./capability"\]|command: ["sh", "start.sh"]|' "$caps/selu-text/manifest.yaml"
    printf 'sleep 5; exec ./capability\n' >"$caps/selu-text/start.sh"
  fi
  chmod -R a+rX "$caps"
  "$capsule" grant "${C[@]}" text-tools --read "$secret" >/dev/null || { echo "FAIL: grant --read"; exit 1; }
  local a
  a=$(wc_call --timeout 60)
  grep -q '"words"' <<<"$a" || skip "no warm Selu instance here: $(head -c 200 <<<"$a")"
  key=$(statuses)
  [ "$(wc -w <<<"$key")" = 1 ] || { echo "FAIL: one instance expected, found: $key"; exit 1; }
  "$capsule" stop --state "$state" text-tools >/dev/null 2>&1
  [ -f "$state/run/$key.lock" ] || { echo "FAIL: no start lock $state/run/$key.lock after the first start"; exit 1; }
  [ -z "$(statuses)" ] || { echo "FAIL: the instance did not stop"; exit 1; }
}
hold_start_lock() {
  python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "r+"); fcntl.flock(f, fcntl.LOCK_EX); print("held", flush=True); time.sleep(600)' \
    "$state/run/$key.lock" >"$work/holder.out" &
  holder=$!
  pids+=($holder)
  for _ in $(seq 100); do grep -q held "$work/holder.out" && break; sleep 0.1; done
}
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
await_caller() {
  for _ in $(seq 600); do waiting && break; kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  waiting || { cat "$work/call.out"; echo "FAIL: the call never reached the start lock"; exit 1; }
}
# revoked_alive [WAIT]: the pid of a live keeper named $key (the revoked
# grant's instance) in $alive, "" when none; WAIT: first up to 15 s for it
# to serve (a keeper has its own deadline to become ready)
revoked_alive() {
  local pid=
  alive=
  for _ in $(seq 150); do
    [ -f "$state/run/$key.status" ] || break
    pid=$(sed -n 's/^pid=//p' "$state/run/$key.status")
    [ -z "${1:-}" ] || grep -q '^state=serving' "$state/run/$key.status" && break
    sleep 0.1
  done
  [ -n "$pid" ] && [ -f "$state/run/$key.status" ] && kill -0 "$pid" 2>/dev/null && alive=$pid
  true
}
