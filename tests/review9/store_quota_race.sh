#!/usr/bin/env bash
# Finding (serve --grpc's artifact store, src/gateway/artifact_store.c):
# the user's bounds (256 MiB, 256 artifacts) were checked once, as an
# upload began, against what was stored then: uploads begun at once each
# got the whole room left (up to 32 MiB each, 64 calls at once: 2 GiB for
# one user, and as many artifacts past 256). Here alice holds 250 MiB
# (one artifact, sparse on disk) and 250 artifacts; 12 uploads of 2 MiB
# begun together must not take her past 256 MiB, and 12 tiny ones past
# 256 artifacts. Exits 1 while either bound is passed, 0 blocked, 77
# cannot run. Then again with capsule as uid 65534.
# Usage: store_quota_race.sh CAPSULE
capsule=$(realpath "${1:-build/capsule}")
. "$(dirname "$0")/lib.sh"
command -v truncate >/dev/null || { echo "SKIP: no truncate"; exit 77; }
start_serve
first=$(UPLOAD_NAME=seed.txt drive upload | jq -r '.res.capability_artifact_id')
[ -n "$first" ] && [ "$first" != null ] || { echo "SKIP: an upload failed"; exit 77; }
dir=$(user_dir alice)
plant() { # ID SIZE: an artifact of alice's as an upload leaves it (bytes sparse)
  truncate -s "$2" "$dir/$1.data"
  printf '{"user":"alice","filename":"p.bin","mime_type":"application/octet-stream","origin":"upload","source_id":null,"size":%s,"created":%s}' \
    "$2" "$(date +%s)" >"$dir/$1.meta"
  chmod 600 "$dir/$1.data" "$dir/$1.meta"
  if [ "${R9_NOBODY:-}" = 1 ]; then chown 65534:65534 "$dir/$1.data" "$dir/$1.meta"; fi
}
plant capsule-artifact-$(printf '%032x' 1) $((250 << 20))
used() { find "$dir" -maxdepth 1 -type f -name '*.data' -printf '%s\n' | awk '{s += $1} END {print s}'; }
CONC_N=12 CONC_BYTES=$((2 << 20)) drive concurrent >"$W/bytes.out"
bytes=$(used)
echo "12 uploads of 2 MiB at once over 250 MiB: $(cat "$W/bytes.out"); alice holds $((bytes >> 20)) MiB"
vulnerable=0
if [ "$bytes" -gt $((256 << 20)) ]; then
  echo "VULNERABLE: alice holds $bytes bytes, past her 256 MiB"
  vulnerable=1
fi
# the count: alice's artifacts made up to 250 (each 1 byte), then 12 at once
rm -f "$dir"/capsule-artifact-*
for i in $(seq 2 251); do plant capsule-artifact-$(printf '%032x' "$i") 1; done
CONC_N=12 CONC_BYTES=1 drive concurrent >"$W/count.out"
n=$(find "$dir" -maxdepth 1 -name '*.meta' | wc -l)
echo "12 uploads at once over 250 artifacts: $(cat "$W/count.out"); alice holds $n artifacts"
if [ "$n" -gt 256 ]; then
  echo "VULNERABLE: alice holds $n artifacts, past her 256"
  vulnerable=1
fi
finish9 "$vulnerable"
