#!/usr/bin/env bash
# The transparent egress path end to end: tools with no proxy support reach
# allowlisted names through the sandbox's resolver and synthetic addresses
# (curl --noproxy, Node's fetch, Python's imaplib and smtplib with
# STARTTLS, psql), and everything else is refused: other names, ports not
# allowed, names that resolve host-side to forbidden addresses (also among
# others: rebinding), an SNI that is not the name, DNS to any other server.
# Upstreams are local (tservers.py, PostgreSQL when installed) and reached
# by name through --resolve. As root and unprivileged.
# Usage: transparent.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
here=$(cd "$(dirname "$0")" && pwd)
for tool in node openssl curl python3 getent; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (scripts/deps.sh test installs it)"; exit 77; }
done
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
work=$(mktemp -d /var/tmp/capsule-transparent.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  [ -n "${rns:-}" ] && ip netns del "$rns" 2>/dev/null
  [ -n "${pgdata:-}" ] && as_user "$pguser" "$pgbin/pg_ctl" -D "$pgdata" -m immediate stop >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
# capsule's own state, not the caller's (a newer capsule's database there
# must not decide this test)
mkdir -m 1777 "$work/state"
export XDG_STATE_HOME=$work/state

# shellcheck source=../lib/egress.sh
. "$(dirname "$0")/../lib/egress.sh"
egress_certs mail.test mail.test web.test ruled.test other.test any.test cred.test

egress_servers
http=$(port http) https=$(port https) https2=$(port https2) imaps=$(port imaps) smtp=$(port smtp) spare=$(port spare)
drain=$(port drain)
[ -n "$spare" ] || { echo "FAIL: the test upstreams did not start"; exit 1; }

# PostgreSQL for psql, when installed (trust auth on 127.0.0.1 only)
pgbin=$(dirname "$(command -v initdb 2>/dev/null || ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | tail -1)" 2>/dev/null)
pgport=""
pguser=root
[ "$(id -u)" = 0 ] && pguser=nobody
if [ -x "$pgbin/initdb" ] && [ -x "$pgbin/pg_ctl" ] && command -v psql >/dev/null; then
  pgdata=$work/pg
  mkdir -m 700 "$pgdata" && [ "$(id -u)" = 0 ] && chown 65534:65534 "$pgdata"
  pgport=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  if ! as_user "$pguser" "$pgbin/initdb" -D "$pgdata" -A trust -U postgres >"$work/pg.log" 2>&1 ||
     ! as_user "$pguser" "$pgbin/pg_ctl" -D "$pgdata" -w -l "$pgdata/log" \
        -o "-c listen_addresses=127.0.0.1 -p $pgport -k $pgdata" start >>"$work/pg.log" 2>&1; then
    echo "note: PostgreSQL did not start; the psql test is skipped"; tail -5 "$work/pg.log"; pgport=""; pgdata=""
  fi
else
  echo "note: PostgreSQL (initdb, pg_ctl, psql) is not installed; the psql test is skipped"
fi

R="--resolve half.test:127.0.0.1 --resolve mail.test:127.0.0.1 --resolve web.test:127.0.0.1 --resolve plain.test:127.0.0.1 --resolve ruled.test:127.0.0.1 --resolve db.test:127.0.0.1 --resolve meta.test:169.254.169.254 --resolve rebind.test:127.0.0.1,169.254.169.254"
P="--proxy-allow-private"
m() { printf '{"version": "0.1.0", %s}\n' "$2" >"$work/$1.json"; }
m main '"filesystem": {"grants": [{"path": "'"$work"'/ca.pem", "access": "read", "type": "file"}]},
 "network": {"mode": "proxy", "endpoints": [{"host": "mail.test:'"$imaps"'"}, {"host": "mail.test:'"$smtp"'"},
  {"host": "web.test:'"$https"'"}, {"host": "plain.test:'"$http"'"}, {"host": "meta.test:'"$http"'"},
  {"host": "half.test:'"$drain"'"},
  {"host": "rebind.test:'"$http"'"}, {"host": "db.test:'"${pgport:-1}"'"},
  {"host": "ruled.test:'"$https2"'", "rules": [{"method": "GET", "path": "/allowed/**"}]}]}'

m any '"filesystem": {"grants": [{"path": "'"$work"'/ca.pem", "access": "read", "type": "file"}]},
 "network": {"mode": "proxy", "allow_domains": ["any.test"]}'
m ruledplain '"network": {"mode": "proxy", "endpoints": [{"host": "plain.test:'"$http"'",
  "rules": [{"method": "GET", "path": "/allowed/**"}]}]}'
