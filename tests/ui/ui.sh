#!/usr/bin/env bash
# The operator dashboard, `capsule serve --ui ADDR` (docs/dashboard.md):
# with curl, what a browser's protections rest on (unauthenticated
# requests redirected or 401, the login and its errors, a new session id
# at sign-in under its own path (/s/KEY), the cookie's flags, the Content-Security-Policy and the other
# headers, a missing or wrong CSRF token 403, a foreign Origin or Host
# 403, sign-out and a revoked token ending the session, a hostile tool
# argument escaped), the forms (a policy for everyone and a user's
# override, bad ones 400), readiness, the listings, the egress log; then
# in a real browser (Debian's chromium driven by puppeteer-core,
# tests/ui/browser.mjs): sign in, visit another local service on another
# port (the session's cookie is not sent to it), see a pending approval arrive live and
# approve it while a `capsule call --wait-approval` waits in the
# background, which then completes; change a policy and see it decide the next call; find an
# audit record by filters; find a call's refused egress by filters. As root and as uid 65534 (the browser always
# runs as root: it only talks HTTP to the server). TLS (root): the cookie
# is Secure, named __Secure-capsule_ui. PostgreSQL (root, when installed):
# the approvals, the audit search and the egress log on a PostgreSQL state;
# two serves on it share sessions, and a sign-out or a revoked token on
# one ends the session on the other through its notification; a token
# revoked while the listener's connection was cut ends it too.
# Usage: ui.sh CAPSULE
set -u
capsule=$(realpath "$1")
export CAPSULE_STATE=$(mktemp -d /var/tmp/capsule-probe.XXXXXX)
trap 'rm -rf "$CAPSULE_STATE"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if ! "$capsule" run -- /bin/true 2>/dev/null; then
  echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77
fi
command -v curl >/dev/null || { echo "SKIP: curl is not installed (scripts/deps.sh test)"; exit 77; }
browser=
chromium=$(command -v chromium || true)
if [ -z "$chromium" ]; then
  echo "(browser part skipped: Debian's chromium is not installed; scripts/deps.sh test installs it)"
elif ! command -v node >/dev/null || [ ! -d "$root/tests/node_modules/puppeteer-core" ]; then
  echo "(browser part skipped: puppeteer-core is not installed: cd tests && npm ci)"
else
  browser=1
fi
work=$(mktemp -d /var/tmp/capsule-ui.XXXXXX)
chmod 755 "$work"
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; ! declare -F pg_stop >/dev/null || pg_stop immediate
      rm -rf "$work" "$CAPSULE_STATE"' EXIT
export CAPSULE_STATE_KEY=
pass=0 fail=0
ok() { echo "  ok   $1"; pass=$((pass + 1)); }
bad() { echo "  FAIL $1"; fail=$((fail + 1)); }
wait_for() { for _ in $(seq 1 200); do "$@" && return 0; sleep 0.1; done; return 1; }

caps=$work/caps
agent() { # agent ID SCRIPT [NETWORK]
  mkdir -p "$caps/agents/$1"
  printf '[agent]\nid = "%s"\nname = "%s"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "%s"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' "$1" "$1" "${3:-off}" >"$caps/agents/$1/agent.toml"
  printf '#!/bin/sh\n%s\n' "$2" >"$caps/agents/$1/run.sh"
  chmod 755 "$caps/agents/$1/run.sh"
  chmod -R a+rX "$caps"
}
agent asker 'IFS= read -r line; printf "{\"got\":%s}\n" "$line"'
agent echo 'IFS= read -r line; printf "{\"echo\":%s}\n" "$line"'
# egress through the proxy (port 443 only): two requests it refuses, before
# any packet leaves (TEST-NET-2 addresses, never reached)
agent net 'IFS= read -r line
for port in 80 8081; do curl -s -o /dev/null --max-time 20 "http://198.51.100.9:$port/p<b>$port" 2>/dev/null; done
printf "{\"done\":true}\n"' outbound-https-only
# an MCP server's capability: its tools are those its last discovery cached
mkdir -p "$caps/mcp-filesystem" && cp "$root/examples/mcp-filesystem/capability.json" "$caps/mcp-filesystem/" && chmod -R a+rX "$caps"

