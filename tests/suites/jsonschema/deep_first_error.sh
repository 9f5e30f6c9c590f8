#!/usr/bin/env bash
# Regression: in first-error mode a failure deep inside a recursive schema
# must be found within the evaluation budget. Each level's quiet property
# lookup once re-ran below every level on the way down (quadratic), so a
# failure 240 levels deep, with a 1000-item array per level, exhausted the
# budget and reported "the evaluation budget ran out" instead of the error.
# Usage: deep_first_error.sh CAPSULE
set -euo pipefail
capsule=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo '{"$defs":{"n":{"properties":{"b":{"items":{"type":"integer"}},"a":{"$ref":"#/$defs/n"},"c":{"type":"integer"}}}},"$ref":"#/$defs/n"}' >"$work/s.json"
items=$(seq -s, 0 999)
{
  for _ in $(seq 240); do printf '{"x":1,"y":2,"z":3,"b":[%s],"a":' "$items"; done
  printf '{"x":1,"y":2,"z":3,"b":[%s],"c":"bad"}' "$items"
  for _ in $(seq 240); do printf '}'; done
} >"$work/i.json"
out=$("$capsule" validate --first --schema "$work/s.json" "$work/i.json" 2>&1) && { echo "FAIL: accepted"; exit 1; }
if echo "$out" | grep -q '/c: expected integer, got string (keyword /$defs/n/properties/c/type)'; then
  echo "deep first error: 1 passed, 0 failed"
else
  echo "FAIL: $(echo "$out" | cut -c1-200 | sed 's|\(/a\)\{5,\}|/a/.../a|')"
  exit 1
fi