secret=canary-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')
export CAPSULE_TEST_SECRET=$secret
m route '"network": {"mode": "proxy"}, "credentials": [{"name": "cred", "upstream": "https://cred.test:'"$https2"'",
  "source": "env://CAPSULE_TEST_SECRET"}]'
want_auth=$(printf 'Bearer %s' "$secret" | sha256sum | cut -d' ' -f1)
# DNS rebinding for real: a network namespace of the test's own with a DNS
# server that answers a name first with 127.0.0.1, then with the metadata
# address, and capsule inside it reading that server (its resolv.conf
# mounted over in a mount namespace of its own); root only
rns=""
if [ "$(id -u)" = 0 ] && ip netns add "capsule-rebind-$$" 2>/dev/null; then
  rns=capsule-rebind-$$
  ip -n "$rns" link set lo up
  mkdir -m 755 "$work/www" && echo rebind-ok >"$work/www/x" && chmod 644 "$work/www/x"
  echo "nameserver 127.0.0.1" >"$work/resolv.conf" && chmod 644 "$work/resolv.conf"
  ip netns exec "$rns" "$py" "$here/rebind_dns.py" 127.0.0.1 169.254.169.254 >"$work/dns.out" & pids+=($!)
  ip netns exec "$rns" "$py" -m http.server --bind 127.0.0.1 --directory "$work/www" 18080 >/dev/null 2>&1 & pids+=($!)
  for _ in $(seq 50); do [ -s "$work/dns.out" ] && break; sleep 0.1; done
  eps=""
  for n in rebind keep short alias; do eps="$eps{\"host\": \"$n-root.test:18080\"}, {\"host\": \"$n-nobody.test:18080\"}, "; done
  m rebind '"network": {"mode": "proxy", "endpoints": ['"${eps%, }"']}'
else
  echo "note: the real-rebinding test needs root and ip netns; skipped"
fi
in_rns() { # WHO CMD...: as WHO inside the rebinding namespace, its resolver in /etc/resolv.conf
  local who=$1; shift
  local drop=()
  [ "$who" = root ] || drop=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  ip netns exec "$rns" unshare -m sh -c 'mount --bind "$1" /etc/resolv.conf && shift && exec "$@"' \
    sh "$work/resolv.conf" "${drop[@]}" "$@"
}
# the same through a Selu manifest's allowlist (host:port entries)
cat >"$work/manifest.yaml" <<YAML
id: mail-tool
class: tool
image: ghcr.io/example/mail:1.0.0
tools:
  - name: send
    description: Send a mail
    input_schema: {type: object}
network:
  mode: allowlist
  hosts:
    - "mail.test:$imaps"
    - "mail.test:$smtp"
YAML
capture=no
"$capsule" doctor 2>/dev/null | grep -qE '^ +any-port names +yes' && capture=yes
[ "$capture" = yes ] || echo "note: doctor says any-port names are not captured here; those tests are skipped"

C="curl -sS --max-time 20 --noproxy '*'"
# half-closes: the tool sends SIZE bytes and its end at once (they reach
# capsule together), the drain server answers after that end with their
# count and hash and closes (the answer and its end together too); through
# a CONNECT tunnel or on the transparent path (spliced: not HTTP, not TLS)
halfclose='
import hashlib, socket, sys
mode, host, port, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = (b"half-close payload " * (size // 19 + 1))[:size]
if mode == "connect":
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host.encode(), port, host.encode(), port))
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        b = s.recv(1)
        if not b:
            break
        head += b
    if not head.startswith(b"HTTP/1.1 200"):
        sys.exit("the tunnel was refused: %r" % head)
