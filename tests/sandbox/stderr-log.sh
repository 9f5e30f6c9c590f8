#!/usr/bin/env bash
# Issue 10 item 16: a tool whose stderr is a log file (what `capsule call`
# and warm instances give it) gets a pipe, and capsule writes the log: the
# tool can neither truncate nor rewrite what the log already holds. With
# stderr alone on the log, and with stdout and stderr on the same log (in
# order). As root and as uid 65534. Usage: stderr-log.sh CAPSULE PROBE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
probe=$hostile
work=$(mktemp -d /var/tmp/capsule-stderr.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
bindir=$(dirname "$probe")
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$1" "$2"; }
bad() { fail=$((fail + 1)); printf '  FAIL %-6s %s\n' "$1" "$2"; echo "$3" | head -5 | sed 's/^/         /'; }

for who in "${users[@]}"; do
  log="$work/$who.log"
  echo "an earlier run's line" >"$log"; chmod 666 "$log"
  out=$(as_user "$who" "$capsule" run --allow-read "$bindir" -- "$probe" truncate-stderr 2>>"$log" </dev/null)
  if echo "$out" | grep -q '^BLOCKED' && [ "$(cat "$log")" = "an earlier run's line
tool line" ]; then ok "$who" "stderr log: the tool cannot truncate or rewrite it"
  else bad "$who" "stderr log: tampered with" "$out
log: $(cat "$log")"; fi

  both="$work/$who-both.log"
  echo "an earlier run's line" >"$both"; chmod 666 "$both"
  as_user "$who" "$capsule" run --allow-read "$bindir" -- "$probe" truncate-stderr >>"$both" 2>&1 </dev/null
  if [ "$(cat "$both")" = "an earlier run's line
tool line
BLOCKED" ]; then ok "$who" "stdout and stderr on one log: kept, in order"
  else bad "$who" "stdout and stderr on one log: tampered with" "$(cat "$both")"; fi
done
echo "stderr log: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
