#!/bin/bash
# Finding (robustness / DoS): every state directory a user's capsule ever
# opened is appended to DEFAULT/state-dirs and masked in every later run
# that grants a directory containing it, failing closed when the mask
# cannot be placed. A state directory under /tmp exists on the host but not
# in the sandbox (its /tmp is private), so from then on every run of that
# user granting / (Covenant `filesystem = "host"`, --allow-read /) fails:
# "cannot mask /tmp/... (capsule's state)". Seen on this machine for root,
# after another suite's state in /tmp/ids.*. Exits non-zero when the run
# fails for that reason.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to act as uid 65534"; exit 77; }
H=$(mktemp -d /var/tmp/capsule-review-home.XXXXXX); T=$(mktemp -d /tmp/capsule-review-st.XXXXXX)
trap 'rm -rf "$H" "$T"' EXIT
chown 65534:65534 "$H" "$T"
as_op() { (cd /tmp && setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$H" "$@"); }
as_op "$capsule" run --allow-read / -- /bin/true || { echo "setup: the control run failed"; exit 2; }
as_op "$capsule" cred list --state "$T/state" >/dev/null 2>&1   # once, any verb
out=$(as_op "$capsule" run --allow-read / -- /bin/true 2>&1); rc=$?
echo "after one use of a state in /tmp: exit $rc: $out"
if [ $rc != 0 ] && grep -q "cannot mask" <<<"$out"; then
  echo "VULNERABLE: every run granting / now fails"; exit 1
fi
echo blocked; exit 0
