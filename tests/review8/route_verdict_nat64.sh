#!/usr/bin/env bash
# Finding (net/hostaddr.c host_addrs_local, the kept routing verdicts): the
# proxy refuses an address this machine answers for itself (an interface
# address, or a `local` route such as `ip route add local 203.0.113.0/24
# dev lo`: anycast, a load balancer's VIPs, a service mesh's). The kernel's
# verdict for a destination is kept until routes change, keyed on the
# address in IPv4-mapped form; but the verdict asked for an IPv4-compatible
# or NAT64 (64:ff9b::/96) IPv6 address is the IPv6 route's, which is not
# local, and was kept under the IPv4 address's key. A tool asks for
# http://[64:ff9b::cb00:7101]:PORT/ first, then http://203.0.113.1:PORT/ is
# judged by the kept "not local" and connected to: a service bound on this
# machine (0.0.0.0) reached through the proxy.
# Root only (a network namespace of the test's own with a local route);
# the capsule runs as root and as uid 65534. Exits 1 when the second
# request reaches the local service, 0 when refused, 77 skip.
# Usage: route_verdict_nat64.sh CAPSULE
set -u
capsule=$(realpath "${1:-build/capsule}")
if [ -z "${CAPSULE_REVIEW8_NETNS:-}" ]; then
  [ "$(id -u)" = 0 ] || { echo "SKIP: needs root (a network namespace with a local route)"; exit 77; }
  for t in ip unshare python3 curl; do
    command -v "$t" >/dev/null || { echo "SKIP: $t is not installed"; exit 77; }
  done
  CAPSULE_REVIEW8_NETNS=1 exec unshare -n -- "$0" "$capsule"
  echo "SKIP: cannot create a network namespace"; exit 77
fi
if ! { ip link set lo up && ip route add local 203.0.113.0/24 dev lo; }; then
  echo "SKIP: cannot add a local route in the test's namespace"; exit 77
fi
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review8-route.XXXXXX)
chmod 755 "$W"
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$W"' EXIT
# the local service: on every address of this namespace, 203.0.113.1 too
python3 -c '
import http.server, socketserver, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = b"LOCAL-SERVICE-REACHED\n"
        self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a): pass
s = socketserver.TCPServer(("0.0.0.0", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()' >"$W/port" &
pid=$!
for _ in $(seq 100); do [ -s "$W/port" ] && break; sleep 0.1; done
port=$(head -1 "$W/port")
[ -n "$port" ] || { echo "FAIL: the local service did not start"; exit 1; }
curl -sS --max-time 20 "http://203.0.113.1:$port/" | grep -q LOCAL-SERVICE-REACHED ||
  { echo "SKIP: 203.0.113.1 is not this namespace's own address here"; exit 77; }
printf '{"version": "0.1.0", "network": {"mode": "proxy", "allow_domains": ["*"]}}\n' >"$W/any.json"
chmod 644 "$W/any.json"
C="curl -sS --max-time 20 --noproxy ''"
fail=0
for who in root nobody; do
  wrap=(env XDG_STATE_HOME="$W/xdg-$who")
  if [ "$who" = nobody ]; then
    command -v setpriv >/dev/null || continue
    wrap=(setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$W/home-nobody")
  fi
  # the direct request alone: refused (the check this finding gets around)
  out=$(cd "$W" && "${wrap[@]}" timeout 120 "$capsule" run --config "$W/any.json" -- \
    sh -c "$C http://203.0.113.1:$port/direct" 2>&1 </dev/null)
  if grep -q LOCAL-SERVICE-REACHED <<<"$out" || ! grep -q "never connects to" <<<"$out"; then
    echo "FAIL $who: the local address asked directly was not refused: $out" | head -4
    fail=1
    continue
  fi
  for form in "[64:ff9b::cb00:7101]" "[::cb00:7101]"; do
    out=$(cd "$W" && "${wrap[@]}" timeout 120 "$capsule" run --config "$W/any.json" -- \
      sh -c "$C 'http://$form:$port/first'; echo; $C http://203.0.113.1:$port/second" 2>&1 </dev/null)
    if grep -q LOCAL-SERVICE-REACHED <<<"$out"; then
      echo "FAIL $who: after $form, 203.0.113.1 (a local route) was connected to:"
      echo "$out" | head -6 | sed 's/^/    /'
      fail=1
    else
      echo "ok   $who: after $form, 203.0.113.1 refused"
    fi
  done
done
exit $fail
