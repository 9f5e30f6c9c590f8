#!/bin/bash
# Finding (root, 0199c17): when a state's range now belongs to another
# state, the refusal suggests a command to paste:
#   sqlite3 STATE/state.db "DELETE FROM id_ranges WHERE capability = 'KEY'"
# with KEY (a nono or Talos capability's folder name) pasted in raw. A
# package whose folder is named  x'"$(touch /tmp/...)"'  turns the advice
# into a command that runs what the package chose, as root, when pasted
# (and  x'; DELETE FROM audit; --  into one that empties the audit log).
# Here the message is checked for an unquoted "$(" in the suggestion.
# Exits 1 when the suggested command carries the folder name's "$(", 0
# blocked, 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review5-advice.XXXXXX); trap 'rm -rf "$W"' EXIT
chmod 755 "$W"
name='x$(touch REVIEW5-PWNED)'
mkdir -p "$W/$name"; echo '{"version": "0.1.0"}' >"$W/$name/capability.json"
cd /tmp || exit 77
"$capsule" run --state "$W/a" --config "$W/$name" -- /bin/true >/dev/null 2>&1 || { echo "SKIP: first run failed"; exit 77; }
cp -a "$W/a" "$W/a-copy" # the copy's range belongs to the original: refused
out=$("$capsule" run --state "$W/a-copy" --config "$W/$name" -- /bin/true 2>&1)
echo "$out"
if grep -q 'sqlite3 .*capability = .x\$(touch' <<<"$out"; then
  echo "VULNERABLE: the advice to paste runs a command the package's folder name chose"; exit 1
fi
echo blocked; exit 0
