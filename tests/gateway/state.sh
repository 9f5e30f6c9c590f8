#!/usr/bin/env bash
# The state directory (issue 10): credentials scoped to a capability and
# user, with the lookup order and the migration of global ones to shared;
# schema versions; the audit high-water mark (deletion, truncation and
# rollback are a gap); directory and key ownership and modes; --user needs
# the operator; escaped audit text; a capsule holding the key is not
# dumpable. Usage: state.sh CAPSULE
set -u
capsule=$(realpath "$1")
if ! "$capsule" run -- /bin/true 2>/dev/null; then
  echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77
fi
command -v sqlite3 >/dev/null || { echo "SKIP: sqlite3 is not installed (scripts/deps.sh test installs it)"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-state.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
[ -n "${KEEP:-}" ] && trap - EXIT
export CAPSULE_STATE_KEY= # the key file in the state directory
caps=$work/caps
state=$work/state

pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; }
# t NAME WANT-STATUS REGEX ARGS...: capsule ARGS (stdin from /dev/null)
t() {
  local name=$1 want=$2 regex=$3; shift 3
  local out status
  out=$("$capsule" "$@" 2>&1 </dev/null)
  status=$?
  if [ "$status" = "$want" ] && echo "$out" | grep -qE -- "$regex"; then ok "$name"
  else bad "$name (exit $status, want $want)"; echo "$out" | head -5 | sed 's/^/         /'; fi
}
# tn NAME REGEX ARGS...: like t, but the output must NOT match REGEX
tn() {
  local name=$1 regex=$2; shift 2
  local out
  out=$("$capsule" "$@" 2>&1 </dev/null)
  if ! echo "$out" | grep -qE -- "$regex"; then ok "$name"
  else bad "$name"; echo "$out" | head -5 | sed 's/^/         /'; fi
}
setcred() { # setcred VALUE ARGS...: capsule cred set ARGS with VALUE on stdin
  local v=$1; shift
  printf '%s\n' "$v" | "$capsule" cred set "$@" >/dev/null 2>&1 || bad "cred set $* failed"
}
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
G=(--caps "$caps" --state "$state")

talos() { # talos ID: a Talos tool that shows the credential it was given
  mkdir -p "$caps/$1"
  cat >"$caps/$1/manifest.json" <<JSON
{"id": "$1", "name": "$1", "description": "Shows its token.", "version": "1.0.0", "logName": "$1",
 "credentials": [{"name": "token", "label": "Token", "description": "a test token", "required": true}],
 "functions": [{"name": "show", "description": "Shows the token.", "parameters": {"type": "object"}}]}
JSON
  echo 'export async function show(_, { config }) { return { token: config.token }; }' >"$caps/$1/index.js"
}

echo "credentials scoped to a capability (and user)"
if command -v node >/dev/null; then
  talos talk-a
  talos talk-b
  for c in talk-a talk-b; do "$capsule" policy set "$c" show allow --state "$state"; done
  setcred a-sys talk-a token --scope system --state "$state"
  t scoped-a-gets-its-own 0 '"token":"a-sys"' call "${G[@]}" --user u1 talk-a show '{}'
  t scoped-b-gets-nothing 1 "credential token is not set for user u1; set it with .capsule cred set talk-b token" call "${G[@]}" --user u1 talk-b show '{}'
  setcred shared-sys --shared token --scope system --state "$state"
  t shared-reaches-b 0 '"token":"shared-sys"' call "${G[@]}" --user u1 talk-b show '{}'
  t capability-over-shared 0 '"token":"a-sys"' call "${G[@]}" --user u1 talk-a show '{}'
  setcred shared-u1 --shared token --scope user --user u1 --state "$state"
  t shared-user-over-shared-system 0 '"token":"shared-u1"' call "${G[@]}" --user u1 talk-b show '{}'
  t shared-user-not-for-others 0 '"token":"shared-sys"' call "${G[@]}" --user u2 talk-b show '{}'
  t capability-system-over-shared-user 0 '"token":"a-sys"' call "${G[@]}" --user u1 talk-a show '{}'
  setcred a-u1 talk-a token --scope user --user u1 --state "$state"
  t capability-user-first 0 '"token":"a-u1"' call "${G[@]}" --user u1 talk-a show '{}'
  t capability-user-not-for-others 0 '"token":"a-sys"' call "${G[@]}" --user u2 talk-a show '{}'
  t list-one-capability 0 "^talk-a +token +user +u1 " cred list talk-a --state "$state"
  tn list-one-capability-only "shared" cred list talk-a --state "$state"
  t list-shared 0 "^\(shared\) +token +system +- " cred list --shared --state "$state"
  tn list-shared-only "talk-a" cred list --shared --state "$state"
  t list-user-filter 0 "^\(shared\) +token +user +u1 " cred list --shared --scope user --user u1 --state "$state"
  t rm-capability-user 0 "" cred rm talk-a token --scope user --user u1 --state "$state"
  t rm-shared-system 0 "" cred rm --shared token --scope system --state "$state"
  t rm-shared-again 1 "no system credential token shared" cred rm --shared token --scope system --state "$state"
  t after-rm 0 '"token":"a-sys"' call "${G[@]}" --user u1 talk-a show '{}'
else
  echo "  note: node is not installed; the credential lookup cases are skipped"
fi
t form-needs-capability 2 "cred set\|rm CAPABILITY NAME" cred set token --scope system --state "$state"
t form-shared-takes-one-name 2 "cred set\|rm CAPABILITY NAME" cred set --shared talk-a token --scope system --state "$state"
t form-system-has-no-user 2 "belongs to no user" cred set talk-a token --scope system --user u1 --state "$state"