# a serve with the dashboard on a free port; sets url (and server)
start() {
  local state=$1 log=$2
  shift 2
  "${wrap[@]}" "$capsule" serve --caps "$caps" --state "$state" "$@" 2>"$log" &
  server=$!
  pids+=("$server")
  addr() { "${wrap[@]}" "$capsule" serve status --state "$state" --json 2>/dev/null | grep -o '"ui":"[^"]*"' | cut -d'"' -f4; }
  has_addr() { [ -n "$(addr)" ]; }
  wait_for has_addr || return 1
  url=$(addr)
}

# the CSRF token in a page
csrf_of() { grep -o 'name="csrf" value="[0-9a-f]*"' | head -1 | grep -o '[0-9a-f]\{64\}'; }

# the signed-in session's pages in jar: $U/s/KEY/ (its cookie's path)
ui_base() { echo "$U$(awk -F'\t' '$3 ~ /^\/s\// {p = $3} END {print p}' "$1")/"; }

# a session's page (jar, URL) sent to /login
refused() { [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$1" "$2")" = 303 ]; }

# signs in with token into the cookie jar; prints the final status
sign_in() {
  local jar=$1 token=$2 csrf
  csrf=$(curl -s -c "$jar" -b "$jar" "$U/login" | csrf_of)
  curl -s -o /dev/null -w '%{http_code}' -c "$jar" -b "$jar" --data-urlencode "csrf=$csrf" \
    --data-urlencode "token=$token" "$U/login"
}

