#!/bin/bash
# Finding (proxy, host services): the egress proxy refuses "every address
# assigned to one of the host's own interfaces" (docs/egress.md), read with
# getifaddrs (src/net/hostaddr.c) and judged by net_address_forbidden
# (src/net/rules.c). An address the host answers for through a `local`
# route (AnyIP: `ip route add local PREFIX dev lo`, as cloud guest agents
# install for load-balancer / forwarded IPs, e.g. GCE's forwarded-ips) is
# not assigned to any interface, so getifaddrs does not list it: the proxy
# connects to it and the kernel delivers the connection to the host's own
# service bound to 0.0.0.0, a service the tool must not reach (the same one
# is refused at the host's interface address). Shown in a network
# namespace of this test's own (lo with a public-looking address of
# its own, and a local route for 198.51.100.0/24).
# Exits 1 when the tool reads the host-only service, 0 when refused.
capsule=$(realpath "${1:-build/capsule}")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (netns)"; exit 77; }
command -v python3 >/dev/null && command -v curl >/dev/null || { echo "SKIP: python3/curl"; exit 77; }
ns=capr2lr$$
ip netns add "$ns" || { echo "SKIP: cannot make a netns"; exit 77; }
srv=
cleanup() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; ip netns del "$ns" 2>/dev/null; rm -rf "$d"; }
d=$(mktemp -d); trap cleanup EXIT
x() { ip netns exec "$ns" "$@"; }
x ip link set lo up
x ip addr add 203.0.113.10/32 dev lo || { echo "SKIP: cannot add an address"; exit 77; }
x ip route add local 198.51.100.0/24 dev lo table local || { echo "SKIP: no local route"; exit 77; }
echo "HOST-ONLY-SERVICE-$$" >"$d/index.html"
port=18631
x python3 -m http.server --bind 0.0.0.0 --directory "$d" "$port" >/dev/null 2>&1 &
srv=$!
for _ in $(seq 50); do x curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
# control: the same service at the interface address is refused
ctl=$(cd /tmp && x "$capsule" run --allow-host "203.0.113.10:$port" -- \
  curl -s -m 10 "http://203.0.113.10:$port/index.html" 2>&1)
echo "interface address: $ctl"
out=$(cd /tmp && x "$capsule" run --allow-host "198.51.100.7:$port" -- \
  curl -s -m 10 "http://198.51.100.7:$port/index.html" 2>&1)
echo "local-route address: $out"
if grep -q "HOST-ONLY-SERVICE-$$" <<<"$out"; then
  echo "VULNERABLE: the tool reached a host-only service through a local-route address"; exit 1
fi
# a local route added while a run goes on is seen at once: the proxy keeps
# the kernel's routing verdicts (src/net/hostaddr.c) only until the next
# route event. The tool asks for 192.0.2.7 (no route yet: not this
# machine's, kept), the route is added, the tool asks again.
mkdir -m 777 "$d/hs"
cat >"$d/cap.json" <<JSON
{"version": "0.1.0", "filesystem": {"grants": [{"path": "$d/hs", "access": "readwrite"}]},
 "network": {"mode": "proxy", "allow_domains": ["192.0.2.7"]}}
JSON
chmod 755 "$d"
(cd /tmp && x "$capsule" run --config "$d/cap.json" -- sh -c "
  curl -s -m 10 http://192.0.2.7:$port/index.html >/dev/null 2>&1; touch '$d/hs/asked'
  for i in \$(seq 600); do [ -e '$d/hs/go' ] && break; sleep 0.1; done
  curl -s -m 10 http://192.0.2.7:$port/index.html" >"$d/later" 2>&1 </dev/null) &
run=$!
for _ in $(seq 600); do [ -e "$d/hs/asked" ] && break; sleep 0.1; done
[ -e "$d/hs/asked" ] || { echo "the tool's first request never ended"; cat "$d/later"; exit 1; }
x ip route add local 192.0.2.0/24 dev lo table local || { echo "cannot add the second local route"; exit 1; }
touch "$d/hs/go"
wait "$run"
echo "local route added during the run: $(head -c 300 "$d/later")"
if grep -q "HOST-ONLY-SERVICE-$$" "$d/later"; then
  echo "VULNERABLE: a routing verdict kept across a route change let the tool reach a host-only service"; exit 1
fi
echo blocked; exit 0
