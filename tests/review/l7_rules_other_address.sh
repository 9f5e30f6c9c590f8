#!/bin/bash
# Finding: L7 rules "follow the server, not the name" only as far as DNS
# says (src/net/upstream.c proxy_endpoints_at / resolves_into): a request
# to another address of the same server that the endpoint's host does not
# resolve to gets no rules at all. Here a dual-stack server on port P has
# rules for 127.0.0.1:P (GET /allowed/** only); with allow_domains ["*"]
# the tool reaches GET /admin through [::1]:P (or 127.0.0.2:P). On the
# internet: a server's IPv6 address when the endpoint is an IPv4 literal or
# an A-only name, or a CDN/load-balancer address outside this query's DNS
# answer. Loopback stands in for the server (--proxy-allow-private).
# Exits non-zero when /admin is served.
capsule=$(realpath "${1:-build/capsule}")
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d /var/tmp/capsule-review-l7.XXXXXX)
port=$((20000 + RANDOM % 20000))
cat >"$tmp/dual.py" <<'PY'
import http.server, socket, sys
class S(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6
    def server_bind(self):
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = ("served " + self.path + "\n").encode()
        self.send_response(200); self.send_header("Content-Length", str(len(b)))
        self.end_headers(); self.wfile.write(b)
    def log_message(self, *a): pass
S(("::", int(sys.argv[1])), H).serve_forever()
PY
python3 "$tmp/dual.py" "$port" & srv=$!
trap 'kill $srv 2>/dev/null; rm -rf "$tmp"' EXIT
cat >"$tmp/req.sh" <<'SH'
#!/bin/bash
exec 3<>/dev/tcp/127.0.0.1/3128
printf 'GET %s HTTP/1.1\r\n\r\n' "$1" >&3
timeout 5 cat <&3 | tail -1
SH
chmod 755 "$tmp" "$tmp/req.sh"
printf '{"version": "0.1.0", "network": {"mode": "proxy", "allow_domains": ["*"], "endpoints": [{"host": "127.0.0.1:%s", "rules": [{"method": "GET", "path": "/allowed/**"}]}]}}\n' "$port" >"$tmp/m.json"
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
run() { timeout 20 "$capsule" run --proxy-allow-private --config "$tmp/m.json" --allow-read "$tmp/req.sh" -- "$tmp/req.sh" "$1" 2>/dev/null; }
echo "control, by the endpoint's own address: $(run "http://127.0.0.1:$port/admin")"
out=$(run "http://[::1]:$port/admin")
echo "same server by [::1]: $out"
if grep -q "served /admin" <<<"$out"; then
  echo "VULNERABLE: the endpoint's L7 rules did not apply to another address of the same server"; exit 1
fi
echo "blocked"; exit 0
