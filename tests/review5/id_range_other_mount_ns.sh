#!/bin/bash
# Finding (root): the id-range registry drops every line whose state
# directory stat()s as ENOENT, judged in the mount namespace of whichever
# capsule rewrites it. A capsule run as root from a systemd service with
# PrivateTmp=yes or ProtectHome=yes (root's default state is under /root),
# a container sharing /var/lib, or any private mount namespace does not see
# the other states' directories: its first allocation drops their lines
# and hands their ranges out again, while those states keep using them.
# Here a private mount namespace with a tmpfs over the directory holding
# state A stands for such a service.
# Exits 1 when beta, allocated inside the namespace, reads alpha's 0600
# file; 0 blocked; 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
command -v unshare >/dev/null || { echo "SKIP: no unshare"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review5-mntns.XXXXXX); trap 'rm -rf "$W"' EXIT
mkdir -p "$W/shared" "$W/hidden"; chmod 1777 "$W/shared"; chmod 755 "$W" "$W/hidden"
for id in alpha beta; do
  printf 'id: %s\nclass: tool\nimage: none\ntools:\n  - name: t\n    description: t\n    input_schema: {type: object}\nnetwork: {mode: none}\nfilesystem: none\n' "$id" >"$W/$id.yaml"
done
cd /tmp || exit 77
out=$("$capsule" run --state "$W/hidden/stateA" --config "$W/alpha.yaml" --allow-rw "$W/shared" -- /bin/sh -c \
  "umask 077; echo A-SECRET-$$ >$W/shared/a-secret; cat /proc/self/uid_map" 2>&1) ||
  { echo "setup: run A failed: $out"; exit 77; }
echo "alpha (host's mount namespace): $out"
out=$(unshare -m --propagation private sh -c "mount -t tmpfs none '$W/hidden' &&
  '$capsule' run --state '$W/stateB' --config '$W/beta.yaml' --allow-rw '$W/shared' -- /bin/sh -c \
  'cat /proc/self/uid_map; cat $W/shared/a-secret'" 2>&1)
echo "beta (a namespace without state A): $out"
grep -F "$W/" "${CAPSULE_TEST_ID_REGISTRY_DIR:-/var/lib/capsule}/id-ranges"
if grep -q "A-SECRET-$$" <<<"$out"; then
  echo "VULNERABLE: a capsule that cannot see state A dropped its registry line; beta got alpha's range"; exit 1
fi
echo blocked; exit 0
