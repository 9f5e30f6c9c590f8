#!/bin/bash
# Finding: `capsule ps` / `capsule stop` trust the pid in a keeper's status
# file (STATE/run/KEY.status). A keeper killed outright (SIGKILL, OOM kill,
# a crash) leaves its file behind (instance_status.c says so); once its pid
# is reused by an unrelated process of the operator (as root: any process),
# `capsule ps` lists it as a live instance (kill(pid, 0) succeeds) and
# `capsule stop CAP` finds no keeper on the socket and falls back to
# kill(pid, SIGTERM) on that unrelated process
# (src/gateway/instance_status.c gw_instance_stop / gw_instance_list).
# Nothing checks that the pid is still the keeper: its KEY.lock (held by
# the living keeper), /proc/PID start time or cmdline.
# Pid reuse cannot be forced in a test, so this script leaves the file a
# killed keeper leaves, naming the pid a victim process has now. Exits 1
# when the victim is signalled, 0 when it is not, 77 when it cannot run.
capsule=$(realpath "${1:-build/capsule}")
[ -x "$capsule" ] || { echo "SKIP: no $capsule"; exit 77; }
S=$(mktemp -d /tmp/capsule-review3-stop.XXXXXX); trap 'kill $victim 2>/dev/null; rm -rf "$S"' EXIT
chmod 700 "$S"
export CAPSULE_STATE=$S/state
mkdir -p -m 700 "$S/state/run"
# the victim: an unrelated long-running process of the operator
setsid sleep 300 </dev/null >/dev/null 2>&1 &
victim=$!
sleep 0.2
now=$(($(date +%s) * 1000))
# what keeper_main's status file holds; the keeper then died by SIGKILL
printf 'capability=demo\npid=%d\nstate=serving\nleases=0\nmax_leases=1\nstarted_ms=%d\nidle_since_ms=%d\n' \
  "$victim" "$now" "$now" >"$S/state/run/0123456789abcdef.status"
chmod 600 "$S/state/run/0123456789abcdef.status"
echo "--- capsule ps"
"$capsule" ps 2>&1
echo "--- capsule stop demo"
"$capsule" stop demo </dev/null 2>&1
sleep 0.3
if ! kill -0 "$victim" 2>/dev/null; then
  echo "VULNERABLE: capsule stop sent SIGTERM to pid $victim, which is not a keeper (a sleep)"; exit 1
fi
echo blocked; exit 0
