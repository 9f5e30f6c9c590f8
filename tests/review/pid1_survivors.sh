#!/bin/bash
# A tool that leaves processes behind (a setsid'd double fork, a process
# group of its own, one ignoring SIGTERM/SIGHUP) must not outlive `capsule
# run`: pid 1 kills and reaps every process of the namespace before it
# reports the command's status (src/sandbox/pid1.c, finish), so none is
# left when capsule returns, and the status is the command's own (7), not
# a survivor's. Root and uid 65534. Exits non-zero when a survivor is found
# or the status is another than the command's.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: runs as root and as uid 65534"; exit 77; }
rc=0
for who in root nobody; do
  # sleep's argument is the marker (dash has no exec -a): 9PID1.5 seconds
  n=9$$$([ $who = root ] && echo 1 || echo 2)
  pre=(); [ $who = nobody ] && pre=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  "${pre[@]}" "$capsule" run -- /bin/sh -c "
    setsid sh -c 'trap \"\" TERM HUP; sleep $n.5 & exec sleep $n.25' &
    (sh -c 'sleep $n.125' &) ; sleep 0.2; exit 7" </dev/null >/dev/null 2>&1
  status=$?
  left=$(pgrep -f "sleep $n\\." | tr '\n' ' ')
  echo "$who: exit $status, survivors: ${left:-none}"
  if [ "$status" != 7 ] || [ -n "$left" ]; then
    echo "VULNERABLE ($who): processes outlive capsule run, or the status is not the command's"
    rc=1
    for p in $left; do kill -9 "$p" 2>/dev/null; done
  fi
done
exit $rc
