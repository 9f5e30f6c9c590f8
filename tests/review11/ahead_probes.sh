#!/usr/bin/env bash
# Attempts on serve --grpc's warm Selu calls with the next lease asked
# ahead (src/gateway/instance.c's ahead_fresh, instance_keeper.c,
# selu_channels.c), with the C Selu example (text-tools): six kinds of
# package edit made right after a warm call (a new subdirectory, a rename
# over a file, a mode, the times only, the directory swapped for a copy,
# a hard link made outside and written there): the next call must start
# a new instance; bob's call right after alice's must not take her lease
# asked ahead (his own instance starts), alternating calls are each
# answered; the keeper's inotify descriptor is not left in serve's
# processes nor in the server's. Exits 1 when one works, 0 when all are
# blocked, 77 cannot run.
# Usage: ahead_probes.sh CAPSULE
set -u
. "$(dirname "$0")/lib.sh" "$1"
[ -x "$root/examples/selu-text/capability" ] || { echo "SKIP: build examples/selu-text (make build does)"; exit 77; }
[ -d "$root/examples/selu-node/node_modules/@grpc/grpc-js" ] ||
  { echo "SKIP: examples/selu-node's modules are not installed (scripts/deps.sh test)"; exit 77; }
cp -r "$root/examples/selu-text" "$caps/selu-text"
chmod -R a+rX "$caps"
"$capsule" policy set --caps "$caps" --state "$state" text-tools word_count allow >/dev/null ||
  { echo "SKIP: cannot set up a state"; exit 77; }
ta=$(token alice) || exit 77
tb=$(token bob) || exit 77
mkdir -m 700 "$W/outside"
"$capsule" serve --caps "$caps" --state "$state" --grpc "unix:$W/g.sock" 2>"$W/serve.log" &
spid=$!
for _ in $(seq 600); do [ -S "$W/g.sock" ] && break; sleep 0.05; done
[ -S "$W/g.sock" ] || { tail -5 "$W/serve.log"; echo "SKIP: serve --grpc did not start"; exit 77; }
node "$root/tests/review11/ahead_probes.mjs" "$root/proto/selu/orchestrator/capability.proto" "unix:$W/g.sock" \
  "$ta" "$tb" "$state/logs/text-tools.log" "$caps/selu-text" "$W/outside" "$spid"
rc=$?
kill -0 "$spid" 2>/dev/null || { echo "WORKS serve died"; tail -5 "$W/serve.log"; rc=1; }
[ "$rc" = 0 ] && echo blocked
exit $rc
