#!/bin/bash
# Finding (state masking by path): capsule masks a state directory inside a
# grant only when the grant's real path is a prefix of the state's real
# path (src/sandbox/mount_plan.c plan_mask_real); the marker scan looks two
# levels deep only. A directory the host also mounts elsewhere (a bind
# mount: a container volume, /srv/home bound from /home, a btrfs subvolume
# mounted twice) shows the same state under another path, which no prefix
# test sees: a tool granted the alias reads the key and state.db.
# Unprivileged operator (uid 65534); the alias is a bind mount this test
# makes on the host (root). Exits 1 when the key is read through the alias.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" ||
  { echo "SKIP: uid 65534 cannot run $capsule"; exit 77; }
H=$(mktemp -d /var/tmp/capsule-review2-home.XXXXXX)
A=$(mktemp -d /var/tmp/capsule-review2-alias.XXXXXX)
trap 'umount "$A" 2>/dev/null; rm -rf "$H"; rmdir "$A"' EXIT
chown 65534:65534 "$H" "$A"; chmod 755 "$H"
mount --bind "$H" "$A" || { echo "SKIP: cannot bind-mount"; exit 77; }
as_op() { (cd /tmp && setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$H" USER=nobody "$@"); }
printf 'ghp_OPERATOR_SECRET_%s' $$ | as_op "$capsule" cred set --shared GITHUB_TOKEN --scope system >/dev/null ||
  { echo "setup: cred set failed"; exit 2; }
key_sum=$(sha256sum <"$H/.local/state/capsule/key" | cut -d' ' -f1)
out=$(as_op "$capsule" run --allow-read "$A" -- /bin/sh -c "sha256sum <$A/.local/state/capsule/key" 2>&1)
echo "through the alias: $out"
if grep -q "$key_sum" <<<"$out"; then
  echo "VULNERABLE: the state key was read through a bind-mount alias of its directory"; exit 1
fi
echo blocked; exit 0
