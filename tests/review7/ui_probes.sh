#!/usr/bin/env bash
# Attempts on the dashboard (serve --ui) that are blocked today, kept as
# regression tests: state changes without POST or without the session's
# CSRF token (GET and HEAD on a form's path, a method-override header, a
# text/plain form, a token from another session), Host and Origin
# rebinding (look-alike names, two Host headers, null, a prefix match), a session id the
# attacker chose (not adopted), an open redirect after sign-in, the live
# stream without a signed-in session, clickjacking and caching headers on
# every answer (login, 404, assets), oversized headers, and uid 65534
# without a token. Exits 1 when one works, 0 when all are blocked, 77
# cannot run.
. "$(dirname "$0")/ui_lib.sh"
ui_start
port=${U##*:}
jar=$work/jar other=$work/other
[ "$(sign_in "$jar" "$op")" = 303 ] || { echo "SKIP: cannot sign in"; exit 77; }
csrf=$(curl -s -b "$jar" "$U/" | csrf_of)
[ -n "$csrf" ] || { echo "SKIP: no CSRF token on the page"; exit 77; }
fail=0
check() { # NAME EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then echo "  blocked  $1 ($3)"; else echo "  WORKS    $1 (got $3, want $2)"; fail=1; fi
}
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
form='capability=asker&tool=dispatch&policy=allow'
check "GET with a form's fields" 404 "$(code -b "$jar" "$U/policy?$form&csrf=$csrf")"
check "HEAD with a form's fields" 404 "$(code -I -b "$jar" "$U/policy?$form&csrf=$csrf")"
check "GET with X-HTTP-Method-Override: POST" 404 \
  "$(code -b "$jar" -H 'X-HTTP-Method-Override: POST' "$U/policy?$form&csrf=$csrf")"
check "PUT (method other than GET/HEAD/POST)" 405 "$(code -X PUT -b "$jar" -d "csrf=$csrf&$form" "$U/policy")"
check "text/plain form without the token" 403 \
  "$(code -b "$jar" -H 'Content-Type: text/plain' --data-binary "$form" "$U/policy")"
check "the token only in the query string, form without it" 403 \
  "$(code -b "$jar" -d "$form" "$U/policy?csrf=0000")"
sign_in "$other" "$op" >/dev/null
check "another session's CSRF token" 403 \
  "$(code -b "$other" -d "csrf=$csrf&$form" "$U/policy")"
check "Host look-alike" 403 "$(code -b "$jar" -H "Host: 127.0.0.1.evil.example:$port" "$U/")"
check "Host without the port" 403 "$(code -b "$jar" -H "Host: 127.0.0.1" "$U/")"
check "Host of another port" 403 "$(code -b "$jar" -H "Host: localhost:1" "$U/")"
check "no Host (HTTP/1.0)" 403 "$(code -0 -b "$jar" -H "Host:" "$U/")"
twohosts=$(/usr/bin/python3 -c '
import socket, sys
p = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", p)); s.settimeout(5)
s.sendall(b"GET /login HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nHost: evil.example\r\nConnection: close\r\n\r\n" % p)
print(s.recv(100).split(b" ")[1].decode())' "$port" 2>/dev/null)
check "two Host headers, ours first" 403 "$twohosts"
check "Origin null" 403 "$(code -b "$jar" -H 'Origin: null' -d "csrf=$csrf&$form" "$U/policy")"
check "Origin prefix match" 403 \
  "$(code -b "$jar" -H "Origin: http://127.0.0.1:$port.evil.example" -d "csrf=$csrf&$form" "$U/policy")"
check "Origin of another scheme" 403 \
  "$(code -b "$jar" -H "Origin: file://127.0.0.1:$port" -d "csrf=$csrf&$form" "$U/policy")"
"$capsule" policy list --state "$state" | grep -q 'asker.*dispatch.*ask' && r=unchanged || r=changed
check "the policy after all the refused forms" unchanged "$r"
# a session id the attacker chose is not adopted
chosen=$(printf 'a%.0s' $(seq 1 64))
set_cookie=$(curl -s -D - -o /dev/null -b "capsule_ui=$chosen" "$U/login" | tr -d '\r' | grep -i '^Set-Cookie:')
grep -q "$chosen" <<<"$set_cookie" && r=adopted || r=new
check "a planted session id at /login" new "$r"
fake=$work/fake
printf '127.0.0.1\tFALSE\t/\tFALSE\t0\tcapsule_ui\t%s\n' "$chosen" >"$fake"
c=$(curl -s -o /dev/null -w '%{http_code}' -b "$fake" -c "$fake" --data-urlencode "csrf=$(curl -s -b "$fake" -c "$fake" "$U/login" | csrf_of)" \
  --data-urlencode "token=$op" "$U/login")
grep -q "$chosen" "$fake" && r=kept || r=replaced
check "the planted id after sign-in ($c)" replaced "$r"
# no open redirect after sign-in
loc=$(curl -s -D - -o /dev/null -c "$work/j3" -b "$work/j3" --data-urlencode "csrf=$(curl -s -c "$work/j3" -b "$work/j3" "$U/login" | csrf_of)" \
  --data-urlencode "token=$op" "$U/login?next=//evil.example&redirect=http://evil.example" | tr -d '\r' | grep -i '^Location:' | cut -d' ' -f2)
check "redirect after sign-in with next=//evil" / "$loc"
# the stream needs a signed-in session
check "events without a session" 303 "$(code --max-time 5 "$U/events")"
curl -s -o /dev/null -c "$work/anon" "$U/login"
check "events with a signed-out session" 303 "$(code --max-time 5 -b "$work/anon" "$U/events")"
# headers on every answer
for path in /login /nonexistent /static/ui.css; do
  h=$(curl -s -D - -o /dev/null -b "$jar" "$U$path" | tr -d '\r')
  grep -q "frame-ancestors 'none'" <<<"$h" && grep -qi '^X-Frame-Options: DENY' <<<"$h" && r=framed-no || r=framable
  check "$path: frame-ancestors" framed-no "$r"
  grep -qi '^Cache-Control: no-store' <<<"$h" && r=no-store || r=cacheable
  check "$path: Cache-Control" no-store "$r"
done
# a 128 KiB header: refused, and the server answers afterwards
{ printf 'X-Big: '; head -c 131072 /dev/zero | tr '\0' a; echo; } >"$work/big"
c=$(curl -s -o /dev/null -w '%{http_code}' -H @"$work/big" "$U/login")
[ "$c" = 200 ] && r=accepted || r=refused
check "a 128 KiB header ($c)" refused "$r"
check "the server after it" 200 "$(code "$U/login")"
# uid 65534 without a token: no page, no change
check "uid 65534: a page without a session" 303 "$("${as_nobody[@]}" curl -s -o /dev/null -w '%{http_code}' "$U/approvals")"
check "uid 65534: a form with a signed-out session" 401 "$("${as_nobody[@]}" bash -c '
  j=$(mktemp); c=$(curl -s -c "$j" -b "$j" "$1/login" | grep -o "[0-9a-f]\{64\}" | head -1)
  curl -s -o /dev/null -w "%{http_code}" -b "$j" -d "csrf=$c&$2" "$1/policy"; rm -f "$j"' _ "$U" "$form")"
[ "$fail" = 0 ] && { echo blocked; exit 0; }
exit 1
