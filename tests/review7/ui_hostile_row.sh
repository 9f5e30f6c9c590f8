#!/usr/bin/env bash
# Finding (the dashboard, src/front/ui_pages.c approval_row, ui_time): a
# pending approval's id went onto the page as it is in the database (an
# element id, a <code>, a form's hidden value) and its times through
# (its times are int64 milliseconds, always within gmtime's range). The state is a database others may
# write (a PostgreSQL shared by gateways, an edited row): a row whose id
# is markup (8 characters: `"><form>`, `<b>x</b>`) put its own elements
# on the operator's page, inside the approve form's hidden field (the CSP
# keeps scripts out, not a broken-out attribute or a forged element).
# Exits 1 while the row's markup reaches the page, 0 blocked, 77 cannot run.
. "$(dirname "$0")/ui_lib.sh"
command -v sqlite3 >/dev/null || { echo "SKIP: no sqlite3"; exit 77; }
"$capsule" call --caps "$caps" --state "$state" asker dispatch '{"a":1}' </dev/null >/dev/null 2>&1
db=$(ls "$state"/*.db 2>/dev/null | head -1)
[ -n "$db" ] && [ "$(sqlite3 "$db" "SELECT count(*) FROM approval_requests WHERE status='pending'")" = 1 ] ||
  { echo "SKIP: no pending approval in the state's database"; exit 77; }
sqlite3 "$db" "UPDATE approval_requests SET id = '<b>x</b>' WHERE status = 'pending'"
ui_start
jar=$work/jar
[ "$(sign_in "$jar" "$op")" = 303 ] || { echo "SKIP: cannot sign in"; exit 77; }
curl -s -b "$jar" "$(ui_base "$jar")approvals" >"$work/page"
grep -o '<tr id="approval-[^<]*<td><code>[^<]*' "$work/page" | head -2
if grep -q '<b>x</b>' "$work/page"; then
  echo "VULNERABLE: a database row's id put its own markup on the operator's page"; exit 1
fi
grep -q '&lt;b&gt;x&lt;/b&gt;' "$work/page" || { echo "SKIP: the row is not on the page"; exit 77; }
echo blocked