echo "schema versions and the migration of global credentials"
old=$work/old
mkdir -p "$old" && chmod 700 "$old"
printf 'legacy\n' | "$capsule" cred set --shared token --scope system --state "$old" >/dev/null
# the database as capsule wrote it before versions: credentials global by name
sqlite3 "$old/state.db" "CREATE TABLE c0 (name TEXT NOT NULL, scope TEXT NOT NULL, user TEXT NOT NULL,
  nonce BLOB NOT NULL, sealed BLOB NOT NULL, updated TEXT NOT NULL, PRIMARY KEY (name, scope, user));
  INSERT INTO c0 SELECT name, scope, user, nonce, sealed, updated FROM credentials;
  DROP TABLE credentials; ALTER TABLE c0 RENAME TO credentials; PRAGMA user_version = 0;"
rm -f "$old/audit-hwm"
t migrate-warns 0 "warning: 1 stored credential became shared" cred list --state "$old"
t migrated-is-shared 0 "^\(shared\) +token +system" cred list --state "$old"
tn migrate-warns-once "warning" cred list --state "$old"
if [ "$(sqlite3 "$old/state.db" "PRAGMA user_version")" -ge 2 ]; then ok schema-version-recorded; else bad schema-version-recorded; fi
if command -v node >/dev/null; then
  "$capsule" policy set talk-b show allow --state "$old"
  t migrated-still-unseals 0 '"token":"legacy"' call --caps "$caps" --state "$old" talk-b show '{}'
fi
newer=$work/newer
cp -r "$old" "$newer"
sqlite3 "$newer/state.db" "PRAGMA user_version = 99"
t newer-schema-refused 1 "schema version 99, newer than this capsule knows" cred list --state "$newer"
if [ "$(sqlite3 "$newer/state.db" "PRAGMA user_version")" = 99 ]; then ok newer-schema-untouched; else bad newer-schema-untouched; fi

echo "the audit high-water mark: deletion, truncation and rollback are a gap"
mkdir -p "$caps/agents/noop"
printf '[agent]\nid = "noop"\nname = "noop"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' >"$caps/agents/noop/agent.toml"
printf '#!/bin/sh\necho "{}"\n' >"$caps/agents/noop/run.sh" && chmod 755 "$caps/agents/noop/run.sh"
A=$work/audit
blocked() { # blocked N DIR: N calls refused by policy, one audit record each
  for _ in $(seq "$1"); do "$capsule" call --caps "$caps" --state "$2" noop dispatch '{"text": "x"}' >/dev/null 2>&1; done
}
blocked 3 "$A"
t hwm-intact 0 "audit log verified: 3 records" audit verify --state "$A"
if [ -f "$A/audit-hwm" ] && [ "$(stat -c %a "$A/audit-hwm")" = 600 ]; then ok hwm-file-0600; else bad hwm-file-0600; fi
cp -a "$A" "$work/a1"; sqlite3 "$work/a1/state.db" "DELETE FROM audit; DELETE FROM meta"
t hwm-deleted-all 1 "gap: the audit log holds 0 records but capsule wrote 3" audit verify --state "$work/a1"
cp -a "$A" "$work/a2"; sqlite3 "$work/a2/state.db" "DELETE FROM audit WHERE seq = 3; DELETE FROM meta"
t hwm-truncated 1 "gap: the audit log holds 2 records but capsule wrote 3" audit verify --state "$work/a2"
cp -a "$A" "$work/a3"; rm "$work/a3/state.db" "$work/a3/state.db-wal" "$work/a3/state.db-shm" 2>/dev/null
t hwm-database-removed 1 "gap: the audit log holds 0 records but capsule wrote 3" audit verify --state "$work/a3"
# rollback: a copy of the database taken at 3 records, restored after 2 more
sqlite3 "$A/state.db" ".backup $work/old.db"
blocked 2 "$A"
t hwm-advances 0 "audit log verified: 5 records" audit verify --state "$A"
cp -a "$A" "$work/a4"; cp "$work/old.db" "$work/a4/state.db"; rm -f "$work/a4/state.db-wal" "$work/a4/state.db-shm"
t hwm-rollback 1 "gap: the audit log holds 3 records but capsule wrote 5" audit verify --state "$work/a4"
blocked 3 "$work/a4" # written to after the restore, past the mark's count
t hwm-rollback-then-written 1 "gap: audit record 5 is not the one capsule wrote" audit verify --state "$work/a4"
cp -a "$A" "$work/a5"; rm "$work/a5/audit-hwm"
t hwm-file-deleted 1 "gap: the audit high-water mark .* is missing" audit verify --state "$work/a5"
blocked 1 "$work/a5"
t hwm-not-recreated-by-append 1 "is missing" audit verify --state "$work/a5"
cp -a "$A" "$work/a6"; sed -i 's/ 5 / 9 /' "$work/a6/audit-hwm"
t hwm-forged 1 "gap: the audit high-water mark .* does not verify" audit verify --state "$work/a6"
# eight appenders at once: the mark ends at the last record, never behind a gap
pids=(); for i in $(seq 8); do blocked 2 "$A" & pids+=($!); done; wait "${pids[@]}"
t hwm-concurrent 0 "audit log verified: 21 records" audit verify --state "$A"
if grep -q "^capsule-audit-hwm-v1 21 " "$A/audit-hwm"; then ok hwm-at-head; else bad "hwm-at-head ($(cut -c1-30 "$A/audit-hwm"))"; fi

echo "state tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
