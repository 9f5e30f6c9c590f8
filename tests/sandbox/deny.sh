#!/usr/bin/env bash
# filesystem.deny inside a granted directory (~/.ssh under a home grant),
# held by both layers, as root and as uid 65534: the mount mask (the denied
# path is empty) and Landlock (the grant given as rules on its other
# entries). With the build's test hooks the masks are left out
# (CAPSULE_TEST_NO_DENY_MASKS) to show Landlock alone keeps the contents
# closed: a denied directory, one reached through a symlink, one under a
# symlinked parent, a denied file; the rest of the grant stays usable
# (reading, writing in subdirectories); a nono profile's implicit
# deny_credentials group does the same through `run --profile`.
# Usage: deny.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
work=$(mktemp -d /var/tmp/capsule-deny.XXXXXX)
chmod 755 "$work"
pass=0 fail=0
trap 'rm -rf "$work"' EXIT

ok() { pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$1" "$2"; }
bad() {
  fail=$((fail + 1)); printf '  FAIL %-6s %s\n' "$1" "$2"
  printf '%s\n' "$3" | head -5 | sed 's/^/         /'
}

# check WHO NAME WANT-STATUS WANT-REGEX [ENV=VAL...] -- CAPSULE-RUN-ARGS...
check() {
  local who=$1 name=$2 want=$3 regex=$4; shift 4
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local out status
  out=$(cd "$work/$who/home" && as_user "$who" env HOME="$work/$who/home" \
    XDG_STATE_HOME="$work/xdg-$who" XDG_CONFIG_HOME="$work/xdg-$who" "${envs[@]}" \
    timeout 60 "$capsule" run "$@" 2>&1 </dev/null)
  status=$?
  if [ "$status" = "$want" ] && echo "$out" | grep -qE -- "$regex"; then
    ok "$who" "$name"
  else
    bad "$who" "$name (exit $status, want $want)" "$out"
  fi
}

setup_user() {
  local who=$1 h="$work/$1/home"
  mkdir -p "$h/.ssh" "$h/real-keys" "$h/proj/sub" "$h/realparent/inner" "$work/xdg-$who"
  echo "ssh-secret" >"$h/.ssh/id_ed25519"
  echo "linked-secret" >"$h/real-keys/key"
  ln -s "$h/real-keys" "$h/keys-link"
  echo "parent-secret" >"$h/realparent/inner/key"
  ln -s "$h/realparent" "$h/parent-link"
  echo "token-secret" >"$h/.netrc"
  echo "visible" >"$h/proj/readme"
  chmod -R a+rX "$work/$who"
  [ "$who" = root ] || chown -R 65534:65534 "$work/$who" "$work/xdg-$who"
  cat >"$work/$who/home.json" <<JSON
{"version": "0.1.0",
 "filesystem": {"grants": [{"path": "$h", "access": "readwrite"}],
                "deny": [{"path": "$h/.ssh"}, {"path": "$h/keys-link"},
                         {"path": "$h/parent-link/inner"}, {"path": "$h/.netrc"}]}}
JSON
  cat >"$work/$who/home-profile.json" <<'JSON'
{
  // a home grant; deny_credentials comes with the implicit default groups
  "meta": {"name": "home"},
  "filesystem": {"allow": ["$HOME"]},
  "network": {"block": true},
}
JSON
}

landlock=$("$capsule" doctor 2>/dev/null | grep -c 'Landlock *yes')
hooks=${CAPSULE_TEST_HOOKS:-1}
for who in "${users[@]}"; do
  setup_user "$who"
  h="$work/$who/home"
  reads="cat $h/.ssh/id_ed25519; cat $h/keys-link/key; cat $h/real-keys/key; cat $h/realparent/inner/key; cat $h/.netrc"
  rounds=("both layers|")
  [ "$hooks" = 1 ] && [ "$landlock" -ge 1 ] && rounds+=("Landlock alone|CAPSULE_TEST_NO_DENY_MASKS=1")
  for round in "${rounds[@]}"; do
    label=${round%%|*} env_set=${round#*|}
    envs=(); [ -n "$env_set" ] && envs=("$env_set")
    echo "as $who, $label:"
    check "$who" "denied contents stay closed ($label)" 0 '^closed=5$' "${envs[@]}" -- \
      --config "$work/$who/home.json" -- /bin/sh -c \
      "n=0; for f in $h/.ssh/id_ed25519 $h/keys-link/key $h/real-keys/key $h/realparent/inner/key $h/.netrc; do cat \$f >/dev/null 2>&1 || n=\$((n+1)); done; echo closed=\$n"
    check "$who" "no secret printed ($label)" 0 '^done$' "${envs[@]}" -- \
      --config "$work/$who/home.json" -- /bin/sh -c "{ $reads; } 2>/dev/null | grep -q secret && echo LEAK; echo done"
    check "$who" "a denied directory cannot be written ($label)" 0 '^refused$' "${envs[@]}" -- \
      --config "$work/$who/home.json" -- /bin/sh -c \
      "echo x > $h/.ssh/authorized_keys 2>/dev/null && echo WROTE || echo refused"
    check "$who" "the rest of the grant reads and writes ($label)" 0 '^visible wrote$' "${envs[@]}" -- \
      --config "$work/$who/home.json" -- /bin/sh -c \
      "r=\$(cat $h/proj/readme); echo new > $h/proj/sub/new-$who && echo \"\$r wrote\""
  done
  echo "as $who, a nono profile:"
  check "$who" "run --profile: ~/.ssh denied by the implicit deny_credentials" 0 '^closed visible$' -- \
    --profile "$work/$who/home-profile.json" -- /bin/sh -c \
    "s=\$(cat $h/.ssh/id_ed25519 2>/dev/null || echo closed); echo \"\$s \$(cat $h/proj/readme)\""
done
grep -q "new" "$work/root/home/proj/sub/new-root" 2>/dev/null && ok root "the write reached the host" ||
  bad root "the write did not reach the host" ""
echo "deny inside grants: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
