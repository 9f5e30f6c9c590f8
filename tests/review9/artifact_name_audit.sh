#!/usr/bin/env bash
# Finding (serve --grpc, src/gateway/artifact_store.c clean_name and
# src/front/serve_grpc_artifacts.c): an uploaded artifact's file name
# kept bytes that are not UTF-8 (a client's lone surrogate arrives as ED
# A0 80), C1 controls and bidi overrides; the artifact-upload record
# carried them as they came (a refusal's, the name before any cleaning,
# controls included, cut at 200 bytes wherever that fell). On a
# PostgreSQL state (UTF8) such a record cannot be written: the upload
# was stored and answered, and its audit record silently lost. The name
# also went back to the orchestrator and tools with U+202E in it (a
# "report<RLO>fdp.exe" shown as "reportexe.pdf"). Here alice uploads
# "a<U+D800>b<U+202E>.txt"; the record must be in the audit, and the
# stored name well-formed, without the override. Exits 1 while the
# record is lost or the name kept, 0 blocked, 77 cannot run (needs
# PostgreSQL). Usage: artifact_name_audit.sh CAPSULE
set -u
capsule=$(realpath "${1:-build/capsule}")
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=pg_lib.sh
. "$root/tests/review9/pg_lib.sh"
start_serve_pg
out=$(UPLOAD_NAME_JSON='"a\ud800b\u202e.txt"' node "$root/tests/review9/client.mjs" \
  "$root/proto/selu/orchestrator/capability.proto" "unix:$W/g.sock" "$token" upload)
id=$(jq -r '.res.capability_artifact_id // empty' <<<"$out")
[ -n "$id" ] || { echo "SKIP: the upload failed: $out"; exit 77; }
rec=$("$capsule" --state "$PGURL" audit --json 2>/dev/null | jq -c --arg id "$id" '[.[] | select(.tool == $id)]')
echo "the upload: $id; its records: $rec"
meta=$(cat "$XDG_STATE_HOME"/capsule/run/artifacts/*/"$id.meta" 2>/dev/null)
echo "its record in the store: $meta"
vulnerable=0
[ "$(jq length <<<"$rec")" = 1 ] || { echo "VULNERABLE: the upload's audit record was lost"; vulnerable=1; }
if grep -qi 'ufffd\|u202e' <<<"$meta"; then
  echo "VULNERABLE: the stored name kept bytes that are not UTF-8 or the override"
  vulnerable=1
fi
[ "$vulnerable" = 0 ] && { echo blocked; exit 0; }
exit 1
