#!/usr/bin/env bash
# serve's main thread built a session's tool table with each capability's
# readiness dry run (gw_ready: a sandbox) made right there, in a process
# with threads (libmicrohttpd's, the calls' own), by a raw clone3 that
# glibc's malloc does not see: a clone made while another thread held an
# arena's lock left the sandbox's pid 1 waiting forever on it in its own
# fork(), and serve's main thread waiting for that pid 1: every session of
# every user stalled, for good. Each 2026-07-28 request is a session of its
# own, so plain concurrent tools/call by one token holder found it within
# a few hundred calls (a 2025 client, at each initialize; the dashboard and
# the gRPC process made the same dry run). Exits 1 when a call gets no
# answer within 120 s, 0 when all 1,500 (500 in an ASan build) are
# answered, 77 cannot run.
# Usage: ready_clone_hang.sh CAPSULE
set -u
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
. "$(dirname "$0")/lib.sh" "$1"
agent echo 5000 'printf "{\"got\":%s}\n" "$line"' allow
tok=$(token alice) || exit 77
serve10
# an ASan build answers the flood several times slower (1,500 calls took
# 7 min on a loaded 2-core host, past review/run.sh's 600 s a script):
# 500 there, plenty (its own stall, core/fork_gate.c's, took the first 16)
n=1500
grep -qa __asan_init "$capsule" && n=500
n=${R10_CALLS:-$n}
r=$(node "$root/tests/review10/ready_clone_hang.mjs" "http://127.0.0.1:$port/mcp" "$tok" "$n")
echo "$n concurrent tools/call: $r"
case $r in
done*) echo blocked; exit 0 ;;
*) echo "serve stopped answering (its main thread waits on a dry run's pid 1)"; exit 1 ;;
esac
