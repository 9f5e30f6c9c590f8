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
  echo 'export async function show(_, config) { return { token: config.token }; }' >"$caps/$1/index.js"
}

echo "credentials scoped to a capability (and user)"
if command -v node >/dev/null; then
  talos talk-a
  talos talk-b
  for c in talk-a talk-b; do "$capsule" policy set "$c" show allow --caps "$caps" --state "$state"; done
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
legacy() { # legacy DIR: a state as capsule wrote it before versions (credentials global by name)
  printf 'legacy\n' | "$capsule" cred set --shared token --scope system --state "$1" >/dev/null
  sqlite3 "$1/state.db" "CREATE TABLE c0 (name TEXT NOT NULL, scope TEXT NOT NULL, user TEXT NOT NULL,
    nonce BLOB NOT NULL, sealed BLOB NOT NULL, updated TEXT NOT NULL, PRIMARY KEY (name, scope, user));
    INSERT INTO c0 SELECT name, scope, user, nonce, sealed, updated FROM credentials;
    DROP TABLE credentials; ALTER TABLE c0 RENAME TO credentials; PRAGMA user_version = 0;"
  rm -f "$1/audit-hwm"
}
old=$work/old
legacy "$old"
t migrate-warns 0 "warning: 1 stored credential became shared" cred list --state "$old"
t migrated-is-shared 0 "^\(shared\) +token +system" cred list --state "$old"
tn migrate-warns-once "warning" cred list --state "$old"
if [ "$(sqlite3 "$old/state.db" "PRAGMA user_version")" -ge 2 ]; then ok schema-version-recorded; else bad schema-version-recorded; fi
if command -v node >/dev/null; then
  "$capsule" policy set talk-b show allow --caps "$caps" --state "$old"
  t migrated-still-unseals 0 '"token":"legacy"' call --caps "$caps" --state "$old" talk-b show '{}'
fi
# migrated first by `capsule run` reading the credential: the next verb warns
viarun=$work/viarun
legacy "$viarun"
printf '{"version": "0.1.0", "network": {"mode": "proxy"}, "credentials": [{"name": "key", "upstream": "https://127.0.0.1:9/v1", "source": "token", "env_var": "API_KEY", "inject": {"mode": "header", "header": "X-Api-Key", "format": "{}"}}]}\n' >"$work/store.json"
"$capsule" run --state "$viarun" --config "$work/store.json" -- /bin/true >/dev/null 2>&1 || bad "run with a stored credential failed"
[ "$(sqlite3 "$viarun/state.db" "PRAGMA user_version")" -ge 5 ] || bad "capsule run did not migrate the state"
t migrate-warns-after-run 0 "warning: 1 stored credential became shared" cred list --state "$viarun"
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

echo "audit text output escapes control characters (invalid UTF-8 stored as U+FFFD); --json stays exact"
E=$work/esc
forged=$'t\n99 2026-01-01T00:00:00.000Z root noop.dispatch allow 1ms ok\e[2J\xff\xe2\x80\xae'
"$capsule" call --caps "$caps" --state "$E" noop "$forged" '{}' >/dev/null 2>&1
"$capsule" call --caps "$caps" --state "$E" noop dispatch '{}' >/dev/null 2>&1
out=$("$capsule" audit --state "$E" 2>&1)
if [ "$(printf '%s\n' "$out" | wc -l)" = 2 ] && ! printf '%s' "$out" | grep -q $'\e' &&
   printf '%s' "$out" | grep -qF 'noop.t\n99 2026' && printf '%s' "$out" | grep -qF '\x1b[2J'$'\xef\xbf\xbd''\u{202e}'; then
  ok audit-text-escaped
else bad audit-text-escaped; printf '%s\n' "$out" | head -4 | cat -A | sed 's/^/         /'; fi
"$capsule" audit --json --state "$E" >"$work/esc.json" 2>&1
if python3 -c 'import json,sys; r=json.load(open(sys.argv[1], "rb")); sys.exit(0 if r[0]["tool"].startswith("t\n99 2026") and "\x1b[2J" in r[0]["tool"] and len(r) == 2 else 1)' "$work/esc.json"
then ok audit-json-exact; else bad audit-json-exact; head -c 300 "$work/esc.json"; fi

