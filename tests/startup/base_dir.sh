#!/usr/bin/env bash
# The sandbox root's mount point (a directory capsule creates, and removes,
# on the host) lies on tmpfs, /dev/shm, unless TMPDIR names another place:
# on a disk-backed /tmp creating and removing it cost ~2 ms a run.
# Usage: base_dir.sh CAPSULE
set -u
# a sanitizer build links its runtime (libstdc++, exported __odr_asan symbols)
# and LeakSanitizer cannot run under strace: these check the release build
[ -z "${ASAN_OPTIONS:-}" ] || { echo "SKIP: not meaningful in a sanitizer build"; exit 77; }
capsule=$(realpath "$1")
command -v strace >/dev/null || { echo "SKIP: strace is not installed"; exit 77; }
[ -w /dev/shm ] || { echo "SKIP: no writable /dev/shm"; exit 77; }
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: no sandbox on this host"; exit 77; }
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; }
work=$(mktemp -d)
chmod 755 "$work" # the sandbox's setup runs as another uid: it must reach the base
trap 'rm -rf "$work"' EXIT

base() { grep -oE 'mkdir\("[^"]*/\.capsule-[A-Za-z0-9]{6}"' "$work/log" | head -1 | cut -d'"' -f2; }
env -u TMPDIR strace -f -qq -e trace=mkdir -o "$work/log" "$capsule" run -- /bin/true
status=$?
b=$(base)
if [ "$status" = 0 ] && [[ "$b" == /dev/shm/.capsule-* ]] && [ ! -e "$b" ]; then ok "base on /dev/shm, removed after ($b)"
else bad "base without TMPDIR: '$b'"; fi
TMPDIR=$work strace -f -qq -e trace=mkdir -o "$work/log" "$capsule" run -- /bin/true
status=$?
b=$(base)
if [ "$status" = 0 ] && [[ "$b" == "$work"/.capsule-* ]] && [ ! -e "$b" ]; then ok "TMPDIR is honoured ($b)"
else bad "base with TMPDIR=$work: '$b'"; fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
