#!/usr/bin/env bash
# Runs every fuzz target briefly over a seed corpus taken from the check
# cases and suites. Any crash, leak or timeout fails the run.
# Usage: run.sh FUZZ_BUILD_DIR SECONDS_PER_TARGET
set -euo pipefail
build=$(realpath "$1")
seconds=${2:-20}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

seed() { # seed NAME FILES...
  local dir="$work/$1"; shift
  mkdir -p "$dir"
  local i=0
  for f in "$@"; do [ -f "$f" ] && cp "$f" "$dir/seed$((i++))"; done
}
seed selu $(find "$root/tests/check/selu" "$root/examples" -name '*.yaml' 2>/dev/null)
toml_files=$(find "$root/tests/check/covenant" "$root/examples" -name '*.toml' 2>/dev/null)
if [ -d "$root/../shared/testsuites/toml-test/tests/valid" ]; then
  toml_files="$toml_files $(find "$root/../shared/testsuites/toml-test/tests/valid" -name '*.toml' | head -200; true)"
fi
seed toml $toml_files
seed talos $(find "$root/tests/check/talos" "$root/examples" -name 'manifest.json' 2>/dev/null)
seed nono $(find "$root/tests/check/nono" "$root/examples" -name '*.json' ! -name 'manifest.json' 2>/dev/null)
seed nono_profile $(find "$root/tests/check/nono-profile" -name '*.json*' 2>/dev/null)
mkdir -p "$work/http"
printf 'GET http://example.com/a?b=1 HTTP/1.1\r\nHost: example.com\r\n\r\n' >"$work/http/get"
printf 'CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n' >"$work/http/connect"
printf 'POST /route/v1/x HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\n\r\n' >"$work/http/post"
printf 'PUT http://[::1]:8080/up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n' >"$work/http/chunked"
seed jsonschema $(find "$root/tests/suites/jsonschema" -name '*.seed' 2>/dev/null)
mkdir -p "$work/discovery"
printf '{"tools":[{"name":"greet","description":"d","input_schema":{"type":"object","properties":{"name":{"type":"string","pattern":"^[a-z]+$"}},"required":["name"]},"recommended_policy":"allow","terminal_on_success":true}]}' >"$work/discovery/tools"
printf '[{"name":"a","inputSchema":{"$defs":{"x":{"$ref":"#/$defs/x"}},"$ref":"#/$defs/x"}},{"name":"b","input_schema":true}]' >"$work/discovery/array"

