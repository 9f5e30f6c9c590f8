#!/usr/bin/env bash
# The egress log in the state (issue 18, schema version 9): a gateway
# call's egress decisions stored with its audit record, on SQLite and on
# PostgreSQL (a throwaway server, tests/state/pg-lib.sh; skipped when it
# is not installed), as root and as uid 65534. The tool is a Covenant
# agent whose network is an operator's grant of one host:port: capsule
# runs in a network namespace of the test's own (198.51.100.8, TEST-NET-2),
# joined by a veth pair to another where 198.51.100.7 stands in for a host
# on the network; the agent fetches a 100 KB file from a server there
# (allowed, its bytes counted) and asks for a port the grant does not name
# (refused before anything is sent). Then the same from a warm Selu
# instance (tests/state/egress_selu.js on Node, skipped without node or
# examples/selu-node/node_modules): its keeper's proxy serves the calls
# leased on it, and each call's two decisions are stored with that call's
# audit record, the first call (which starts the instance) and the next
# (on the warm one) apart; on SQLite, three more through a running serve
# (`capsule call` by its socket: the later calls made in serve's warm Selu
# process, the keeper's connection kept between leases), each with its own
# rows. Needs root (ip netns).
# Usage: egress.sh CAPSULE
set -u
capsule=$(realpath "$1")
here=$(dirname "$(realpath "$0")")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (a network namespace of the test's own)"; exit 77; }
if ! command -v ip >/dev/null || ! command -v python3 >/dev/null; then echo "SKIP: needs ip and python3"; exit 77; fi
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
# shellcheck source=tests/state/pg-lib.sh
. "$here/pg-lib.sh"
work=$(mktemp -d /var/tmp/capsule-egress-state.XXXXXX)
chmod 755 "$work"
ns=capsule-egst-$$ up=capsule-egup-$$ nsip=198.51.100.7 port=18080
pids=()
# shellcheck disable=SC2154 # p is the trap's own loop variable
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; pg_stop immediate; ip netns del "$ns" 2>/dev/null
      ip netns del "$up" 2>/dev/null; rm -rf "$work"' EXIT
if ! ip netns add "$ns" 2>/dev/null || ! ip netns add "$up" 2>/dev/null; then echo "SKIP: cannot create a network namespace"; exit 77; fi
ip -n "$ns" link set lo up && ip -n "$up" link set lo up &&
  ip -n "$ns" link add cveth0 type veth peer name cveth1 netns "$up" &&
  ip -n "$ns" addr add 198.51.100.8/24 dev cveth0 && ip -n "$ns" link set cveth0 up &&
  ip -n "$up" addr add "$nsip/24" dev cveth1 && ip -n "$up" link set cveth1 up ||
  { echo "FAIL: cannot set up the test namespaces"; exit 1; }
mkdir -p "$work/www" && head -c 100000 /dev/zero >"$work/www/big"
ip netns exec "$up" python3 -m http.server --bind "$nsip" --directory "$work/www" "$port" >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 100); do ip netns exec "$ns" python3 -c 'import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 1)' "$nsip" "$port" 2>/dev/null && break; sleep 0.2; done
export CAPSULE_STATE_KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
unset CAPSULE_STATE CAPSULE_STATE_KEY_FILE

caps=$work/caps
mkdir -p "$caps/agents/fetch"
printf '[agent]\nid = "fetch"\nname = "fetch"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' >"$caps/agents/fetch/agent.toml"
cat >"$caps/agents/fetch/run.sh" <<SH
#!/bin/sh
IFS= read -r line
got=\$(curl -s --max-time 30 http://$nsip:$port/big | wc -c)
curl -s -o /dev/null --max-time 30 http://$nsip:$((port + 1))/refused
printf '{"got":%s}\n' "\$got"
SH
chmod -R a+rX "$caps" && chmod 755 "$caps/agents/fetch/run.sh"
# the warm Selu server (its package holds what it runs: the protos, node_modules)
node_dir=$here/../../examples/selu-node
selu=
if command -v node >/dev/null && [ -d "$node_dir/node_modules/@grpc/grpc-js" ]; then
  selu=$caps/egress-selu
  mkdir -p "$selu" && cp "$here/egress_selu.js" "$selu/server.js" && cp -r "$node_dir/node_modules" "$selu/" &&
    cp "$here/../../proto/selu/capability/v1/capability.proto" "$selu/" &&
    cp "$here/../../proto/selu/orchestrator/capability.proto" "$selu/orchestrator.proto"
  cat >"$selu/manifest.yaml" <<YAML
id: egress-selu
class: tool
image: example/egress-selu:0.1.0
tools:
  - name: fetch
    description: Two requests through the egress proxy
    input_schema: {type: object, properties: {allowed: {type: string}, refused: {type: string}}}
network:
  mode: allowlist
  hosts: ["$nsip:$port"]
filesystem: none
resources:
  max_memory_mb: 256
  pids_limit: 64
x-capsule:
  command: ["node", "server.js"]
YAML
  chmod -R a+rX "$selu"
fi

pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | head -8 | sed 's/^/         /'; }
as() { # as WHO COMMAND...: in the namespace, as root or uid 65534
  local who=$1; shift
  if [ "$who" = root ]; then ip netns exec "$ns" "$@"
  else ip netns exec "$ns" setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; fi
}

