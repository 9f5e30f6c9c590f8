#!/usr/bin/env bash
# A sandbox's setup that never ends (once: its pid 1 waiting in the ASan
# build's fork gate for a thread of serve's that was not in it, serve's
# main thread waiting for its dry run) holds no caller forever: sandbox_run
# kills a setup that reports nothing within its bound and says so, and a
# readiness dry run's process (gw_ready's `apart`) stuck past its limit is
# killed and the capability reported not ready. A test build stalls pid 1
# before it forks the command (CAPSULE_TEST_STALL_SETUP_MS) and shortens
# the bounds (CAPSULE_TEST_SETUP_BOUND_MS, CAPSULE_TEST_APART_LIMIT_MS).
# Nothing of the stuck sandbox may be left. As root and as uid 65534.
# Usage: setup-bound.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
work=$(mktemp -d /var/tmp/capsule-setup-bound.XXXXXX)
chmod 755 "$work"
left() { pgrep -f "$work" >/dev/null; }
trap 'pkill -KILL -f "$work" 2>/dev/null; rm -rf "$work"' EXIT
# wait_for SECONDS CMD...: polls CMD until it succeeds (a generous bound,
# not a timing assertion)
wait_for() {
  local n=$(($1 * 10)); shift
  while [ "$n" -gt 0 ]; do "$@" && return 0; sleep 0.1; n=$((n - 1)); done
  return 1
}
none_left() { ! left; }

# a Covenant agent for `capsule list`, whose readiness is a dry run in its sandbox
mkdir -p "$work/caps/agents/echo"
printf '[agent]\nid = "echo"\nname = "echo"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' \
  >"$work/caps/agents/echo/agent.toml"
printf '#!/bin/sh\nIFS= read -r line; echo "$line"\n' >"$work/caps/agents/echo/run.sh"
chmod -R a+rX "$work/caps" && chmod 755 "$work/caps/agents/echo/run.sh"

export CAPSULE_TEST_SETUP_BOUND_MS=2000
export CAPSULE_TEST_STALL_SETUP_MS=600000
dir=$work
for who in "${users[@]}"; do
  check_timeout=120 check "$who" "run: a stuck setup is killed and reported" 1 \
    "sandbox setup failed: it reported nothing within 2 s" \
    run -- /bin/echo "$work"
  wait_for 30 none_left && ok "$who" "run: nothing of the stuck sandbox left" ||
    { bad "$who" "run: the stuck sandbox is still there"; pgrep -af "$work" | head -3; }
  check_timeout=120 check "$who" "list: a stuck dry run's setup makes it not ready" 0 \
    "echo .*not ready: its sandbox cannot be set up: sandbox setup failed: it reported nothing within 2 s" \
    list --caps "$work/caps"
  wait_for 30 none_left && ok "$who" "list: nothing of the stuck dry run left" ||
    { bad "$who" "list: the stuck dry run is still there"; pgrep -af "$work" | head -3; }
  # the dry run's own process past its limit (here shorter than the setup's bound)
  CAPSULE_TEST_SETUP_BOUND_MS=600000 CAPSULE_TEST_APART_LIMIT_MS=2000 check_timeout=120 \
    check "$who" "list: a stuck dry run is killed, not ready" 0 \
    "echo .*not ready: the dry run did not finish within 2 s \(stuck: its process was killed\)" \
    list --caps "$work/caps"
  wait_for 30 none_left && ok "$who" "list: nothing of the killed dry run left" ||
    { bad "$who" "list: the killed dry run's sandbox is still there"; pgrep -af "$work" | head -3; }
  # and without the stall, the same dry run is ready
  CAPSULE_TEST_STALL_SETUP_MS= check "$who" "list: ready without the stall" 0 \
    "echo .*\) +ready" list --caps "$work/caps"
done
echo "setup bound: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
