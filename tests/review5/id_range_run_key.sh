#!/bin/bash
# Finding (root): `capsule run` without --config takes the host id range
# of the key "run" (RUN_ID_KEY, src/cli/run.c), and a capability's key is
# its id, so a capability whose id is "run" (a valid Selu or Covenant id, a
# nono or Talos folder named run) is handed the very range of every ad-hoc
# `capsule run -- CMD` of the same state: its tools own what the operator's
# sandboxed commands wrote outside idmapped grants, and pass host services'
# SO_PEERCRED checks made for them. (Its audit records read capability
# "run" too, like the ad-hoc runs'.)
# Exits 1 when the capability "run" reads an ad-hoc run's 0600 file, 0
# blocked, 77 cannot run.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review5-runkey.XXXXXX); trap 'rm -rf "$W"' EXIT
mkdir -p "$W/shared"; chmod 1777 "$W/shared"; chmod 755 "$W"
printf 'id: run\nclass: tool\nimage: none\ntools:\n  - name: t\n    description: t\n    input_schema: {type: object}\nnetwork: {mode: none}\nfilesystem: none\n' >"$W/run.yaml"
cd /tmp || exit 77
out=$("$capsule" run --state "$W/state" --allow-rw "$W/shared" -- /bin/sh -c \
  "umask 077; echo ADHOC-SECRET-$$ >$W/shared/secret; cat /proc/self/uid_map" 2>&1) ||
  { echo "setup: the ad-hoc run failed: $out"; exit 77; }
echo "ad-hoc run: $out"
ls -ln "$W/shared"
out=$("$capsule" run --state "$W/state" --config "$W/run.yaml" --allow-rw "$W/shared" -- /bin/sh -c \
  "cat /proc/self/uid_map; cat $W/shared/secret" 2>&1)
echo "capability run: $out"
if grep -q "ADHOC-SECRET-$$" <<<"$out"; then
  echo "VULNERABLE: the capability named run holds the ad-hoc runs' host ids; it read their 0600 file"; exit 1
fi
echo blocked; exit 0
