#!/usr/bin/env bash
# Runs the manifest check cases: every directory under tests/check/<format>/
# holding an `expected` file. Inside the case directory it runs
# `capsule check ARGS` (ARGS from the `args` file, default `.`) and compares
# the exit status and the combined output with `expected`, whose first line
# is `exit N`. Usage: run.sh CAPSULE [FILTER]
set -u
capsule=$(realpath "$1")
filter=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
pass=0 fail=0
failed=()
while IFS= read -r expected; do
  dir=$(dirname "$expected")
  name=${dir#"$here"/}
  [[ -n "$filter" && "$name" != *"$filter"* ]] && continue
  args=.
  [ -f "$dir/args" ] && args=$(head -n1 "$dir/args")
  want_status=$(head -n1 "$expected" | sed -n 's/^exit \([0-9]*\)$/\1/p')
  if [ -z "$want_status" ]; then
    echo "MALFORMED $name: first line of expected must be 'exit N'"
    fail=$((fail + 1)); failed+=("$name"); continue
  fi
  # shellcheck disable=SC2086
  got=$(cd "$dir" && "$capsule" check $args 2>&1 </dev/null)
  status=$?
  want=$(tail -n +2 "$expected")
  if [ "$status" = "$want_status" ] && [ "$got" = "$want" ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); failed+=("$name")
    echo "FAIL $name (exit $status, want $want_status)"
    diff <(echo "$want") <(echo "$got") | sed 's/^/    /' | head -20
  fi
done < <(find "$here" -mindepth 3 -name expected -type f | sort)
echo "check cases: $pass passed, $fail failed"
[ $((pass + fail)) -gt 0 ] || { echo "no check cases found"; exit 1; }
[ "$fail" -eq 0 ]
