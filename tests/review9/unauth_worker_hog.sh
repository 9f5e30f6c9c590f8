#!/usr/bin/env bash
# Finding (serve --grpc, src/front/grpc_serve.c answer_call): a call's
# bearer token was checked by the handler only after the call's first
# message came (or stream_idle_ms, 30 s, passed): a peer without any
# token holding calls open that send nothing took one of the 64 call
# slots each for 30 s, again and again, and every user's calls were
# refused RESOURCE_EXHAUSTED meanwhile. UploadInputArtifact (a client
# stream) makes this one line of any gRPC client. The attacker here is
# uid 65534 without a token (the socket is reachable, as loopback TCP is
# to every local user); alice's Healthcheck must still be answered.
# Exits 1 while the slots are taken, 0 blocked, 77 cannot run.
# Usage: unauth_worker_hog.sh CAPSULE
capsule=$(realpath "${1:-build/capsule}")
. "$(dirname "$0")/lib.sh"
start_serve
HOG_N=70 HOG_MS=10000 drive_nobody hog >"$W/hog.out" 2>&1 &
hog=$!
sleep 4
got=$(drive health)
wait "$hog"
echo "attacker: $(cat "$W/hog.out")"
echo "alice's Healthcheck meanwhile: $got"
if jq -e '.err.code == 8' <<<"$got" >/dev/null 2>&1; then
  echo "VULNERABLE: calls without a token held every call slot (RESOURCE_EXHAUSTED for alice)"
  exit 1
fi
jq -e '.res.ready == true' <<<"$got" >/dev/null 2>&1 || { echo "SKIP: the Healthcheck failed otherwise"; exit 77; }
echo blocked
