#!/usr/bin/env bash
# Finding (serve --grpc, src/gateway/selu_artifacts.c capture_result): a
# Selu tool's result naming several artifacts had each downloaded into
# the store in turn; when a later one failed (here the tool names one it
# does not have: its DownloadOutputArtifact answers an error), the call
# failed but the ones stored before stayed: artifacts nobody was told the
# id of, with no artifact-out record, counted against the user's bounds
# for 6 hours. A hostile tool fills its caller's store this way, call
# after call, unseen. Exits 1 while an artifact of a failed call stays,
# 0 blocked, 77 cannot run. The same when every download went but the
# result, each entry now naming capsule's longer id, grew past the output
# cap (16 MiB) and the call failed for it (a result of 16 MiB - 100
# bytes naming one artifact three times).
# Then again with capsule as uid 65534.
# Usage: selu_capture_orphans.sh CAPSULE
capsule=$(realpath "${1:-build/capsule}")
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/selu_lib.sh"
evil_tool "(filename === 'big' ? (() => { const r = {artifacts: [1, 2, 3].map(() => ({capability_artifact_id: id})), pad: ''}; r.pad = 'x'.repeat((16 << 20) - 100 - JSON.stringify(r).length); return r; })() : {artifacts: [{capability_artifact_id: id, filename: 'kept.txt'}, {capability_artifact_id: 'art-none'}]})"
start_serve
vulnerable=0
for how in none big; do
  out=$(TOOL=evil.make_file ARGS="{\"filename\":\"$how\",\"text\":\"hello\"}" drive invoke)
  echo "the call ($how): $(cut -c1-300 <<<"$out")"
  want='art-none'; [ $how = big ] && want='output cap'
  jq -e --arg w "$want" '.res.error | test($w)' <<<"$out" >/dev/null ||
    { echo "SKIP: the Selu tool did not run as planned"; tail -3 "$W/serve.log"; exit 77; }
  left=$(grep -l '"origin":"evil.make_file"' "$(user_dir alice)"/*.meta 2>/dev/null | wc -l)
  echo "artifacts of the failed call left in the store: $left"
  if [ "$left" -gt 0 ]; then
    echo "VULNERABLE: a failed call ($how) left $left artifact(s) nobody was told of"
    vulnerable=1
    rm -f "$(user_dir alice)"/*
  fi
done
finish9 "$vulnerable"