else:
    s = socket.create_connection((host, port), timeout=20)
s.sendall(data)
s.shutdown(socket.SHUT_WR)
got = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    got += b
want = b"got %d %s\n" % (len(data), hashlib.sha256(data).hexdigest().encode())
print("half-close ok" if got == want else "half-close mismatch: %r, want %r" % (got, want))'
run_main() { echo run --config "$work/main.json" $R $P --egress-log "$work/logs/$1-$who.log"; }
mkdir -m 777 "$work/logs"

for who in "${users[@]}"; do
  # the resolver: allowed names get synthetic addresses (one each), others NXDOMAIN, AAAA NODATA
  check "$who" dns-allowed 0 "^127\.77\.0\.[0-9]+ +mail\.test$" $(run_main dns) -- getent hosts mail.test
  check "$who" dns-refused 0 "^nx=2$" $(run_main dns) -- sh -c 'getent hosts nope.test; echo nx=$?'
  check "$who" dns-aaaa-nodata 0 "^v4 127\.77\.0\.[0-9]+ v6 none$" $(run_main dns) -- $py -c '
import socket
a = socket.getaddrinfo("web.test", 80, socket.AF_INET)[0][4][0]
try: b = socket.getaddrinfo("web.test", 80, socket.AF_INET6)[0][4][0]
except socket.gaierror as e: b = "none"
print("v4", a, "v6", b)'
  check "$who" hosts-only-localhost 0 "^localhost ok$" $(run_main dns) -- sh -c 'grep -v "^#" /etc/hosts | grep -qv localhost && echo extra || echo localhost ok'
  # curl without the proxy: plain HTTP to an allowed name, the Host kept; a refused name
  for mode in connect direct; do
    for size in 13 300000; do
      check "$who" "half-close-$mode-$size" 0 "^half-close ok$" $(run_main half) -- $py -c "$halfclose" $mode half.test "$drain" $size
    done
  done
  check "$who" curl-noproxy-allowed 0 "^GET /x host=plain\.test:$http$" $(run_main curl) -- sh -c "$C http://plain.test:$http/x"
  check "$who" curl-noproxy-refused 0 "^rc=6$" $(run_main curl) -- sh -c "$C http://nope.test:$http/x; echo rc=\$?"
  check "$who" curl-https-spliced 0 "^GET /s host=web\.test:$https$" $(run_main curl) -- sh -c "$C --cacert $work/ca.pem https://web.test:$https/s"
  # Node's built-in fetch (undici: no proxy support), spliced end to end
  check "$who" node-fetch-https 0 "^200 GET /f host=web\.test:$https$" $(run_main node) --env NODE_EXTRA_CA_CERTS="$work/ca.pem" -- node -e "
fetch('https://web.test:$https/f').then(async (r) => console.log(r.status, (await r.text()).trim())).catch((e) => { console.log('error', e.cause || e); process.exit(1); })"
  # L7 rules hold on the transparent path: TLS terminated with the session CA
  check "$who" node-fetch-intercepted 0 "^200 GET /allowed/a host=ruled\.test:$https2 403$" $(run_main node) -- node -e "
(async () => { const a = await fetch('https://ruled.test:$https2/allowed/a'); const b = await fetch('https://ruled.test:$https2/admin');
console.log(a.status, (await a.text()).trim(), b.status); })().catch((e) => { console.log('error', e.cause || e); process.exit(1); })"
  # Python's imaplib over TLS and smtplib with STARTTLS, against local servers
  check "$who" python-imap4-ssl 0 "^imap OK BYE$" $(run_main mail) -- $py -c "
import imaplib, ssl
c = ssl.create_default_context(cafile='$work/ca.pem')
m = imaplib.IMAP4_SSL('mail.test', $imaps, ssl_context=c)
print('imap', m.login('u', 'p')[0], m.logout()[0])"
  check "$who" python-smtp-starttls 0 "^smtp 250 queued \(tls=1\)$" $(run_main mail) -- $py -c "
