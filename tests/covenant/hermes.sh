#!/usr/bin/env bash
# The Hermes runtime (runtime = "hermes") against a small Hermes-compatible
# gateway on loopback (hermes_server.py): a run followed over SSE and
# polling, the Idempotency-Key, the key as a sealed credential, tools
# outside tools_allowed stopping the run, approval policies (auto-deny,
# auto-once, operator-prompt through capsule's approval queue), the wall
# clock stopping a run, egress rules applied to the endpoint, https://
# endpoints (verified, and mutual TLS against `openssl s_server -Verify`
# and the gateway requiring a client certificate), and a
# gateway that hangs, drops the event stream, answers garbage or 500s;
# the run's events in the audit log and in Covenant's export. As root, and
# the plain run as uid 65534. Usage: hermes.sh CAPSULE
set -u
capsule=$(realpath "$1")
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /var/tmp/capsule-hermes.XXXXXX)
chmod 755 "$work"
server=
trap '[ -n "$server" ] && kill $server 2>/dev/null; rm -rf "$work"' EXIT
export CAPSULE_STATE_KEY= COVENANT_HOME=
unset HERMES_API_BASE_URL HERMES_API_KEY
HERMES_TEST_KEY=sekrit-key python3 "$here/hermes_server.py" >"$work/port" 2>"$work/server.log" &
server=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")
[ -n "$port" ] || { echo "FAIL: the test gateway did not start"; exit 1; }
base=http://127.0.0.1:$port/v1
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; }
as=()
t() {
  local name=$1 want=$2 regex=$3; shift 3
  local status
  out=$("${as[@]}" "$capsule" "$@" 2>&1 </dev/null)
  status=$?
  if [ "$status" = "$want" ] && echo "$out" | grep -qE -- "$regex"; then ok "$name"
  else bad "$name (exit $status, want $want)"; echo "$out" | head -5 | sed 's/^/         /'; fi
}
hagent() { # hagent DIR ID NETWORK POLICY TOOLS
  mkdir -p "$1/$2"
  cat >"$1/$2/agent.toml" <<TOML
[agent]
id = "$2"
name = "$2"
version = "0.1.0"
runtime = "hermes"
[resources]
cpu_ms_per_task = 4000
memory_mb = 0
network = "$3"
[hermes]
tools_allowed = [$5]
approval_policy = "$4"
TOML
}
log() { curl -s "http://127.0.0.1:$port/debug/log" 2>/dev/null || python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$port/debug/log').read().decode())"; }

caps=$work/caps state=$work/state
hagent "$caps" hplain full auto-deny '"read_file"'
hagent "$caps" honce full auto-once '"read_file"'
hagent "$caps" hop full operator-prompt ''
hagent "$caps" hoff off auto-deny ''
hagent "$caps" hhttps outbound-https-only auto-deny ''
G=(--caps "$caps" --state "$state")
for a in hplain honce hop hoff hhttps; do "$capsule" policy set "$a" dispatch allow "${G[@]}" >/dev/null; done

echo "configuration"
t no-endpoint 3 "runs on Hermes, and no endpoint is configured: set HERMES_API_BASE_URL" dispatch --agent hplain "plain x" "${G[@]}"
t list-not-ready 0 "hplain .*not ready: it runs on Hermes: set HERMES_API_BASE_URL" list "${G[@]}"
export HERMES_API_BASE_URL=ftp://127.0.0.1:$port/v1
t not-http-refused 3 'is not an http:// or https:// URL' dispatch --agent hplain "plain x" "${G[@]}"
export HERMES_API_BASE_URL=$base
t list-ready 0 "hplain +\(covenant, hermes-http\) +ready \(Hermes at $base; tools_allowed: read_file; approval_policy: auto-deny\)" list "${G[@]}"
t show-tools-allowed 0 '"tools_allowed": \[' show "$caps/hplain"
t no-key-401 1 "answered POST /runs with 401" dispatch --agent hplain "plain x" "${G[@]}"
printf 'sekrit-key\r\nX-Injected: 1' | "$capsule" cred set --shared HERMES_API_KEY --scope system --state "$state" >/dev/null
t key-control-refused 1 "HERMES_API_KEY holds a control character" dispatch --agent hplain "plain x" "${G[@]}"
printf 'sekrit-key' | "$capsule" cred set --shared HERMES_API_KEY --scope system --state "$state" >/dev/null
t plain-run 0 '^\{"text":"done: plain x","sources":\[\]\}$' dispatch --agent hplain "plain x" "${G[@]}"
python3 - "$(log)" <<'PY' && ok idempotency-key-is-session || bad idempotency-key-is-session
import json, sys
posts = [e for e in json.loads(sys.argv[1]) if e.get("post") == "runs" and e["input"] == "plain x"]
last = posts[-1]
assert last["idempotency_key"] and last["idempotency_key"] == last["session_id"], last
assert last["authorization"] == "Bearer sekrit-key"
PY
t tool-audited 0 'hermes-tool .*"event":"tool.started".*"tool":"read_file","preview_hash_hex":"[0-9a-f]{64}"' audit "${G[@]}"
"$capsule" audit "${G[@]}" | grep -q "README.md" && bad preview-not-audited || ok preview-not-audited

echo "egress rules on the endpoint"
t network-off-refused 1 "network grant does not allow its Hermes endpoint 127.0.0.1:$port" dispatch --agent hoff "plain x" "${G[@]}"
t https-only-refused 1 "network grant does not allow its Hermes endpoint" dispatch --agent hhttps "plain x" "${G[@]}"

echo "tools_allowed and approvals"
t tool-outside-stops 4 'invoked the tool "terminal", which is not in the agent.s \[hermes\] tools_allowed \(read_file\); capsule stopped the run' dispatch --agent hplain "terminal x" "${G[@]}"
log | grep -q '"input": "terminal x"}' && ok tool-outside-stop-sent || bad tool-outside-stop-sent
t auto-deny 0 '"approved: deny"' dispatch --agent hplain "approval x" "${G[@]}"
t auto-once 0 '"answers: once,deny"' dispatch --agent honce "twice x" "${G[@]}"
t approvals-audited 0 'hermes-approval .*"choice":"once","policy":"auto-once","resolved":1' audit "${G[@]}"
# operator-prompt: a pending approval in capsule's queue, answered while the run waits
"$capsule" dispatch --agent hop "approval op" "${G[@]}" >"$work/op.out" 2>&1 &
op=$!
id=
for _ in $(seq 60); do
  id=$("$capsule" approvals --json --state "$state" 2>/dev/null | python3 -c 'import json,sys; a=[x for x in json.load(sys.stdin) if x["tool"]=="hermes-approval"]; print(a[0]["id"] if a else "")')
  [ -n "$id" ] && break; sleep 0.1
done
[ -n "$id" ] && ok operator-prompt-pending || bad operator-prompt-pending
t operator-approves 0 "approved $id" approve "$id" --state "$state"
wait $op; st=$?
if [ $st = 0 ] && grep -q '"approved: once"' "$work/op.out"; then ok operator-prompt-approved; else bad "operator-prompt-approved (exit $st)"; cat "$work/op.out"; fi
t operator-no-answer 1 "wall clock exceeded" dispatch --agent hop "approval unanswered" --timeout 2 "${G[@]}"
log | grep -q '"choice": "deny", "input": "approval unanswered"' && ok operator-no-answer-denied || bad operator-no-answer-denied

echo "faults"
t wall-clock-stops 1 "wall clock exceeded \(the Hermes run run-[0-9a-f]+ ran past 4000 ms; capsule asked the gateway to stop it\)" dispatch --agent hplain "slow x" "${G[@]}"
t sse-dropped-polling 0 '"done: dropsse x"' dispatch --agent hplain "dropsse x" "${G[@]}"
t sse-chunked-crlf 0 '"done: chunked x"' dispatch --agent hplain "chunked x" "${G[@]}"
t sse-chunked-events 0 'hermes-tool .*"event":"tool.completed".*"tool":"read_file","duration_ms":1500,"error":true' audit "${G[@]}"
t garbage 1 "answer to GET /runs/run-[0-9a-f]+ is not a JSON object \(200: <html>this is not JSON</html>\)" dispatch --agent hplain "garbage x" "${G[@]}"
t error-500 1 "answered POST /runs with 500: boom: the gateway broke" dispatch --agent hplain "fail500 x" "${G[@]}"
t hang 1 "did not answer POST /runs in time" dispatch --agent hplain "hang x" "${G[@]}"
t garbage-audited 0 "hplain.dispatch .*is not a JSON object" audit "${G[@]}"
t error-500-audited 0 "hplain.dispatch .*answered POST /runs with 500" audit "${G[@]}"
t hang-audited 0 "hplain.dispatch .*did not answer POST /runs in time" audit "${G[@]}"

# mutual TLS: servers that require a client certificate its CA ("cca")
# signed: openssl s_server -Verify (TLS 1.3, and 1.2 where the refusal is
# in the handshake itself) and the test gateway with CERT_REQUIRED
mtls() {
  echo "mutual TLS (HERMES_CLIENT_CERT, HERMES_CLIENT_KEY)"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=capsule test cca" \
    -days 2 -keyout "$tls/cca.key" -out "$tls/cca.pem" 2>/dev/null
  mkcert client "DNS:capsule-client" cca
  mkcert stranger "DNS:capsule-client" rogue
  chmod 600 "$tls/client.key" "$tls/stranger.key"
  [ ${#as[@]} = 0 ] || chown 65534:65534 "$tls/client.key" "$tls/stranger.key"
  local name args
  for name in v13 v12; do
    args=(); [ $name = v12 ] && args=(-no_tls1_3)
    openssl s_server -accept 127.0.0.1:0 -www -Verify 1 -verify_return_error -CAfile "$tls/cca.pem" -cert "$tls/good.pem" \
      -key "$tls/good.key" "${args[@]}" </dev/null >"$tls/s_server-$name.log" 2>&1 &
    server="$server $!"
  done
  for name in v13 v12; do
    for _ in $(seq 100); do grep -q '^ACCEPT' "$tls/s_server-$name.log" && break; sleep 0.1; done
  done
  HERMES_TEST_KEY=sekrit-key HERMES_TEST_TLS_CERT=$tls/good.pem HERMES_TEST_TLS_KEY=$tls/good.key \
    HERMES_TEST_TLS_CLIENT_CA=$tls/cca.pem python3 "$here/hermes_server.py" >"$tls/mutual.port" 2>"$tls/mutual.log" &
  server="$server $!"
  for _ in $(seq 100); do [ -s "$tls/mutual.port" ] && break; sleep 0.1; done
  export HERMES_CA_FILE=$tls/ca.pem
  unset HERMES_CLIENT_CERT HERMES_CLIENT_KEY
  local need='the Hermes endpoint requires a client certificate \(mutual TLS\) and none is set: set HERMES_CLIENT_CERT and HERMES_CLIENT_KEY'
  for name in v13 v12; do
    export HERMES_API_BASE_URL=https://127.0.0.1:$(sed -n 's/^ACCEPT .*:\([0-9]*\)$/\1/p' "$tls/s_server-$name.log")/v1
    t "mtls-s_server-$name-refused-without" 1 "$need" dispatch --agent hplain "plain m" "${G[@]}"
    HERMES_CLIENT_CERT=$tls/stranger.pem HERMES_CLIENT_KEY=$tls/stranger.key \
      t "mtls-s_server-$name-refuses-a-stranger" 1 "refused capsule's client certificate $tls/stranger.pem \(HERMES_CLIENT_CERT\): it does not trust it" \
      dispatch --agent hplain "plain m" "${G[@]}"
    # accepted: s_server's -www page is no Hermes answer, but the TLS session stands
    HERMES_CLIENT_CERT=$tls/client.pem HERMES_CLIENT_KEY=$tls/client.key \
      t "mtls-s_server-$name-accepts-with" 1 "the Hermes endpoint" dispatch --agent hplain "plain m" "${G[@]}"
    if grep -qiE "certificate|TLS|mutual" <<<"$out"; then bad "mtls-s_server-$name-session-stands ($out)"
    else ok "mtls-s_server-$name-session-stands"; fi
    # s_server verified the certificate capsule sent
    grep -A1 "^depth=0 CN *= *client" "$tls/s_server-$name.log" | grep -q "verify return:1" &&
      ok "mtls-s_server-$name-saw-the-client" || { bad "mtls-s_server-$name-saw-the-client"; tail -5 "$tls/s_server-$name.log"; }
  done
  export HERMES_API_BASE_URL=https://127.0.0.1:$(cat "$tls/mutual.port")/v1
  t mtls-gateway-refused-without 1 "$need" dispatch --agent hplain "plain m" "${G[@]}"
  t mtls-refusal-audited 0 "hplain.dispatch .*requires a client certificate \(mutual TLS\)" audit "${G[@]}"
  export HERMES_CLIENT_CERT=$tls/client.pem HERMES_CLIENT_KEY=$tls/client.key
  t mtls-gateway-run 0 '^\{"text":"done: plain mtls","sources":\[\]\}$' dispatch --agent hplain "plain mtls" "${G[@]}"
  chmod 644 "$tls/client.key"
  t mtls-key-open-to-others 1 "HERMES_CLIENT_CERT, HERMES_CLIENT_KEY: $tls/client.key is a private key that others may read or write \(mode 0644\); .chmod 600" \
    dispatch --agent hplain "plain m" "${G[@]}"
  chmod 600 "$tls/client.key"
  HERMES_CLIENT_KEY=$tls/stranger.key t mtls-key-mismatch 1 "the client key $tls/stranger.key is not the key of the certificate $tls/client.pem" \
    dispatch --agent hplain "plain m" "${G[@]}"
  HERMES_CLIENT_KEY= t mtls-cert-without-key 1 "a client certificate needs its key" dispatch --agent hplain "plain m" "${G[@]}"
  HERMES_CLIENT_KEY= t mtls-cert-without-key-not-ready 0 "hplain .*not ready: HERMES_CLIENT_CERT is set without HERMES_CLIENT_KEY" list "${G[@]}"
  HERMES_CLIENT_CERT=$tls/nope.pem t mtls-cert-missing-not-ready 0 "hplain .*not ready: HERMES_CLIENT_CERT $tls/nope.pem cannot be read" list "${G[@]}"
  HERMES_API_BASE_URL=$base t mtls-needs-https 1 "HERMES_CLIENT_CERT and HERMES_CLIENT_KEY are set but the Hermes endpoint 127.0.0.1:[0-9]+ is http://" \
    dispatch --agent hplain "plain m" "${G[@]}"
  unset HERMES_CLIENT_CERT HERMES_CLIENT_KEY
}

echo "TLS (https:// endpoints)"
if command -v openssl >/dev/null; then
  # a test CA made here: a certificate for 127.0.0.1 it signs, one it signs
  # for another name, and one from a CA nobody trusts
  tls=$work/tls
  mkdir -p "$tls"
  mkcert() { # mkcert NAME SAN CA-NAME
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
      -keyout "$tls/$1.key" -out "$tls/$1.csr" 2>/dev/null &&
    printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\n' "$2" >"$tls/$1.ext" &&
    openssl x509 -req -in "$tls/$1.csr" -CA "$tls/$3.pem" -CAkey "$tls/$3.key" -CAcreateserial \
      -days 2 -extfile "$tls/$1.ext" -out "$tls/$1.pem" 2>/dev/null
  }
  for ca in ca rogue; do
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=capsule test $ca" \
      -days 2 -keyout "$tls/$ca.key" -out "$tls/$ca.pem" 2>/dev/null
  done
  mkcert good "IP:127.0.0.1,DNS:localhost" ca
  mkcert elsewhere "DNS:hermes.elsewhere.example,IP:10.9.9.9" ca
  mkcert untrusted "IP:127.0.0.1" rogue
  tls_servers=()
  for name in good elsewhere untrusted; do
    HERMES_TEST_KEY=sekrit-key HERMES_TEST_TLS_CERT=$tls/$name.pem HERMES_TEST_TLS_KEY=$tls/$name.key \
      python3 "$here/hermes_server.py" >"$tls/$name.port" 2>"$tls/$name.log" &
    tls_servers+=($!)
  done
  server="$server ${tls_servers[*]}"
  for name in good elsewhere untrusted; do
    for _ in $(seq 100); do [ -s "$tls/$name.port" ] && break; sleep 0.1; done
  done
  export HERMES_API_BASE_URL=https://127.0.0.1:$(cat "$tls/good.port")/v1
  unset HERMES_CA_FILE
  t tls-list-ready 0 "hplain .*ready \(Hermes at https://127.0.0.1" list "${G[@]}"
  t tls-unknown-ca-refused 1 "refusing the Hermes endpoint 127.0.0.1:[0-9]+: the certificate of 127.0.0.1 is not trusted: unable to get local issuer certificate \(capsule trusts the system's CA store; set HERMES_CA_FILE" \
    dispatch --agent hplain "plain x" "${G[@]}"
  export HERMES_CA_FILE=$tls/ca.pem
  t tls-plain-run 0 '^\{"text":"done: plain tls","sources":\[\]\}$' dispatch --agent hplain "plain tls" "${G[@]}"
  t tls-sse-events 0 'hermes-tool .*"event":"tool.completed".*"tool":"read_file"' audit "${G[@]}"
  t tls-sse-dropped-polling 0 '"done: dropsse tls"' dispatch --agent hplain "dropsse tls" "${G[@]}"
  t tls-approval 0 '"approved: deny"' dispatch --agent hplain "approval tls" "${G[@]}"
  t tls-wall-clock-stops 1 "wall clock exceeded" dispatch --agent hplain "slow tls" "${G[@]}"
  t tls-garbage 1 "is not a JSON object" dispatch --agent hplain "garbage tls" "${G[@]}"
  export HERMES_API_BASE_URL=https://127.0.0.1:$(cat "$tls/elsewhere.port")/v1
  t tls-wrong-host-refused 1 "refusing the Hermes endpoint 127.0.0.1:[0-9]+: the certificate of 127.0.0.1 is not trusted: IP address mismatch \(capsule trusts the system's CA store and $tls/ca.pem" \
    dispatch --agent hplain "plain x" "${G[@]}"
  t tls-wrong-host-audited 0 "hplain.dispatch .*refusing the Hermes endpoint 127.0.0.1:[0-9]+: the certificate of 127.0.0.1 is not trusted: IP address mismatch" audit "${G[@]}"
  export HERMES_API_BASE_URL=https://127.0.0.1:$(cat "$tls/untrusted.port")/v1
  t tls-untrusted-refused 1 "refusing the Hermes endpoint 127.0.0.1:[0-9]+: the certificate of 127.0.0.1 is not trusted: unable to get local issuer certificate" \
    dispatch --agent hplain "plain x" "${G[@]}"
  # the key never reached a server capsule refused
  for name in elsewhere untrusted; do
    seen=$(python3 -c 'import ssl,sys,urllib.request; c=ssl.create_default_context(); c.check_hostname=False; c.verify_mode=ssl.CERT_NONE; sys.stdout.write(urllib.request.urlopen(sys.argv[1], context=c).read().decode())' \
      "https://127.0.0.1:$(cat "$tls/$name.port")/debug/log" 2>&1)
    if [ "$seen" = "[]" ]; then ok "tls-$name-got-nothing"; else bad "tls-$name-got-nothing ($seen)"; fi
  done
  # a gateway that accepts and never answers the TLS handshake: bounded by the run's wall clock
  python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(8); print(s.getsockname()[1], flush=True); c=[]
while True: c.append(s.accept())' >"$tls/mute.port" &
  server="$server $!"
  for _ in $(seq 100); do [ -s "$tls/mute.port" ] && break; sleep 0.1; done
  export HERMES_API_BASE_URL=https://127.0.0.1:$(cat "$tls/mute.port")/v1 HERMES_CA_FILE=$tls/ca.pem
  t tls-handshake-hang 1 "the Hermes endpoint 127.0.0.1:[0-9]+: the TLS handshake with 127.0.0.1 did not finish in time" dispatch --agent hplain "plain x" "${G[@]}"
  export HERMES_API_BASE_URL=https://127.0.0.1:$(cat "$tls/good.port")/v1 HERMES_CA_FILE=$tls/missing.pem
  t tls-ca-file-missing 1 "HERMES_CA_FILE: cannot read the CA file $tls/missing.pem" dispatch --agent hplain "plain x" "${G[@]}"
  t tls-ca-file-missing-not-ready 0 "hplain .*not ready: HERMES_CA_FILE $tls/missing.pem cannot be read" list "${G[@]}"
  mtls
  export HERMES_API_BASE_URL=$base
  unset HERMES_CA_FILE HERMES_CLIENT_CERT HERMES_CLIENT_KEY
else
  echo "  note: openssl is not installed: the TLS cases are skipped (scripts/deps.sh test installs it)"
fi

echo "Covenant's export"
t export 0 "exported" audit export --format covenant "$work/export" "${G[@]}"
for kind in hermes_tool_invoked hermes_tool_completed hermes_approval_resolved; do
  grep -q "\"type\":\"$kind\"" "$work/export/events.jsonl" && ok "export-has-$kind" || bad "export-has-$kind"
done
t export-verifies 0 "covenant audit verified" audit verify --format covenant "$work/export"
python3 - "$work/export/events.jsonl" "$here/fixtures/audit-kinds.v1.subset.json" <<'PY' && ok export-wire-shape || bad export-wire-shape
import json, sys
golden = {}
for r in json.load(open(sys.argv[2]))["records"]:
    e = json.loads(r["canonical_json"])
    golden[e["kind"]["type"]] = list(e["kind"])
seen = set()
for line in open(sys.argv[1]):
    k = json.loads(line)["kind"]
    if k["type"] in golden:
        assert list(k) == golden[k["type"]], line
        seen.add(k["type"])
assert {"hermes_tool_invoked", "hermes_tool_completed", "hermes_approval_resolved"} <= seen, seen
PY
t chain-verifies 0 "audit log verified" audit verify "${G[@]}"

if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
   setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" 2>/dev/null; then
  echo "as uid 65534"
  mkdir -p "$work/nobody" && cp -r "$caps" "$work/nobody/caps" && chown -R 65534:65534 "$work/nobody"
  as=(setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$work/nobody")
  N=(--caps "$work/nobody/caps" --state "$work/nobody/state")
  "${as[@]}" "$capsule" policy set hplain dispatch allow "${N[@]}" >/dev/null
  printf 'sekrit-key' | "${as[@]}" "$capsule" cred set --shared HERMES_API_KEY --scope system --state "$work/nobody/state" >/dev/null
  t nobody-plain-run 0 '"done: plain y"' dispatch --agent hplain "plain y" "${N[@]}"
  t nobody-tool-outside 4 "capsule stopped the run" dispatch --agent hplain "terminal y" "${N[@]}"
  if [ -s "${tls:-/nonexistent}/good.port" ]; then
    HERMES_API_BASE_URL=https://127.0.0.1:$(cat "$tls/good.port")/v1 HERMES_CA_FILE=$tls/ca.pem \
      t nobody-tls-run 0 '"done: plain tls y"' dispatch --agent hplain "plain tls y" "${N[@]}"
    HERMES_API_BASE_URL=https://127.0.0.1:$(cat "$tls/untrusted.port")/v1 HERMES_CA_FILE=$tls/ca.pem \
      t nobody-tls-untrusted 1 "the certificate of 127.0.0.1 is not trusted" dispatch --agent hplain "plain y" "${N[@]}"
  fi
  if [ -s "${tls:-/nonexistent}/mutual.port" ]; then # mutual TLS, its key the user's own
    install -m 600 -o 65534 -g 65534 "$tls/client.key" "$work/nobody/client.key"
    export HERMES_API_BASE_URL=https://127.0.0.1:$(cat "$tls/mutual.port")/v1 HERMES_CA_FILE=$tls/ca.pem
    t nobody-mtls-refused-without 1 "requires a client certificate \(mutual TLS\) and none is set" dispatch --agent hplain "plain y" "${N[@]}"
    HERMES_CLIENT_CERT=$tls/client.pem HERMES_CLIENT_KEY=$work/nobody/client.key \
      t nobody-mtls-run 0 '"done: plain mtls y"' dispatch --agent hplain "plain mtls y" "${N[@]}"
    export HERMES_API_BASE_URL=$base
    unset HERMES_CA_FILE
  fi
fi
echo "hermes tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
