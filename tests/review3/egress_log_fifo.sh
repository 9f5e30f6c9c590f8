#!/bin/bash
# Finding (low): `capsule run --egress-log PATH` opens PATH with
# O_WRONLY|O_APPEND|O_CREAT|O_NOFOLLOW (src/cli/run.c open_egress_log) and
# only then checks that it is a regular file. A FIFO there blocks the open
# (no reader) and capsule hangs before the run starts. The directory check
# covers only this run's writable grants: a tool of an earlier run granted
# that directory plants the FIFO (here the tool, with the caller's uid 65534,
# makes ~/logs/egress.log a FIFO; the next run keeps ~/logs out of its
# grants, as the error message asks). Fix: O_NONBLOCK on the open (or
# fstatat/S_ISREG before it, then O_NONBLOCK cleared).
# Exits 1 while capsule hangs, 0 when it refuses or runs, 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to act as uid 65534"; exit 77; }
command -v mkfifo >/dev/null || exit 77
H=$(mktemp -d /var/tmp/capsule-review3-fifo.XXXXXX); trap 'rm -rf "$H"' EXIT
mkdir -p "$H/logs"; chown -R 65534:65534 "$H"; chmod 755 "$H"
as_op() { (cd /tmp && setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$H" CAPSULE_STATE="$H/.st" "$@"); }
as_op "$capsule" run --allow-rw "$H/logs" -- mkfifo "$H/logs/egress.log" || { echo "setup failed"; exit 77; }
ls -l "$H/logs"
as_op timeout 15 "$capsule" run --net proxy --egress-log "$H/logs/egress.log" -- true
rc=$?
echo "capsule run --egress-log: rc=$rc"
if [ "$rc" = 124 ]; then
  echo "VULNERABLE: capsule hung opening a FIFO planted as its egress log"; exit 1
fi
echo blocked; exit 0