curl_checks() {
  local who=$1 state=$2 op=$3 user=$4 jar=$work/jar-$1 h
  rm -f "$jar"
  [ "$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "$U/")" = "303 $U/login" ] &&
    ok "$who: unauthenticated-get-redirects" || bad "$who: unauthenticated-get-redirects"
  [ "$(curl -s -o /dev/null -w '%{http_code}' -d 'capability=asker&tool=dispatch&policy=allow' "$U/policy")" = 401 ] &&
    ok "$who: unauthenticated-post-401" || bad "$who: unauthenticated-post-401"
  [ "$(curl -s -o /dev/null -w '%{http_code}' -N --max-time 5 "$U/events")" = 303 ] &&
    ok "$who: unauthenticated-events-refused" || bad "$who: unauthenticated-events-refused"
  [ "$(sign_in "$jar" "capsule_$(printf '%064d' 7)")" = 401 ] && ok "$who: unknown-token-401" || bad "$who: unknown-token-401"
  [ "$(sign_in "$jar" "$user")" = 401 ] && ok "$who: non-operator-token-401" || bad "$who: non-operator-token-401"
  local before after
  before=$(awk -F'\t' '$3 == "/login" && $6 == "capsule_ui" {print $7}' "$jar")
  h=$(curl -s -D - -o /dev/null -c "$jar" -b "$jar" --data-urlencode "csrf=$(curl -s -b "$jar" "$U/login" | csrf_of)" \
    --data-urlencode "token=$op" "$U/login")
  after=$(awk -F'\t' '$3 ~ /^\/s\// && $6 == "capsule_ui" {print $7}' "$jar")
  local B
  B=$(ui_base "$jar")
  grep -q '^HTTP/1.1 303' <<<"$h" && ok "$who: operator-signs-in" || bad "$who: operator-signs-in"
  [ -n "$before" ] && [ -n "$after" ] && [ "$before" != "$after" ] && ok "$who: new-session-at-sign-in" ||
    bad "$who: new-session-at-sign-in"
  local cookie
  cookie=$(grep -i '^Set-Cookie:' <<<"$h" | tr -d '\r')
  grep -q 'HttpOnly' <<<"$cookie" && grep -q 'SameSite=Strict' <<<"$cookie" && grep -q "Path=$(p=${B#"$U"}; echo "${p%/}");" <<<"$cookie" &&
    ! grep -q 'Secure' <<<"$cookie" && ok "$who: cookie-flags" || bad "$who: cookie-flags ($cookie)"
  h=$(curl -s -D - -o "$work/page" -b "$jar" "$B")
  grep -q "^HTTP/1.1 200" <<<"$h" && grep -q 'asker' "$work/page" && ok "$who: page-after-sign-in" || bad "$who: page-after-sign-in"
  local csp
  csp=$(grep -i '^Content-Security-Policy:' <<<"$h")
  grep -q "default-src 'none'" <<<"$csp" && grep -q "script-src 'self';" <<<"$csp" &&
    grep -q "frame-ancestors 'none'" <<<"$csp" && ! grep -q "unsafe-inline" <<<"$csp" &&
    ok "$who: csp-header" || bad "$who: csp-header ($csp)"
  grep -qi '^X-Content-Type-Options: nosniff' <<<"$h" && grep -qi '^Cache-Control: no-store' <<<"$h" &&
    grep -qi '^X-Frame-Options: DENY' <<<"$h" && ok "$who: other-headers" || bad "$who: other-headers"
  if grep -Eo '<script[^>]*>' "$work/page" | grep -qv 'src="/static/ui.js"' || grep -Eq ' on[a-z]+=| style=' "$work/page"; then
    bad "$who: no-inline-script"
  else
    ok "$who: no-inline-script"
  fi
  local csrf
  csrf=$(csrf_of <"$work/page")
  [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" -d 'capability=asker&tool=dispatch&policy=allow' "${B}policy")" = 403 ] &&
    ok "$who: missing-csrf-403" || bad "$who: missing-csrf-403"
  [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" -d "csrf=$(printf '%064d' 1)&capability=asker&tool=dispatch&policy=allow" "${B}policy")" = 403 ] &&
    ok "$who: wrong-csrf-403" || bad "$who: wrong-csrf-403"
  [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" -H 'Origin: http://evil.example' -d "csrf=$csrf&capability=asker&tool=dispatch&policy=allow" "${B}policy")" = 403 ] &&
    ok "$who: foreign-origin-403" || bad "$who: foreign-origin-403"
  [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" -H 'Host: evil.example' "$B")" = 403 ] &&
    ok "$who: foreign-host-403" || bad "$who: foreign-host-403"
  C policy list --state "$state" | grep -q 'asker.*dispatch.*ask' && ok "$who: refused-forms-changed-nothing" ||
    bad "$who: refused-forms-changed-nothing"
  # a hostile argument, shown escaped where it can be seen: the pending approval
  C call --caps "$caps" --state "$state" asker dispatch '{"text":"<script>alert(1)</script>\"><img src=x onerror=alert(2)>"}' >/dev/null 2>&1
  curl -s -b "$jar" "${B}approvals" >"$work/approvals"
  grep -q '&lt;script&gt;alert(1)&lt;/script&gt;' "$work/approvals" && ! grep -q '<script>alert' "$work/approvals" &&
    ! grep -q '<img src=x' "$work/approvals" && ok "$who: hostile-argument-escaped" || bad "$who: hostile-argument-escaped"
  # a form with its token works, from the same Origin
  [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" -H "Origin: $U" -d "csrf=$csrf&capability=echo&tool=dispatch&policy=allow" "${B}policy")" = 303 ] &&
    C policy list --state "$state" | grep -q 'echo.*dispatch.*allow' && ok "$who: csrf-form-applies" || bad "$who: csrf-form-applies"
  C audit --state "$state" | grep -q 'policy-set' && ok "$who: change-audited" || bad "$who: change-audited"
  # a user's override, shown under the tool's effective policy
  [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" -d "csrf=$csrf&capability=echo&tool=dispatch&policy=block&user=alice" "${B}policy")" = 303 ] &&
    C policy list --state "$state" | grep -Eq 'echo +dispatch +block +alice' &&
    curl -s -b "$jar" "$B" | grep -q 'user alice: block' && ok "$who: user-override" || bad "$who: user-override"
  [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" -d "csrf=$csrf&capability=echo&tool=nope&policy=allow" "${B}policy")" = 400 ] &&
    [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" -d "csrf=$csrf&capability=echo&tool=dispatch&policy=maybe" "${B}policy")" = 400 ] &&
    ok "$who: bad-policy-form-400" || bad "$who: bad-policy-form-400"
  # a discovered tool: listed from the cache, its policy set
  local cache=$state/cache
  printf '{"tools":[{"name":"read_file","description":"<b>reads</b>","input_schema":{"type":"object"}}]}' >"$work/tools.json"
  "${wrap[@]}" sh -c 'mkdir -p "$1" && cp "$2" "$1/mcp-filesystem.tools.json"' - "$cache" "$work/tools.json"
  curl -s -b "$jar" "${B}?id=mcp-filesystem" | grep -q '<tr data-tool="mcp-filesystem.read_file"><td><code>read_file</code></td><td>&lt;b&gt;reads&lt;/b&gt;' &&
    [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" -d "csrf=$csrf&capability=mcp-filesystem&tool=read_file&policy=allow" "${B}policy")" = 303 ] &&
    ok "$who: discovered-tools" || bad "$who: discovered-tools"
  # readiness, as `capsule list` checks it
  curl -s -b "$jar" "${B}?ready=1&id=echo" | grep -q '<p class="ready ok">ready</p>' && ok "$who: readiness" || bad "$who: readiness"
  # the other listings: a Covenant token issued here is listed; every page answers
  C token issue local tool.call.echo --state "$state" >/dev/null 2>&1
  curl -s -b "$jar" "${B}covenant" | grep -q '<td>tool.call.echo</td>' && ok "$who: covenant-token-listed" ||
    bad "$who: covenant-token-listed"
  # the egress log: a call's refused requests stored with its record, found by filters
  C call --caps "$caps" --state "$state" net dispatch '{"text":"out"}' >/dev/null 2>&1
  curl -s -b "$jar" "${B}egress?capability=net&decision=deny&q=8081" >"$work/egress"
  local callseq
  callseq=$(grep -o 'href="/s/[0-9a-f]*/egress?call=[0-9]*"' "$work/egress" | head -1 | sed 's/.*call=\([0-9]*\)"/\1/')
  [ "$(grep -c '<tr class="egress"' "$work/egress")" = 1 ] && grep -q '<td>198.51.100.9</td><td>8081</td>' "$work/egress" &&
    grep -q 'p&lt;b&gt;8081' "$work/egress" && [ -n "$callseq" ] &&
    [ "$(curl -s -b "$jar" "${B}egress?call=$callseq" | grep -c '<tr class="egress"')" = 2 ] &&
    curl -s -b "$jar" "${B}audit?capability=net" | grep -q "data-seq=\"$callseq\"" &&
    ok "$who: egress-log-filtered" || bad "$who: egress-log-filtered ($(grep -c '<tr' "$work/egress") rows, call $callseq)"
  local p codes=
  for p in /talos /rollback /images /audit "/audit?verify=1" /nope; do
    codes="$codes $(curl -s -o /dev/null -w '%{http_code}' -b "$jar" "${B%/}$p")"
  done
  [ "$codes" = " 200 200 200 200 200 404" ] && ok "$who: pages-answer" || bad "$who: pages-answer ($codes)"
  [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" "$U/static/ui.js")" = 200 ] && ok "$who: script-served" || bad "$who: script-served"
  curl -s -o /dev/null -b "$jar" -d "csrf=$(csrf_of <"$work/approvals")" "${B}logout"
  [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" "$B")" = 303 ] && ok "$who: sign-out-ends-session" || bad "$who: sign-out-ends-session"
  # a revoked token's session ends at its next request
  local op2
  op2=$(C access issue op2 --operator --state "$state" 2>/dev/null)
  rm -f "$jar"
  [ "$(sign_in "$jar" "$op2")" = 303 ] && B=$(ui_base "$jar") &&
    [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" "$B")" = 200 ] &&
    C access revoke op2 --state "$state" >/dev/null 2>&1 &&
    [ "$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' -b "$jar" "$B")" = "303 $U/login" ] &&
    ok "$who: revoked-token-ends-session" || bad "$who: revoked-token-ends-session"
  # the pending hostile call's approval is denied, out of the way
  local id
  id=$(C approvals --state "$state" --json | grep -o '"id":"[0-9a-f]*"' | head -1 | cut -d'"' -f4)
  [ -n "$id" ] && C deny --state "$state" "$id" >/dev/null
}

