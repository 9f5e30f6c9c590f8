#!/bin/bash
# Finding: a write-only grant (--allow-write, access "write") below /tmp is
# readable and listable by the tool. The grant is bound inside the
# sandbox's private /tmp, and Landlock rules are inherited down the path
# walk: the rule giving the private /tmp read+write (src/sandbox/landlock.c)
# also covers the bind mount beneath it, and the mount itself is
# read-write, so no layer withholds READ_FILE/READ_DIR. The same grant
# outside /tmp (e.g. /var/tmp/X) is refused as it should be.
# Run as root and as uid 65534. Exits non-zero when the attack works.
capsule=$(realpath "${1:-build/capsule}")
d=$(mktemp -d /tmp/capsule-review-wo.XXXXXX); trap 'rm -rf "$d"' EXIT
chmod 777 "$d"; echo "host-secret-$$" >"$d/secret"; chmod 666 "$d/secret"
rc=0
for who in root nobody; do
  run=("$capsule" run --allow-write "$d" -- /bin/sh -c "cat $d/secret; ls $d")
  if [ $who = nobody ]; then
    out=$(setpriv --reuid=65534 --regid=65534 --clear-groups -- "${run[@]}" 2>&1)
  else
    out=$("${run[@]}" 2>&1)
  fi
  if printf '%s' "$out" | grep -q "host-secret-$$"; then
    echo "VULNERABLE ($who): the tool read a file in a write-only grant: $out"; rc=1
  else
    echo "blocked ($who): $out"
  fi
done
exit $rc