mkdir -p "$work/covenant"
printf '{"capability":{"subject":{"display":"research@agent","pubkey":"4vJ9JU1bJJE96FWSJKvHsmmFADCg4gpZQff4P3bkLKi"},"action":"tool.call.echo","scope":{"arguments":{"allow":{"text":"hi"}},"max_uses":5,"tool":"echo","version":1},"granted_by":{"display":"operator@local","pubkey":"8qbHbw2BbbTHBW1sbeqakYXVKRQM8Ne7pLK7m6CVfeR"},"expires_at":1700000000000},"signature":"1111111111111111111111111111111111111111111111111111111111111111"}' >"$work/covenant/token"
printf '[1e30,4.50,0.002,{"\\u20ac":1,"\\r":2,"1":3},"\\ud83d\\ude00"]' >"$work/covenant/jcs"
printf 'US517G5965aydkZ46HS38QLi7UQiSojurfbQfKCELFx' >"$work/covenant/key"
printf ': keepalive\n\ndata: {"event":"tool.started","run_id":"r1","tool":"terminal"}\r\n\r\ndata: a\ndata: b\n\n' >"$work/covenant/sse"
mkdir -p "$work/rollback_idx"
printf '%s 0 12\n%s 12 0\n' "$(printf 'a%.0s' $(seq 64))" "$(printf '0%.0s' $(seq 64))" >"$work/rollback_idx/two"
printf 'zz 1 2\n%s 18446744073709551615 2' "$(printf 'f%.0s' $(seq 64))" >"$work/rollback_idx/bad"
mkdir -p "$work/event_id"
printf '1086802836-12' >"$work/event_id/id"
printf '4294967295-18446744073709551615' >"$work/event_id/max"
mkdir -p "$work/volume_name"
printf 'alice' >"$work/volume_name/plain"
printf '%%2Fetc%%2F..%%00x/y..' >"$work/volume_name/encoded"
mkdir -p "$work/id_registry"
printf '0 capsule-id-ranges-format-2 /\n1879048192 alpha/0123456789abcdef0123456789abcdef@4026531832:65024:11 /var/lib/s t\n1879113728 my%%20tool /root/.local/state/capsule\n' >"$work/id_registry/lines"
printf '0 capsule-id-ranges-format-9x /\nGARBAGE\n1 a@1:2:3@4:5:6 /x\n-5 b /\n' >"$work/id_registry/odd"
printf '5 k@1:2:3@0:0:0 /d\n6 j@0:0:0 /e\n' >"$work/id_registry/zero-where" # once read as another line
mkdir -p "$work/image"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%064d","size":349,"annotations":{"org.opencontainers.image.ref.name":"example.org/a:1"}}]}' 0 >"$work/image/index"
printf '{"schemaVersion":2,"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%064d","size":3},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%064d","size":9}]}' 1 2 >"$work/image/manifest"
printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/x"],"Cmd":["-v"],"Env":["A=b"],"WorkingDir":"/w"}}' >"$work/image/config"
printf '[{"Config":"c.json","RepoTags":["example.org/a:1"],"Layers":["l/layer.tar"]}]' >"$work/image/docker"
printf 'ghcr.io/owner/name:tag' >"$work/image/ref"
tar -C "$here" -cf "$work/image/tar" fuzz_image.c
mkdir -p "$work/mcp"
printf '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"t0"}}\n{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x__y","arguments":{}}}\n' >"$work/mcp/list"
printf '!{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1.0.0"}}\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n[{"jsonrpc":"2.0"}]\n{"jsonrpc":"2.0","id":7,"result":{"action":"accept"}}\n{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}\n' >"$work/mcp/lifecycle"
mkdir -p "$work/dns" "$work/sni"
# a stub resolver's A query with EDNS, and a real ClientHello (python's ssl)
printf '\022\064\001\000\000\001\000\000\000\000\000\001\004imap\004mail\002me\003com\000\000\001\000\001\000\000\051\004\320\000\000\000\000\000\000' >"$work/dns/a-edns"
printf '\000\001\001\000\000\001\000\000\000\000\000\000\007example\003com\000\000\034\000\001' >"$work/dns/aaaa"
python3 -c '
import ssl, sys
c = ssl.create_default_context()
o = ssl.MemoryBIO()
s = c.wrap_bio(ssl.MemoryBIO(), o, server_hostname="imap.mail.me.com")
try: s.do_handshake()
except ssl.SSLWantReadError: pass
sys.stdout.buffer.write(o.read())' >"$work/sni/hello" 2>/dev/null || true
# a nameserver's answers: a CNAME chain (compressed) to an A record with an
# SOA, a truncated one, and resolv.conf text
mkdir -p "$work/dns_answer"
python3 -c '
import struct, sys
q = b"\x07example\x03com\x00" + struct.pack(">HH", 1, 1)
h = struct.pack(">HHHHHH", 0x1234, 0x8180, 1, 2, 1, 0)
cname = b"\xc0\x0c" + struct.pack(">HHIH", 5, 1, 300, 6) + b"\x03www\xc0\x0c"
a = b"\xc0\x29" + struct.pack(">HHIH", 1, 1, 60, 4) + bytes([192, 0, 2, 1])
soa = b"\xc0\x14" + struct.pack(">HHIH", 6, 1, 900, 28) + b"\x01a\xc0\x14\x01b\xc0\x14" + struct.pack(">IIIII", 1, 2, 3, 4, 30)
sys.stdout.buffer.write(h + q + cname + a + soa)' >"$work/dns_answer/cname" 2>/dev/null || true
printf '\022\064\203\200\000\001\000\000\000\000\000\000\007example\003com\000\000\034\000\001' >"$work/dns_answer/tc"
# found by this fuzzer: an address record, then one of the wrong length (was
# malformed with the first address kept)
printf '\022\064\201\200\000\001\000\002\000\000\000\000\007example\003com\000\000\001\000\001\300\014\000\001\000\001\000\000\000\074\000\004\300\000\002\001\300\014\000\001\000\001\000\000\000\074\000\003\300\000\002' >"$work/dns_answer/badlen"
printf 'nameserver 192.0.2.53\nnameserver ::1\noptions timeout:1 attempts:3 ndots:2\nsearch example\n' >"$work/dns_answer/resolv"
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost # x\n192.0.2.1\texample.com. www\n' >"$work/dns_answer/hosts"
tar -C "$here" -czf "$work/image/tgz" fuzz_image.c
printf '!{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}\n{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-01-01"}}}\n' >"$work/mcp/modern"
printf 'H:2026-07-28\ttools/call\t=?base64?ZWNobw==?=\n{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}\nH:2026-07-28\tsubscriptions/listen\t\n{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}\n{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}\n' >"$work/mcp/headers"
printf '{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":{"promptsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":["test://a","test://a",7]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}\n{"jsonrpc":"2.0","id":4,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["test://a","test://b"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}\n{"jsonrpc":"2.0","id":4,"method":"subscriptions/listen","params":{"notifications":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}\n{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}\n' >"$work/mcp/listen"

