#!/usr/bin/env bash
# On a cgroup v1 host, as root: the command (not the sandbox's pid 1) moves itself
# into the memory, pids, cpu and cpuacct groups its limits need (no more:
# a v1 group costs more to make than the rest of a spawn) by writing "0" to their
# `tasks` files (opened by capsule before the clone), and capsule never
# writes a pid to cgroup.procs (the move that waits for an RCU grace period,
# 5-15 ms, see src/sandbox/limits.c). The command runs in every group.
# A group left behind by a killed capsule that had the same pid is removed
# and made anew as root, and left alone (limits by rlimit) by uid 65534,
# which used to fail ("cannot move the sandbox into ...").
# Usage: cgroup_join.sh CAPSULE
set -u
# a sanitizer build links its runtime (libstdc++, exported __odr_asan symbols)
# and LeakSanitizer cannot run under strace: these check the release build
[ -z "${ASAN_OPTIONS:-}" ] || { echo "SKIP: not meaningful in a sanitizer build"; exit 77; }
capsule=$(realpath "$1")
[ "$(id -u)" = 0 ] || { echo "SKIP: v1 cgroups are written as root"; exit 77; }
[ -f /sys/fs/cgroup/pids/cgroup.procs ] || { echo "SKIP: no cgroup v1 pids hierarchy"; exit 77; }
command -v strace >/dev/null || { echo "SKIP: strace is not installed"; exit 77; }
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: no sandbox on this host"; exit 77; }
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT

in_group() { echo "$1" | grep -qE "^[0-9]+:([a-z_,]*,)?$2(,[a-z_,]*)?:/capsule-[0-9]+\$"; }
out=$("$capsule" run --memory 256M --pids 64 --cpu-ms 5000 -- /bin/cat /proc/self/cgroup 2>&1)
for c in memory pids cpuacct; do
  if in_group "$out" $c; then ok "with memory, pids and cpu-ms limits: the command is in its $c group"
  else bad "the command is not in a capsule $c group: $(echo "$out" | tr '\n' ' ')"; fi
done
out=$(strace -f -qq -e trace=openat,write -o "$log" \
  "$capsule" run --memory 256M --pids 64 -- /bin/cat /proc/self/cgroup 2>&1)
for c in memory pids; do
  if in_group "$out" $c; then ok "the command is in its $c group"
  else bad "the command is not in a capsule $c group: $(echo "$out" | tr '\n' ' ')"; fi
done
for c in cpu cpuacct; do
  if ! in_group "$out" $c; then ok "no $c group without a limit that needs it"
  else bad "a $c group was made without a cpu limit: $(echo "$out" | tr '\n' ' ')"; fi
done
if grep -E 'capsule-[0-9]+/cgroup.procs", O_WRONLY' "$log" >/dev/null; then
  bad "capsule moved the sandbox by pid: $(grep -c 'cgroup.procs", O_WRONLY' "$log") cgroup.procs writes"
else ok "no pid written to cgroup.procs"; fi
joins=$(grep -cE 'write\([0-9]+, "0", 1\) += 1' "$log")
opened=$(grep -cE 'capsule-[0-9]+/tasks", O_WRONLY\|O_CLOEXEC\) = [0-9]+' "$log")
if [ "$opened" -ge 2 ] && [ "$joins" = "$opened" ]; then ok "the sandbox joined its $joins groups itself"
else bad "tasks files opened: $opened, joins written: $joins"; fi

# a stale group named after the pid capsule will have: exec keeps the shell's
stale() { # stale WHO: prints the run's status and the stale group's path
  sh -c 'd=/sys/fs/cgroup/pids/capsule-$$; mkdir "$d" && echo "$d" >&2 &&
    if [ "$1" = root ]; then exec "$2" run --pids 32 -- /bin/true
    else exec setpriv --reuid=65534 --regid=65534 --clear-groups -- "$2" run --pids 32 -- /bin/true; fi' \
    sh "$1" "$capsule" 2>"$log.dir" >/dev/null
  echo "$? $(head -1 "$log.dir")"
}
read -r status dir < <(stale root)
if [ "$status" = 0 ] && [ -n "$dir" ] && [ ! -e "$dir" ]; then ok "root: a stale group of its name taken over and removed"
else bad "root with a stale group: exit $status, $dir $( [ -e "$dir" ] && echo is left)"; fi
[ -n "$dir" ] && rmdir "$dir" 2>/dev/null
if setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" 2>/dev/null; then
  read -r status dir < <(stale nobody)
  if [ "$status" = 0 ]; then ok "uid 65534: a stale root-owned group of its name is not used"
  else bad "uid 65534 with a stale group: exit $status"; fi
  [ -n "$dir" ] && rmdir "$dir" 2>/dev/null
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
