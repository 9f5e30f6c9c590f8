#!/usr/bin/env bash
# SIGTERM, SIGINT and SIGHUP sent to `capsule run` reach the tool (which
# can exit on its own terms), with the network blocked and in proxy mode,
# where the egress proxy's threads must not take the signal and end capsule
# (they did: the tool was then killed with capsule instead). As root and
# as uid 65534. Usage: signals.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
work=$(mktemp -d /var/tmp/capsule-signals.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
cat >"$work/proxy.json" <<'JSON'
{"version": "0.1.0", "network": {"mode": "proxy", "allow_domains": ["example.com"]}}
JSON
chmod 644 "$work/proxy.json"
# the tool: says it is ready, then exits 3 on SIGTERM (or SIGINT, SIGHUP)
tool='trap "echo got-signal; exit 3" TERM INT HUP; echo ready; while :; do sleep 0.1; done'

# case WHO NAME SIGNAL CAPSULE-ARGS...: capsule run ARGS -- the tool, then SIGNAL to capsule
case_() {
  local who=$1 name=$2 sig=$3; shift 3
  local out=$work/$who-$name.out
  : >"$out"; chmod 666 "$out"
  # $! must be capsule itself: setpriv execs it, a shell function would not
  # the signals' default actions: a test run under nohup or in a background
  # job inherits SIGHUP/SIGINT ignored, and a shell cannot trap a signal
  # ignored on entry, so the tool would never see one (exec keeps pid)
  local prefix=(env --default-signal=HUP,INT,TERM)
  [ "$who" = root ] || prefix+=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  # a state of the test's own (the default one is shared with other runs)
  mkdir -p "$work/state-$who"
  [ "$who" = root ] || chown 65534:65534 "$work/state-$who"
  "${prefix[@]}" "$capsule" run --state "$work/state-$who" "$@" -- /bin/sh -c "$tool" >"$out" 2>&1 </dev/null &
  local pid=$!
  for _ in $(seq 300); do grep -q ready "$out" && break; sleep 0.1; done
  kill "-$sig" "$pid"
  # bounded: a signal lost shows where capsule and its sandbox wait, then fails
  local waited=0
  while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 1200 ]; do sleep 0.1; waited=$((waited + 1)); done
  if kill -0 "$pid" 2>/dev/null; then
    echo "  capsule (pid $pid) still runs 120 s after SIG$sig; its processes and threads:"
    ps -eLo pid,ppid,lwp,stat,wchan:24,args | awk -v p="$pid" 'NR == 1 || $1 == p || $2 == p' | sed 's/^/         /'
    for t in /proc/"$pid"/task/*; do
      echo "         thread ${t##*/}: $(grep -E '^Sig(Pnd|Blk|Ign|Cgt)|^ShdPnd' "$t/status" | tr '\n' ' ')"
      sed 's/^/           /' "$t/stack" 2>/dev/null | head -8
    done
    pkill -KILL -P "$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid"
  local status=$?
  if [ "$status" = 3 ] && grep -q got-signal "$out"; then
    pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$who" "$name"
  else
    fail=$((fail + 1)); printf '  FAIL %-6s %s (exit %s, want 3)\n' "$who" "$name" "$status"
    head -5 "$out" | sed 's/^/         /'
  fi
}

for who in "${users[@]}"; do
  case_ "$who" term-reaches-tool TERM
  case_ "$who" hup-reaches-tool HUP
  case_ "$who" term-reaches-tool-in-proxy-mode TERM --config "$work/proxy.json"
done
echo "signals: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
