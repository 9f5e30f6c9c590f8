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
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root (the PostgreSQL server runs as uid 65534)"; exit 77; }
command -v node >/dev/null && command -v jq >/dev/null || { echo "SKIP: needs node and jq"; exit 77; }
[ -d "$root/examples/selu-node/node_modules/@grpc/grpc-js" ] || { echo "SKIP: examples/selu-node's modules are not installed"; exit 77; }
. "$root/tests/state/pg-lib.sh"
[ -n "$pg_bin" ] || { echo "SKIP: PostgreSQL is not installed"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review9-pg.XXXXXX)
spid=
trap '[ -n "$spid" ] && kill -TERM "$spid" 2>/dev/null; sleep 1; pg_stop immediate; rm -rf "$W"' EXIT
pg_start "$W" || { echo "SKIP: cannot start PostgreSQL"; exit 77; }
export XDG_STATE_HOME=$W/home CAPSULE_STATE_KEY=$(printf '%064d' 1)
mkdir -p "$W/caps"
"$capsule" --state "$PGURL" policy list >/dev/null 2>&1 || { echo "SKIP: cannot open the PostgreSQL state"; exit 77; }
token=$("$capsule" --state "$PGURL" access issue r9 --user alice 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1)
[ -n "$token" ] || { echo "SKIP: cannot issue a token"; exit 77; }
"$capsule" --state "$PGURL" serve --caps "$W/caps" --grpc "unix:$W/g.sock" 2>"$W/serve.log" &
spid=$!
for _ in $(seq 400); do [ -S "$W/g.sock" ] && break; sleep 0.05; done
[ -S "$W/g.sock" ] || { tail -3 "$W/serve.log"; echo "SKIP: serve --grpc did not start"; exit 77; }
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
