#!/usr/bin/env bash
# The transparent egress path from the formats a gateway calls: a Covenant
# agent (stdio JSONL, curl --noproxy '*') and a Talos plugin (Node's
# http module, which never uses a proxy), each granted one host:port by
# the operator (capsule grant), reach that name through the sandbox's
# resolver and its synthetic address, and are refused a name they were not
# granted (NXDOMAIN inside) and a port of the granted name they were not
# granted; a Covenant agent with outbound-https-only and a grant too, which
# also reaches two names on 443 (HTTPS, 198.51.100.7) through on-demand
# addresses where the capture redirect works (doctor), and is refused
# another port of those names and a ClientHello naming one sent to the
# other's address. No proxy variable is used: each client is told to ignore it or never reads
# it. capsule runs in a network namespace of the test's own (198.51.100.8,
# TEST-NET-2), joined by a veth pair to another where 198.51.100.7 serves
# HTTP; the granted name is resolved host-side from an /etc/hosts bound
# over capsule's in a mount namespace of its own. As root and as uid
# 65534. Needs root (ip netns).
# Usage: formats.sh CAPSULE
set -u
capsule=$(realpath "$1")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces of the test's own)"; exit 77; }
for tool in ip python3 curl unshare setpriv openssl; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-egress-formats.XXXXXX)
chmod 755 "$work"
ns=capsule-egfm-$$ up=capsule-egfu-$$ nsip=198.51.100.7 port=18080
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  ip netns del "$ns" 2>/dev/null
  ip netns del "$up" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
if ! ip netns add "$ns" 2>/dev/null || ! ip netns add "$up" 2>/dev/null; then echo "SKIP: cannot create a network namespace"; exit 77; fi
if ! { ip -n "$ns" link set lo up && ip -n "$up" link set lo up &&
  ip -n "$ns" link add cveth0 type veth peer name cveth1 netns "$up" &&
  ip -n "$ns" addr add 198.51.100.8/24 dev cveth0 && ip -n "$ns" link set cveth0 up &&
  ip -n "$up" addr add "$nsip/24" dev cveth1 && ip -n "$up" link set cveth1 up; }; then
  echo "FAIL: cannot set up the test namespaces"; exit 1
fi
mkdir -p "$work/www" && head -c 5000 /dev/zero >"$work/www/big" && chmod -R a+rX "$work/www"
for p in "$port" $((port + 1)); do
  ip netns exec "$up" python3 -m http.server --bind "$nsip" --directory "$work/www" "$p" >/dev/null 2>&1 &
  pids+=($!)
done
# HTTPS on 443 for outbound-https-only's names (a self-signed certificate:
# the agent's curl -k still sends the name as SNI, which capsule checks)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/srv.key" \
  -out "$work/srv.pem" -days 2 -subj /CN=a.pat.test -addext 'subjectAltName=DNS:*.pat.test' 2>/dev/null ||
  { echo "FAIL: cannot make the test certificate"; exit 1; }
ip netns exec "$up" python3 -c '
import functools, http.server, ssl, sys
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[2])
http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None
s = http.server.ThreadingHTTPServer((sys.argv[1], 443), h)
c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
c.load_cert_chain(sys.argv[3], sys.argv[4])
s.socket = c.wrap_socket(s.socket, server_side=True)
s.serve_forever()' "$nsip" "$work/www" "$work/srv.pem" "$work/srv.key" >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  ip netns exec "$ns" python3 -c 'import socket,sys; socket.create_connection((sys.argv[1], 443), 1)' \
    "$nsip" 2>/dev/null && break
  sleep 0.2
done
for _ in $(seq 100); do
  ip netns exec "$ns" python3 -c 'import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 1)' \
    "$nsip" $((port + 1)) 2>/dev/null && break
  sleep 0.2
done
# capsule's host side resolves the names from this file (before any DNS)
printf '127.0.0.1 localhost\n%s up.test other.test a.pat.test b.pat.test\n' "$nsip" >"$work/hosts"
chmod 644 "$work/hosts"
CAPSULE_STATE_KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
export CAPSULE_STATE_KEY
unset CAPSULE_STATE CAPSULE_STATE_KEY_FILE

