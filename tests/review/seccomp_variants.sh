#!/bin/bash
# The build-time seccomp programs (src/sandbox/seccomp_gen.c: one program
# per combination of deny-list with or without System V semaphores,
# setuid-mode rules (root), connect trap (below Landlock ABI 9), open trap
# (exec_strategy "supervised")) each hold the whole deny-list: seccomp_probe.c
# (compiled here) calls every denied syscall with arguments the kernel
# would accept, x32 and int 0x80 unshare, socket families with bits in the
# register's upper half, inet protocols that load modules (SCTP, DCCP),
# ioctl TIOCSTI with them, and as root the setuid bits. Run as root and as uid 65534, with the default process modes,
# ipc_mode "full", "supervised", and both. Exits non-zero when a probe
# escapes under any variant.
capsule=$(realpath "${1:-build/capsule}")
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIP: runs as root and as uid 65534"; exit 77; }
command -v cc >/dev/null || { echo "SKIP: no C compiler for the probe"; exit 77; }
d=$(mktemp -d /var/tmp/capsule-review-seccomp.XXXXXX)
trap 'rm -rf "$d"' EXIT
chmod 755 "$d"
mkdir -m 777 "$d/rw"
cc -O1 -o "$d/probe" "$here/seccomp_probe.c" || { echo "SKIP: the probe does not build"; exit 77; }
for v in default full supervised supervised-full; do
  proc='{}'
  case $v in
  full) proc='{"ipc_mode": "full"}' ;;
  supervised) proc='{"exec_strategy": "supervised"}' ;;
  supervised-full) proc='{"exec_strategy": "supervised", "ipc_mode": "full"}' ;;
  esac
  cat >"$d/$v.json" <<JSON
{"version": "0.1.0", "process": $proc,
 "filesystem": {"grants": [{"path": "$d", "access": "read"}, {"path": "$d/rw", "access": "readwrite"}]}}
JSON
done
rc=0
for who in root nobody; do
  pre=() env=(--env SETID_PROBES=1)
  [ $who = nobody ] && pre=(setpriv --reuid=65534 --regid=65534 --clear-groups --) env=()
  for v in default full supervised supervised-full; do
    out=$(cd "$d" && "${pre[@]}" env HOME="$d" "$capsule" --state "$d/state-$who" run \
      --approval-timeout 1 --config "$d/$v.json" "${env[@]}" -- "$d/probe" "$d/rw" 2>&1 </dev/null)
    status=$?
    n=$(grep -c '^ok ' <<<"$out")
    echo "$who $v: exit $status, $n blocked"
    if [ "$status" != 0 ] || [ "$n" -lt 31 ] || grep -q '^ESCAPED' <<<"$out"; then
      grep -v '^ok ' <<<"$out" | head -10 | sed 's/^/    /'
      echo "VULNERABLE ($who, $v): a denied syscall got through"
      rc=1
    fi
  done
done
exit $rc