mkdir -p "$work/grpc_msg" # a method's number, then its request: the orchestrator's, the seed's
printf '\002\012\015echo.dispatch\022\014{"text":"h"}\042\001s\062\001t' >"$work/grpc_msg/orchestrator"
printf '\000\012\001x\022\002{}\032\020\012\012session_id\022\002s1' >"$work/grpc_msg/seed"
printf '\005\012\006in.txt\022\012text/plain\032\005hello' >"$work/grpc_msg/upload"
printf '\006\012\061capsule-artifact-0123456789abcdef0123456789abcdef' >"$work/grpc_msg/download"
mkdir -p "$work/artifact_meta" # a store's record; arguments with attachments
printf '{"user":"alice","filename":"in.txt","mime_type":"text/plain","origin":"upload","source_id":null,"size":5,"created":1764136800}' >"$work/artifact_meta/upload"
printf '{"user":"bob","filename":"out.txt","mime_type":"text/plain","origin":"node-tools.make_file","source_id":"art-1","size":16,"created":1}' >"$work/artifact_meta/output"
printf '{"attachments":[{"filename":"a","capability_artifact_id":"capsule-artifact-0123456789abcdef0123456789abcdef"},7,{"capability_artifact_id":1}]}' >"$work/artifact_meta/args"
mkdir -p "$work/state_sql"
printf "INSERT OR IGNORE INTO meta VALUES ('a?', ?); SELECT user, \"user\" FROM t WHERE x = ?3 -- c\n ORDER BY rowid" >"$work/state_sql/sql"
printf 'CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, b BLOB) /* user */' >"$work/state_sql/ddl"
printf 'postgresql://capsule:hunter2@db.example/capsule?sslmode=require&password=x' >"$work/state_sql/url"
mkdir -p "$work/ui_form"
printf 'csrf=%064d&capability=a%%2Eb&tool=x+y&policy=allow&user=&bad=%%zz%%4&=v&novalue&nul=%%00' 0 >"$work/ui_form/policy"

mkdir -p "$work/mcp_relay"
# a server's notifications/cancelled without requestId (it once reached cap_jw_node as NULL)
printf '{"relay":{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}}\n' >"$work/mcp_relay/cancel_no_id"
printf '{"relay":{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}}\n{"relay":{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","params":{"messages":[]}}}\nC{"jsonrpc":"2.0","id":1,"result":{"role":"assistant"}}\n{"relay":{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1}}}\n{"relay":{"jsonrpc":"2.0","id":"s","method":"tools/call"}}\n' >"$work/mcp_relay/relay"
# the 2026-07-28 form: a held call's input requests, retries with and without the response
printf '%s\n' 'M{"relay":{"jsonrpc":"2.0","id":9,"method":"sampling/createMessage","params":{"messages":[]}}}' \
  'R{}' 'R{"capsule_relay_1":{"role":"assistant"}}' 'M{"relay":{"jsonrpc":"2.0","id":"e","method":"elicitation/create","params":{}}}' \
  'Sh1.1.00000000000000000000000000000000.0000000000000000000000000000000000000000000000000000000000000000' \
  'R{"capsule_relay_2":{"action":"accept"}}' >"$work/mcp_relay/modern"