echo "state directory permissions and ownership"
P=$work/perm
mkdir -m 755 "$P"
"$capsule" policy list --state "$P" >/dev/null 2>&1
sqlite3 "$P/state.db" "CREATE TABLE IF NOT EXISTS x (a)"; chmod 644 "$P/state.db"; chmod 755 "$P"
t perm-0755-repaired-run 0 "" policy list --state "$P"
modes=$(stat -c '%n %a' "$P" "$P"/state.db* "$P/key" "$P/audit-hwm" | sed "s|$P|S|")
if ! echo "$modes" | grep -vqE '^S 700$|^S/[^ ]+ 600$'; then ok perm-0755-repaired
else bad perm-0755-repaired; echo "$modes" | sed 's/^/         /'; fi
N=$work/fresh
(umask 022 && "$capsule" policy list --state "$N" >/dev/null 2>&1)
modes=$(stat -c '%n %a' "$N" "$N"/state.db* "$N/key" | sed "s|$N|S|")
if ! echo "$modes" | grep -vqE '^S 700$|^S/[^ ]+ 600$'; then ok perm-new-0600
else bad perm-new-0600; echo "$modes" | sed 's/^/         /'; fi
K=$work/keyopen; "$capsule" policy list --state "$K" >/dev/null 2>&1; chmod 644 "$K/key"
t perm-key-readable-refused 1 "key is readable by others" policy list --state "$K"
if [ "$(id -u)" = 0 ]; then
  # uid 65534 plants a state directory (0777) with a key it knows
  pl=$work/planted
  mkdir -m 777 "$pl" && head -c 32 /dev/urandom >"$pl/key" && chmod 600 "$pl/key" && chown -R 65534:65534 "$pl"
  out=$(printf 'root-secret\n' | "$capsule" cred set --shared token --scope system --state "$pl" 2>&1); st=$?
  if [ $st = 1 ] && echo "$out" | grep -q "owned by uid 65534, not by you" && [ ! -e "$pl/state.db" ]; then ok planted-dir-refused
  else bad "planted-dir-refused (exit $st)"; echo "$out" | head -3 | sed 's/^/         /'; fi
  chmod 700 "$pl"
  t planted-0700-dir-refused 1 "owned by uid 65534, not by you" cred list --state "$pl"
  own=$work/own; mkdir -m 700 "$own" && cp "$pl/key" "$own/key" && chown 65534 "$own/key"
  t planted-key-refused 1 "key is owned by uid 65534, not by you .* refusing a key" cred list --state "$own"
  gw=$work/groupw; mkdir -m 770 "$gw"
  t group-writable-refused 1 "writable by group or others \(mode 0770\)" cred list --state "$gw"
  rw=$work/rootw; mkdir -m 1777 "$rw"
  t nobody-in-root-0777-refused 1 "writable by group or others" policy list --state "$rw"
  out=$(as_nobody "$capsule" policy list --state "$rw" 2>&1); st=$?
  if [ $st = 1 ] && echo "$out" | grep -q "writable by group or others"; then ok nobody-other-writable-refused
  else bad "nobody-other-writable-refused (exit $st)"; echo "$out" | head -3 | sed 's/^/         /'; fi
  nb=$work/nb; mkdir -m 755 "$nb" && chown 65534:65534 "$nb"
  out=$(as_nobody "$capsule" policy list --state "$nb" 2>&1); st=$?
  if [ $st = 0 ] && [ "$(stat -c %a "$nb")" = 700 ] && [ "$(stat -c %a "$nb/state.db")" = 600 ]; then ok nobody-own-0755-repaired
  else bad "nobody-own-0755-repaired (exit $st)"; echo "$out" | head -3 | sed 's/^/         /'; fi

  echo "--user other than the caller's login needs the operator"
  ro=$work/rootstate; "$capsule" policy set noop dispatch allow --caps "$caps" --state "$ro" >/dev/null
  out=$(as_nobody "$capsule" call --caps "$caps" --state "$ro" --user alice noop dispatch '{}' 2>&1); st=$?
  if [ $st = 4 ] && echo "$out" | grep -q -- "--user alice needs the operator's rights"; then ok user-non-owner-refused
  else bad "user-non-owner-refused (exit $st)"; echo "$out" | head -3 | sed 's/^/         /'; fi
  out=$(as_nobody "$capsule" cred set noop token --scope user --user alice --state "$nb" 2>&1 <<<"v"); st=$?
  if [ $st = 0 ]; then ok user-owner-may; else bad "user-owner-may (exit $st)"; echo "$out" | head -3; fi
  if printf 'v\n' | "$capsule" cred set noop token --scope user --user alice --state "$ro" >/dev/null 2>&1; then ok user-root-may; else bad user-root-may; fi
  # $USER is the caller's to set: it does not name who calls
  as_nobody env USER=alice "$capsule" call --caps "$caps" --state "$nb" noop dispatch '{}' >/dev/null 2>&1
  if as_nobody "$capsule" audit --state "$nb" 2>&1 | grep -q " nobody noop.dispatch"; then ok user-env-not-trusted
  else bad user-env-not-trusted; as_nobody "$capsule" audit --state "$nb" 2>&1 | head -3; fi

  echo "a capsule holding the state key is not dumpable"
  ff=$nb/fifo; as_nobody mkfifo "$ff"
  res=$(as_nobody bash -c '
    "$1" audit --follow --tail 1 --state "$2" >"$3" 2>/dev/null & pid=$!
    exec 4<"$3"; read -r _ <&4
    if (exec 3</proc/$pid/mem) 2>/dev/null; then echo mem-readable; else echo mem-refused; fi
    echo "owner $(stat -c %u /proc/$pid/mem)"
    kill $pid' _ "$capsule" "$nb" "$ff")
  if echo "$res" | grep -q mem-refused && echo "$res" | grep -q "owner 0"; then ok not-dumpable-mem-refused
  else bad "not-dumpable-mem-refused ($(echo $res))"; fi
  # the egress proxy's process holds a credential and its CA key
  printf '{"version": "0.1.0", "network": {"mode": "proxy"}, "credentials": [{"name": "key", "upstream": "https://127.0.0.1:9/v1", "source": "env://CAPSULE_TEST_SECRET", "env_var": "API_KEY", "inject": {"mode": "header", "header": "X-Api-Key", "format": "{}"}}]}\n' >"$nb/proxy.json"
  chown 65534 "$nb/proxy.json"
  res=$(as_nobody env CAPSULE_TEST_SECRET=s3cret-proxy bash -c '
    "$1" run --config "$2/proxy.json" -- sh -c "echo ready; exec sleep 600" >"$3" 2>/dev/null & pid=$!
    exec 4<"$3"; read -r _ <&4
    if (exec 3</proc/$pid/mem) 2>/dev/null; then echo mem-readable; else echo mem-refused; fi
    echo "owner $(stat -c %u /proc/$pid/mem)"
    kill $pid' _ "$capsule" "$nb" "$ff")
  if echo "$res" | grep -q mem-refused && echo "$res" | grep -q "owner 0"; then ok proxy-not-dumpable
  else bad "proxy-not-dumpable ($(echo $res))"; fi
else
  echo "  note: the ownership, --user and dumpability cases need root (uid 65534 via setpriv)"
fi

echo "state tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
