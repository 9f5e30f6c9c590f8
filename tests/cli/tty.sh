#!/usr/bin/env bash
# `capsule run --tty` and the terminal's window size (docs/cli.md): the
# tool gets the caller's terminal itself (no relay), so TIOCGWINSZ answers
# the caller's size and a resize reaches the tool as SIGWINCH (it stays in
# the terminal's foreground process group). Without --tty the tool has no
# terminal at all. In a pseudo-terminal made by script(1); as root and as
# uid 65534. Usage: tty.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
command -v script >/dev/null || { echo "SKIP: script(1) is not installed"; exit 77; }
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$1" "$2"; }
bad() { fail=$((fail + 1)); printf '  FAIL %-6s %s\n' "$1" "$2"; }
work=$(mktemp -d /var/tmp/capsule-tty.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT

# In the pseudo-terminal: set a size, start the tool, wait until it is
# ready (a file it makes), resize, and let the tool report what it sees.
cat >"$work/resize.sh" <<'EOF2'
capsule=$1 dir=$2
stty rows 33 cols 101
"$capsule" run --tty --allow-rw "$dir" -- sh -c '
  stty size </dev/tty
  trap "stty size </dev/tty; exit 0" WINCH
  touch "$0/ready"
  while :; do sleep 0.1; done' "$dir" &
for _ in $(seq 400); do [ -e "$dir/ready" ] && break; sleep 0.05; done
stty rows 40 cols 120
wait
EOF2
for who in "${users[@]}"; do
  d=$work/$who
  mkdir -p "$d" && [ "$who" = root ] || chown 65534:65534 "$d"
  out=$(cd "$d" && as_user "$who" timeout 60 script -qec "sh $work/resize.sh $capsule $d" /dev/null | tr -d '\r')
  if [ "$(sed -n 1p <<<"$out")" = "33 101" ]; then ok "$who" tty-window-size
  else bad "$who" "tty-window-size ($out)"; fi
  if [ "$(sed -n 2p <<<"$out")" = "40 120" ]; then ok "$who" tty-sigwinch-resize
  else bad "$who" "tty-sigwinch-resize ($out)"; fi
  # without --tty: no terminal, so no size to read (stdin is /dev/null)
  out=$(cd "$d" && as_user "$who" timeout 60 script -qec "$capsule run -- stty size" /dev/null | tr -d '\r')
  if grep -q "Inappropriate ioctl\|not a tty" <<<"$out"; then ok "$who" no-tty-no-terminal
  else bad "$who" "no-tty-no-terminal ($out)"; fi
done
echo "tty tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
