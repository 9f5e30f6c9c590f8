#!/usr/bin/env bash
# Temporary space within the limits, as root and unprivileged: /tmp and
# /dev/shm are tmpfs (memory), so with --memory they hold no more than the
# limit together, and with a disk limit /dev/shm no more than it either
# (two files, each under the per-file RLIMIT_FSIZE, must not add up past
# it). Usage: tmpfs_limits.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
work=$(mktemp -d /var/tmp/capsule-tmpfs.XXXXXX)
export XDG_STATE_HOME=$work/xdg-state # the default state of its own: not the host's, which another capsule may have migrated
chmod 755 "$work"
pass=0 fail=0
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/agent"
printf '#!/bin/sh\nexit 0\n' >"$work/agent/run.sh"
cat >"$work/agent/agent.toml" <<'TOML'
[agent]
id = "scratch"
name = "scratch"
version = "0.1.0"
runtime = "rust-bin"
entry = "run.sh"

[capabilities]
required = ["tool.scratch"]

[resources]
disk_mb = 4
memory_mb = 256

[sandbox]
required = false
filesystem = "ephemeral"
TOML
chmod -R a+rX "$work/agent"

# check WHO NAME WANT-REGEX CAPSULE-ARGS...
check() {
  local who=$1 name=$2 regex=$3; shift 3
  local out
  out=$(cd "$work" && as_user "$who" timeout 60 "$capsule" run "$@" 2>&1 </dev/null)
  if echo "$out" | grep -qE "$regex"; then
    pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$who" "$name"
  else
    fail=$((fail + 1)); printf '  FAIL %-6s %s\n' "$who" "$name"
    echo "$out" | head -5 | sed 's/^/         /'
  fi
}

# fill DIR FILES MIB: writes FILES files of MIB MiB each, prints the MiB stored
fill='d=$1; n=$2; m=$3; i=0; while [ $i -lt $n ]; do head -c $((m * 1048576)) /dev/zero >"$d/f$i" 2>/dev/null; i=$((i + 1)); done; echo "stored=$(($(cat "$d"/f* | wc -c) / 1048576))"'

for who in "${users[@]}"; do
  echo "as $who:"
  # 40 MiB into /tmp under a 32 MiB memory limit (the old /tmp held 64 MiB)
  check "$who" memory-bounds-tmp 'stored=([0-9]|[12][0-9]|3[01])$' --memory 32M -- /bin/sh -c "$fill" sh /tmp 1 40
  # 12 MiB into /dev/shm under a 32 MiB memory limit (the old one held 16 MiB)
  check "$who" memory-bounds-shm 'stored=[0-8]$' --memory 32M -- /bin/sh -c "$fill" sh /dev/shm 1 12
  # two 3 MiB files into /dev/shm under a 4 MiB disk limit
  check "$who" disk-bounds-shm 'stored=[0-4]$' --config "$work/agent" -- /bin/sh -c "$fill" sh /dev/shm 2 3
  check "$who" disk-bounds-tmp 'stored=[0-4]$' --config "$work/agent" -- /bin/sh -c "$fill" sh /tmp 2 3
  # a writable grant under a disk limit: no quota backs it, and capsule says so
  mkdir -p "$work/rw-$who"; chmod 777 "$work/rw-$who"
  check "$who" disk-unenforced-warned 'cannot enforce: .*disk limit on writable grants' \
    --config "$work/agent" --allow-rw "$work/rw-$who" -- /bin/true
  # within the limits, the space is there
  check "$who" tmp-usable 'stored=16$' --memory 64M -- /bin/sh -c "$fill" sh /tmp 2 8
done
echo "tmpfs limits suite: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
