#!/bin/bash
# Finding (root; bypass of b59bb12's host id-range registry): registry_open
# (src/gateway/id_range.c) drops every line whose state directory no longer
# stat()s, but the line names the directory by its realpath at allocation
# time. A state directory that is renamed or moved (mv, a project checkout
# moved, a bind/symlink path changed) keeps its id_ranges table and keeps
# using its ranges, yet its registry lines are pruned at the next
# allocation anywhere, so another state is handed the same host range.
# (A state path holding a newline splits its line the same way.)
# Exits 1 when B reads A's private file, 0 blocked, 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review4-ids.XXXXXX); trap 'rm -rf "$W"' EXIT
mkdir -p "$W/shared"; chmod 1777 "$W/shared"; chmod 755 "$W"
for id in alpha beta; do
  printf 'id: %s\nclass: tool\nimage: none\ntools:\n  - name: t\n    description: t\n    input_schema: {type: object}\nnetwork: {mode: none}\nfilesystem: none\n' "$id" >"$W/$id.yaml"
done
cd /tmp || exit 77
# capability alpha gets a range under state A ...
"$capsule" run --state "$W/stateA" --config "$W/alpha.yaml" -- /bin/true 2>&1 ||
  { echo "setup: run A failed"; exit 77; }
# ... the state directory is moved (its ranges stay in its database) ...
mv "$W/stateA" "$W/stateA-moved"
# ... another state allocates: A's registry line is pruned, its range reused
"$capsule" run --state "$W/stateB" --config "$W/beta.yaml" -- /bin/true 2>&1 ||
  { echo "setup: run B failed"; exit 77; }
"$capsule" run --state "$W/stateA-moved" --config "$W/alpha.yaml" --allow-rw "$W/shared" -- /bin/sh -c \
  "umask 077; echo A-SECRET-$$ >$W/shared/a-secret; cat /proc/self/uid_map" 2>&1
ls -ln "$W/shared"
out=$("$capsule" run --state "$W/stateB" --config "$W/beta.yaml" --allow-rw "$W/shared" -- /bin/sh -c \
  "cat /proc/self/uid_map; cat $W/shared/a-secret" 2>&1)
echo "run B: $out"
if grep -q "A-SECRET-$$" <<<"$out"; then
  echo "VULNERABLE: a moved state's range was handed to another state; beta read alpha's 0600 file"; exit 1
fi
echo blocked; exit 0
