#!/bin/bash
# Finding (root): host id ranges are allocated per state database
# (src/gateway/id_range.c allocate: the first free range from 0x70000000,
# "taken" = this state's id_ranges table, subuid/subgid and host users).
# Another state directory (--state, CAPSULE_STATE, a project's own state,
# the config file's) allocates the same first range to its own first
# capability, so two capabilities of two states run as the same host uid,
# contrary to "two capabilities never share one" (docs/sandbox.md). Here
# capability A's tool keeps a 0600 secret in a shared sticky directory (a
# world-writable grant is not idmapped: it writes as its own host uid), and
# capability B, under another state, reads and rewrites it.
# Exits 1 when B reads A's private file, 0 blocked, 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review3-ids.XXXXXX); trap 'rm -rf "$W"' EXIT
mkdir -p "$W/shared"; chmod 1777 "$W/shared"; chmod 755 "$W"
for id in alpha beta; do
  printf 'id: %s\nclass: tool\nimage: none\ntools:\n  - name: t\n    description: t\n    input_schema: {type: object}\nnetwork: {mode: none}\nfilesystem: none\n' "$id" >"$W/$id.yaml"
done
cd /tmp || exit 77
# capability alpha under state A; capability beta under state B
"$capsule" run --state "$W/stateA" --config "$W/alpha.yaml" --allow-rw "$W/shared" -- /bin/sh -c \
  "umask 077; echo A-SECRET-$$ >$W/shared/a-secret; cat /proc/self/uid_map" 2>&1 ||
  { echo "setup: run A failed"; exit 77; }
ls -ln "$W/shared"
out=$("$capsule" run --state "$W/stateB" --config "$W/beta.yaml" --allow-rw "$W/shared" -- /bin/sh -c \
  "cat /proc/self/uid_map; cat $W/shared/a-secret" 2>&1)
echo "run B: $out"
if grep -q "A-SECRET-$$" <<<"$out"; then
  echo "VULNERABLE: two states' capabilities share a host uid; capability beta read alpha's 0600 file"; exit 1
fi
echo blocked; exit 0