# an egress batch of two rows (one allowed, one refused, texts and a NULL)
mkdir -p "$work/egress_batch"
python3 -c 'import struct,sys
def t(x): return struct.pack("<I", 0xffffffff) if x is None else struct.pack("<I", len(x)) + x
rows = [(1764100000000, 0, 443, 0, 120, 100204, [b"http", b"example.com", b"GET", b"/big", None, b"allowed"]),
        (1764100000001, 1, 8081, 0, 0, 0, [b"http", b"example.com", b"GET", b"/x", None, b"not in the allowlist"])]
out = struct.pack("<qq", len(rows), 3)
for r in rows:
    out += struct.pack("<6q", *r[:6]) + b"".join(t(x) for x in r[6])
sys.stdout.buffer.write(out)' >"$work/egress_batch/two" 2>/dev/null || true
# an egress spool file (a keeper's left): its head, two rows, one of them counted to int64's edge
mkdir -p "$work/egress_spool"
python3 -c 'import struct,sys
def t(x): return struct.pack("<I", 0xffffffff) if x is None else struct.pack("<I", len(x)) + x
out = b"capsule-egress-spool-v1\0" + struct.pack("<q", 2) + b"0123456789abcdef01234567" + t(b"cap") + t(b"alice")
rows = [(1764100000000, 1, 443, 1, 0, 0, [b"connect", b"denied.invalid", None, None, None, b"not allowed"]),
        (1764100000001, 2, 0, 9223372036854775807, 0, 0, [None, None, None, None, None, b"coalesced"])]
for r in rows:
    out += struct.pack("<6q", *r[:6]) + b"".join(t(x) for x in r[6])
sys.stdout.buffer.write(out)' >"$work/egress_spool/two" 2>/dev/null || true
status=0
mkdir -p "$work/escape"
printf 'title:\033]0;x\007 \342\200\256rtl \302\233csi \377\300\257 \355\240\200 \\ \n\t' >"$work/escape/mixed"
mkdir -p "$work/mcp_keeper"
printf '%s\n' '1{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","_meta":{"progressToken":"t"}}}' \
  '2{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{}}' \
  'S{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}' \
  'S{"jsonrpc":"2.0","id":1,"result":{}}' 'S{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"u"}}' \
  'S{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage"}' \
  '1{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}' 'W{"jsonrpc":"2.0","id":5,"result":{}}' \
  >"$work/mcp_keeper/calls"
mkdir -p "$work/mcp_template"
printf 'test://template/{id}/data\ntest://template/7/data' >"$work/mcp_template/simple"
printf 'file://{+path}{?q,r}{#f}\nfile://a/b?q=1&r=2#x' >"$work/mcp_template/operators"
mkdir -p "$work/subid"
printf 'alice:100000:65536\n' >"$work/subid/name"
printf '1000:4294901760:65536' >"$work/subid/number"
# what a Selu server sends (first byte: the call's kind and cap): its
# SETTINGS, the answer's HEADERS, a message in DATA, the trailers
python3 - "$work/selu_h2" "$work/grpc_serve_h2" <<'PY'
import gzip, os, struct, sys, zlib
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
def frame(t, flags, sid, payload):
    return struct.pack('>I', len(payload))[1:] + bytes([t, flags]) + struct.pack('>I', sid) + payload
def lit(name, value):  # a literal header field without indexing, new name
    return b'\x00' + bytes([len(name)]) + name + bytes([len(value)]) + value
settings = frame(4, 0, 0, b'') + frame(4, 1, 0, b'')
headers = frame(1, 4, 1, b'\x88' + lit(b'content-type', b'application/grpc'))
msg = b'\x0a\x02{}'
data = frame(0, 0, 1, b'\x00' + struct.pack('>I', len(msg)) + msg)
trailers = frame(1, 5, 1, lit(b'grpc-status', b'0'))
error = frame(1, 5, 1, b'\x88' + lit(b'grpc-status', b'12') + lit(b'grpc-message', b'no%20such'))
goaway = frame(7, 0, 0, struct.pack('>II', 0, 0))
seeds = {'unary': b'\x00' + settings + headers + data + trailers,
         'stream': b'\x01' + settings + headers + data + data + trailers,
         'small': b'\x02' + settings + headers + data + data + trailers,
         'error': b'\x00' + settings + error,
         'goaway': b'\x00' + settings + goaway,
         'reset': b'\x00' + settings + frame(3, 0, 1, struct.pack('>I', 7))}
