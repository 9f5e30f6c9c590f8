#!/usr/bin/env bash
# Malformed input of every kind, in every format: empty, binary garbage, a
# 10 MB file, deep nesting, invalid UTF-8, duplicate keys. Each must give
# exit status 1 and well-formed diagnostics (FILE:LINE:COL: error: ...)
# mentioning the problem, never a crash. Usage: run.sh CAPSULE
set -u
capsule=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0

# case NAME FILE PATTERN: FILE already written under $work/NAME/
run_case() {
  local name=$1 file=$2 pattern=$3
  local out status
  out=$(cd "$work/$name" && "$capsule" check "$file" 2>&1 </dev/null)
  status=$?
  local bad=""
  [ "$status" -eq 1 ] || bad="exit $status (want 1)"
  [ -n "$bad" ] || echo "$out" | grep -qiE "$pattern" || bad="no message matching /$pattern/"
  if [ -z "$bad" ]; then
    while IFS= read -r line; do
      [[ "$line" =~ ^[^:]+(:[0-9]+:[0-9]+)?:\ (error|warning):\  ]] ||
        [[ "$line" =~ ^capsule:\ [0-9]+\ more ]] || bad="malformed line: $line"
    done <<<"$out"
  fi
  if [ -z "$bad" ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL $name: $bad"
    echo "$out" | head -5 | sed 's/^/    /'
  fi
}

gen() { # gen NAME FILE PERL-PROGRAM
  mkdir -p "$work/$1"
  perl -e "$3" >"$work/$1/$2"
}

gen_escaped() { # gen_escaped NAME FILE TEXT-WITH-\xHH-AND-\n-ESCAPES
  mkdir -p "$work/$1"
  V=$3 perl -e '$_ = $ENV{V}; s/\\x([0-9a-f]{2})/chr(hex($1))/ge; s/\\n/\n/g; print' >"$work/$1/$2"
}

declare -A files=([selu]=manifest.yaml [covenant]=agent.toml [talos]=manifest.json [nono]=capability.json)
declare -A open_nest=([selu]='a: ' [covenant]='a = ' [talos]='{"a": ' [nono]='{"a": ')
declare -A dup=(
  [selu]='id: a\nid: b\n'
  [covenant]='[agent]\nid = "a"\nid = "b"\n'
  [talos]='{"id": "a", "id": "b"}'
  [nono]='{"version": "0.1.0", "version": "0.1.0"}')
declare -A badutf=(
  [selu]='id: "\xff\xfe"\n'
  [covenant]='[agent]\nid = "\xff"\n'
  [talos]='{"id": "\xc3\x28"}'
  [nono]='{"version": "\xed\xa0\x80"}')

for fmt in selu covenant talos nono; do
  f=${files[$fmt]}
  gen "$fmt-empty" "$f" ''
  run_case "$fmt-empty" "$f" 'empty'
  gen "$fmt-garbage" "$f" 'srand(42); print map { chr(int(rand(256))) } 1..4096'
  run_case "$fmt-garbage" "$f" '.'
  gen "$fmt-10mb" "$f" 'print "x" x (10 * 1024 * 1024)'
  run_case "$fmt-10mb" "$f" 'bytes'
  gen "$fmt-deep" "$f" "print '${open_nest[$fmt]}' . ('[' x 100000)"
  run_case "$fmt-deep" "$f" 'nest|deep|depth'
  gen_escaped "$fmt-utf8" "$f" "${badutf[$fmt]}"
  run_case "$fmt-utf8" "$f" 'UTF-8'
  gen_escaped "$fmt-duplicate" "$f" "${dup[$fmt]}"
  run_case "$fmt-duplicate" "$f" 'duplicate|already'
done
echo "malformed input: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
