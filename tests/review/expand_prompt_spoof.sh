#!/bin/bash
# Supervised mode (capability expansion): the question put to the operator
# names the asking process by its comm, which the tool sets at will
# (prctl PR_SET_NAME), and by the path it asked for. A comm holding ESC
# (terminal controls) or U+202E (a bidi override that reverses what
# follows) must reach the terminal and the pending-approval line escaped.
# Root and uid 65534. Exits non-zero when a raw ESC or U+202E is printed.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: runs as root and as uid 65534"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 sets the comm"; exit 77; }
abi=$("$capsule" doctor 2>/dev/null | sed -n 's/.*Landlock *yes *ABI \([0-9]*\).*/\1/p')
[ "${abi:-0}" -gt 0 ] || { echo "SKIP: capability expansion needs Landlock"; exit 77; }
rc=0
for who in root nobody; do
  d=$(mktemp -d /var/tmp/capsule-review-spoof.XXXXXX)
  chmod 755 "$d"
  mkdir -p "$d/grant" "$d/out" "$d/state"
  echo secret >"$d/out/read.txt"
  cat >"$d/sup.json" <<JSON
{"version": "0.1.0", "process": {"exec_strategy": "supervised"},
 "filesystem": {"grants": [{"path": "$d/grant", "access": "readwrite"}]}}
JSON
  pre=()
  if [ $who = nobody ]; then
    chown -R 65534:65534 "$d"
    pre=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  fi
  tool='import ctypes, sys
ctypes.CDLL(None).prctl(15, b"\x1b[2K\r\xe2\x80\xaeok", 0, 0, 0)
try:
    open(sys.argv[1]).read()
except OSError as e:
    print("refused", e.errno)'
  "${pre[@]}" env HOME="$d" "$capsule" --state "$d/state" run --approval-timeout 1 \
    --config "$d/sup.json" -- python3 -c "$tool" "$d/out/read.txt" >"$d/out.txt" 2>"$d/err.txt" </dev/null
  echo "$who: $(tr -d '\033' <"$d/err.txt" | head -1 | cut -c1-110)"
  if ! grep -q 'is pending' "$d/err.txt"; then
    echo "FAIL ($who): no question was put"; rc=1
  elif LC_ALL=C grep -q $'\033\|\xe2\x80\xae' "$d/err.txt"; then
    echo "VULNERABLE ($who): the tool's comm reaches the terminal raw"; rc=1
  fi
  rm -rf "$d"
done
exit $rc
