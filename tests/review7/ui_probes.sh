#!/usr/bin/env bash
# Attempts on the dashboard (serve --ui) that are blocked today, kept as
# regression tests: state changes without POST or without the session's
# CSRF token (GET and HEAD on a form's path, a method-override header, a
# text/plain form, a token from another session), Host and Origin
# rebinding (look-alike names, two Host headers, null, a prefix match), a session id the
# attacker chose (not adopted), a session id under a path not its own, an open redirect after sign-in, the live
# stream without a signed-in session, clickjacking and caching headers on
# every answer (login, 404, assets), oversized headers, and uid 65534
# without a token. Exits 1 when one works, 0 when all are blocked, 77
# cannot run.
. "$(dirname "$0")/ui_lib.sh"
ui_start
port=${U##*:}
jar=$work/jar other=$work/other
[ "$(sign_in "$jar" "$op")" = 303 ] || { echo "SKIP: cannot sign in"; exit 77; }
B=$(ui_base "$jar") # the session's pages: $U/s/KEY/
csrf=$(curl -s -b "$jar" "$B" | csrf_of)
[ -n "$csrf" ] || { echo "SKIP: no CSRF token on the page"; exit 77; }
fail=0
check() { # NAME EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then echo "  blocked  $1 ($3)"; else echo "  WORKS    $1 (got $3, want $2)"; fail=1; fi
}
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
form='capability=asker&tool=dispatch&policy=allow'
check "GET with a form's fields" 404 "$(code -b "$jar" "${B}policy?$form&csrf=$csrf")"
check "HEAD with a form's fields" 404 "$(code -I -b "$jar" "${B}policy?$form&csrf=$csrf")"
check "GET with X-HTTP-Method-Override: POST" 404 \
  "$(code -b "$jar" -H 'X-HTTP-Method-Override: POST' "${B}policy?$form&csrf=$csrf")"
check "PUT (method other than GET/HEAD/POST)" 405 "$(code -X PUT -b "$jar" -d "csrf=$csrf&$form" "${B}policy")"
check "text/plain form without the token" 403 \
  "$(code -b "$jar" -H 'Content-Type: text/plain' --data-binary "$form" "${B}policy")"
check "the token only in the query string, form without it" 403 \
  "$(code -b "$jar" -d "$form" "${B}policy?csrf=0000")"
sign_in "$other" "$op" >/dev/null
check "another session's CSRF token" 403 \
  "$(code -b "$other" -d "csrf=$csrf&$form" "$(ui_base "$other")policy")"
check "Host look-alike" 403 "$(code -b "$jar" -H "Host: 127.0.0.1.evil.example:$port" "$B")"
check "Host without the port" 403 "$(code -b "$jar" -H "Host: 127.0.0.1" "$B")"
check "Host of another port" 403 "$(code -b "$jar" -H "Host: localhost:1" "$B")"
check "no Host (HTTP/1.0)" 403 "$(code -0 -b "$jar" -H "Host:" "$B")"
twohosts=$(/usr/bin/python3 -c '
import socket, sys
p = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", p)); s.settimeout(5)
s.sendall(b"GET /login HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nHost: evil.example\r\nConnection: close\r\n\r\n" % p)
print(s.recv(100).split(b" ")[1].decode())' "$port" 2>/dev/null)
check "two Host headers, ours first" 403 "$twohosts"
check "Origin null" 403 "$(code -b "$jar" -H 'Origin: null' -d "csrf=$csrf&$form" "${B}policy")"
check "Origin prefix match" 403 \
  "$(code -b "$jar" -H "Origin: http://127.0.0.1:$port.evil.example" -d "csrf=$csrf&$form" "${B}policy")"
check "Origin of another scheme" 403 \
  "$(code -b "$jar" -H "Origin: file://127.0.0.1:$port" -d "csrf=$csrf&$form" "${B}policy")"
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
# the signed-in session's cookie (under its /s/KEY path) is a new id
[ "$(awk -F'\t' '$3 ~ /^\/s\// {print $7}' "$fake")" = "$chosen" ] && r=kept || r=replaced
check "the planted id after sign-in ($c)" replaced "$r"
# no open redirect after sign-in
loc=$(curl -s -D - -o /dev/null -c "$work/j3" -b "$work/j3" --data-urlencode "csrf=$(curl -s -c "$work/j3" -b "$work/j3" "$U/login" | csrf_of)" \
  --data-urlencode "token=$op" "$U/login?next=//evil.example&redirect=http://evil.example" | tr -d '\r' | grep -i '^Location:' | cut -d' ' -f2)
[[ "$loc" =~ ^/s/[0-9a-f]{64}/$ ]] && r=own || r="$loc"
check "redirect after sign-in with next=//evil: the session's own path" own "$r"
# the stream needs a signed-in session
check "events without a session" 303 "$(code --max-time 5 "$U/events")"
curl -s -o /dev/null -c "$work/anon" "$U/login"
check "events with a signed-out session" 303 "$(code --max-time 5 -b "$work/anon" "$U/events")"
# the signed-out session's id under a session path (its own KEY unknown)
anon=$(awk -F'\t' '$3 == "/login" {print $7}' "$work/anon")
check "a signed-out session's id under ${B#$U}events" 303 \
  "$(code --max-time 5 -H "Cookie: capsule_ui=$anon" "${B}events")"
# a signed-in session's id under another session's path
sid=$(awk -F'\t' '$3 ~ /^\/s\// {print $7}' "$jar" | tail -1)
check "a session's id under another session's path" 303 \
  "$(code -H "Cookie: capsule_ui=$sid" "$(ui_base "$other")approvals")"
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
