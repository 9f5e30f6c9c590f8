#!/bin/bash
# Finding (root): the id-range registry is read with fgets into a buffer of
# PATH_MAX + 600 bytes. A line longer than that (a Selu id has no length
# limit; a state path may be up to PATH_MAX) is read as two: the first has
# no state directory (dropped at the next allocation), the second is parsed
# on its own. So a capability with a 4,800-character id loses its line and
# its range goes to the next capability allocated; and the tail of its id
# becomes a line of its own: an id ending in "-1879048192" (a digit run
# after the cut) plants "1879048192 <rest> STATE" naming any base it likes.
# Exits 1 when beta reads the long-id capability's 0600 file, 0 blocked.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review5-long.XXXXXX); trap 'rm -rf "$W"' EXIT
mkdir -p "$W/shared"; chmod 1777 "$W/shared"; chmod 755 "$W"
long=$(head -c 4800 /dev/zero | tr '\0' a)
for id in "$long" beta; do
  printf 'id: %s\nclass: tool\nimage: none\ntools:\n  - name: t\n    description: t\n    input_schema: {type: object}\nnetwork: {mode: none}\nfilesystem: none\n' "$id" >"$W/${id:0:4}.yaml"
done
cd /tmp || exit 77
out=$("$capsule" run --state "$W/stateA" --config "$W/aaaa.yaml" --allow-rw "$W/shared" -- /bin/sh -c \
  "umask 077; echo A-SECRET-$$ >$W/shared/a-secret; cat /proc/self/uid_map" 2>&1) ||
  { echo "setup: run of the long id failed: $out"; exit 77; }
echo "run long-id: $out"
a_map=$(awk 'NR==1{print $2}' <<<"$out")
out=$("$capsule" run --state "$W/stateB" --config "$W/beta.yaml" --allow-rw "$W/shared" -- /bin/sh -c \
  "cat /proc/self/uid_map; cat $W/shared/a-secret" 2>&1)
echo "run beta: $out"
if grep -q "A-SECRET-$$" <<<"$out"; then
  echo "VULNERABLE: the long id's range was handed to beta; beta read its 0600 file"; exit 1
fi
b_map=$(awk 'NR==1{print $2}' <<<"$out")
if [ -n "$a_map" ] && [ "$a_map" = "$b_map" ]; then
  echo "VULNERABLE: beta runs under the long id's host ids ($a_map)"; exit 1
fi
echo blocked; exit 0