import smtplib, ssl
s = smtplib.SMTP('mail.test', $smtp, timeout=20)
s.starttls(context=ssl.create_default_context(cafile='$work/ca.pem')); s.ehlo()
s.mail('a@x.test'); s.rcpt('b@x.test'); code, msg = s.data('Subject: t\r\n\r\nhello\r\n')
print('smtp', code, msg.decode()); s.quit()"
  if [ -n "$pgport" ]; then
    check "$who" psql 0 "^42$" $(run_main pg) -- psql "host=db.test port=$pgport user=postgres dbname=postgres sslmode=disable connect_timeout=10" -Atc 'select 42'
  fi
  # connects from 40 threads one after another and 8 at once (each a
  # thread the supervisor has not seen: its kept pidfds are evicted and
  # reused), each one's own socket connected; a refused port among them
  check "$who" threads-connect 0 "^48 ok, refused$" $(run_main threads) -- $py -c "
import socket, threading
res = []
def one():
    s = socket.create_connection(('plain.test', $http), timeout=20)
    s.sendall(b'GET /t HTTP/1.0\\r\\nHost: plain.test\\r\\n\\r\\n')
    res.append(b'GET /t' in s.makefile('rb').read())
for i in range(40):
    t = threading.Thread(target=one); t.start(); t.join()
ts = [threading.Thread(target=one) for i in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
try: socket.create_connection((socket.gethostbyname('plain.test'), $spare), timeout=10); r = 'connected'
except (ConnectionRefusedError, PermissionError): r = 'refused'
print(sum(res), 'ok,', r)"
  # a connection the connect supervisor never sees (TCP Fast Open's
  # sendto connects without connect()): still served, by the listeners'
  # sweep, and still checked
  check "$who" tcp-fast-open 0 "^b'GET /tfo host=plain\.test:$http'$" $(run_main tfo) -- $py -c "
import socket
s = socket.socket()
s.sendto(b'GET /tfo HTTP/1.0\\r\\nHost: plain.test\\r\\n\\r\\n', socket.MSG_FASTOPEN, (socket.gethostbyname('plain.test'), $http))
print(s.makefile('rb').read().split(b'\\r\\n\\r\\n', 1)[-1].strip())"
  check_log "$who" tcp-fast-open-logged '"decision":"allow","kind":"transparent","host":"plain.test"' tfo
  # refusals: a port the name may not use, a forbidden address host-side,
  # a rebinding name (one of its addresses forbidden), an SNI for another name
  check "$who" port-not-allowed 0 "^refused$" $(run_main refuse) -- $py -c "
import socket
a = socket.gethostbyname('plain.test')
try: socket.create_connection((a, $spare), timeout=10); print('connected')
except (ConnectionRefusedError, PermissionError): print('refused')"
  check "$who" forbidden-address 0 "^rc=(52|56)$" $(run_main meta) -- sh -c "$C http://meta.test:$http/latest; echo rc=\$?"
  check_log "$who" forbidden-address-logged '"host":"meta.test".*never connects to' meta
  check "$who" rebinding-refused 0 "^rc=(52|56)$" $(run_main rebind) -- sh -c "$C http://rebind.test:$http/x; echo rc=\$?"
  check_log "$who" rebinding-logged '"host":"rebind.test".*never connects to' rebind
  check "$who" private-without-flag 0 "^rc=(52|56)$" run --config "$work/main.json" $R --egress-log "$work/logs/priv-$who.log" -- sh -c "$C http://plain.test:$http/x; echo rc=\$?"
  check_log "$who" private-without-flag-logged '"host":"plain.test".*never connects to' priv
  check "$who" sni-mismatch 0 "^refused$" $(run_main sni) -- $py -c "
import socket, ssl
c = ssl.create_default_context(cafile='$work/ca.pem')
s = socket.create_connection((socket.gethostbyname('web.test'), $https), timeout=10)
try: c.wrap_socket(s, server_hostname='other.test'); print('handshake done')
except (ssl.SSLError, OSError) as e: print('refused')"
  # a ClientHello in pieces: read whole before any verdict, then spliced
  check "$who" sni-split-hello 0 "^server hello$" $(run_main sni) -- $py -c "
import socket, ssl, time
o = ssl.MemoryBIO()
t = ssl.create_default_context(cafile='$work/ca.pem').wrap_bio(ssl.MemoryBIO(), o, server_hostname='web.test')
try: t.do_handshake()
except ssl.SSLWantReadError: pass
hello = o.read()
s = socket.create_connection((socket.gethostbyname('web.test'), $https), timeout=10)
for piece in (hello[:3], hello[3:40], hello[40:]):
    s.sendall(piece); time.sleep(0.2)
print('server hello' if s.recv(1) == b'\x16' else 'nothing')"
  check_log "$who" sni-mismatch-logged '"host":"web.test".*SNI' sni
  # no DNS leaves the sandbox: UDP/53 to another server goes nowhere, the
  # real address is not reachable from inside either
  check "$who" udp53-elsewhere 0 "^8.8.8.8 unreachable 127.0.0.1 no answer$" $(run_main udp) -- $py -c "
import socket
q = bytes.fromhex('12340100000100000000000004706c61696e04746573740000010001')
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
try: s.sendto(q, ('8.8.8.8', 53)); r = 'sent'
except OSError: r = 'unreachable'
t = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); t.settimeout(2)
try: t.sendto(q, ('127.0.0.1', 53)); t.recv(512); u = 'answered'
except OSError: u = 'no answer'
print('8.8.8.8', r, '127.0.0.1', u)"
  check "$who" real-address-unreachable 0 "^refused$" $(run_main udp) -- $py -c "
