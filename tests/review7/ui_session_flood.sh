#!/usr/bin/env bash
# Finding (the dashboard, src/front/ui.c sess_new): every GET /login
# without a cookie makes an anonymous server-side session, and when the
# table is full (256) the session used longest ago is dropped, signed in or
# not. Anyone who reaches the port, with no token at all (another local
# user, uid 65534 here, or a tool with the host's network), signs every
# operator out with 256 requests, again and again.
# Exits 1 while the operator's session is dropped, 0 blocked, 77 cannot run.
. "$(dirname "$0")/ui_lib.sh"
ui_start
jar=$work/jar
[ "$(sign_in "$jar" "$op")" = 303 ] || { echo "SKIP: cannot sign in"; exit 77; }
[ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" "$(ui_base "$jar")")" = 200 ] || { echo "SKIP: no page"; exit 77; }
# the attacker, uid 65534, without any token: 300 anonymous sessions
"${as_nobody[@]}" bash -c 'for i in $(seq 1 300); do curl -s -o /dev/null "$1/login"; done' _ "$U"
code=$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" "$(ui_base "$jar")")
echo "the operator's page after 300 anonymous GET /login: $code"
[ "$code" = 200 ] && { echo blocked; exit 0; }
echo "VULNERABLE: an unauthenticated client signed the operator out"
exit 1