run_as() {
  local who=$1 state=$work/state-$1
  wrap=()
  mkdir -p "$state" && chmod 700 "$state"
  if [ "$who" = nobody ]; then chown 65534:65534 "$state"; wrap=(setpriv --reuid=65534 --regid=65534 --clear-groups --); fi
  echo "as $who:"
  C() { "${wrap[@]}" "$capsule" "$@"; }
  C policy set --caps "$caps" --state "$state" asker dispatch ask >/dev/null
  C policy set --caps "$caps" --state "$state" net dispatch allow >/dev/null
  local op user
  op=$(C access issue op --operator --state "$state" 2>/dev/null)
  user=$(C access issue alice --user alice --state "$state" 2>/dev/null)
  start "$state" "$work/serve-$who.log" --ui 127.0.0.1:0 || { bad "$who: serve-starts"; cat "$work/serve-$who.log"; return; }
  ok "$who: serve-starts-on-a-free-port"
  U=http://$url
  curl_checks "$who" "$state" "$op" "$user"
  if [ -n "$browser" ]; then
    while IFS= read -r line; do
      case $line in
        "ok "*) ok "$who: browser: ${line#ok }" ;;
        *) bad "$who: browser: $line" ;;
      esac
    done < <(cd "$root/tests" && node "$here/browser.mjs" "$chromium" "$U" "$op" "$caps" "$state" "${wrap[@]}" "$capsule" 2>"$work/browser-$who.err")
    [ -s "$work/browser-$who.err" ] && tail -20 "$work/browser-$who.err" | sed 's/^/         /'
  fi
  local keep=$work/jar-keep-$who
  rm -f "$keep"
  sign_in "$keep" "$op" >/dev/null
  kill -TERM "$server"
  wait "$server"
  [ $? = 0 ] && ok "$who: sigterm-exits-0" || bad "$who: sigterm-exits-0"
  # a signed-in session is in the state: the next serve honours it
  if start "$state" "$work/serve2-$who.log" --ui 127.0.0.1:0; then
    U=http://$url
    [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$keep" "$(ui_base "$keep")")" = 200 ] && ok "$who: session-outlives-restart" ||
      bad "$who: session-outlives-restart"
    kill -TERM "$server"
    wait "$server"
  else
    bad "$who: serve-restarts"
  fi
  C serve --caps "$caps" --state "$state" --ui 0.0.0.0:0 2>"$work/insecure.err"
  [ $? = 2 ] && grep -q -- "--ui 0.0.0.0:0 is not a loopback address" "$work/insecure.err" &&
    ok "$who: non-loopback-needs-tls" || bad "$who: non-loopback-needs-tls"
}