import socket
try: socket.create_connection(('127.0.0.1', $http), timeout=10); print('connected')
except OSError: print('refused')"
  # the egress log has the transparent connections, escaped
  check_log "$who" egress-logged '"decision":"allow","kind":"transparent","host":"plain.test"' curl
  check_log "$who" dns-refusal-logged '"kind":"dns","host":"nope.test"' dns
  # plain HTTP to a host with rules, and a credential route: read as absolute-form requests
  check "$who" http-rules-allowed 0 "^GET /allowed/a host=plain\.test:$http$" run --config "$work/ruledplain.json" $R $P -- sh -c "$C http://plain.test:$http/allowed/a"
  check "$who" http-rules-denied 0 "^HTTP/1.1 403" run --config "$work/ruledplain.json" $R $P -- sh -c "$C -i http://plain.test:$http/admin | head -1"
  check "$who" route-injected 0 "^auth#sha256=$want_auth$" run --config "$work/route.json" --resolve cred.test:127.0.0.1 $P -- sh -c "$C https://cred.test:$https2/v"
  check "$who" route-secret-not-inside 0 "^clean$" run --config "$work/route.json" --resolve cred.test:127.0.0.1 $P -- sh -c "r=clean; $C https://cred.test:$https2/v | grep -q '$secret' && r=leaked; env | grep -q '$secret' && r=leaked; echo \$r"
  # every format with proxy mode, and --allow-host, use it
  check "$who" selu-allowlist-smtp 0 "^smtp 250 queued \(tls=1\)$" run --config "$work/manifest.yaml" $R $P -- $py -c "
