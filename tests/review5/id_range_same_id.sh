#!/bin/bash
# Finding (root): a capability's host id range is keyed by its id alone,
# and nothing ties an id to one package: a nono capability's id is its
# folder's name, so two unrelated nono packages that both live in a folder
# named "tool" (or "mcp", "server", ...) in different places get one range
# in the same state, without anyone choosing it; a Selu, Covenant or Talos
# package can take another's id on purpose. Either reads the files the
# other's tools wrote outside idmapped grants (0600 ones too) and passes
# SO_PEERCRED checks made for the other.
# Exits 1 when package B reads package A's 0600 file, 0 blocked, 77 skip.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review5-sameid.XXXXXX); trap 'rm -rf "$W"' EXIT
mkdir -p "$W/shared" "$W/vendor-a/tool" "$W/vendor-b/tool"; chmod 1777 "$W/shared"; chmod -R 755 "$W"
chmod 1777 "$W/shared"
echo '{"version": "0.1.0"}' >"$W/vendor-a/tool/capability.json"
echo '{"version": "0.1.0"}' >"$W/vendor-b/tool/capability.json"
cd /tmp || exit 77
out=$("$capsule" run --state "$W/state" --config "$W/vendor-a/tool" --allow-rw "$W/shared" -- /bin/sh -c \
  "umask 077; echo A-SECRET-$$ >$W/shared/a-secret; cat /proc/self/uid_map" 2>&1) ||
  { echo "setup: package A failed: $out"; exit 77; }
echo "package A: $out"
out=$("$capsule" run --state "$W/state" --config "$W/vendor-b/tool" --allow-rw "$W/shared" -- /bin/sh -c \
  "cat /proc/self/uid_map; cat $W/shared/a-secret" 2>&1)
echo "package B: $out"
if grep -q "A-SECRET-$$" <<<"$out"; then
  echo "VULNERABLE: two packages named by the same folder share a host id range; B read A's 0600 file"; exit 1
fi
echo blocked; exit 0