tls() { # the cookie of an HTTPS dashboard is Secure, with the __Secure- prefix (its Path is the session's)
  command -v openssl >/dev/null || { echo "  (no openssl: TLS skipped)"; return; }
  local state=$work/state-tls op jar=$work/jar-tls
  wrap=()
  mkdir -p "$state" && chmod 700 "$state"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/key.pem" -out "$work/cert.pem" \
    -days 2 -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
  op=$("$capsule" access issue op --operator --state "$state" 2>/dev/null)
  start "$state" "$work/serve-tls.log" --ui 127.0.0.1:0 --tls-cert "$work/cert.pem" --tls-key "$work/key.pem" ||
    { bad "tls: serve-starts"; cat "$work/serve-tls.log"; return; }
  U=https://$url
  local csrf h
  csrf=$(curl -s --cacert "$work/cert.pem" -c "$jar" "$U/login" | csrf_of)
  h=$(curl -s -D - -o /dev/null --cacert "$work/cert.pem" -b "$jar" --data-urlencode "csrf=$csrf" --data-urlencode "token=$op" "$U/login")
  grep -qi "^Set-Cookie: __Secure-capsule_ui=[0-9a-f]\{64\}; Path=/s/[0-9a-f]\{64\}; HttpOnly; SameSite=Strict; Secure" <<<"$h" &&
    ok "tls: cookie-secure-prefix" || bad "tls: cookie-secure-prefix ($(grep -i set-cookie <<<"$h"))"
  kill -TERM "$server"
  wait "$server"
}

