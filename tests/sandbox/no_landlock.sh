#!/usr/bin/env bash
# A host without Landlock (forced through the test-hook build's
# CAPSULE_TEST_NO_LANDLOCK, which makes landlock_abi() answer 0): what
# Landlock alone holds must fail closed, never run with more than
# declared. A write-only grant is bound read-write by the mount tree (a
# mount is read-only or read-write), so without Landlock its files would
# be readable: the run is refused with exit 3 naming the grant. Command
# lists likewise, and signal_mode allow_same_sandbox (Landlock's signal
# scoping; before, a setup failure with exit 1). Read and read-write grants still run (the mount tree
# and namespaces hold them), and --dry-run says the write-only grant is
# refused. Before the fix the write-only run exited 0 and printed the
# file. As root and uid 65534. Usage: no_landlock.sh CAPSULE HOSTILE
set -u
[ "${CAPSULE_TEST_HOOKS:-1}" = 1 ] || { echo "SKIP: needs the test-hook build (-Dtest_hooks=true)"; exit 77; }
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
work=$(mktemp -d /var/tmp/capsule-nolandlock.XXXXXX)
export XDG_STATE_HOME=$work/xdg-state
chmod 755 "$work"
pass=0 fail=0
trap 'rm -rf "$work"' EXIT

# expect WHO NAME WANT-STATUS REGEX [!REGEX-ABSENT] -- RUN-ARGS...
expect() {
  local who=$1 name=$2 want=$3 regex=$4 absent=; shift 4
  if [ "$1" != -- ]; then absent=$1; shift; fi
  shift
  local out status
  out=$(cd "$work" && as_user "$who" env CAPSULE_TEST_NO_LANDLOCK=1 timeout 120 "$capsule" run "$@" 2>&1 </dev/null)
  status=$?
  if [ "$status" = "$want" ] && grep -qE -- "$regex" <<<"$out" &&
     { [ -z "$absent" ] || ! grep -qE -- "$absent" <<<"$out"; }; then
    pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$who" "$name"
  else
    fail=$((fail + 1)); printf '  FAIL %-6s %s (exit %s, want %s; want /%s/%s)\n' "$who" "$name" \
      "$status" "$want" "$regex" "${absent:+, not /$absent/}"
    head -5 <<<"$out" | sed 's/^/         /'
  fi
}

for who in "${users[@]}"; do
  d=$work/$who
  mkdir -p "$d/wo" "$d/ro" "$d/rw"
  echo "wo-secret-$who" >"$d/wo/secret"
  echo "ro-ok" >"$d/ro/f"
  chmod -R a+rwX "$d"
  cat >"$d/cmdlist.json" <<JSON
{"version": "0.1.0", "process": {"allowed_commands": ["cat"]}}
JSON
  cat >"$d/same.json" <<JSON
{"version": "0.1.0", "process": {"signal_mode": "allow_same_sandbox"}}
JSON
  chmod a+r "$d/cmdlist.json" "$d/same.json"
  echo "as $who (Landlock forced off):"
  # the hook holds: dry run sees no Landlock
  expect "$who" "dry run: no Landlock, write-only refused" 0 \
    "grant write +dir  $d/wo: REFUSED: write-only needs Landlock" -- \
    --dry-run --allow-write "$d/wo" -- /bin/true
  expect "$who" "write-only grant refused (exit 3, naming it)" 3 \
    "write-only grant $d/wo needs Landlock" "wo-secret" -- \
    --allow-write "$d/wo" -- /bin/cat "$d/wo/secret"
  expect "$who" "write-only file grant refused too" 3 \
    "write-only grant $d/wo/secret needs Landlock" "wo-secret" -- \
    --allow-write "$d/wo/secret" -- /bin/cat "$d/wo/secret"
  expect "$who" "command lists refused (exit 3)" 3 \
    "allowed_commands/blocked_commands need Landlock" -- \
    --config "$d/cmdlist.json" -- /bin/cat /etc/hostname
  expect "$who" "signal_mode allow_same_sandbox refused (exit 3)" 3 \
    'signal_mode "allow_same_sandbox" needs Landlock signal scoping' -- \
    --config "$d/same.json" -- /bin/true
  # what the mount tree holds alone still runs
  expect "$who" "read and read-write grants still run" 0 '^ro-ok$' -- \
    --allow-read "$d/ro" --allow-rw "$d/rw" -- /bin/sh -c "cat $d/ro/f && echo x >$d/rw/x"
done

# control: with Landlock (when this host has it) the write-only grant runs
# and its file stays unreadable
if "$capsule" doctor 2>/dev/null | grep -q 'Landlock *yes'; then
  who=${users[0]} d=$work/${users[0]}
  out=$(cd "$work" && as_user "$who" timeout 120 "$capsule" run --allow-write "$d/wo" -- \
    /bin/sh -c "cat $d/wo/secret 2>/dev/null || echo unreadable; echo new >$d/wo/new && echo wrote" 2>&1 </dev/null)
  if grep -q '^unreadable$' <<<"$out" && grep -q '^wrote$' <<<"$out"; then
    pass=$((pass + 1)); echo "  ok   with Landlock the write-only grant runs, write-only"
  else
    fail=$((fail + 1)); echo "  FAIL with Landlock the write-only grant: $out"
  fi
fi
echo "no-Landlock suite: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
