#!/usr/bin/env bash
# The egress spool's recovery (every state open stores what a warm
# server's keeper left in STATE/run/egress) against another user and a
# redirected run directory. Held: uid 65534 cannot put a file in a root
# state's run/egress (the state directory is root's, 0700). Was open, now
# fixed: a state whose run directory is a symlink (here uid 65534's own
# state, pointed at another directory of its own) had its target's
# egress/ read by every open, and each file there that was not a spool
# removed; now the recovery opens neither a symlinked run nor an egress
# directory that is not the user's and private, as the keepers do not.
# Exits 0 when all hold, 1 when one does not, 77 when it cannot run here.
# Usage: spool_other_user.sh CAPSULE
set -u
capsule=$(realpath "$1")
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root (it switches to uid 65534)"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv is not installed"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-r16-spool.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$work/u" "$@"; }
fail=0
# root's state, opened once (made), with its run/egress as a keeper makes it
mkdir -m 700 "$work/root-state"
"$capsule" audit verify --state "$work/root-state" >/dev/null 2>&1 || { echo "SKIP: capsule audit verify cannot open a state here"; exit 77; }
mkdir -p -m 700 "$work/root-state/run/egress"
if nobody sh -c "echo forged > '$work/root-state/run/egress/0123456789abcdef01234567'" 2>/dev/null; then
  echo "FAIL: uid 65534 wrote into a root state's run/egress"
  fail=1
fi
# uid 65534's own state, its run a symlink to another of its directories
mkdir -m 700 "$work/u" && chown 65534:65534 "$work/u"
nobody mkdir -m 700 "$work/u/state" "$work/u/other" "$work/u/other/egress"
nobody sh -c "echo precious > '$work/u/other/egress/notes'"
nobody "$capsule" audit verify --state "$work/u/state" >/dev/null 2>&1 || { echo "SKIP: capsule audit verify cannot open uid 65534's state"; exit 77; }
nobody ln -s "$work/u/other" "$work/u/state/run" 2>/dev/null ||
  { nobody rm -rf "$work/u/state/run" && nobody ln -s "$work/u/other" "$work/u/state/run"; }
nobody "$capsule" audit verify --state "$work/u/state" >/dev/null 2>&1
if [ ! -f "$work/u/other/egress/notes" ]; then
  echo "FAIL: a state open removed a file through its symlinked run directory"
  fail=1
fi
[ "$fail" = 0 ] && echo "held: no write into root's spool directory; no file removed through a symlinked run"
exit "$fail"
