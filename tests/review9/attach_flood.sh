#!/usr/bin/env bash
# Finding (serve --grpc, src/front/serve_grpc_artifacts.c
# serve_grpc_artifacts_in): an Invoke's "attachments" entries naming
# artifacts were each opened and audited (artifact-in), with no bound on
# their number: one 4 MiB request of the same id named 70,000 times made
# 70,000 audit records (and, to a Selu tool, as many uploads of up to 32
# MiB to its instance), for a tool that then refused the call. A user
# holds at most 256 artifacts; more entries than that name one twice.
# Here 3,000 entries naming one upload, to a Covenant agent. Exits 1
# while more than 256 artifact-in records come of one call, 0 blocked,
# 77 cannot run. Usage: attach_flood.sh CAPSULE
capsule=$(realpath "${1:-build/capsule}")
. "$(dirname "$0")/lib.sh"
start_serve
out=$(ATTACH_N=3000 drive attach-many)
echo "the call: $(cut -c1-300 <<<"$out")"
id=$(jq -r '.id // empty' <<<"$out")
[ -n "$id" ] || { echo "SKIP: the upload failed"; exit 77; }
n=$("$capsule" audit --json --state "$state" 2>/dev/null |
  jq --arg id "$id" '[.[] | select(.decision == "artifact-in" and .tool == $id)] | length')
echo "artifact-in records of the call: $n"
[ -n "$n" ] || { echo "SKIP: cannot read the audit"; exit 77; }
if [ "$n" -gt 256 ]; then
  echo "VULNERABLE: one call made $n audit records"
  exit 1
fi
jq -e '.error | test("attachments")' <<<"$out" >/dev/null || { echo "FAIL: the call was not refused naming its attachments"; exit 1; }
echo blocked
