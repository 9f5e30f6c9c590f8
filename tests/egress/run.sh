#!/usr/bin/env bash
# The egress proxy end to end, against local upstreams only (server.mjs on
# host loopback: plain HTTP and HTTPS from a test CA): allowlist by host and
# port, L7 rules over intercepted HTTPS, every credential inject mode with a
# canary search for the secret inside the sandbox, metadata and private
# address refusals, a tool that ignores the proxy, UDP out, malformed and
# oversized requests, the egress log and -v. As root and unprivileged.
# Usage: run.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
here=$(cd "$(dirname "$0")" && pwd)
for tool in node openssl curl; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (scripts/deps.sh test installs it)"; exit 77; }
done
work=$(mktemp -d /var/tmp/capsule-egress.XXXXXX)
chmod 755 "$work"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT

# a test CA and a certificate for 127.0.0.1; capsule (outside) trusts the CA
(cd "$work" &&
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem \
    -days 2 -subj /CN=capsule-test-ca 2>/dev/null &&
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout srv.key -out srv.csr \
    -subj /CN=127.0.0.1 2>/dev/null &&
  printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >ext &&
  openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 \
    -extfile ext 2>/dev/null) || { echo "FAIL: cannot make the test certificates"; exit 1; }
chmod 644 "$work"/*.pem
export SSL_CERT_FILE=$work/ca.pem

node "$here/server.mjs" "$work/srv.key" "$work/srv.pem" >"$work/ports" & pids+=($!)
for _ in $(seq 50); do [ -s "$work/ports" ] && break; sleep 0.1; done
read -r http https https2 https3 < <(node -e 'const p=JSON.parse(require("fs").readFileSync(process.argv[1]));console.log(p.http,p.https,p.https2,p.https3)' "$work/ports")
[ -n "${https3:-}" ] || { echo "FAIL: the test upstreams did not start"; exit 1; }

secret=canary-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')
export CAPSULE_TEST_SECRET=$secret
# for the re-encodings: '/', '+' and '=' have escaped forms
secret2=fm/s+k=y-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')
export CAPSULE_TEST_SECRET2=$secret2
printf 'elastic:%s\n' "$secret" >"$work/es-secret"
chmod 644 "$work/es-secret" # readable by capsule as nobody; never granted to the tool
basic_b64=$(printf 'elastic:%s' "$secret" | base64 -w0)
h() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; } # the server echoes these hashes

m() { # m NAME JSON: a nono manifest in $work/NAME.json
  printf '{"version": "0.1.0", %s}\n' "$2" >"$work/$1.json"
}
m tunnel '"filesystem": {"grants": [{"path": "'"$work"'/ca.pem", "access": "read", "type": "file"}]},
 "network": {"mode": "proxy", "allow_domains": ["127.0.0.1", "localhost"], "ports": {"connect": ['"$https,$http"']}}'
m l7 '"network": {"mode": "proxy", "endpoints": [{"host": "127.0.0.1:'"$https"'",
 "rules": [{"method": "GET", "path": "/allowed/**"}]}]}'
m any '"filesystem": {"grants": [{"path": "'"$hostile"'", "access": "read", "type": "file"}]},
 "network": {"mode": "proxy", "allow_domains": ["*"]}'
m creds '"network": {"mode": "proxy"}, "credentials": [
 {"name": "hdr", "upstream": "https://127.0.0.1:'"$https2"'", "source": "env://CAPSULE_TEST_SECRET"},
 {"name": "key", "upstream": "https://127.0.0.1:'"$https"'/v1", "source": "env://CAPSULE_TEST_SECRET",
  "env_var": "API_KEY", "inject": {"mode": "header", "header": "X-Api-Key", "format": "{}"}},
 {"name": "tg", "upstream": "https://127.0.0.1:'"$https"'", "source": "env://CAPSULE_TEST_SECRET",
  "env_var": "TG_TOKEN", "inject": {"mode": "url_path", "path_pattern": "/bot{}/"}},
 {"name": "q", "upstream": "http://127.0.0.1:'"$http"'", "source": "env://CAPSULE_TEST_SECRET",
  "inject": {"mode": "query_param", "query_param_name": "key"}},
 {"name": "basic", "upstream": "http://127.0.0.1:'"$http"'", "source": "file://'"$work"'/es-secret",
  "env_var": "ES_PASSWORD", "inject": {"mode": "basic_auth"},
  "endpoint_rules": [{"method": "GET", "path": "/_search"}]}]'
m alias '"network": {"mode": "proxy", "allow_domains": ["*"], "endpoints": [
 {"host": "127.0.0.1:'"$https"'", "rules": [{"method": "GET", "path": "/allowed/**"}]},
 {"host": "localhost:'"$http"'", "rules": [{"method": "GET", "path": "/allowed/**"}]}]}'
m mask '"network": {"mode": "proxy"}, "credentials": [
 {"name": "hdr", "upstream": "https://127.0.0.1:'"$https2"'", "source": "env://CAPSULE_TEST_SECRET"},
 {"name": "q", "upstream": "http://127.0.0.1:'"$http"'", "source": "env://CAPSULE_TEST_SECRET",
  "inject": {"mode": "query_param", "query_param_name": "key"}},
 {"name": "qs", "upstream": "https://127.0.0.1:'"$https3"'", "source": "env://CAPSULE_TEST_SECRET",
  "inject": {"mode": "query_param", "query_param_name": "key"}},
 {"name": "f", "upstream": "http://127.0.0.1:'"$http"'", "source": "env://CAPSULE_TEST_SECRET2"}]'
m glob '"network": {"mode": "proxy", "endpoints": [{"host": "localhost:'"$http"'",
 "rules": [{"method": "GET", "path": "/**/a/**/b/**/a/**/b/**/c"}, {"method": "GET", "path": "/ok/**"}]}]}'
deep=$(for _ in $(seq 1000); do printf /a/b; done)
m forward '"network": {"mode": "proxy", "ports": {"localhost": ['"$http"']}}'
m store '"network": {"mode": "proxy"}, "credentials": [
 {"name": "st", "upstream": "https://127.0.0.1:'"$https2"'", "source": "capsule_test_token"}]'
m missing '"network": {"mode": "proxy"}, "credentials": [
 {"name": "gone", "upstream": "https://127.0.0.1:1", "source": "env://CAPSULE_NO_SUCH_VARIABLE"}]'

# A network namespace of the test's own, where a veth address
# (198.51.100.7, TEST-NET-2) stands in for this machine's interface address:
# capsule and an upstream both run inside it, so no packet ever goes to a
# real non-loopback address.
ns=capsule-egress-$$ nsip=198.51.100.7 nsip2=198.51.100.8
if ip netns add "$ns" 2>/dev/null; then
  trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; ip netns del "$ns" 2>/dev/null; rm -rf "$work"' EXIT
  ip -n "$ns" link set lo up &&
    ip -n "$ns" link add cveth0 type veth peer name cveth1 &&
    ip -n "$ns" addr add "$nsip/24" dev cveth0 && ip -n "$ns" link set cveth0 up &&
    ip -n "$ns" link set cveth1 up &&
    ip -n "$ns" route add unreachable "$nsip2" || { echo "FAIL: cannot set up the test namespace"; exit 1; }
  ip netns exec "$ns" env CAPSULE_TEST_LISTEN=0.0.0.0 node "$here/server.mjs" "$work/srv.key" "$work/srv.pem" >"$work/nsports" & pids+=($!)
  for _ in $(seq 50); do [ -s "$work/nsports" ] && break; sleep 0.1; done
  nshttp=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).http)' "$work/nsports")
else
  ns="" nshttp=""
  echo "note: cannot create a network namespace; the host-interface tests are skipped"
fi
mkdir -m 755 "$work/sync"
m nsany '"filesystem": {"grants": [{"path": "'"$hostile"'", "access": "read", "type": "file"},
 {"path": "'"$work"'/sync", "access": "read", "type": "directory"}]},
 "network": {"mode": "proxy", "allow_domains": ["*"]}'
mkdir -m 777 "$work/logs"

pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$1" "$2"; }
bad() { fail=$((fail + 1)); printf '  FAIL %-6s %s\n' "$1" "$2"; }

# runs CMD as WHO, inside the test's namespace when in_ns is set
as_user_ns() {
  local who=$1; shift
  local pre=()
  [ -n "${in_ns:-}" ] && pre=(ip netns exec "$in_ns")
  # root's default state its own: not the host's, which another capsule may have migrated
  if [ "$who" = root ]; then XDG_STATE_HOME=$work/xdg-state "${pre[@]}" "$@"
  else "${pre[@]}" setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; fi
}

# check WHO NAME WANT-STATUS WANT-OUTPUT-REGEX CAPSULE-ARGS...
check() {
  local who=$1 name=$2 want=$3 regex=$4; shift 4
  local out status
  out=$(cd "$work" && as_user_ns "$who" timeout 60 "$capsule" "$@" 2>&1 </dev/null)
  status=$?
  if [ "$status" = "$want" ] && echo "$out" | grep -qE -- "$regex"; then ok "$who" "$name"
  else bad "$who" "$name (exit $status, want $want)"; echo "$out" | head -6 | sed 's/^/         /'; fi
}
C="curl -sS --max-time 20 --noproxy ''" # the proxy from the environment, even for 127.0.0.1
P="--proxy-allow-private"

for who in "${users[@]}"; do
  # allowlist: hosts, ports, tunnels stay end to end
  check "$who" https-tunnel 0 "^GET /t HTTP|^GET /t$" run --config "$work/tunnel.json" $P -- sh -c "$C --cacert $work/ca.pem https://127.0.0.1:$https/t"
  check "$who" http-by-name 0 "^GET /n$" run --config "$work/tunnel.json" $P -- sh -c "$C http://localhost:$http/n"
  check "$who" port-not-allowed 0 "403|CONNECT tunnel failed" run --config "$work/tunnel.json" $P -- sh -c "$C --cacert $work/ca.pem https://127.0.0.1:$https2/t; true"
  check "$who" host-not-allowed 0 "not in the capability's network allowlist" run --config "$work/l7.json" $P -- sh -c "$C http://localhost:$http/x"
  check "$who" private-refused 0 "never connects to" run --config "$work/tunnel.json" -- sh -c "$C http://127.0.0.1:$http/x"
  check "$who" metadata-refused 0 "never connects to" run --config "$work/any.json" $P -- sh -c "$C http://169.254.169.254/latest/meta-data/"
  check "$who" metadata-v6-refused 0 "never connects to" run --config "$work/any.json" $P -- sh -c "$C 'http://[fd00:ec2::254]/'"
  # L7 rules on HTTPS: TLS terminated with the session CA the sandbox trusts
  check "$who" l7-https-allowed 0 "^GET /allowed/a/b$" run --config "$work/l7.json" $P -- sh -c "$C https://127.0.0.1:$https/allowed/a/b"
  check "$who" l7-https-path-denied 0 "do not allow this method and path" run --config "$work/l7.json" $P -- sh -c "$C https://127.0.0.1:$https/admin"
  check "$who" l7-https-method-denied 0 "do not allow this method and path" run --config "$work/l7.json" $P -- sh -c "$C -X POST https://127.0.0.1:$https/allowed/a"
  check "$who" l7-https-traversal 0 "do not allow this method and path" run --config "$work/l7.json" $P -- sh -c "$C --path-as-is https://127.0.0.1:$https/allowed/../admin"
  check "$who" l7-ca-env 0 "^/dev/.capsule/ca-bundle.pem /dev/.capsule/ca-bundle.pem /dev/.capsule/ca-bundle.pem$" run --config "$work/l7.json" -- sh -c 'echo $SSL_CERT_FILE $NODE_EXTRA_CA_CERTS $REQUESTS_CA_BUNDLE'
  # a grant of / (Covenant's filesystem = "host") with an intercepted host:
  # the CA lives on the sandbox's own /dev, not in the host's root
  check "$who" l7-root-grant-intercepted 0 "^GET /allowed/r$" run --config "$work/l7.json" --allow-read / $P -- sh -c "$C https://127.0.0.1:$https/allowed/r"
  # L7 rules follow the server, not its name: the same address by another
  # name (or by IP) gets the same rules, over HTTPS (intercepted) and HTTP
  check "$who" l7-alias-https-denied 0 "do not allow this method and path" run --config "$work/alias.json" $P -- sh -c "$C https://localhost:$https/admin"
  check "$who" l7-by-ip-allowed 0 "^GET /allowed/x$" run --config "$work/alias.json" $P -- sh -c "$C http://127.0.0.1:$http/allowed/x"
  check "$who" l7-by-ip-denied 0 "do not allow this method and path" run --config "$work/alias.json" $P -- sh -c "$C http://127.0.0.1:$http/admin"
  check "$who" l7-path-param-dotdot 0 "do not allow this method and path" run --config "$work/alias.json" $P -- sh -c "$C --path-as-is 'http://127.0.0.1:$http/allowed/..;/admin'"
  # path globs cost linear work: five '**' against 1,000 a/b pairs (the old
  # backtracking matcher ran for minutes), then the proxy still answers
  check "$who" l7-glob-bounded 0 "do not allow this method and path" run --config "$work/glob.json" $P -- sh -c "$C http://localhost:$http$deep/x; $C http://localhost:$http/ok/y"
  check "$who" l7-glob-after 0 "^GET /ok/y$" run --config "$work/glob.json" $P -- sh -c "$C http://localhost:$http$deep/x; $C http://localhost:$http/ok/y"
  # credentials: every inject mode reaches the upstream with the secret
  check "$who" inject-header-reverse 0 "^Authorization#sha256: $(h "Bearer $secret")$" run --config "$work/creds.json" $P -- sh -c "$C http://127.0.0.1:3128/hdr/echo"
  check "$who" proxy-itself-127.1 0 "^Authorization#sha256: $(h "Bearer $secret")$" run --config "$work/creds.json" $P -- sh -c "$C http://127.1:3128/hdr/echo"
  check "$who" inject-no-proxy-path 0 "^Authorization#sha256: $(h "Bearer $secret")$" run --config "$work/creds.json" $P -- sh -c "curl -sS --max-time 20 http://127.0.0.1:3128/hdr/echo"
  check "$who" inject-header-intercepted 0 "^Authorization#sha256: $(h "Bearer $secret")$" run --config "$work/creds.json" $P -- sh -c "$C -H 'Authorization: Bearer guess' https://127.0.0.1:$https2/echo"
  check "$who" echoed-secret-scrubbed 0 "^Authorization: Bearer \*{${#secret}}$" run --config "$work/creds.json" $P -- sh -c "$C -H 'Authorization: Bearer guess' https://127.0.0.1:$https2/echo"
  # the echoed secret is masked in the de-chunked body, whatever chunk
  # boundary falls inside it: chunk sizes 1..72, and 4 KiB chunks with the
  # secret moved across the boundary; reverse proxy and interception,
  # header and query_param modes
  for mode in "hdr-reverse http://127.0.0.1:3128/hdr" "hdr-intercepted https://127.0.0.1:$https2" \
              "query-reverse http://127.0.0.1:3128/q" "query-intercepted https://127.0.0.1:$https3"; do
    set -- $mode
    out=$(cd "$work" && as_user "$who" timeout 120 "$capsule" run --config "$work/mask.json" $P -- sh -c "
      for n in \$(seq 1 72); do $C '$2/chunks?size='\$n; done
      for p in \$(seq 3996 4096); do $C '$2/chunks?size=4096&pad='\$p; done" 2>&1 </dev/null)
    ends=$(echo "$out" | grep -c '^end$')
    if [ "$ends" = 173 ] && ! echo "$out" | grep -qF "$secret" && echo "$out" | grep -qF "${secret//?/*}"; then
      ok "$who" "mask-chunk-boundaries-$1"
    else bad "$who" "mask-chunk-boundaries-$1 ($ends of 173 responses)"; echo "$out" | grep -F "$secret" | head -3 | cut -c1-200 | sed 's/^/         /'; fi
  done
  # re-encodings of the secret are masked too; a compressed body is refused
  out=$(cd "$work" && as_user "$who" timeout 60 "$capsule" run --config "$work/mask.json" $P -- sh -c "$C http://127.0.0.1:3128/f/forms" 2>&1 </dev/null)
  leaked=$(printf '%s' "$out" | node -e '
    const v = process.argv[1], out = require("fs").readFileSync(0, "utf8");
    const pct = encodeURIComponent(v);
    const forms = {json: v.replace(/\//g, "\\/"), pct_upper: pct,
      pct_lower: pct.replace(/%[0-9A-F]{2}/g, (s) => s.toLowerCase()),
      unicode: [...v].map((c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0")).join("")};
    for (const [i, pre] of ["", "a", "ab"].entries()) { // the characters that are the secret alone
      forms[`b64_${i}`] = Buffer.from(pre + v + "z").toString("base64").slice(3, -3);
      forms[`b64url_${i}`] = Buffer.from(pre + v + "zz").toString("base64url").slice(3, -3);
    }
    const lines = (out.match(/^form /gm) || []).length;
    const bad = Object.entries(forms).filter(([, f]) => out.includes(f)).map(([k]) => k);
    console.log(lines === 10 ? bad.join(" ") : "only " + lines + " form lines");' "$secret2")
  if [ -z "$leaked" ]; then ok "$who" mask-re-encodings
  else bad "$who" "mask-re-encodings (visible: $leaked)"; echo "$out" | head -10 | sed 's/^/         /'; fi
  check "$who" mask-gzip-refused 0 "capsule: the upstream sent a compressed" run --config "$work/mask.json" $P -- sh -c "$C -H 'Accept-Encoding: identity' http://127.0.0.1:3128/f/gzip"
  check "$who" trace-refused 0 "TRACE and TRACK are not forwarded" run --config "$work/creds.json" $P -- sh -c "$C -X TRACE http://127.0.0.1:3128/hdr/echo"
  check "$who" route-dotdot-refused 0 "the path is ambiguous" run --config "$work/creds.json" $P -- sh -c "$C --path-as-is http://127.0.0.1:3128/key/../../admin"
  check "$who" fragment-refused 0 "no #fragment|carries no #fragment" run --config "$work/l7.json" $P -- bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128; printf "GET /hdr/x#/y HTTP/1.1\r\nHost: a\r\n\r\n" >&3; cat <&3'
  check "$who" inject-header-phantom 0 "^X-Api-Key#sha256: $(h "$secret")\$" run --config "$work/creds.json" $P -- sh -c "$C -H \"X-Api-Key: \$API_KEY\" http://127.0.0.1:3128/key/models"
  check "$who" reverse-base-path 0 "^GET /v1/models\$" run --config "$work/creds.json" $P -- sh -c "$C -H \"X-Api-Key: \$API_KEY\" http://127.0.0.1:3128/key/models"
  check "$who" inject-header-no-phantom 0 "does not carry this session's token" run --config "$work/creds.json" $P -- sh -c "$C -H 'X-Api-Key: guess' http://127.0.0.1:3128/key/models"
  check "$who" inject-url-path 0 "^url#sha256: $(h "/bot$secret/getMe")\$" run --config "$work/creds.json" $P -- sh -c "$C http://127.0.0.1:3128/tg/bot\$TG_TOKEN/getMe"
  check "$who" inject-url-path-wrong-token 0 "does not carry this session's token" run --config "$work/creds.json" $P -- sh -c "$C http://127.0.0.1:3128/tg/botguess/getMe"
  check "$who" inject-query 0 "^url#sha256: $(h "/search?x=1&key=$secret")\$" run --config "$work/creds.json" $P -- sh -c "$C 'http://127.0.0.1:3128/q/search?key=guess&x=1'"
  check "$who" inject-basic 0 "^Authorization#sha256: $(h "Basic $basic_b64")\$" run --config "$work/creds.json" $P -- sh -c "$C -u \"elastic:\$ES_PASSWORD\" http://127.0.0.1:3128/basic/_search"
  check "$who" inject-basic-rules 0 "endpoint_rules do not allow" run --config "$work/creds.json" $P -- sh -c "$C -u \"elastic:\$ES_PASSWORD\" -d x http://127.0.0.1:3128/basic/_search"
  check "$who" unknown-route 0 "no credential route of this name" run --config "$work/creds.json" $P -- sh -c "$C http://127.0.0.1:3128/nope/x"
  # a state directory of the user's own: capsule refuses one others own or may write
  st="$work/state-$who"
  rm -rf "$st" && mkdir -m 700 "$st" && { [ "$who" = root ] || chown 65534:65534 "$st"; }
  printf '%s\n' "$secret" | as_user "$who" "$capsule" cred set --shared capsule_test_token --scope system --state "$st"
  check "$who" inject-from-store 0 "^Authorization#sha256: $(h "Bearer $secret")$" run --state "$st" --config "$work/store.json" $P -- sh -c "$C http://127.0.0.1:3128/st/echo"
  rm -rf "$st" && mkdir -m 700 "$st" && { [ "$who" = root ] || chown 65534:65534 "$st"; }
  check "$who" store-missing 1 "capsule_test_token is not in capsule's credential store; set it with .capsule cred set --shared capsule_test_token --scope system." run --state "$st" --config "$work/store.json" -- /bin/true
  check "$who" missing-secret 1 "CAPSULE_NO_SUCH_VARIABLE is not set" run --config "$work/missing.json" -- /bin/true

  # canary: nothing the tool can read holds the secret
  out=$(cd "$work" && as_user "$who" timeout 60 "$capsule" run --config "$work/creds.json" $P -- sh -c \
    "env; cat /proc/*/environ /proc/*/cmdline /dev/.capsule/* $work/es-secret | tr '\\0' '\\n'; ls -la / /tmp; cat /tmp/* 2>&1; \
     $C http://127.0.0.1:3128/hdr/echo >/dev/null; cat /proc/*/environ | tr '\\0' '\\n'" 2>&1 </dev/null)
  if ! echo "$out" | grep -qF "$secret" && echo "$out" | grep -qE '^TG_TOKEN=[0-9a-f]{64}$' &&
     echo "$out" | grep -q "es-secret: No such file"; then ok "$who" canary-no-secret-inside
  else bad "$who" canary-no-secret-inside; echo "$out" | grep -F "$secret" | head -3 | sed 's/^/         /'; fi

  # ports.localhost: that port of the host's loopback, and no other
  check "$who" localhost-forward 0 "^GET /fwd$" run --config "$work/forward.json" -- sh -c "curl -sS --max-time 20 --noproxy '*' http://127.0.0.1:$http/fwd"
  check "$who" localhost-other-port 0 "^refused$" run --config "$work/forward.json" -- sh -c "curl -sS --max-time 20 --noproxy '*' http://127.0.0.1:$https/ 2>/dev/null || echo refused"

  # ways around the proxy
  check "$who" direct-bypass 0 "BLOCKED" run --config "$work/any.json" $P -- "$hostile" tcp "$http"
  if [ -n "$ns" ]; then
    # a UDP datagram to the stand-in host address (delivered if it got out)
    in_ns=$ns check "$who" udp-out 0 "BLOCKED" run --config "$work/any.json" $P -- "$hostile" udp "$nsip" 53
    # the host's own interface addresses are refused as loopback is
    in_ns=$ns check "$who" host-interface-refused 0 "never connects to .*answers for itself" run --config "$work/nsany.json" -- sh -c "$C http://$nsip:$nshttp/x"
    # other spellings of the same address: one number, IPv4-mapped IPv6
    in_ns=$ns check "$who" host-interface-as-number 0 "never connects to .*answers for itself" run --config "$work/nsany.json" -- bash -c "exec 3<>/dev/tcp/127.0.0.1/3128; printf 'GET http://3325256711:$nshttp/x HTTP/1.1\r\n\r\n' >&3; cat <&3"
    in_ns=$ns check "$who" host-interface-v4-mapped 0 "never connects to .*answers for itself" run --config "$work/nsany.json" -- bash -c "exec 3<>/dev/tcp/127.0.0.1/3128; printf 'GET http://[::ffff:$nsip]:$nshttp/x HTTP/1.1\r\n\r\n' >&3; cat <&3"
    in_ns=$ns check "$who" host-interface-allowed-private 0 "^GET /x$" run --config "$work/nsany.json" $P -- sh -c "$C http://$nsip:$nshttp/x"
    # an address added while capsule runs is refused too (re-read on
    # change): unassigned it is unreachable (502), assigned it is the host's
    rm -f "$work/sync/go" "$work/logs/ns.out"
    (in_ns=$ns as_user_ns "$who" timeout 60 "$capsule" run --config "$work/nsany.json" -- sh -c \
      "$C http://$nsip2:$nshttp/before; echo ready; for i in \$(seq 300); do [ -e $work/sync/go ] && break; sleep 0.1; done; $C http://$nsip2:$nshttp/after" \
      >"$work/logs/ns.out" 2>&1 </dev/null) &
    nsjob=$!
    for _ in $(seq 300); do grep -q '^ready' "$work/logs/ns.out" 2>/dev/null && break; sleep 0.1; done
    ip -n "$ns" addr add "$nsip2/24" dev cveth0
    touch "$work/sync/go"
    wait $nsjob
    ip -n "$ns" addr del "$nsip2/24" dev cveth0
    if grep -q 'did not accept' "$work/logs/ns.out" && ! grep -q '^GET /after$' "$work/logs/ns.out" &&
       grep -q 'never connects to .*answers for itself' "$work/logs/ns.out"; then ok "$who" host-interface-added-later
    else bad "$who" host-interface-added-later; head -6 "$work/logs/ns.out" | sed 's/^/         /'; fi
  fi
  # bad input: the proxy answers and stays up
  check "$who" malformed 0 "^HTTP/1.1 400" run --config "$work/any.json" -- bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128; printf "GARBAGE\r\n\r\n" >&3; head -1 <&3; exec 3<>/dev/tcp/127.0.0.1/3128; printf "GET http://x/ HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n" >&3; head -1 <&3'
  check "$who" oversized-head 0 "larger than 16 KiB" run --config "$work/tunnel.json" $P -- sh -c "$C -H \"X-Big: \$(printf '%020000d' 0)\" http://localhost:$http/big-head"
  # header names outside the token set are refused; hop-by-hop headers
  # (Connection and what it names, Keep-Alive, Proxy-*, TE, Upgrade) dropped
  check "$who" header-name-space 0 "capsule: a header name holds a space" run --config "$work/tunnel.json" $P -- bash -c "exec 3<>/dev/tcp/127.0.0.1/3128; printf 'GET http://localhost:$http/s HTTP/1.1\r\nHost: a\r\nX Y: z\r\n\r\n' >&3; cat <&3"
  check "$who" header-name-te-space 0 "capsule: a header name holds a space" run --config "$work/tunnel.json" $P -- bash -c "exec 3<>/dev/tcp/127.0.0.1/3128; printf 'POST http://localhost:$http/s HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n' >&3; cat <&3; true"
  out=$(cd "$work" && as_user "$who" timeout 60 "$capsule" run --config "$work/tunnel.json" $P -- sh -c "$C -H 'Connection: keep-alive, X-Hop-Named' -H 'X-Hop-Named: 1' -H 'Proxy-Foo: 2' -H 'Keep-Alive: 3' -H 'TE: trailers' -H 'X-End-To-End: 4' http://localhost:$http/hop" 2>&1 </dev/null)
  if echo "$out" | grep -q '^X-End-To-End: 4$' && ! echo "$out" | grep -qiE '^(X-Hop-Named|Proxy-Foo|Keep-Alive|TE):'; then ok "$who" hop-by-hop-stripped
  else bad "$who" hop-by-hop-stripped; echo "$out" | grep -iE '^(X-|Proxy|Keep|TE)' | head -6 | sed 's/^/         /'; fi
  # a large plain-HTTP response arrives whole, forwarded and through a
  # route (the proxy used to half-close the upstream after the request,
  # which Node's server takes for an abort: 64 MB came through as ~5 MB)
  check "$who" large-plain-response 0 "^67108864$" run --config "$work/tunnel.json" $P -- sh -c "$C -o /dev/null -w '%{size_download}\\n' http://localhost:$http/big?bytes=67108864"
  check "$who" large-plain-routed-response 0 "^67108864$" run --config "$work/mask.json" $P -- sh -c "$C -o /dev/null -w '%{size_download}\\n' http://127.0.0.1:3128/q/big?bytes=67108864"
  check "$who" chunked-body 0 "^hello chunked$" run --config "$work/tunnel.json" $P -- sh -c "echo 'hello chunked' | $C -H 'Transfer-Encoding: chunked' --data-binary @- http://localhost:$http/up"
  # faults: a dead upstream, a silent one, 10,000 connections opened and
  # dropped, 200 held open at once: the proxy answers, stays up and bounded
  check "$who" dead-upstream 0 "^HTTP/1.1 502" run --config "$work/any.json" $P -- bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128; printf "GET http://127.0.0.1:1/ HTTP/1.1\r\n\r\n" >&3; head -1 <&3'
  rm -f "$work/logs/faults.out"
  as_user "$who" "$capsule" run --config "$work/tunnel.json" $P -- bash -c "
    for i in \$(seq 10000); do exec 3<>/dev/tcp/127.0.0.1/3128 && exec 3>&-; done
    for i in \$(seq 200); do $C http://localhost:$http/hang >/dev/null 2>&1 & done
    sleep 1; $C http://localhost:$http/alive | head -1; sleep 3; kill \$(jobs -p) 2>/dev/null" \
    >"$work/logs/faults.out" 2>&1 </dev/null &
  cap_pid=$!
  hwm=""
  for _ in $(seq 600); do
    if grep -q '^GET /alive' "$work/logs/faults.out" 2>/dev/null; then
      sup=$cap_pid # the supervisor: this job itself, or (root) its child
      [ "$(cat /proc/$sup/comm 2>/dev/null)" = capsule ] || sup=$(pgrep -P "$cap_pid" -x capsule | head -1)
      hwm=$(awk '/VmHWM/ {print $2}' "/proc/$sup/status" 2>/dev/null); break
    fi
    sleep 0.1
  done
  wait $cap_pid
  if [ -n "$hwm" ] && [ "$hwm" -lt 262144 ]; then ok "$who" "10k-connections-then-200-held (capsule peak RSS ${hwm} kB)"
  else bad "$who" "10k-connections-then-200-held (peak RSS '${hwm}' kB)"; head -5 "$work/logs/faults.out" | sed 's/^/         /'; fi

  # the proxy's CPU is the sandbox's: a masked response through a
  # credential route (TLS from the upstream, parsed, masked, sent on) costs
  # capsule about four times what reading it costs the tool, so under
  # --cpu-ms 700 two 200 MB responses stop the tool though its own
  # processes stay well under 700 ms (they used to run to the end, as they
  # still do under a large budget)
  big="for i in 1 2; do $C -o /dev/null -w '%{size_download}\\n' http://127.0.0.1:3128/hdr/big?bytes=200000000; done"
  check "$who" proxy-cpu-charged 125 "killed: cpu budget" run --cpu-ms 700 --config "$work/mask.json" $P -- sh -c "$big"
  check "$who" proxy-cpu-large-budget 0 "^200000000$" run --cpu-ms 30000 --config "$work/mask.json" $P -- sh -c "$big"

  # the egress log and -v
  rm -f "$work/logs/egress.log"
  check "$who" verbose-denial 0 "capsule: egress denied: GET localhost:$http /x" run -v --egress-log "$work/logs/egress.log" --config "$work/l7.json" $P -- sh -c "$C http://localhost:$http/x >/dev/null"
  if grep -q '"decision":"deny","kind":"http","host":"localhost"' "$work/logs/egress.log" 2>/dev/null; then ok "$who" egress-log
  else bad "$who" egress-log; head -3 "$work/logs/egress.log" 2>&1 | sed 's/^/         /'; fi

  # the log is bounded: repeated denials coalesced, a rate limit, long
  # fields cut; each line valid JSON with what the tool chose escaped
  rm -f "$work/logs/flood.log"
  as_user "$who" timeout 120 "$capsule" run --egress-log "$work/logs/flood.log" --config "$work/l7.json" $P -- bash -c "
    exec 3<>/dev/tcp/127.0.0.1/3128; printf 'GET http://localhost:$http/long%08000d HTTP/1.1\r\n\r\n' 0 >&3; cat <&3 >/dev/null
    exec 3<>/dev/tcp/127.0.0.1/3128; printf 'GET http://localhost:$http/a\342\200\256b\377c\302\233d HTTP/1.1\r\n\r\n' >&3; cat <&3 >/dev/null
    for i in \$(seq 300); do exec 3<>/dev/tcp/127.0.0.1/3128; printf 'GET http://localhost:$http/p%d HTTP/1.1\r\n\r\n' \$i >&3; cat <&3 >/dev/null; done
    for i in \$(seq 1500); do exec 3<>/dev/tcp/127.0.0.1/3128; printf 'GET http://h%d.example/ HTTP/1.1\r\n\r\n' \$i >&3; cat <&3 >/dev/null; done" \
    >/dev/null 2>&1 </dev/null
  verdict=$(node -e '
    const lines = require("fs").readFileSync(process.argv[1], "latin1").split("\n").filter(Boolean);
    const bad = [];
    const js = [];
    for (const l of lines) { try { js.push(JSON.parse(Buffer.from(l, "latin1").toString("utf8"))); } catch { bad.push("not JSON: " + l.slice(0, 80)); } }
    if (lines.some((l) => /\u00e2\u0080\u00ae|\xff|\u00c2\u009b/.test(l))) bad.push("raw bytes in the log");
    // the odd path is the first of this run of denials, /p1../p300 repeat it
    const local = js.filter((j) => j.host === "localhost" && j.decision === "deny");
    const sup = js.filter((j) => j.decision === "suppressed" && /more denials of GET localhost:/.test(j.reason));
    const sum = sup.reduce((a, j) => a + j.count, 0);
    if (local.length !== 1 || sum !== 300) bad.push(`coalesced: ${local.length} lines, ${sum} suppressed`);
    const hosts = js.filter((j) => j.decision === "deny" && /^h\d+\.example$/.test(j.host || "")).length;
    const dropped = js.filter((j) => j.decision === "suppressed" && /dropped by the rate limit/.test(j.reason)).reduce((a, j) => a + j.count, 0);
    if (!dropped || hosts + dropped < 1500 || hosts >= 1500) bad.push(`rate limit: ${hosts} lines, ${dropped} dropped`);
    const long = js.find((j) => /\/long0/.test(j.path || ""));
    if (!long || long.path.length > 1100 || !/more bytes\)$/.test(long.path)) bad.push("long path not cut");
    const odd = js.find((j) => /^\/a/.test(j.path || ""));
    if (!odd || odd.path !== "/a\\u{202e}b\\xffc\\u{009b}d") bad.push("escaped path: " + JSON.stringify(odd && odd.path));
    console.log(bad.join("; "));' "$work/logs/flood.log" 2>&1)
  if [ -z "$verdict" ]; then ok "$who" egress-log-bounded-and-escaped
  else bad "$who" "egress-log-bounded-and-escaped: $verdict"; fi
done
# a device node planted at the egress log's path is refused without being
# opened for writing (its type is read through an O_PATH descriptor first)
if [ "$(id -u)" = 0 ] && mknod "$work/logs/dev" c 1 3 2>/dev/null; then
  out=$("$capsule" run --net proxy --egress-log "$work/logs/dev" -- true 2>&1)
  if [ $? -ne 0 ] && grep -q "cannot use .* as the egress log" <<<"$out"; then ok root egress-log-device-refused
  else bad root "egress-log-device-refused: $out"; fi
  rm -f "$work/logs/dev"
fi
echo "egress tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
