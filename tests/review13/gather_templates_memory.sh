#!/usr/bin/env bash
# Review 13 (src/front/mcp_template.c): each template of the last
# resources/templates/list was compiled to a POSIX regex, held by the
# session, up to 4096 of them of 1 KiB each; glibc's compiled regex grows
# with the square of its expressions (1.8 MiB for 255), so a hostile
# server's 3 MB list (3000 templates of 255 "{/a}", tests/review13/lists/
# server.py's heavy mode) made one `capsule mcp` session hold 1.8 GB
# (each serve session its own). Now a template past 256 bytes or 16
# expressions matches nothing, and a server's templates past 256 are not
# compiled: the session stays small, and the other server's template
# still routes its URI. As root.
# Usage: gather_templates_memory.sh CAPSULE
. "$(dirname "$0")/lib.sh" "$1" review13-templates
modes heavy benign
out=$(mcp_drive '{"method":"resources/templates/list","params":{}}' \
  '{"method":"resources/read","params":{"uri":"zzz://doc/7"}}')
hwm=$(awk '$1 == "hwm" {print $2}' <<<"$out")
grep -q '"id":1,"result"' <<<"$out" || { echo "FAIL: no list: $(head -c 300 <<<"$out")"; exit 1; }
grep -q '"id":2,"result".*from zzz' <<<"$out" || { echo "FAIL: zzz://doc/7 not read from zzz"; exit 1; }
# a session is some tens of MB (more under ASan); the compiled list was 1.8 GB
[ -n "$hwm" ] && [ "$hwm" -lt 600000 ] ||
  { echo "FAIL: capsule mcp's peak memory ${hwm:-?} KB after a hostile template list"; exit 1; }
echo "PASS: peak ${hwm} KB"
