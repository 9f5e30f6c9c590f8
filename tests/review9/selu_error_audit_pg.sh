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
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root (the PostgreSQL server runs as uid 65534)"; exit 77; }
command -v node >/dev/null && command -v jq >/dev/null || { echo "SKIP: needs node and jq"; exit 77; }
[ -d "$root/examples/selu-node/node_modules/@grpc/grpc-js" ] || { echo "SKIP: examples/selu-node's modules are not installed"; exit 77; }
. "$root/tests/state/pg-lib.sh"
[ -n "$pg_bin" ] || { echo "SKIP: PostgreSQL is not installed"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review9-pg.XXXXXX)
spid=
keepers() { # the Selu tool's keepers: processes holding a file under $W
  local f l
  for f in /proc/[0-9]*/fd/*; do
    l=$(readlink "$f" 2>/dev/null) || continue
    case $l in "$W"/home/*) f=${f#/proc/}; echo "${f%%/*}" ;; esac
  done | sort -u | grep -vx "$$"
}
trap '[ -n "$spid" ] && kill -TERM "$spid" 2>/dev/null; sleep 1; for p in $(keepers); do kill -TERM "$p" 2>/dev/null; done; pg_stop immediate; rm -rf "$W"' EXIT
pg_start "$W" || { echo "SKIP: cannot start PostgreSQL"; exit 77; }
export XDG_STATE_HOME=$W/home CAPSULE_STATE_KEY=$(printf '%064d' 1)
capsule=$capsule caps=$W/caps state=$PGURL
mkdir -p "$caps"
"$capsule" --state "$PGURL" policy list >/dev/null 2>&1 || { echo "SKIP: cannot open the PostgreSQL state"; exit 77; }
. "$root/tests/review9/selu_lib.sh"
evil_tool "(() => { throw new ToolError('failed \\uD800 here'); })()"
token=$("$capsule" --state "$PGURL" access issue r9 --user alice 2>/dev/null | grep -o 'capsule_[0-9a-f]*' | head -1)
[ -n "$token" ] || { echo "SKIP: cannot issue a token"; exit 77; }
"$capsule" --state "$PGURL" serve --caps "$caps" --grpc "unix:$W/g.sock" 2>"$W/serve.log" &
spid=$!
for _ in $(seq 400); do [ -S "$W/g.sock" ] && break; sleep 0.05; done
[ -S "$W/g.sock" ] || { tail -3 "$W/serve.log"; echo "SKIP: serve --grpc did not start"; exit 77; }
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
