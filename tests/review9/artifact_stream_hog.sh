#!/usr/bin/env bash
# Finding (serve --grpc, src/front/serve_grpc_artifacts.c): the server
# answers 64 calls at once, and an artifact stream (UploadInputArtifact,
# DownloadOutputArtifact) holds one of those slots for as long as its
# client keeps it going (a message within every 30 s suffices). One token
# holder could hold all 64 with uploads that trickle a byte now and then:
# every user's calls, Healthcheck included, were refused RESOURCE_EXHAUSTED
# ("too many calls at once") meanwhile. Here alice holds 8 uploads open
# (a byte every 2 s); a ninth upload of hers and a download of hers must be
# refused RESOURCE_EXHAUSTED with a message naming the bound (8), while
# bob's upload is stored; once her 8 end, all 8 are stored and her next
# upload is too. Exits 1 while a user's streams are not bounded, 0
# blocked, 77 cannot run. Usage: artifact_stream_hog.sh CAPSULE
set -u
capsule=$(realpath "${1:-build/capsule}")
. "$(dirname "$0")/lib.sh"
start_serve
first=$(drive upload)
id=$(jq -r '.res.capability_artifact_id // empty' <<<"$first")
[ -n "$id" ] || { echo "SKIP: an upload failed: $first"; exit 77; }
dir=$(user_dir alice)
HOLD_N=8 HOLD_UNTIL=$W/release drive hold >"$W/hold.out" 2>&1 &
holder=$!
parts() { ls -A "$dir" | grep -c 'part$'; }
for _ in $(seq 600); do [ "$(parts)" -ge 8 ] && break; sleep 0.1; done
[ "$(parts)" -ge 8 ] || { touch "$W/release"; wait "$holder"; echo "SKIP: the 8 uploads did not begin: $(cat "$W/hold.out")"; exit 77; }
ninth=$(UPLOAD_NAME=ninth.txt drive upload)
down=$(DOWNLOAD_ID=$id drive download)
bobs=$(UPLOAD_NAME=bob.txt drive upload "$other")
touch "$W/release"
wait "$holder"
held=$(cat "$W/hold.out")
after=$(UPLOAD_NAME=after.txt drive upload)
echo "alice's ninth upload: $ninth"
echo "alice's download: $(cut -c1-200 <<<"$down")"
echo "bob's upload: $bobs"
echo "alice's 8 held uploads: $held"
echo "alice's upload after: $after"
fail=0
jq -e '.err.code == 8 and (.err.details | test("8 artifact streams"))' <<<"$ninth" >/dev/null ||
  { echo "VULNERABLE: a ninth artifact stream of one user was taken"; fail=1; }
jq -e '.err.code == 8 and (.err.details | test("8 artifact streams"))' <<<"$down" >/dev/null ||
  { echo "VULNERABLE: a download past the user's 8 streams was taken"; fail=1; }
jq -e '.res.capability_artifact_id' <<<"$bobs" >/dev/null || { echo "FAIL: another user's upload was refused"; fail=1; }
jq -e '.stored == 8' <<<"$held" >/dev/null || { echo "FAIL: the 8 held uploads were not all stored"; fail=1; }
jq -e '.res.capability_artifact_id' <<<"$after" >/dev/null ||
  { echo "FAIL: the user's streams were not given back when they ended"; fail=1; }
refusals=$(cap9 audit --json --state "$state" 2>/dev/null |
  jq '[.[] | select(.user == "alice" and (.outcome | test("8 artifact streams")))] | length')
echo "alice's refusals in the audit: $refusals"
[ "$refusals" = 2 ] || { echo "FAIL: the two refusals are not each an audit record"; fail=1; }
finish9 "$fail"
