#!/bin/bash
# Finding (unprivileged; 79375af): a `capsule run` now holds its audit
# marker's state directory open for the whole run, as m->dirfd =
# dup(statefd) in inflight_begin (src/gateway/state_audit.c): dup() drops
# O_CLOEXEC. The command is forked before pid 1 closes its fds, and relies
# on close_range(3, ~0, CLOSE_RANGE_CLOEXEC) in exec.c, whose result is not
# checked: on a kernel without CLOSE_RANGE_CLOEXEC (before 5.11; Debian 11
# runs 5.10) the tool inherits a descriptor of the caller's state
# directory, and without Landlock (before 5.13) nothing stops it reading
# STATE/key through it: the key that seals every stored credential.
# (`capsule call` markers have held the same dup since the markers began.)
# This host's kernel is newer: an LD_PRELOAD shim (old_kernel_shim.c) makes
# close_range answer EINVAL to CLOSE_RANGE_CLOEXEC and the Landlock calls
# ENOSYS, as such a kernel does.
# Exits 1 when the tool prints the state key, 0 blocked, 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
here=$(cd "$(dirname "$0")" && pwd)
command -v cc >/dev/null || { echo "SKIP: no C compiler for the shim"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review5-fd.XXXXXX); trap 'rm -rf "$W"' EXIT
chmod 777 "$W"
cc -shared -fPIC -O2 -o "$W/shim.so" "$here/old_kernel_shim.c" -ldl || { echo "SKIP: shim build"; exit 77; }
chmod 755 "$W/shim.so"
# an ASan build wants its runtime first; the shim only wraps syscall()
ldd "$capsule" 2>/dev/null | grep -q libasan && export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
as() { if [ "$(id -u)" = 0 ]; then setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$W" "$@"; else env HOME="$W" "$@"; fi; }
cd /tmp || exit 77
as "$capsule" audit --state "$W/st" >/dev/null 2>&1 # a state with its key, as after any use
[ -f "$W/st/key" ] || { echo "SKIP: no state key was made"; exit 77; }
key=$(od -An -tx1 "$W/st/key" | tr -d ' \n')
out=$(as env LD_PRELOAD="$W/shim.so" "$capsule" run --state "$W/st" -- /bin/sh -c \
  'for f in /proc/self/fd/*; do [ -f "$f/key" ] && od -An -tx1 "$f/key"; done' 2>&1)
echo "the tool printed: $(echo "$out" | tr -d ' \n')"
if [ -n "$key" ] && [ "$(echo "$out" | tr -d ' \n')" = "$key" ]; then
  echo "VULNERABLE: the tool read the state key through an inherited descriptor of the state directory"; exit 1
fi
echo blocked; exit 0
