#!/usr/bin/env bash
# `capsule show` output for every example and every valid check case must
# validate against nono's published capability-manifest schema and against
# capsule's own schema (docs/capsule-manifest.schema.json), checked by ajv,
# an independent validator. Usage: run.sh CAPSULE
set -u
capsule=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
nono_schema="$root/../shared/reference/nono-capability-manifest.schema.json"
if [ ! -f "$nono_schema" ]; then
  echo "SKIP: $nono_schema is absent (needs ../shared)"; exit 77
fi
if [ ! -d "$root/tests/node_modules/ajv" ] || ! command -v node >/dev/null; then
  echo "SKIP: ajv is not installed; run scripts/deps.sh test"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
n=0
targets=()
for d in "$root"/examples/*/; do targets+=("$d"); done
while IFS= read -r expected; do
  head -n1 "$expected" | grep -qx 'exit 0' || continue
  targets+=("$(dirname "$expected")")
done < <(find "$root/tests/check" -mindepth 3 -name expected | sort)
for t in "${targets[@]}"; do
  args=.
  [ -f "$t/args" ] && args=$(head -n1 "$t/args")
  # shellcheck disable=SC2086
  files=$(cd "$t" && "$capsule" check -q $args >/dev/null 2>&1 && find $args -name 'agent.toml' -path '*agents/*' | sort)
  [ -n "$files" ] || files=$args
  for f in $files; do
    n=$((n + 1))
    if ! (cd "$t" && "$capsule" show "$f" >"$work/$n.json" 2>"$work/$n.err"); then
      echo "FAIL: capsule show $t/$f"; cat "$work/$n.err"; exit 1
    fi
    echo "$t/$f" >"$work/$n.name"
  done
done
node "$here/validate.mjs" "$nono_schema" "$root/docs/capsule-manifest.schema.json" "$work"
