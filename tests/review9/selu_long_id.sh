#!/usr/bin/env bash
# Finding (serve --grpc, src/gateway/selu_artifacts.c store_one): a Selu
# tool's own id for an artifact it made is kept in the store's record
# (source_id) as the tool gave it, any length. A tool naming its artifact
# with a 20,000-byte id had it downloaded and stored, but its record
# (ID.meta) was then past what the store reads (16 KiB): the result named
# a capsule id that answers "not found", no artifact-out record was made,
# and the bytes stayed on the user's disk and bounds, unaudited, until a
# sweep. Exits 1 while such an artifact is stored without its record, 0
# blocked, 77 cannot run. Usage: selu_long_id.sh CAPSULE
capsule=$(realpath "${1:-build/capsule}")
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/selu_lib.sh"
evil_tool "(artifacts.set('x'.repeat(20000), artifacts.get(id)), {artifact: {capability_artifact_id: 'x'.repeat(20000), filename: 'long.txt'}})"
start_serve
out=$(TOOL=evil.make_file ARGS='{"filename":"a.txt","text":"hello"}' drive invoke)
echo "the call: $(cut -c1-300 <<<"$out")"
jq -e '.res' <<<"$out" >/dev/null || { echo "SKIP: the Selu tool did not answer"; tail -3 "$W/serve.log"; exit 77; }
stored=$(grep -c . <(ls "$(user_dir alice)"/*.data 2>/dev/null))
audited=$("$capsule" audit --json --state "$state" 2>/dev/null | jq '[.[] | select(.decision == "artifact-out")] | length')
echo "artifacts stored: $stored; artifact-out records: $audited"
if [ "$stored" -gt "${audited:-0}" ]; then
  echo "VULNERABLE: an artifact of the tool's was stored without its record"
  exit 1
fi
echo blocked
