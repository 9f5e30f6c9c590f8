#!/usr/bin/env bash
# nono's process modes, enforced, as root and as uid 65534:
#   signal_mode  isolated / allow_same_sandbox: the tool signals its own
#                processes, not the sandbox's init (outside its Landlock
#                domain; with Landlock ABI 6); allow_all: it may (within the
#                pid namespace, which shows nothing else);
#   process_info_mode: the sandbox's /proc shows its own processes only;
#   ipc_mode     full: System V semaphores, POSIX semaphores and Python's
#                multiprocessing work; shared_memory_only: System V
#                semaphores refused, and no System V object is shared
#                between two sandboxes running at once, or with the host.
# Usage: process-modes.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
work=$(mktemp -d /var/tmp/capsule-procmodes.XXXXXX)
chmod 755 "$work"
pass=0 fail=0
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
ok() { pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$1" "$2"; }
bad() {
  fail=$((fail + 1)); printf '  FAIL %-6s %s\n' "$1" "$2"
  printf '%s\n' "$3" | head -6 | sed 's/^/         /'
}
abi=$("$capsule" doctor 2>/dev/null | sed -n 's/.*Landlock *yes *ABI \([0-9]*\).*/\1/p')
abi=${abi:-0}

manifest() { # NAME SIGNAL IPC
  cat >"$work/$1.json" <<JSON
{"version": "0.1.0", "process": {"signal_mode": "$2", "ipc_mode": "$3"},
 "filesystem": {"grants": [{"path": "$work/shared", "access": "readwrite"}]}}
JSON
}
mkdir -p "$work/shared"
chmod 777 "$work/shared"
manifest isolated isolated shared_memory_only
manifest same allow_same_sandbox shared_memory_only
manifest all allow_all full

# expect WHO NAME MANIFEST REGEX SCRIPT
expect() {
  local out
  out=$(cd "$work" && as_user "$1" env XDG_STATE_HOME="$work/xdg-$1" timeout 60 \
    "$capsule" run --config "$work/$3.json" -- /bin/sh -c "$5" 2>&1 </dev/null)
  if echo "$out" | tr '\n' ' ' | grep -qE -- "$4"; then ok "$1" "$2"; else bad "$1" "$2" "$out"; fi
}

signals='sleep 30 & kill $! 2>/dev/null && echo child-signalled; kill -0 1 2>/dev/null && echo init-signalled || echo init-refused'
sysv='ipcmk -S 1 >/dev/null 2>&1 && echo sysv-sem-ok || echo sysv-sem-refused'
python='/usr/bin/python3 -c "
import multiprocessing as mp
def sq(x): return x * x
if __name__ == \"__main__\":
    with mp.Pool(2) as p: print(\"pool\", sum(p.map(sq, range(10))))
    s = mp.Semaphore(1); s.acquire(); s.release(); print(\"posix-sem-ok\")
"'
for who in "${users[@]}"; do
  echo "as $who:"
  mkdir -p "$work/xdg-$who"
  [ "$who" = root ] || chown 65534:65534 "$work/xdg-$who"
  if [ "$abi" -ge 6 ]; then
    expect "$who" "isolated: own child signalled, the sandbox's init not" isolated \
      'child-signalled init-refused' "$signals"
    expect "$who" "allow_same_sandbox: the same" same 'child-signalled init-refused' "$signals"
  else
    echo "  skip $who signal scoping: Landlock ABI $abi (< 6) cannot scope signals"
  fi
  expect "$who" "allow_all: init signalled too (only the sandbox's pid namespace is visible)" all \
    'child-signalled init-signalled' "$signals"
  expect "$who" "process_info: /proc shows the sandbox's processes, not the host's" isolated \
    '^(1|2|3|4|5) +$' "ls /proc | grep -c '^[0-9]' ; test -e /proc/$$ && echo HOST-PID-VISIBLE"
  expect "$who" "shared_memory_only: System V semaphores refused" isolated 'sysv-sem-refused' "$sysv"
  expect "$who" "full: System V semaphores allowed" all 'sysv-sem-ok' "$sysv"
  if [ -x /usr/bin/python3 ]; then
    expect "$who" "full: Python multiprocessing (Pool, POSIX semaphores)" all \
      'pool 285 posix-sem-ok' "$python"
  fi

  # two sandboxes at once: A makes a System V segment and waits; B and the
  # host look for A's key (no timing: A waits for a file, bounded by timeout)
  rm -f "$work/shared/made" "$work/shared/done"
  (cd "$work" && as_user "$who" env XDG_STATE_HOME="$work/xdg-$who" timeout 60 "$capsule" run \
    --config "$work/isolated.json" -- /bin/sh -c \
    "ipcmk -M 4096 >/dev/null && ipcs -m | grep '^0x' > $work/shared/made.tmp;
     mv $work/shared/made.tmp $work/shared/made; while [ ! -e $work/shared/done ]; do sleep 0.1; done" \
    >/dev/null 2>&1 </dev/null) &
  pids+=($!)
  for _ in $(seq 1 300); do [ -e "$work/shared/made" ] && break; sleep 0.1; done
  key=$(awk 'NR == 1 { print $1 }' "$work/shared/made" 2>/dev/null)
  seen_b=$(cd "$work" && as_user "$who" env XDG_STATE_HOME="$work/xdg-$who" timeout 60 \
    "$capsule" run --config "$work/isolated.json" -- /bin/sh -c 'ipcs -m | grep -c "^0x"' 2>/dev/null)
  seen_host=$(ipcs -m | awk -v k="$key" '$1 == k' | wc -l)
  touch "$work/shared/done"
  wait "${pids[-1]}" 2>/dev/null
  if [ -n "$key" ] && [ "${seen_b:-x}" = 0 ]; then
    ok "$who" "a System V segment of one sandbox is not seen by another running at once"
  else
    bad "$who" "System V across sandboxes (key '$key', segments seen by B: ${seen_b:-?})" ""
  fi
  [ -n "$key" ] && [ "$seen_host" = 0 ] && ok "$who" "nor by the host" ||
    bad "$who" "the host sees the sandbox's segment $key" ""
done
echo "process modes: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