# one backend, one user: STATE is a directory or a URL; ROWS prints the
# call's egress rows as "decision|host|port|bytes_down|call_seq"
check() {
  local name=$1 who=$2 state=$3 rows=$4 out seq
  as "$who" "$capsule" policy set fetch dispatch allow --caps "$caps" --state "$state" >/dev/null &&
    as "$who" "$capsule" grant fetch --host "$nsip:$port" --caps "$caps" --state "$state" >/dev/null ||
    { bad "$name: setup"; return; }
  out=$(as "$who" "$capsule" call --caps "$caps" --state "$state" fetch dispatch '{"text":"x"}' 2>&1 </dev/null)
  [ "$out" = '{"got":100000}' ] && ok "$name: call-fetches" || bad "$name: call-fetches" "$out"
  seq=$(as "$who" "$capsule" audit --json --state "$state" 2>/dev/null |
    python3 -c 'import json,sys; print([r["seq"] for r in json.load(sys.stdin) if r["capability"] == "fetch"][-1])')
  out=$($rows)
  echo "$out" | grep -qEx "allow\|$nsip\|$port\|1[0-9]{5}\|$seq" && ok "$name: allowed-with-bytes-and-call" ||
    bad "$name: allowed-with-bytes-and-call (call $seq)" "$out"
  echo "$out" | grep -qx "deny|$nsip|$((port + 1))|0|$seq" && ok "$name: refused-recorded" ||
    bad "$name: refused-recorded" "$out"
  [ "$(echo "$out" | wc -l)" = 2 ] && ok "$name: one-row-per-decision" || bad "$name: one-row-per-decision" "$out"
  [ -n "$selu" ] && check_selu "$@"
}

