#!/usr/bin/env bash
# A manifest grant written with "~" is the caller's $HOME in both layers:
# the mount tree binds it and Landlock allows it (Landlock once took "~/d"
# literally and refused what the mount showed). As root and as uid 65534.
# Usage: tilde.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
work=$(mktemp -d /var/tmp/capsule-tilde.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home/d" "$work/cap"
echo "granted through ~" >"$work/home/d/f"
cat >"$work/cap/capability.json" <<'JSON'
{"version": "0.1.0", "filesystem": {"grants": [{"path": "~/d", "access": "read", "type": "directory"}]}}
JSON
chmod -R a+rX "$work"
pass=0 fail=0
for who in "${users[@]}"; do
  out=$(cd / && as_user "$who" env HOME="$work/home" "$capsule" run --config "$work/cap" -- /bin/cat "$work/home/d/f" 2>&1 </dev/null)
  if [ "$out" = "granted through ~" ]; then
    pass=$((pass + 1)); printf '  ok   %-6s a ~/ grant is readable\n' "$who"
  else
    fail=$((fail + 1)); printf '  FAIL %-6s a ~/ grant is not readable: %s\n' "$who" "$out"
  fi
done
echo "tilde grants: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
