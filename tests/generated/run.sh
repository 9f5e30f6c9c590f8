#!/usr/bin/env bash
# Generated files match their committed generators: regenerate each one and
# compare it with what is committed. Usage: run.sh SOURCE_ROOT
set -euo pipefail
root=$1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
python3 "$root/scripts/gen-metaschema.py" "$root/src/jsonschema/metaschemas" >"$out"
if ! cmp -s "$out" "$root/src/jsonschema/metaschema.c"; then
  echo "src/jsonschema/metaschema.c differs from what scripts/gen-metaschema.py makes:" >&2
  diff "$out" "$root/src/jsonschema/metaschema.c" | head -20 >&2
  echo "fix: python3 scripts/gen-metaschema.py > src/jsonschema/metaschema.c" >&2
  exit 1
fi
echo "metaschema.c: regenerated, identical"