import smtplib, ssl
s = smtplib.SMTP('mail.test', $smtp, timeout=20)
s.starttls(context=ssl.create_default_context(cafile='$work/ca.pem')); s.ehlo('x')
s.mail('a@x.test'); s.rcpt('b@x.test'); code, msg = s.data('hi\r\n'); print('smtp', code, msg.decode()); s.quit()"
  check "$who" allow-host-flag 0 "^GET /h host=plain\.test:$http$" run --allow-host "plain.test:$http" $R $P -- sh -c "$C http://plain.test:$http/h"
  # real rebinding: each connection resolves once, checks and uses that answer
  if [ -n "$rns" ]; then
    sleep 1 # the http server inside the namespace
    out=$(cd "$work" && in_rns "$who" timeout 60 "$capsule" run --config "$work/rebind.json" $P \
      --egress-log "$work/logs/rns-$who.log" -- sh -c "$C http://rebind-$who.test:18080/x; $C http://rebind-$who.test:18080/x; echo rc=\$?" 2>&1 </dev/null)
    if echo "$out" | grep -q '^rebind-ok$' && echo "$out" | grep -qE '^rc=(52|56)$' &&
       grep -q '"host":"rebind-'"$who"'.test".*never connects to' "$work/logs/rns-$who.log"; then
      ok "$who" dns-rebinding-resolved-once
    else bad "$who" "dns-rebinding-resolved-once"; echo "$out" | head -5 | sed 's/^/         /'; cat "$work/logs/rns-$who.log" 2>/dev/null | head -3 | sed 's/^/         /'; fi
    # capsule's own queries keep an answer for its TTL: asked once in 300 s
    # (the second answer, the metadata address, is never seen), asked again
    # after 1 s has run out (and that answer refused); a CNAME to a
    # forbidden address refused
    out=$(cd "$work" && in_rns "$who" timeout 60 "$capsule" run --config "$work/rebind.json" $P \
      --egress-log "$work/logs/ttl-$who.log" -- sh -c "$C http://keep-$who.test:18080/x; $C http://keep-$who.test:18080/x; $C http://short-$who.test:18080/x; sleep 3; $C http://short-$who.test:18080/x; echo rc=\$?; $C http://alias-$who.test:18080/x; echo rc=\$?" 2>&1 </dev/null)
    if [ "$(echo "$out" | grep -c '^rebind-ok$')" = 3 ] && [ "$(grep -c "^query keep-$who.test 1$" "$work/dns.out")" = 1 ]; then
      ok "$who" dns-ttl-kept
    else bad "$who" "dns-ttl-kept"; echo "$out" | head -8 | sed 's/^/         /'; grep "keep-$who" "$work/dns.out" | sed 's/^/         /'; fi
    if [ "$(grep -c "^query short-$who.test 1$" "$work/dns.out")" = 2 ] &&
       grep -q '"host":"short-'"$who"'.test".*never connects to' "$work/logs/ttl-$who.log"; then
      ok "$who" dns-ttl-expired-refused
    else bad "$who" "dns-ttl-expired-refused"; echo "$out" | head -8 | sed 's/^/         /'; grep "short-$who" "$work/dns.out" | sed 's/^/         /'; fi
    if [ "$(echo "$out" | grep -cE '^rc=(52|56)$')" = 2 ] &&
       grep -q '"host":"alias-'"$who"'.test".*never connects to' "$work/logs/ttl-$who.log"; then
      ok "$who" dns-cname-to-forbidden-refused
    else bad "$who" "dns-cname-to-forbidden-refused"; echo "$out" | head -8 | sed 's/^/         /'; cat "$work/logs/ttl-$who.log" 2>/dev/null | head -5 | sed 's/^/         /'; fi
  fi
  # a name allowed on any port: every port captured (nftables redirect) where doctor says so
  if [ "$capture" = yes ]; then
    check "$who" any-port-captured 0 "^GET /a host=any\.test:$http$" run --config "$work/any.json" $R --resolve any.test:127.0.0.1 $P -- sh -c "$C http://any.test:$http/a"
    check "$who" any-port-smtp 0 "^smtp 250 queued \(tls=1\)$" run --config "$work/any.json" $R --resolve any.test:127.0.0.1 $P -- $py -c "
import smtplib, ssl
s = smtplib.SMTP('any.test', $smtp, timeout=20)
s.starttls(context=ssl.create_default_context(cafile='$work/ca.pem')); s.ehlo('x')
s.mail('a@x.test'); s.rcpt('b@x.test'); code, msg = s.data('hi\r\n'); print('smtp', code, msg.decode()); s.quit()"
    check "$who" any-port-unknown-address 0 "^rc=(52|56)$" run --config "$work/any.json" $R --resolve any.test:127.0.0.1 $P -- sh -c "$C http://127.77.0.9:$http/; echo rc=\$?"
  fi
  check "$who" resolve-usage 2 "is not HOST:ADDR" run --resolve a.test:1.2.3.4,nope -- true
  check "$who" dry-run-shows 0 "^transparent: +mail\.test -> 127\.77\.0\.1 port [0-9]+, [0-9]+$" run --dry-run --config "$work/main.json"
done
echo "transparent egress tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
