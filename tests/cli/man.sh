#!/usr/bin/env bash
# The man page generated from docs/cli.md (scripts/gen-man.py): it is
# produced, renders without a warning (groff -ww, man --warnings), holds
# every verb and every section of docs/cli.md, and `make install` puts it
# (and the zsh completion) under PREFIX. Usage: man.sh CAPSULE CAPSULE.1
set -u
capsule=$1
page=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "  ok   $1"; }
bad() { fail=$((fail + 1)); echo "  FAIL $1"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ -s "$page" ] && head -1 "$page" | grep -q '^\.TH CAPSULE 1 '; then ok man-generated
else bad man-generated; fi
if command -v groff >/dev/null; then
  w=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
  if [ -z "$w" ]; then ok man-groff-no-warnings; else bad man-groff-no-warnings; echo "$w" | head -5; fi
fi
if command -v man >/dev/null; then
  w=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >"$work/page.txt")
  if [ -z "$w" ] && grep -q "capsule - run AI-agent tools" "$work/page.txt"; then ok man-l-renders
  else bad man-l-renders; echo "$w" | head -5; fi
fi
# every verb (those the completion offers, which tests/cli/run.sh ties to
# --help) is an entry of the verb list
tags=$(awk 'prev == ".TP" { print } { prev = $0 }' "$page")
missing=""
for v in $(sed -n 's/^ *local verbs="\(.*\)"$/\1/p' "$root/completions/capsule.bash"); do
  [ "$v" = help ] && continue
  grep -qE "(^|, )\\\\fB$v( |\\\\fR)" <<<"$tags" || missing+=" $v"
done
if [ -z "$missing" ]; then ok man-has-every-verb; else bad "man-has-every-verb (missing:$missing)"; fi
# every section of docs/cli.md is a section of the page
n_md=$(grep -c '^## ' "$root/docs/cli.md")
n_man=$(grep -c '^\.SH ' "$page")
if [ "$n_man" = $((n_md + 4)) ]; then ok man-has-every-section # + NAME, SYNOPSIS, DESCRIPTION, SEE ALSO
else bad "man-has-every-section ($n_man .SH for $n_md sections)"; fi
# regenerated from the docs as they are now: the page is not stale
if python3 "$root/scripts/gen-man.py" "$root/docs/cli.md" "$work/fresh.1" "$("$capsule" --version | cut -d' ' -f2)" &&
  cmp -s "$work/fresh.1" "$page"; then ok man-up-to-date; else bad man-up-to-date; fi

builddir=$(cd "$(dirname "$capsule")/../.." && pwd)
if make -s -C "$root" install BUILD="$builddir" PREFIX=/opt/capsule DESTDIR="$work/pkg" >"$work/install.log" 2>&1 &&
  cmp -s "$work/pkg/opt/capsule/share/man/man1/capsule.1" "$page" &&
  cmp -s "$work/pkg/opt/capsule/share/zsh/site-functions/_capsule" "$root/completions/_capsule"; then
  ok make-install-man-and-zsh
else bad make-install-man-and-zsh; tail -5 "$work/install.log"; fi
echo "man page tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
