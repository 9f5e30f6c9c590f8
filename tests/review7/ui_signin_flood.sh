#!/usr/bin/env bash
# Finding (the dashboard, src/front/ui.c, after ui_session_flood.sh's fix):
# the login form's anonymous sessions held at most half the session table
# and made room among themselves, so a flood of GET /login by anyone who
# reaches the port (uid 65534 here, no token) pushed out the operator's
# own form session between their GET /login and their POST: the sign-in
# in progress got 401. Now the form keeps nothing on the server (its CSRF
# token is a MAC of its cookie under a key of serve's), so no flood can
# evict it. Also checked: a forged CSRF token is still 403, a POST without
# the form's cookie 401, and the operator signs in.
# Exits 1 while the sign-in fails after the flood, 0 blocked, 77 cannot run.
. "$(dirname "$0")/ui_lib.sh"
ui_start
jar=$work/jar
csrf=$(curl -s -c "$jar" -b "$jar" "$U/login" | csrf_of)
[ -n "$csrf" ] || { echo "SKIP: no login form"; exit 77; }
# the attacker, uid 65534, without any token: 300 login forms
"${as_nobody[@]}" bash -c 'for i in $(seq 1 300); do curl -s -o /dev/null "$1/login"; done' _ "$U"
rc=0
forged=$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" --data-urlencode "csrf=$(printf '%064d' 0)" \
  --data-urlencode "token=$op" "$U/login")
[ "$forged" = 403 ] || { echo "OPEN: a forged CSRF token on POST /login answered $forged (want 403)"; rc=1; }
nocookie=$(curl -s -o /dev/null -w '%{http_code}' --data-urlencode "csrf=$csrf" \
  --data-urlencode "token=$op" "$U/login")
[ "$nocookie" = 401 ] || { echo "OPEN: POST /login without the form's cookie answered $nocookie (want 401)"; rc=1; }
code=$(curl -s -o /dev/null -w '%{http_code}' -c "$jar" -b "$jar" --data-urlencode "csrf=$csrf" \
  --data-urlencode "token=$op" "$U/login")
echo "the operator's sign-in after 300 anonymous GET /login: $code"
if [ "$code" != 303 ]; then
  echo "VULNERABLE: an unauthenticated flood broke a sign-in in progress"; rc=1
else
  page=$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" "$(ui_base "$jar")")
  [ "$page" = 200 ] || { echo "OPEN: signed in, but the home page answered $page"; rc=1; }
fi
[ "$rc" = 0 ] && echo blocked
exit "$rc"
