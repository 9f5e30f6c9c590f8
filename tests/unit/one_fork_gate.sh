#!/usr/bin/env bash
# One fork gate a process (core/fork_gate.c, the ASan build's): the
# executable's. A module that links libcapsule once carried a gate of its
# own, with its own malloc, through which serve's HTTP threads allocated
# while a fork from serve's main thread held the executable's gate: the
# child waited forever on a lock of libasan's (a call never answered, in
# about one flood of thirty calls in ten). Fails when a module defines the
# gate's allocator, joins or cap_fork_*, and when the executable has the
# gate but does not export cap_fork_* (a module that calls them, through
# libcapsule's sandbox code, would not load); passes in a build without
# a gate too.
# Usage: one_fork_gate.sh CAPSULE MODULE.so...
set -u
command -v nm >/dev/null || { echo "SKIP: nm is not installed"; exit 77; }
bad=0
exe=$1
shift
if nm -D --defined-only "$exe" | grep -qw malloc && ! nm -D --defined-only "$exe" | grep -qw cap_fork_prepare; then
  echo "FAIL $(basename "$exe") has the gate but does not export cap_fork_prepare (--export-dynamic-symbol)"
  bad=1
fi
for m in "$@"; do
  own=$(nm --defined-only "$m" | awk '$3 ~ /^(malloc|calloc|realloc|free|pthread_create|pthread_join|pthread_timedjoin_np|pthread_detach|cap_fork_prepare)$/ {print $3}' | sort -u | tr '\n' ' ')
  if [ -n "$own" ]; then
    echo "FAIL $(basename "$m") defines its own $own(a fork gate of its own: core/fork_gate.c belongs in the executable only)"
    bad=1
  else
    echo "ok   $(basename "$m") allocates through the executable's gate"
  fi
done
exit $bad
