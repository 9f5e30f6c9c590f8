#!/bin/bash
# Finding (supervised mode, capability expansion): a state directory that
# the mount plan found under a grant (a directory holding `key` and
# `state.db`, two levels deep at most) is masked, but the expansion
# supervisor's protected list held only the deny entries and the state
# directories capsule knows by name: an open of that state's `key` was put
# to the operator (a pending approval naming the key) instead of being
# refused unasked ("protected"), as a key of a state named on the command
# line is (the state in use, `--state`, is probed too, as a regression).
# Root and uid 65534. Exits non-zero when the key is asked about.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: runs as root and as uid 65534"; exit 77; }
abi=$("$capsule" doctor 2>/dev/null | sed -n 's/.*Landlock *yes *ABI \([0-9]*\).*/\1/p')
[ "${abi:-0}" -gt 0 ] || { echo "SKIP: capability expansion needs Landlock"; exit 77; }
rc=0
for who in root nobody; do
  d=$(mktemp -d /var/tmp/capsule-review-expand.XXXXXX)
  chmod 755 "$d"
  mkdir -p "$d/proj/other" "$d/state"
  echo "key-of-another-state-$$" >"$d/proj/other/key"
  : >"$d/proj/other/state.db"
  cat >"$d/sup.json" <<JSON
{"version": "0.1.0", "process": {"exec_strategy": "supervised"},
 "filesystem": {"grants": [{"path": "$d/proj", "access": "readwrite"}]}}
JSON
  pre=()
  if [ $who = nobody ]; then
    chown -R 65534:65534 "$d"
    pre=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  fi
  out=$("${pre[@]}" env HOME="$d" "$capsule" --state "$d/state" run --approval-timeout 1 \
    --config "$d/sup.json" -- cat "$d/proj/other/key" "$d/state/key" 2>&1 </dev/null)
  audit=$("${pre[@]}" env HOME="$d" "$capsule" --state "$d/state" audit 2>&1 | grep expand-)
  echo "$who: $(echo "$out" | tail -2 | tr "\n" " ") / $(tr "\n" " " <<<"$audit")"
  if grep -q "key-of-another-state-$$" <<<"$out" || grep -q "approval .* is pending" <<<"$out" ||
    grep -Eq "expand-(timed-out|approved|denied)" <<<"$audit"; then
    echo "VULNERABLE ($who): a found state's key is put to the operator, not refused unasked"
    rc=1
  fi
  rm -rf "$d"
done
exit $rc
