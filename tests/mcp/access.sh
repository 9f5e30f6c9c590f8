#!/usr/bin/env bash
# `capsule access`: tokens issued once and stored hashed, listed without
# them, revoked; names checked; issuing and revoking audited and refused
# inside a sandbox. As root and as uid 65534.
# Usage: access.sh CAPSULE
set -u
capsule=$(realpath "$1")
# `capsule run` (the probe, the sandbox checks) on a state of its own, not the caller's default
export CAPSULE_STATE=$(mktemp -d /var/tmp/capsule-probe.XXXXXX)
trap 'rm -rf "$CAPSULE_STATE"' EXIT
command -v sqlite3 >/dev/null || { echo "SKIP: sqlite3 is not installed (scripts/deps.sh test)"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-access.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work" "$CAPSULE_STATE"' EXIT
export CAPSULE_STATE_KEY=
pass=0 fail=0
ok() { echo "  ok   $1"; pass=$((pass + 1)); }
bad() { echo "  FAIL $1"; fail=$((fail + 1)); }
t() { # t WHO NAME STATUS REGEX CMD...: exit status and output
  local who=$1 name=$2 want=$3 re=$4; shift 4
  local out st
  out=$("${wrap[@]}" "$capsule" "$@" 2>&1); st=$?
  if [ "$st" = "$want" ] && grep -Eq -- "$re" <<<"$out"; then ok "$who: $name"
  else bad "$who: $name (exit $st)"; echo "$out" | head -5 | sed 's/^/         /'; fi
}
run_as() {
  local who=$1 state=$work/state-$1
  wrap=()
  mkdir -p "$state" && chmod 700 "$state"
  if [ "$who" = nobody ]; then chown 65534:65534 "$state"; wrap=(setpriv --reuid=65534 --regid=65534 --clear-groups --); fi
  echo "as $who:"
  local token
  token=$("${wrap[@]}" "$capsule" access issue alice --user alice --state "$state" 2>/dev/null)
  [[ $token =~ ^capsule_[0-9a-f]{64}$ ]] && ok "$who: issue-prints-token" || bad "$who: issue-prints-token ($token)"
  t "$who" issue-operator 0 '^capsule_[0-9a-f]{64}$' access issue ops --operator --state "$state"
  t "$who" issue-taken 1 'access "alice" exists; revoke it first' access issue alice --state "$state"
  t "$who" issue-bad-name 1 'is not 1 to 64 of the characters' access issue 'a b' --state "$state"
  t "$who" list-text 0 '^alice +alice +no ' access list --state "$state"
  t "$who" list-json 0 '"operator": "yes"' access list --json --state "$state"
  if "${wrap[@]}" "$capsule" access list --json --state "$state" | grep -q capsule_; then bad "$who: list-no-token"; else ok "$who: list-no-token"; fi
  if sqlite3 "$state/state.db" .dump | grep -q "${token#capsule_}"; then bad "$who: stored-hashed"; else ok "$who: stored-hashed"; fi
  local hash
  hash=$(printf '%s' "$token" | sha256sum | cut -d' ' -f1)
  [ "$(sqlite3 "$state/state.db" "select name from access where token_sha256 = '$hash'")" = alice ] && ok "$who: sha256-stored" || bad "$who: sha256-stored"
  t "$who" revoke 0 '^access alice revoked$' access revoke alice --state "$state"
  t "$who" revoke-missing 1 'no access named alice' access revoke alice --state "$state"
  t "$who" operator-only-on-issue 2 'belong to issue' access list --operator --state "$state"
  t "$who" audited 0 'access-issue .*access alice issued for user alice' audit --state "$state"
  t "$who" audited-revoke 0 'access-revoke .*access alice revoked' audit --state "$state"
  t "$who" inside-refused 4 'inside a capsule sandbox' run --allow-read "$(dirname "$capsule")" -- env -u CAPSULE_SANDBOX ASAN_OPTIONS=detect_leaks=0 "$capsule" access issue x --state "$work/inside-$who"
}
run_as root
if [ "$(id -u)" = 0 ] && setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" 2>/dev/null; then run_as nobody; fi
echo "access: $pass passed, $fail failed"
[ "$fail" = 0 ]
