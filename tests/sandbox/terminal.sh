#!/usr/bin/env bash
# Issue 10 item 6: a tool run by capsule does not get the caller's terminal
# unless the caller asks (--tty): no controlling terminal (setsid), so
# /dev/tty cannot be opened and TIOCSTI has no terminal to type into; stdin
# from the terminal is /dev/null; output to the terminal goes through
# capsule, which escapes control sequences. `script` gives capsule a
# pseudo-terminal, as an interactive user has. As root and as uid 65534.
# Usage: terminal.sh CAPSULE PROBE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
probe=$hostile
command -v script >/dev/null || { echo "SKIP: no script(1) to make a terminal"; exit 77; }
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$1" "$2"; }
bad() { fail=$((fail + 1)); printf '  FAIL %-6s %s\n' "$1" "$2"; echo "$3" | head -5 | sed 's/^/         /'; }
bindir=$(dirname "$probe")

for who in "${users[@]}"; do
  # keystrokes waiting on the terminal: the tool must not read them
  out=$(printf 'typed-secret\n' | as_user "$who" script -qec "$capsule run --allow-read $bindir -- $probe tty" /dev/null 2>&1)
  if echo "$out" | grep -q '^BLOCKED' && ! echo "$out" | grep -q ESCAPED; then
    ok "$who" "no terminal inside: /dev/tty, TIOCSTI, isatty and reading keystrokes all fail"
  else bad "$who" "the tool reached the caller's terminal" "$out"; fi
  if ! printf '%s' "$out" | grep -q $'\033' && ! printf '%s' "$out" | grep -q $'\xc2\x9b' &&
     ! printf '%s' "$out" | grep -q $'\xe2\x80\xae' &&
     echo "$out" | grep -qF 'title:\x1b]0;capsule-probe\x07 clear:\x1b[2J csi:\u{009b}2J bidi:\u{202e}x'; then
    ok "$who" "escape sequences reach the terminal escaped"
  else bad "$who" "raw escape sequences reached the terminal" "$(printf '%s' "$out" | od -c | head -5)"; fi
  # --tty keeps the interactive behaviour: the terminal is the tool's
  out=$(as_user "$who" script -qec "$capsule run --tty -- /bin/sh -c 'test -t 0 && test -t 1 && test -c /dev/tty && stty size >/dev/null && echo on-a-tty'" /dev/null </dev/null 2>&1)
  if echo "$out" | grep -q on-a-tty; then ok "$who" "--tty gives the tool the terminal"
  else bad "$who" "--tty did not give the terminal" "$out"; fi
done
echo "terminal: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