for name, body in seeds.items():
    open(os.path.join(d, name), 'wb').write(body)

# what a gRPC client sends capsule's server (first byte: bit 0 a 64-byte
# cap, bit 1 a token needed): the preface, SETTINGS, a request's HEADERS
# and DATA; an upload's chunks; a reset; a body past the cap
d = sys.argv[2]
os.makedirs(d, exist_ok=True)
def headers(sid, method, end=False, token=True, encoding=None):
    block = (b'\x83\x86' + lit(b':authority', b'capsule') + lit(b':path', b'/selu.capability.v1.Capability/' + method) +
             lit(b'content-type', b'application/grpc') + lit(b'te', b'trailers') +
             (lit(b'authorization', b'Bearer t0k') if token else b'') +
             (lit(b'grpc-encoding', encoding) if encoding else b''))
    return frame(1, 4 | (1 if end else 0), sid, block)
def msg(body, packed=False):
    return (b'\x01' if packed else b'\x00') + struct.pack('>I', len(body)) + body
def data(sid, body, end=True):
    return frame(0, 1 if end else 0, sid, body)
start = b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' + frame(4, 0, 0, b'')
invoke = msg(b'\x0a\x04echo\x12\x02{}')
chunk = msg(b'\x0a\x01f\x1a\x03abc')
seeds = {'invoke': b'\x02' + start + headers(1, b'Invoke') + data(1, invoke),
         'health': b'\x00' + start + headers(1, b'Healthcheck') + data(1, msg(b'')),
         'no-token': b'\x02' + start + headers(1, b'Invoke', token=False) + data(1, invoke),
         'two': b'\x00' + start + headers(1, b'Invoke') + data(1, invoke) + headers(3, b'Invoke') + data(3, invoke),
         'upload': b'\x02' + start + headers(1, b'UploadInputArtifact') + data(1, chunk, False) + data(1, chunk),
         'download': b'\x00' + start + headers(1, b'DownloadOutputArtifact') + data(1, msg(b'\x0a\x02id')),
         'too-big': b'\x01' + start + headers(1, b'Invoke') + data(1, msg(b'x' * 200)),
         'reset': b'\x00' + start + headers(1, b'Invoke') + frame(3, 0, 1, struct.pack('>I', 8)),
         'unknown': b'\x00' + start + headers(1, b'Nope', end=True),
         # compressed: a gzip request, a deflate upload chunk (zlib's)
         'gzip': b'\x02' + start + headers(1, b'Invoke', encoding=b'gzip') +
                 data(1, msg(gzip.compress(b'\x0a\x04echo\x12\x02{}'), True)),
         'deflate': b'\x02' + start + headers(1, b'UploadInputArtifact', encoding=b'deflate') +
                    data(1, msg(zlib.compress(b'\x0a\x01f\x1a\x03abc'), True))}
for name, body in seeds.items():
    open(os.path.join(d, name), 'wb').write(body)
PY
for target in ${FUZZ_TARGETS:-selu toml talos nono nono_profile jsonschema http discovery escape covenant volume_name rollback_idx image mcp dns dns_answer sni grpc_msg artifact_meta state_sql ui_form id_registry mcp_relay mcp_keeper egress_batch egress_spool event_id mcp_template subid selu_h2 grpc_serve_h2}; do
  bin="$build/tests/fuzz/fuzz_$target"
  [ -x "$bin" ] || { echo "fuzz: $target not built, skipped"; continue; }
  mkdir -p "$work/$target"
  echo "fuzz: $target for ${seconds}s"
  if ! (cd "$work" && ASAN_OPTIONS=detect_leaks=1 "$bin" -max_total_time="$seconds" \
        -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "$work/$target" \
        >"$work/$target.log" 2>&1); then
    echo "fuzz: $target FAILED"; tail -40 "$work/$target.log"; status=1
  else
    grep -E 'stat::number_of_executed_units|stat::peak_rss' "$work/$target.log" | sed 's/^/  /'
  fi
done
exit $status
