#!/usr/bin/env bash
# The zsh completion (completions/_capsule): it parses (`zsh -n`), loads as
# a completion function under compinit, and offers every verb of
# `capsule --help` and every option each verb's --help names.
# Skipped (77) when zsh is not installed. Usage: zsh.sh CAPSULE
set -u
capsule=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
comp=$root/completions/_capsule
command -v zsh >/dev/null || { echo "SKIP: zsh is not installed"; exit 77; }
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "  ok   $1"; }
bad() { fail=$((fail + 1)); echo "  FAIL $1"; }

if out=$(zsh -n "$comp" 2>&1); then ok zsh-parses; else bad zsh-parses; echo "$out"; fi
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
out=$(HOME=$home ZDOTDIR=$home zsh -fc "fpath=(${comp%/*} \$fpath); autoload -Uz compinit; compinit -u -d $home/dump; 
  [[ \${_comps[capsule]} == _capsule ]] && autoload +X _capsule && echo loaded" 2>&1)
if [ "$out" = loaded ]; then ok zsh-compinit-binds-capsule; else bad "zsh-compinit-binds-capsule ($out)"; fi

# the verbs: those the bash completion offers (tests/cli/run.sh ties
# those to each verb's --help)
verbs=$(sed -n 's/^ *local verbs="\(.*\)"$/\1/p' "$root/completions/capsule.bash")
missing=""
for v in $verbs; do grep -qE "^    '$v:" "$comp" || missing+=" $v"; done
if [ -n "$verbs" ] && [ -z "$missing" ]; then ok zsh-offers-every-verb; else bad "zsh-offers-every-verb (missing:$missing)"; fi
# block VERB: the lines of _capsule that complete VERB's arguments
block() { sed -n "/^    $1)/,/;;\$/p" "$comp"; [ "$1" = run ] && sed -n '/^      run_opts=(/,/^      )/p' "$comp"; }
for v in check show validate run list call policy cred approvals audit ps stop; do
  missing=""
  # the options of its help's option list (not those its prose mentions)
  for o in $("$capsule" "$v" --help | grep -oE -- '^ +(-[a-zA-Z], )?--[a-z][a-z-]+' |
             grep -oE -- '--[a-z-]+' | sort -u); do
    if block "$v" | grep -q '\$common' && grep -qF -- "$o[" <(sed -n '/^  common=(/,/^  )/p' "$comp"); then continue; fi
    block "$v" | grep -qE -- "$o([^a-z-]|\$)" || missing+=" $o"
  done
  if [ -z "$missing" ]; then ok "zsh-covers-$v-help"; else bad "zsh-covers-$v-help (missing:$missing)"; fi
done
echo "zsh completion tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
