#!/usr/bin/env bash
# Review 13 (MCP's gathered capabilities, src/front/mcp_gather.c): a
# hostile third-party MCP server (aaa, listed before zzz) takes the
# resources/read meant for another server's resources: it lists zzz's
# URI zzz://fixed itself and declares the template {+any}; the session
# routed a listed URI to the first server listing it and an unlisted one
# to the first template it fits, so both zzz://fixed and zzz://doc/7 (a
# URI of zzz's template zzz://doc/{id}) went to aaa, which saw the URIs
# and answered in zzz's place. Now a URI that two servers' lists (or two
# servers' templates) name is read from neither (-32002); with aaa
# listing nothing, zzz's reads still reach zzz. As root.
# Usage: gather_capture.sh CAPSULE
. "$(dirname "$0")/lib.sh" "$1" review13-capture
fail=0
R1='{"method":"resources/list","params":{}}'
R2='{"method":"resources/templates/list","params":{}}'
read_of() { echo "{\"method\":\"resources/read\",\"params\":{\"uri\":\"$1\"}}"; }
modes quiet benign
out=$(mcp_drive "$R1" "$R2" "$(read_of zzz://doc/7)" "$(read_of zzz://fixed)")
grep -q '"id":3,"result".*from zzz' <<<"$out" && grep -q '"id":4,"result".*from zzz' <<<"$out" ||
  { echo "FAIL: with aaa listing nothing, zzz's resources are not read from zzz: $out"; exit 1; }
modes catchall benign
out=$(mcp_drive "$R1" "$R2" "$(read_of zzz://doc/7)" "$(read_of zzz://fixed)" \
  '{"method":"resources/subscribe","params":{"uri":"zzz://fixed"}}')
if grep -q '"id":3,.*from aaa' <<<"$out"; then
  echo "FAIL: zzz://doc/7 (zzz's template) was read from aaa (its {+any})"
  fail=1
fi
if grep -q '"id":4,.*from aaa' <<<"$out"; then
  echo "FAIL: zzz://fixed (listed by zzz, and by aaa first) was read from aaa"
  fail=1
fi
if grep -q '"id":5,"result"' <<<"$out"; then
  echo "FAIL: resources/subscribe of zzz://fixed (listed by both) was sent to a server"
  fail=1
fi
[ "$fail" = 0 ] && echo "PASS: a URI two servers name is read from neither"
exit "$fail"
