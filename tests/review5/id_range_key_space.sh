#!/bin/bash
# Finding (root): the host id-range registry /var/lib/capsule/id-ranges
# stores "BASE KEY STATE-DIR" and parses KEY as one word (sscanf %s), but a
# capability's key is not always one word: a nono capability is named by
# its folder and a Talos one by an id equal to its folder, and a folder name
# may hold spaces (or tabs, newlines). The line of capability "my tool"
# reads as key "my", state "tool /path": that "state" never exists, so the
# next allocation anywhere drops the line and hands the same host range to
# another capability, which then owns every file "my tool"'s tools wrote.
# Exits 1 when beta reads the 0600 file of "my tool", 0 blocked, 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review5-key.XXXXXX); trap 'rm -rf "$W"' EXIT
mkdir -p "$W/shared" "$W/my tool"; chmod 1777 "$W/shared"; chmod 755 "$W"
echo '{"version": "0.1.0"}' >"$W/my tool/capability.json"
printf 'id: beta\nclass: tool\nimage: none\ntools:\n  - name: t\n    description: t\n    input_schema: {type: object}\nnetwork: {mode: none}\nfilesystem: none\n' >"$W/beta.yaml"
cd /tmp || exit 77
out=$("$capsule" run --state "$W/stateA" --config "$W/my tool" --allow-rw "$W/shared" -- /bin/sh -c \
  "umask 077; echo A-SECRET-$$ >$W/shared/a-secret; cat /proc/self/uid_map" 2>&1) ||
  { echo "setup: run of 'my tool' failed: $out"; exit 77; }
echo "run 'my tool': $out"
a_map=$(awk '{print $2}' <<<"$out")
grep -F " $W/stateA" "${CAPSULE_TEST_ID_REGISTRY_DIR:-/var/lib/capsule}/id-ranges"
out=$("$capsule" run --state "$W/stateB" --config "$W/beta.yaml" --allow-rw "$W/shared" -- /bin/sh -c \
  "cat /proc/self/uid_map; cat $W/shared/a-secret" 2>&1)
echo "run beta: $out"
echo "registry lines of the two states now:"
grep -F "$W/state" "${CAPSULE_TEST_ID_REGISTRY_DIR:-/var/lib/capsule}/id-ranges"
if grep -q "A-SECRET-$$" <<<"$out"; then
  echo "VULNERABLE: 'my tool''s range was handed to beta; beta read its 0600 file"; exit 1
fi
b_map=$(awk 'NR==1{print $2}' <<<"$out")
if [ -n "$a_map" ] && [ "$a_map" = "$b_map" ]; then
  echo "VULNERABLE: beta runs under the host ids of 'my tool' ($a_map)"; exit 1
fi
echo blocked; exit 0
