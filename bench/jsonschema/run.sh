#!/bin/sh
# JSON Schema validation benchmark: capsule vs ajv on the same schemas and
# instances, validation only (both sides parse the instances beforehand).
# usage: [ROUNDS=3] bench/jsonschema/run.sh [SECONDS_PER_CASE]   (default 1)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
secs=${1:-1}
modules=${CAPSULE_NODE_MODULES:-$root/tests/node_modules}
export CAPSULE_NODE_MODULES="$modules"
[ -d "$modules/ajv" ] || { echo "ajv missing: run scripts/deps.sh test (or cd tests && npm install)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc=${CC:-cc}
# the library sources the validator needs, built optimised like a release
$cc -std=c17 -O2 -DNDEBUG -D_GNU_SOURCE -I"$root/src" -o "$work/bench" "$here/bench.c" \
  "$root"/src/jsonschema/*.c "$root/src/core/buf.c" "$root/src/core/diag.c" \
  "$root/src/core/error.c" "$root/src/core/json.c" "$root/src/core/node.c" \
  "$root/src/core/text.c" "$root/src/core/escape.c" -lpcre2-8 -lm
node "$here/cases.js" > "$work/cases.json"
# alternate the two sides and keep each case's best of $rounds runs: shared
# and virtual machines are noisy, and the best run is the least disturbed one
rounds=${ROUNDS:-3}
: > "$work/capsule.all"
: > "$work/ajv.all"
i=0
while [ "$i" -lt "$rounds" ]; do
  "$work/bench" "$work/cases.json" "$secs" >> "$work/capsule.all"
  node "$here/bench.js" "$work/cases.json" "$secs" >> "$work/ajv.all"
  i=$((i + 1))
done
best() { awk -F'\t' '{ if (!($1 in a) || $2 > a[$1]) a[$1] = $2; if (NF > 2 && $3 > b[$1]) b[$1] = $3;
  if (!($1 in o)) o[$1] = ++n; k[n] = $1 }
  END { for (i = 1; i <= n; i++) { x = k[i]; if (x in b) print x "\t" a[x] "\t" b[x]; else print x "\t" a[x] } }' "$1"; }
best "$work/capsule.all" > "$work/capsule.tsv"
best "$work/ajv.all" > "$work/ajv.tsv"
echo "JSON Schema validation, instances/s (higher is better); $(node --version), ajv $(node -p "require('$modules/ajv/package.json').version")"
echo "best of $rounds rounds of ${secs}s per case; capsule: first error collected (like ajv's default);"
echo "capsule verdict: no error objects (cap_js_validate with errs = NULL)"
awk -F'\t' '
  NR == FNR { first[$1] = $2; verdict[$1] = $3; order[++n] = $1; next }
  { ajv[$1] = $2 }
  END {
    printf "| %-34s | %12s | %12s | %7s | %14s |\n", "case", "ajv", "capsule", "ratio", "capsule verdict"
    printf "|%s|%s|%s|%s|%s|\n", "------------------------------------", "--------------", "--------------", "---------", "----------------"
    logsum = 0
    for (i = 1; i <= n; i++) {
      k = order[i]; r = first[k] / ajv[k]; logsum += log(r)
      printf "| %-34s | %12.0f | %12.0f | %6.2fx | %15.0f |\n", k, ajv[k], first[k], r, verdict[k]
    }
    printf "geometric mean ratio capsule/ajv: %.2fx over %d cases\n", exp(logsum / n), n
  }' "$work/capsule.tsv" "$work/ajv.tsv"
