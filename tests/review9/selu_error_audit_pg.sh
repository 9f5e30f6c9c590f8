#!/usr/bin/env bash
# Finding (the audit log on a PostgreSQL state, src/gateway/state_audit.c
# gw_audit_append): a record's text went to the database as it came. A
# hostile Selu tool failing with an error that is not UTF-8 (a lone
# surrogate in its error string arrives as ED A0 80; protobuf-c does not
# check) made its call's record unwritable (PostgreSQL refuses the bytes
# in a UTF8 database): the call's record was lost ("cannot append to the
# audit log ... the call's result is withheld"), so a tool could make its
# calls leave no trace but a marker. The same for an artifact's name
# before review 9 cleaned it (artifact_name_audit.sh). Exits 1 while the
# call leaves no record, 0 blocked, 77 cannot run (needs PostgreSQL).
# Usage: selu_error_audit_pg.sh CAPSULE
set -u
capsule=$(realpath "${1:-build/capsule}")
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=pg_lib.sh
. "$root/tests/review9/pg_lib.sh"
. "$root/tests/review9/selu_lib.sh"
evil_tool "(() => { throw new ToolError('failed \\uD800 here'); })()"
start_serve_pg
out=$(TOOL=evil.make_file ARGS='{"filename":"a","text":"b"}' timeout 120 node "$root/tests/review9/client.mjs" \
  "$root/proto/selu/orchestrator/capability.proto" "unix:$W/g.sock" "$token" invoke)
echo "the call: $(cut -c1-300 <<<"$out")"
jq -e '.res.error | length > 0' <<<"$out" >/dev/null || { echo "SKIP: the tool did not fail as planned"; exit 77; }
rec=$("$capsule" --state "$PGURL" audit --json 2>/dev/null | jq -c '[.[] | select(.capability == "evil" and .tool == "make_file" and .user == "alice")]')
echo "its records: $(cut -c1-400 <<<"$rec")"
if [ "$(jq length <<<"$rec")" != 1 ]; then
  echo "VULNERABLE: the tool's call left no audit record"
  exit 1
fi
"$capsule" --state "$PGURL" audit verify >/dev/null 2>&1 || { echo "FAIL: the audit chain does not verify"; exit 1; }
echo blocked
