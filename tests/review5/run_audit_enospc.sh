#!/bin/bash
# Finding (79375af; unprivileged): a `capsule run` that cannot write its
# marker in the default state directory runs unaudited without a word
# (run.c: only a named --state warns), whatever the error. The tool runs
# as the caller's uid, so a tool granted any directory on the filesystem
# of the caller's home fills it (RLIMIT_FSIZE bounds each file, not their
# total): every later run's marker then fails with ENOSPC and those runs
# leave no record, silently; the tool (or a later one) frees the space.
# Here a 4 MiB tmpfs in a private mount namespace is the filesystem.
# Exits 1 when a run made while the disk was full left no record and said
# nothing, 0 blocked (a record, or a warning), 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (a tmpfs in a mount namespace)"; exit 77; }
command -v unshare >/dev/null || { echo "SKIP: no unshare"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review5-nospc.XXXXXX); trap 'rm -rf "$W"' EXIT
chmod 755 "$W"; mkdir "$W/home"
export CAPSULE_STATE_KEY= W capsule
out=$(unshare -m --propagation private bash -c '
  mount -t tmpfs -o size=4m,mode=755,uid=65534,gid=65534 none "$W/home" || exit 77
  as() { setpriv --reuid=65534 --regid=65534 --clear-groups env -u CAPSULE_STATE HOME="$W/home" "$@"; }
  cd /tmp
  mkdir -p "$W/home/work" && chown 65534:65534 "$W/home/work"
  as "$capsule" run -- /bin/true                   # the state exists, audited
  as "$capsule" run --allow-rw "$W/home/work" -- /bin/sh -c \
    "i=0; while dd if=/dev/zero of=$W/home/work/f\$i bs=64k count=8 2>/dev/null; do i=\$((i+1)); done; true"
  echo "while full:"; as "$capsule" run -- /bin/echo the-unaudited-run 2>&1
  as "$capsule" run --allow-rw "$W/home/work" -- /bin/sh -c "rm -f $W/home/work/f*"
  echo "audit:"; as "$capsule" audit 2>&1
' 2>&1)
rc=$?
[ "$rc" = 77 ] && { echo "SKIP: cannot mount a tmpfs"; exit 77; }
echo "$out"
if grep -q "the-unaudited-run" <<<"$out" && ! grep -q "run\.echo\|not audited" <<<"$out"; then
  echo "VULNERABLE: a run made while the tool had filled the disk left no audit record and no warning"; exit 1
fi
echo blocked; exit 0
