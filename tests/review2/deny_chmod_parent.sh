#!/bin/bash
# Finding (unprivileged capsule): a deny mask is left out when the caller
# cannot resolve the denied path ("a path the sandbox's own uid cannot reach
# needs no mask: the tool has that uid and fewer rights", docs/sandbox.md;
# src/sandbox/mount_plan.c plan_mask). But the tool has the caller's uid
# and owns the directories of its read-write grant, so it can make the path
# unreachable itself and reachable again: run 1 does `chmod 000` on the
# denied file's parent (the mask's pinned ancestors stop a rename, not a
# chmod); in run 2 capsule cannot resolve the deny path, places no mask,
# and the tool does `chmod 755` and reads the denied file.
# Exits 1 when the denied file is read, 0 when blocked, 77 when it cannot run.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to act as uid 65534"; exit 77; }
setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" ||
  { echo "SKIP: uid 65534 cannot run $capsule"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review2-ws.XXXXXX); trap 'chmod -R u+rwx "$W" 2>/dev/null; rm -rf "$W"' EXIT
mkdir -p "$W/proj/conf"; echo "DENIED-SECRET-$$" >"$W/proj/conf/secret.env"
chown -R 65534:65534 "$W"; chmod 755 "$W"
as_op() { (cd /tmp && setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME=/tmp "$@"); }
run() { as_op "$capsule" run --allow-rw "$W/proj" --deny "$W/proj/conf/secret.env" -- /bin/sh -c "$1" 2>&1; }
echo "control: $(run "cat $W/proj/conf/secret.env")"
echo "run 1: $(run "chmod 000 $W/proj/conf && echo chmod 000 conf")"
out=$(run "chmod 755 $W/proj/conf && cat $W/proj/conf/secret.env")
chmod 755 "$W/proj/conf"
echo "run 2: $out"
if grep -q "DENIED-SECRET-$$" <<<"$out"; then
  echo "VULNERABLE: the denied file was read"; exit 1
fi
echo blocked; exit 0
