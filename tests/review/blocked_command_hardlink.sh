#!/bin/bash
# Finding: process.blocked_commands masks the blocked program at the path
# it has on PATH (and its symlink targets), but not the other names of the
# same file: on Debian /usr/bin/perl and /usr/bin/perl5.36.0 are one inode
# (a hard link), so `blocked_commands: [perl]` still lets the tool run
# perl5.36.0 straight from PATH. (docs/sandbox.md: "each blocked program
# masked where it is installed on the sandbox's PATH".)
# Exits non-zero when the attack works; 77 when no hard-linked alias exists.
capsule=$(realpath "${1:-build/capsule}")
perl=$(command -v perl) || { echo "SKIP: no perl"; exit 77; }
ino=$(stat -c %i "$perl")
alias=$(find /usr/bin /bin -maxdepth 1 -inum "$ino" ! -name perl 2>/dev/null | head -1)
[ -n "$alias" ] || { echo "SKIP: perl has no hard-linked alias here"; exit 77; }
d=$(mktemp -d /var/tmp/capsule-review-bc.XXXXXX); trap 'rm -rf "$d"' EXIT
chmod 755 "$d"
echo '{"version": "0.1.0", "process": {"blocked_commands": ["perl"]}}' >"$d/m.json"
rc=0
for who in root nobody; do
  pre=(); [ $who = nobody ] && pre=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  direct=$("${pre[@]}" "$capsule" run --config "$d/m.json" -- perl -e 'print "RAN\n"' 2>&1)
  out=$("${pre[@]}" "$capsule" run --config "$d/m.json" -- "$(basename "$alias")" -e 'print "RAN\n"' 2>&1)
  echo "$who: perl -> ${direct}; $(basename "$alias") -> $out"
  [ "$out" = RAN ] && { echo "VULNERABLE ($who): blocked perl ran as $alias"; rc=1; }
done
exit $rc