caps=$work/caps
# Covenant: network off (the operator's grant opens it), and
# outbound-https-only (any name on 443, and the grant beside it)
agent() { # agent ID NETWORK
  mkdir -p "$caps/agents/$1"
  printf '[agent]\nid = "%s"\nname = "%s"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "%s"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' \
    "$1" "$1" "$2" >"$caps/agents/$1/agent.toml"
  cat >"$caps/agents/$1/run.sh" <<SH
#!/bin/sh
IFS= read -r line
c() { curl -s --noproxy '*' --max-time 20 "\$@"; }
got=\$(c http://up.test:$port/big | wc -c)
c -o /dev/null http://other.test:$port/big; other=\$?
c -o /dev/null http://up.test:$((port + 1))/big; port=\$?
addr=\$(getent hosts up.test | cut -d' ' -f1)
ha=\$(c -k https://a.pat.test/big | wc -c)
hb=\$(c -k https://b.pat.test/big | wc -c)
c -o /dev/null http://a.pat.test:$port/big; hport=\$?
c -k -o /dev/null --connect-to a.pat.test:443:b.pat.test:443 https://a.pat.test/big; sni=\$?
printf '{"got":%s,"other":%s,"port":%s,"addr":"%s","proxy":"%s","https":"%s,%s","hport":%s,"sni":%s}\n' "\$got" "\$other" "\$port" "\$addr" "\${HTTP_PROXY:-}" "\$ha" "\$hb" "\$hport" "\$sni"
SH
  chmod 755 "$caps/agents/$1/run.sh"
}
agent cov off
agent covhttps outbound-https-only
# Talos: a plugin whose handler uses Node's http module
if command -v node >/dev/null; then
  mkdir -p "$caps/tal"
  cat >"$caps/tal/manifest.json" <<'JSON'
{"id": "tal", "name": "Tal", "description": "Fetches with Node's http module.", "version": "1.0.0",
 "functions": [{"name": "get", "description": "Fetches.",
   "parameters": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}}]}
JSON
  cat >"$caps/tal/index.mjs" <<'JS'
import { get as httpGet } from 'node:http';
// node:http never uses a proxy (the shim points fetch at capsule's proxy
// when undici is installed): the kind of client the transparent path is for
export function get({ url }) {
  return new Promise((resolve) => {
    const req = httpGet(url, (r) => {
      let n = 0;
      r.on('data', (d) => { n += d.length; });
      r.on('end', () => resolve({ status: r.statusCode, length: n }));
    });
    req.setTimeout(20000, () => req.destroy(new Error('timed out')));
    req.on('error', (e) => resolve({ failed: `request failed: ${e.message}`, cause: String(e.code ?? '') }));
  });
}
JS
else
  echo "note: node is not installed; the Talos half is skipped"
fi
chmod -R a+rX "$caps"

capture=no
"$capsule" doctor 2>/dev/null | grep -qE '^ +any-port names +yes' && capture=yes
[ "$capture" = yes ] || echo "note: doctor says there is no capture redirect here: outbound-https-only's names are proxy only (NXDOMAIN inside)"
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | head -8 | sed 's/^/         /'; }
as() { # as WHO COMMAND...: in the namespace with the test's /etc/hosts, as root or uid 65534
  local who=$1; shift
  local drop=()
  [ "$who" = root ] || drop=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  # shellcheck disable=SC2016 # the inner shell expands them
  ip netns exec "$ns" unshare -m sh -c 'mount --bind "$1" /etc/hosts && shift && exec "$@"' \
    sh "$work/hosts" "${drop[@]}" "$@"
}
# expect NAME OUT REGEX
expect() { if grep -qE -- "$3" <<<"$2"; then ok "$1"; else bad "$1" "$2"; fi; }

for who in root nobody; do
  st=$work/st-$who
  mkdir -m 700 "$st"
  [ "$who" = nobody ] && chown 65534:65534 "$st"
  G=(--caps "$caps" --state "$st")
  for a in cov covhttps; do
    if ! as "$who" "$capsule" policy set "$a" dispatch allow "${G[@]}" >/dev/null ||
       ! as "$who" "$capsule" grant "$a" --host "up.test:$port" "${G[@]}" >/dev/null; then
      bad "$who: $a setup"; continue
    fi
    out=$(as "$who" "$capsule" call "${G[@]}" "$a" dispatch '{"text":"x"}' 2>&1 </dev/null)
    # 5000 bytes through the synthetic address, no proxy in the agent's
    # way; other.test has no address inside (curl 6), the other port is
    # refused (curl 7). outbound-https-only with the capture redirect:
    # a.pat.test and b.pat.test on 443 through on-demand addresses (5000
    # bytes each); other.test (an on-demand address too), a.pat.test on
    # another port and up.test's other port (redirected like every port)
    # refused by capsule (curl 52 or 56); a ClientHello for a.pat.test
    # sent to b.pat.test's address refused (35, 52 or 56)
    rest='"https":"0,0","hport":6,"sni":6' other=6 oport=7
    if [ "$a" = covhttps ] && [ "$capture" = yes ]; then
      rest='"https":"5000,5000","hport":(52|56),"sni":(35|52|56)' other='(52|56)' oport='(52|56)'
    fi
    expect "$who: $a-covenant-transparent" "$out" \
      '^\{"got":5000,"other":'"$other"',"port":'"$oport"',"addr":"127\.77\.0\.[0-9]+","proxy":"http://127\.0\.0\.1:3128",'"$rest"'\}$'
  done
  if command -v node >/dev/null; then
    if ! as "$who" "$capsule" policy set tal get allow "${G[@]}" >/dev/null ||
       ! as "$who" "$capsule" grant tal --host "up.test:$port" "${G[@]}" >/dev/null; then
      bad "$who: talos setup"
    fi
    out=$(as "$who" "$capsule" call "${G[@]}" tal get "{\"url\":\"http://up.test:$port/big\"}" 2>&1 </dev/null)
    expect "$who: talos-http-transparent" "$out" '"status": ?200,"length": ?5000'
    out=$(as "$who" "$capsule" call "${G[@]}" tal get "{\"url\":\"http://other.test:$port/big\"}" 2>&1 </dev/null)
    expect "$who: talos-http-other-name-refused" "$out" '"failed": ?"request failed[^"]*","cause": ?"ENOTFOUND"'
    out=$(as "$who" "$capsule" call "${G[@]}" tal get "{\"url\":\"http://up.test:$((port + 1))/big\"}" 2>&1 </dev/null)
    expect "$who: talos-http-other-port-refused" "$out" '"failed": ?"request failed[^"]*","cause": ?"(EACCES|ECONNREFUSED)"'
  fi
  # the egress rows: the transparent connection allowed, counted with its bytes
  rows=$(python3 -c 'import sqlite3,sys
for r in sqlite3.connect(sys.argv[1]).execute("SELECT capability, decision, kind, host, port FROM egress ORDER BY seq"):
    print("|".join(map(str, r)))' "$st/state.db" 2>&1)
  expect "$who: covenant-egress-recorded" "$rows" "^cov\|allow\|transparent\|up\.test\|$port$"
  command -v node >/dev/null && expect "$who: talos-egress-recorded" "$rows" "^tal\|allow\|transparent\|up\.test\|$port$"
done
echo "transparent egress from Covenant and Talos: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
