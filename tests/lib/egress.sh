# Shared by the egress suites on the transparent path (tests/egress:
# patterns.sh, transparent.sh), sourced after lib/sandbox.sh with $work
# (the test's directory, 0755), $py (python3) and $pids (the processes to
# end) set. Gives:
#   egress_certs CN SAN...: a test CA ($work/ca.pem, trusted by capsule
#     outside through SSL_CERT_FILE) and a server certificate for CN with
#     those DNS names ($work/srv.key, srv.pem); fails the test without them
#   egress_servers: tservers.py on them; port NAME is one of its ports
#   check_log WHO NAME REGEX LOG: $work/logs/LOG-WHO.log says so (ok and
#     bad are lib/sandbox.sh's, as check is)
egress_certs() {
  local cn=$1 san
  shift
  san=$(printf 'DNS:%s,' "$@")
  (cd "$work" &&
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem \
      -days 2 -subj /CN=capsule-test-ca 2>/dev/null &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout srv.key -out srv.csr \
      -subj "/CN=$cn" 2>/dev/null &&
    printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' "${san%,}" >ext &&
    openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 \
      -extfile ext 2>/dev/null) || { echo "FAIL: cannot make the test certificates"; exit 1; }
  chmod 644 "$work"/*.pem
  export SSL_CERT_FILE=$work/ca.pem # capsule (outside) trusts the test CA
}

egress_servers() {
  "$py" "$(dirname "${BASH_SOURCE[0]}")/../egress/tservers.py" "$work/srv.key" "$work/srv.pem" >"$work/ports" &
  pids+=($!)
  for _ in $(seq 100); do [ -s "$work/ports" ] && break; sleep 0.1; done
}
port() { "$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$work/ports" "$1"; }

check_log() {
  if grep -qE -- "$3" "$work/logs/$4-$1.log" 2>/dev/null; then ok "$1" "$2"
  else bad "$1" "$2 (log: $(tail -c 400 "$work/logs/$4-$1.log" 2>/dev/null))"; fi
}
