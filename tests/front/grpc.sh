#!/usr/bin/env bash
# The gRPC front door's server (src/front/grpc_serve.c, the module
# capsule-grpc-serve.so) against the official Node gRPC client with Selu's
# proto: plaintext on loopback TCP, on a unix socket, and TLS; bearer
# tokens, unknown methods, malformed and oversized messages, bounded
# concurrency, and a SIGTERM that lets calls in progress finish; the
# artifact calls' streams with the orchestrator's proto (stalls included).
# Usage: grpc.sh DRIVER PROTO ORCHESTRATOR_PROTO
set -u
driver=$1 proto=$2 orch=$3
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
[ -d "$here/../../examples/selu-node/node_modules/@grpc/grpc-js" ] ||
  { echo "SKIP: examples/selu-node's modules are not installed (scripts/deps.sh test)"; exit 77; }
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; }
token=t0k3n-$$

# start ADDRESS [CERT KEY]: the driver in the background; sets port, dpid
start() {
  "$driver" "$@" >"$work/out" 2>"$work/err" &
  dpid=$!
  pids+=("$dpid")
  port=
  for _ in $(seq 100); do
    port=$(sed -n 's/^port //p' "$work/out")
    [ -n "$port" ] && return 0
    kill -0 "$dpid" 2>/dev/null || break
    sleep 0.1
  done
  echo "driver did not start: $(cat "$work/err")"
  return 1
}
client() { # TARGET [CA]: the Node client's checks, counted here
  local out
  out=$(node "$here/grpc_client.mjs" "$proto" "$@" 2>&1)
  while IFS= read -r line; do
    case $line in
    ok\ *) ok "$label: ${line#ok }" ;;
    FAIL\ *) bad "$label: ${line#FAIL }" ;;
    *) [ -n "$line" ] && echo "         $line" ;;
    esac
  done <<<"$out"
}

label=tcp
if start "127.0.0.1:0" "$token"; then
  client "127.0.0.1:$port" "$token"
  kill -TERM "$dpid"; wait "$dpid"
  [ $? = 0 ] && grep -q stopped "$work/out" && ok "tcp: SIGTERM stops it" || bad "tcp: SIGTERM stops it"
else bad "tcp: start"; fi

label=drain
if start "127.0.0.1:0" "$token"; then
  DRAIN=1 node "$here/grpc_client.mjs" "$proto" "127.0.0.1:$port" "$token" >"$work/drain" 2>&1 &
  cpid=$!
  for _ in $(seq 200); do grep -q "handling slow" "$work/out" && break; sleep 0.05; done
  kill -TERM "$dpid"; wait "$dpid"
  wait "$cpid" && grep -q "^ok drain" "$work/drain" && ok "drain: SIGTERM lets the call in progress finish" ||
    bad "drain: $(cat "$work/drain")"
else bad "drain: start"; fi

label=streams # the artifact calls' streams, with the orchestrator's proto
if start "unix:$work/s.sock" "$token"; then
  out=$(node "$here/grpc_streams.mjs" "$orch" "unix:$work/s.sock" "$token" 2>&1)
  while IFS= read -r line; do
    case $line in
    ok\ *) ok "$label: ${line#ok }" ;;
    FAIL\ *) bad "$label: ${line#FAIL }" ;;
    *) [ -n "$line" ] && echo "         $line" ;;
    esac
  done <<<"$out"
  for _ in $(seq 100); do grep -q "upload failed after 1 chunks" "$work/out" && break; sleep 0.1; done
  grep -q "upload failed after 1 chunks" "$work/out" && ok "streams: the handler saw the stalled stream fail" ||
    bad "streams: the handler saw the stalled stream fail: $(cat "$work/out")"
  kill -TERM "$dpid"; wait "$dpid"
else bad "streams: start"; fi

label=unix
if start "unix:$work/g.sock" "$token"; then
  client "unix:$work/g.sock" "$token"
  kill -TERM "$dpid"; wait "$dpid"
else bad "unix: start"; fi

label=tls
if command -v openssl >/dev/null &&
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/key.pem" -out "$work/cert.pem" -days 1 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost >/dev/null 2>&1; then
  if start "localhost:0" "$token" "$work/cert.pem" "$work/key.pem"; then
    client "localhost:$port" "$token" "$work/cert.pem"
    kill -TERM "$dpid"; wait "$dpid"
  else bad "tls: start"; fi
else echo "  skip tls: openssl cannot make a certificate"; fi

label=bad-input
"$driver" "127.0.0.1:0" "$token" "$work/missing.pem" "$work/missing-key.pem" >/dev/null 2>"$work/err"
[ $? = 1 ] && grep -q "cannot read .*missing.pem" "$work/err" && ok "missing TLS file: a clear error" ||
  bad "missing TLS file: $(cat "$work/err")"
"$driver" "256.1.1.1:1" "$token" >/dev/null 2>"$work/err"
[ $? = 1 ] && grep -q "cannot listen for gRPC on 256.1.1.1:1" "$work/err" && ok "bad address: a clear error" ||
  bad "bad address: $(cat "$work/err")"

"$driver" "localhost" "$token" >/dev/null 2>"$work/err"
[ $? = 1 ] && grep -q "cannot listen for gRPC on localhost: no port (give HOST:PORT" "$work/err" &&
  ok "address without a port: a clear error" || bad "address without a port: $(cat "$work/err")"

echo "grpc front door: $pass passed, $fail failed"
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