pg() { # the same pages on a PostgreSQL state (tests/state/pg-lib.sh: a throwaway server)
  source "$root/tests/state/pg-lib.sh"
  [ -n "$pg_bin" ] || { echo "  (PostgreSQL is not installed: its part skipped; scripts/deps.sh test)"; return; }
  pg_start "$work/pg" || { bad "pg: server-starts"; return; }
  local url=$PGURL op jar=$work/jar-pg id
  wrap=()
  export CAPSULE_STATE_KEY=$(printf '%064d' 42) XDG_STATE_HOME=$work/pg-local # its local files
  # a session checked in the state is vouched for 10 minutes here (2 s by
  # default): what ends one on the other serve below is the notification
  export CAPSULE_UI_VOUCH_MS=600000
  C() { "$capsule" "$@"; }
  C --state "$url" policy set --caps "$caps" asker dispatch ask >/dev/null
  op=$(C --state "$url" access issue op --operator 2>/dev/null)
  start "$url" "$work/serve-pg.log" --ui 127.0.0.1:0 ||
    { bad "pg: serve-starts"; cat "$work/serve-pg.log"; pg_stop; return; }
  U=http://$url
  [ "$(sign_in "$jar" "$op")" = 303 ] && ok "pg: signs-in" || bad "pg: signs-in"
  local B
  B=$(ui_base "$jar")
  C --state "$PGURL" call --caps "$caps" asker dispatch '{"text":"on postgres"}' >/dev/null 2>&1
  id=$(curl -s -b "$jar" "${B}approvals" | grep -o 'id="approval-[0-9a-f]*"' | head -1 | grep -o '[0-9a-f]\{8\}')
  [ -n "$id" ] && ok "pg: pending-approval-listed" || bad "pg: pending-approval-listed"
  curl -s -o /dev/null -b "$jar" -d "csrf=$(curl -s -b "$jar" "${B}approvals" | csrf_of)&id=$id&decision=approve" "${B}approvals/decide"
  C --state "$PGURL" call --caps "$caps" asker dispatch '{"text":"on postgres"}' 2>/dev/null | grep -q 'on postgres' &&
    ok "pg: approved-call-runs" || bad "pg: approved-call-runs"
  curl -s -b "$jar" "${B}audit?q=asker&decision=ask-approved&verify=1" >"$work/page"
  [ "$(grep -c '<tr class="record"' "$work/page")" = 1 ] && grep -q '<td class="chain ok">ok</td>' "$work/page" &&
    grep -q 'The chain verifies' "$work/page" && ok "pg: audit-search-and-verify" || bad "pg: audit-search-and-verify"
  C --state "$PGURL" policy set --caps "$caps" net dispatch allow >/dev/null
  # the live stream on NOTIFY: serve's listener has its own connection,
  # LISTENing on the approvals', the audit log's and then the access
  # channel (its last statement)
  listening() { [ "$(pg_as "$pg_bin/psql" -h "$PGSOCK" -U capsule -At -c \
    "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN \"capsule_access\"'" capsule)" -ge 1 ]; }
  wait_for listening && ok "pg: dashboard-listens" || bad "pg: dashboard-listens"
  if [ -n "$browser" ]; then # approvals and the audit log live, through NOTIFY
    while IFS= read -r line; do
      case $line in
        "ok "*) ok "pg: browser: ${line#ok }" ;;
        *) bad "pg: browser: $line" ;;
      esac
    done < <(cd "$root/tests" && node "$here/browser.mjs" "$chromium" "$U" "$op" "$caps" "$PGURL" "$capsule" 2>"$work/browser-pg.err")
    [ -s "$work/browser-pg.err" ] && tail -20 "$work/browser-pg.err" | sed 's/^/         /'
  fi
  # a second serve on the same database (another host's, its own local
  # directory): the session signed in on the first is honoured there, its
  # forms accepted, and a sign-out there ends it on the first too
  local first=$server U1=$U U2 B1 B2 jar2=$work/jar-pg2
  if XDG_STATE_HOME=$work/pg-local2 start "$PGURL" "$work/serve-pg2.log" --ui 127.0.0.1:0; then
    U2=http://$url U=http://$url
    rm -f "$jar2"
    [ "$(sign_in "$jar2" "$op")" = 303 ] && B2=$(ui_base "$jar2") && B1=$U1${B2#"$U2"} &&
      [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar2" "$B1")" = 200 ] &&
      [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar2" -d "csrf=$(curl -s -b "$jar2" "$B1" | csrf_of)&capability=echo&tool=dispatch&policy=allow" "${B2}policy")" = 303 ] &&
      ok "pg: session-shared-by-two-serves" || bad "pg: session-shared-by-two-serves"
    curl -s -o /dev/null -b "$jar2" -d "csrf=$(curl -s -b "$jar2" "$B2" | csrf_of)" "${B2}logout"
    # the first serve vouched for the session: it checks it again once it
    # hears the sign-out (NOTIFY), long before its 10 minutes
    wait_for refused "$jar2" "$B1" && ok "pg: sign-out-ends-it-on-both" || bad "pg: sign-out-ends-it-on-both"
    # a token revoked from the command line ends its sessions on both
    local op3 jar3=$work/jar-pg3 B3
    op3=$(C --state "$PGURL" access issue op3 --operator 2>/dev/null)
    rm -f "$jar3"
    [ "$(sign_in "$jar3" "$op3")" = 303 ] && B3=$(ui_base "$jar3") &&
      [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar3" "$U1${B3#"$U2"}")" = 200 ] &&
      [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar3" "$B3")" = 200 ] &&
      C --state "$PGURL" access revoke op3 >/dev/null 2>&1 &&
      wait_for refused "$jar3" "$U1${B3#"$U2"}" && wait_for refused "$jar3" "$B3" &&
      ok "pg: revoked-token-ends-it-on-both" || bad "pg: revoked-token-ends-it-on-both"
    kill -TERM "$server"
    wait "$server"
  else
    bad "pg: second-serve-starts"; cat "$work/serve-pg2.log"
  fi
  server=$first U=$U1
  # the listener's connection cut (its backend ended): every vouch is void
  # then, so a token revoked before it listens again (its notification
  # unheard) still ends the session, asked a while after it listens again
  local op4 jar4=$work/jar-pg4 B4
  op4=$(C --state "$PGURL" access issue op4 --operator 2>/dev/null)
  rm -f "$jar4"
  [ "$(sign_in "$jar4" "$op4")" = 303 ] && B4=$(ui_base "$jar4") &&
    [ "$(curl -s -o /dev/null -w '%{http_code}' -b "$jar4" "$B4")" = 200 ] &&
    pg_as "$pg_bin/psql" -h "$PGSOCK" -U capsule -At -c \
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'" capsule >/dev/null &&
    C --state "$PGURL" access revoke op4 >/dev/null 2>&1 && wait_for listening && sleep 2 &&
    wait_for refused "$jar4" "$B4" && ok "pg: revoked-while-listener-away" || bad "pg: revoked-while-listener-away"
  C --state "$PGURL" call --caps "$caps" net dispatch '{"text":"out"}' >/dev/null 2>&1
  curl -s -b "$jar" "${B}egress?capability=net&decision=deny" >"$work/page"
  [ "$(grep -c '<tr class="egress"' "$work/page")" -ge 2 ] && grep -q '<td>198.51.100.9</td><td>80</td>' "$work/page" &&
    ok "pg: egress-log-filtered" || bad "pg: egress-log-filtered"
  kill -TERM "$server"
  wait "$server"
  pg_stop
}

run_as root
run_as nobody
tls
[ "$(id -u)" = 0 ] && pg
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