# the warm Selu instance: two calls, each call's rows naming it
check_selu() {
  local name=$1-selu who=$2 state=$3 rows=$4 out seqs k
  as "$who" "$capsule" policy set egress-selu fetch allow --caps "$caps" --state "$state" >/dev/null ||
    { bad "$name: setup"; return; }
  # each call refused on a port of its own: a denial repeating the one
  # before within 10 s is only counted by the proxy (a "suppressed" row
  # later, docs/egress.md), whichever call made it
  for k in 1 2; do
    local args="{\"allowed\":\"http://$nsip:$port/big\",\"refused\":\"http://$nsip:$((port + k))/refused\"}"
    out=$(as "$who" "$capsule" call --caps "$caps" --state "$state" egress-selu fetch "$args" 2>&1 </dev/null)
    [ "$out" = '{"got":100000,"refused":403}' ] && ok "$name: call-$k-fetches" || bad "$name: call-$k-fetches" "$out"
  done
  as "$who" "$capsule" stop egress-selu --state "$state" >/dev/null 2>&1 ||
    bad "$name: the instance stops (capsule stop)"
  seqs=$(as "$who" "$capsule" audit --json --state "$state" 2>/dev/null |
    python3 -c 'import json,sys; print(" ".join(str(r["seq"]) for r in json.load(sys.stdin) if r["capability"] == "egress-selu" and r["tool"] == "fetch" and r["decision"] == "allow"))')
  set -- $seqs
  [ $# = 2 ] || { bad "$name: two audit records ($seqs)"; return; }
  out=$(cap=egress-selu $rows)
  local want
  want=$(printf 'allow|%s|%s|100000|%s\ndeny|%s|%s|0|%s\nallow|%s|%s|100000|%s\ndeny|%s|%s|0|%s' \
    "$nsip" "$port" "$1" "$nsip" "$((port + 1))" "$1" "$nsip" "$port" "$2" "$nsip" "$((port + 2))" "$2")
  # bytes_down is the response's whole size (headers too): compared apart
  # within a call the two may come in either order (an allowed request is
  # logged once its response has ended): by call, then decision
  out=$(echo "$out" | sed -E 's/^allow\|([^|]*)\|([^|]*)\|1[0-9]{5}\|/allow|\1|\2|100000|/' | sort -t'|' -k5,5n -k1,1)
  [ "$out" = "$want" ] &&
    ok "$name: each-call-its-own-rows" || bad "$name: each-call-its-own-rows (calls $1 $2)" "$out"
  [ -d "$state" ] && check_selu_serve "${name%-selu}" "$who" "$state" "$rows"
}

# through a running serve (SQLite): `capsule call` goes by serve's socket;
# the first call starts the instance, the next are made in serve's warm
# Selu process, its connection to the keeper kept between leases: each
# call still gets its own rows
check_selu_serve() {
  local name=$1-serve who=$2 state=$3 rows=$4 out spid k seqs want=
  local priv=()
  [ "$who" = root ] || priv=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  # exec'd all the way (not the function as in a subshell): $! is serve
  ip netns exec "$ns" "${priv[@]}" "$capsule" serve --caps "$caps" --state "$state" \
    </dev/null >/dev/null 2>"$work/serve-$1.log" &
  spid=$!
  for _ in $(seq 300); do as "$who" "$capsule" serve status --state "$state" >/dev/null 2>&1 && break; sleep 0.1; done
  for k in 3 4 5; do
    local args="{\"allowed\":\"http://$nsip:$port/big\",\"refused\":\"http://$nsip:$((port + k))/refused\"}"
    out=$(as "$who" "$capsule" call --caps "$caps" --state "$state" egress-selu fetch "$args" 2>&1 </dev/null)
    [ "$out" = '{"got":100000,"refused":403}' ] && ok "$name: call-$k-fetches" || bad "$name: call-$k-fetches" "$out"
  done
  kill -TERM "$spid"; wait "$spid"
  as "$who" "$capsule" stop egress-selu --state "$state" >/dev/null 2>&1
  seqs=$(as "$who" "$capsule" audit --json --state "$state" 2>/dev/null |
    python3 -c 'import json,sys; print(" ".join([str(r["seq"]) for r in json.load(sys.stdin) if r["capability"] == "egress-selu" and r["tool"] == "fetch" and r["decision"] == "allow"][-3:]))')
  set -- $seqs
  [ $# = 3 ] || { bad "$name: three audit records ($seqs)"; return; }
  for k in 3 4 5; do
    want="$want$(printf 'allow|%s|%s|100000|%s\ndeny|%s|%s|0|%s' "$nsip" "$port" "$1" "$nsip" "$((port + k))" "$1")
"
    shift
  done
  out=$(cap=egress-selu $rows | sed -E 's/^allow\|([^|]*)\|([^|]*)\|1[0-9]{5}\|/allow|\1|\2|100000|/' |
    sort -t'|' -k5,5n -k1,1 | tail -6)
  [ "$out" = "${want%$'\n'}" ] && ok "$name: each-call-its-own-rows" || bad "$name: each-call-its-own-rows ($seqs)" "$out"
}

echo "SQLite"
for who in root nobody; do
  st=$work/st-$who
  mkdir -m 700 "$st"
  [ "$who" = nobody ] && chown 65534:65534 "$st"
  lite() { python3 -c 'import sqlite3,sys
for r in sqlite3.connect(sys.argv[1]).execute("SELECT decision, host, port, bytes_down, call_seq FROM egress WHERE capability = ? ORDER BY seq", (sys.argv[2],)):
    print("|".join(map(str, r)))' "$st/state.db" "${cap:-fetch}"; }
  check "sqlite-$who" "$who" "$st" lite
done

echo "PostgreSQL"
if [ -z "$pg_bin" ]; then
  echo "  (skipped: PostgreSQL is not installed; scripts/deps.sh test installs it)"
else
  pg_start "$work/pg" || { echo "FAIL: the server did not start"; exit 1; }
  for who in root nobody; do
    pg_as "$pg_bin/createdb" -h "$PGSOCK" -U capsule "e$who" >/dev/null
    url="postgresql://capsule@/e$who?host=$PGSOCK"
    # the gateway's own files (its high-water mark) in a directory of its own
    mkdir -m 700 "$work/xdg-$who" && [ "$who" = nobody ] && chown 65534:65534 "$work/xdg-$who"
    pgrows() { pg_as "$pg_bin/psql" -h "$PGSOCK" -U capsule -At -q -c \
      "SELECT decision, host, port, bytes_down, call_seq FROM egress WHERE capability = '${cap:-fetch}' ORDER BY seq" "e$who"; }
    XDG_STATE_HOME=$work/xdg-$who check "postgres-$who" "$who" "$url" pgrows
  done
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
