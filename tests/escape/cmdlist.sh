#!/usr/bin/env bash
# Command lists (process.allowed_commands / blocked_commands) against the
# ways around them, as root and unprivileged: the dynamic loader running a
# copy placed in /tmp or in a writable grant, the copy run directly, and a
# memfd run by execveat(AT_EMPTY_PATH) or through /proc/self/fd. Each must
# be refused (a sealed, non-executable memfd can still be mapped by the
# loader, as anonymous memory can be made executable: docs/sandbox.md says
# a command list is no boundary against a hostile tool); the same
# loader trick without a command list runs (the test can fail), and
# /tmp stays writable. Usage: cmdlist.sh CAPSULE CMDLIST
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
cmdlist=$hostile
work=$(mktemp -d /var/tmp/capsule-cmdlist.XXXXXX)
chmod 755 "$work"
mkdir -p "$work/rw"
chmod 777 "$work/rw"
bindir=$(dirname "$cmdlist")
pass=0 fail=0
trap 'rm -rf "$work"' EXIT

# expect WHO NAME WANT-STATUS WANT-REGEX CAPSULE-ARGS... -- CMD...
expect() {
  local who=$1 name=$2 want=$3 regex=$4; shift 4
  local out status
  out=$(cd "$work" && as_user "$who" timeout 60 "$capsule" run --allow-read "$bindir" "$@" 2>&1 </dev/null)
  status=$?
  if [ "$status" = "$want" ] && echo "$out" | grep -qE "$regex"; then
    pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$who" "$name"
  else
    fail=$((fail + 1)); printf '  FAIL %-6s %s (exit %s, want %s)\n' "$who" "$name" "$status" "$want"
    echo "$out" | head -5 | sed 's/^/         /'
  fi
}

for list in allowed blocked; do
  cat >"$work/$list.json" <<JSON
{"version": "0.1.0",
 "filesystem": {"grants": [{"path": "$bindir", "access": "read"}, {"path": "$work/rw", "access": "readwrite"}]},
 "process": {"${list}_commands": ["cat"]}}
JSON
done

suite() {
  local u=$1 c=$cmdlist
  for list in allowed blocked; do
    local cfg=(--config "$work/$list.json")
    expect "$u" "$list: loader + copy in /tmp" 0 '^BLOCKED' "${cfg[@]}" -- "$c" loader-copy /usr/bin/true /tmp
    expect "$u" "$list: loader + copy in a rw grant" 0 '^BLOCKED' "${cfg[@]}" -- "$c" loader-copy /usr/bin/true "$work/rw"
    expect "$u" "$list: loader + copy in /dev/shm" 0 '^BLOCKED' "${cfg[@]}" -- "$c" loader-copy /usr/bin/true /dev/shm
    expect "$u" "$list: copy in /tmp run directly" 0 '^BLOCKED' "${cfg[@]}" -- "$c" copy /usr/bin/true /tmp
    expect "$u" "$list: memfd + execveat" 0 '^BLOCKED' "${cfg[@]}" -- "$c" memfd-execveat /usr/bin/true
    expect "$u" "$list: memfd via /proc/self/fd" 0 '^BLOCKED' "${cfg[@]}" -- "$c" memfd-proc /usr/bin/true
    expect "$u" "$list: /tmp stays writable" 0 '^ok$' "${cfg[@]}" -- /bin/sh -c 'echo x >/tmp/f && echo ok'
  done
  # control: without a command list the loader trick runs (not a boundary then)
  expect "$u" "no list: loader + copy runs" 1 '^ESCAPED' --allow-rw "$work/rw" -- "$c" loader-copy /usr/bin/true /tmp
}

for who in "${users[@]}"; do
  echo "as $who:"
  suite "$who"
done
echo "command-list suite: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
