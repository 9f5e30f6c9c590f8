#!/usr/bin/env bash
# Pattern names on the transparent path: a manifest allowing only
# `*.pat.test` (on the test servers' ports) and a Covenant agent with
# `outbound-https-only` (`*` on 443, made to reach the local server's port
# through the same rule shape: `*` with ports.connect) reach names under
# the pattern without the proxy (curl --noproxy): the sandbox's resolver
# gives each name an on-demand address from 127.77.128.0/17, the capture
# redirect brings the connection to capsule, which maps it back to the
# name. Refused: a name outside the pattern (NXDOMAIN), a port outside,
# an SNI for another name; past 1024 names the resolver answers SERVFAIL
# and the names given keep theirs. Upstreams are local (tservers.py),
# reached by name through --resolve. An endpoint pattern with L7 rules is
# intercepted on the transparent path too. As root and uid 65534.
# Usage: patterns.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
here=$(cd "$(dirname "$0")" && pwd)
for tool in openssl curl python3 getent; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (scripts/deps.sh test installs it)"; exit 77; }
done
if ! "$capsule" doctor 2>/dev/null | grep -qE '^ +any-port names +yes'; then
  echo "SKIP: doctor says the capture redirect (nftables) does not work here: patterns are proxy only"
  exit 77
fi
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
work=$(mktemp -d /var/tmp/capsule-patterns.XXXXXX)
chmod 755 "$work"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
mkdir -m 1777 "$work/state"
export XDG_STATE_HOME=$work/state

# shellcheck source=../lib/egress.sh
. "$(dirname "$0")/../lib/egress.sh"
check_timeout=120
egress_certs a.pat.test "*.pat.test" other.test

egress_servers
http=$(port http) https=$(port https) spare=$(port spare)
[ -n "$spare" ] || { echo "FAIL: the test upstreams did not start"; exit 1; }

grant='"filesystem": {"grants": [{"path": "'"$work"'/ca.pem", "access": "read", "type": "file"}]}'
printf '{"version": "0.1.0", %s, "network": {"mode": "proxy", "allow_domains": ["*.pat.test"], "ports": {"connect": [%s, %s]}}}\n' \
  "$grant" "$https" "$http" >"$work/pat.json"
printf '{"version": "0.1.0", %s, "network": {"mode": "proxy", "endpoints": [{"host": "*.pat.test:%s"}]}}\n' \
  "$grant" "$https" >"$work/endpoint.json"
printf '{"version": "0.1.0", "network": {"mode": "proxy", "endpoints": [{"host": "*.pat.test:%s", "rules": [{"method": "GET", "path": "/allowed/**"}]}]}}\n' \
  "$https" >"$work/ruled.json"
R="--resolve a.pat.test:127.0.0.1 --resolve b.pat.test:127.0.0.1 --proxy-allow-private"

mkdir -m 777 "$work/logs"
C="curl -sS --max-time 30 --noproxy '*' --cacert $work/ca.pem"
run() { echo run --config "$work/$1.json" $R --egress-log "$work/logs/$2-$who.log"; }

for who in "${users[@]}"; do
  # the resolver: each name under the pattern its own pool address, the
  # same one when asked again; the bare suffix and other names NXDOMAIN
  check "$who" dns-on-demand 0 "^a=127\.77\.128\.1 b=127\.77\.128\.2 again=127\.77\.128\.1 bare=2 other=2$" $(run pat dns) -- sh -c '
a=$(getent hosts a.pat.test | cut -d" " -f1); b=$(getent hosts B.Pat.Test | cut -d" " -f1)
c=$(getent hosts a.pat.test | cut -d" " -f1)
getent hosts pat.test >/dev/null; bare=$?; getent hosts a.pat.test.evil >/dev/null; other=$?
echo "a=$a b=$b again=$c bare=$bare other=$other"'
  check_log "$who" dns-refusal-logged '"kind":"dns","host":"a.pat.test.evil"' dns
  # two names under the pattern, HTTPS (spliced, SNI the name) and plain HTTP
  check "$who" two-names-noproxy 0 "^GET /a host=a\.pat\.test:$https GET /b host=b\.pat\.test:$http$" $(run pat curl) -- sh -c \
    "echo \$($C https://a.pat.test:$https/a) \$($C http://b.pat.test:$http/b)"
  check_log "$who" transparent-logged '"decision":"allow","kind":"transparent","host":"b.pat.test"' curl
  # an endpoint pattern with its own port: that port only
  check "$who" endpoint-pattern 0 "^GET /e host=a\.pat\.test:$https rc=(52|56)$" $(run endpoint ep) -- sh -c \
    "echo \$($C https://a.pat.test:$https/e) \$($C http://a.pat.test:$http/e >/dev/null 2>&1; echo rc=\$?)"
  check_log "$who" port-outside-logged '"decision":"deny","kind":"transparent","host":"a.pat.test","port":'"$http"'.*allowlist' ep
  # an endpoint pattern with L7 rules: TLS terminated with the session CA
  # (the tool trusts it through CURL_CA_BUNDLE), the rules hold
  check "$who" ruled-pattern 0 "^GET /allowed/r host=b\.pat\.test:$https 403$" $(run ruled ruled) -- sh -c \
    "echo \$(curl -sS --max-time 30 --noproxy '*' https://b.pat.test:$https/allowed/r) \$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 --noproxy '*' https://b.pat.test:$https/admin)"
  # refusals: a port outside, an SNI for another name, a name outside
  check "$who" port-outside 0 "^rc=(52|56)$" $(run pat port) -- sh -c "$C http://a.pat.test:$spare/x; echo rc=\$?"
  check "$who" sni-mismatch 0 "^refused$" $(run pat sni) -- $py -c "
import socket, ssl
c = ssl.create_default_context(cafile='$work/ca.pem')
s = socket.create_connection((socket.gethostbyname('a.pat.test'), $https), timeout=20)
try: c.wrap_socket(s, server_hostname='b.pat.test'); print('handshake done')
except (ssl.SSLError, OSError) as e: print('refused')"
  check_log "$who" sni-mismatch-logged '"host":"a.pat.test".*SNI' sni
  check "$who" name-outside 0 "^rc=6$" $(run pat out) -- sh -c "$C http://other.test:$http/x; echo rc=\$?"
  # the pool filled: 1024 names, then SERVFAIL (logged); names given keep theirs
  check "$who" pool-exhausted 0 "^given 1024 last 127\.77\.132\.0 refused first 127\.77\.128\.1$" $(run pat pool) -- $py -c "
import socket
given = [socket.gethostbyname('n%d.pat.test' % i) for i in range(1024)]
try: socket.gethostbyname('one-more.pat.test'); r = 'answered'
except socket.gaierror: r = 'refused'
print('given', len(set(given)), 'last', given[-1], r, 'first', socket.gethostbyname('n0.pat.test'))"
  check_log "$who" pool-full-logged '"kind":"dns","host":"one-more.pat.test".*pool is full' pool
  check "$who" dry-run-shows-pool 0 "^transparent: +names under a pattern: on demand from 127\.77\.128\.0/17" run --dry-run --config "$work/pat.json"
done
echo "pattern egress tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
