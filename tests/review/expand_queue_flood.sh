#!/bin/bash
# Supervised mode: the token bucket (a burst of 5, 10 a second) bounds how
# fast questions enter the operator's queue, not how many wait there. A tool
# that keeps threads blocked in opens of distinct host files, a wave of 5
# and another of 5 once the bucket has refilled, had all 10 put to the
# operator one after another (up to 64: the supervisor's threads, each
# question until --approval-timeout). Waiting questions are now bounded
# (the burst): the second wave is refused unasked (rate-limited) while the
# first waits. Root and uid 65534. Exits non-zero when 9 or more questions
# are asked.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: runs as root and as uid 65534"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 drives the threads"; exit 77; }
abi=$("$capsule" doctor 2>/dev/null | sed -n 's/.*Landlock *yes *ABI \([0-9]*\).*/\1/p')
[ "${abi:-0}" -gt 0 ] || { echo "SKIP: capability expansion needs Landlock"; exit 77; }
rc=0
for who in root nobody; do
  d=$(mktemp -d /var/tmp/capsule-review-flood.XXXXXX)
  chmod 755 "$d"
  mkdir -p "$d/grant" "$d/out" "$d/state"
  for i in $(seq 1 10); do echo "$i" >"$d/out/f$i"; done
  cat >"$d/sup.json" <<JSON
{"version": "0.1.0", "process": {"exec_strategy": "supervised"},
 "filesystem": {"grants": [{"path": "$d/grant", "access": "readwrite"}]}}
JSON
  pre=()
  if [ $who = nobody ]; then
    chown -R 65534:65534 "$d"
    pre=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  fi
  # the pause lets the bucket refill (it is no assertion: the first wave
  # waits a second per question, in turn)
  tool='import sys, threading, time
def op(p):
    try: open(p).read()
    except OSError: pass
ts = []
for wave in (range(1, 6), range(6, 11)):
    for i in wave:
        t = threading.Thread(target=op, args=(sys.argv[1] + "/f%d" % i,)); t.start(); ts.append(t)
    time.sleep(1.5)
for t in ts: t.join()'
  "${pre[@]}" env HOME="$d" "$capsule" --state "$d/state" run --approval-timeout 1 \
    --config "$d/sup.json" -- python3 -c "$tool" "$d/out" >/dev/null 2>"$d/err.txt" </dev/null
  asked=$(grep -c 'is pending' "$d/err.txt")
  limited=$("${pre[@]}" env HOME="$d" "$capsule" --state "$d/state" audit 2>/dev/null | grep -c expand-rate-limited)
  echo "$who: $asked questions asked, $limited refused unasked"
  if [ "$asked" -ge 9 ]; then
    echo "VULNERABLE ($who): the operator's queue of questions is not bounded"; rc=1
  elif [ "$asked" -lt 1 ]; then
    echo "FAIL ($who): nothing was asked"; rc=1
  fi
  rm -rf "$d"
done
exit $rc
