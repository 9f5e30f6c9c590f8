#!/usr/bin/env bash
# PostgreSQL restarted during 1,000 calls from 4 gateways (issue 18's
# fault test; meson test `state-restart-calls`, in the suite `slow`): 4
# gateways (each its own directory, as on its own host) make 250 real
# `capsule call`s each to a Covenant agent on one PostgreSQL state; once
# about a fifth of them are done the server is stopped (immediate: no
# shutdown checkpoint, connections cut) and started again. Afterwards:
# every call that succeeded is recorded exactly once, none is recorded
# twice, the records number at most the calls made, a failed call failed
# with a message about the state (never anything else), and the chain
# verifies from another gateway. Usage: restart.sh CAPSULE [CALLS]
set -u
capsule=$(realpath "$1")
total=${2:-1000}
here=$(dirname "$(realpath "$0")")
. "$here/pg-lib.sh"
[ -n "$pg_bin" ] || { echo "SKIP: PostgreSQL is not installed (apt-get install postgresql-15; scripts/deps.sh test installs it)"; exit 77; }
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-restart.XXXXXX)
chmod 755 "$work"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; pg_stop immediate; rm -rf "$work"' EXIT
unset CAPSULE_STATE CAPSULE_STATE_KEY_FILE
export CAPSULE_STATE_KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | head -8 | sed 's/^/         /'; }
gw() { mkdir -p "$work/gw/$1" && chmod 700 "$work/gw/$1" && echo "$work/gw/$1"; }

pg_start "$work" || { echo "FAIL: the server did not start"; exit 1; }
url=$PGURL
caps=$work/caps
mkdir -p "$caps/agents/echo"
printf '[agent]\nid = "echo"\nname = "echo"\nversion = "0.1.0"\nruntime = "rust-bin"\nentry = "run.sh"\n[resources]\ncpu_ms_per_task = 5000\nmemory_mb = 256\nnetwork = "off"\n[sandbox]\nrequired = false\nbackend = "trusted-local"\nfilesystem = "read-only-package"\n' >"$caps/agents/echo/agent.toml"
printf '#!/bin/sh\nIFS= read -r line; printf "{\\"got\\":%%s}\\n" "$line"\n' >"$caps/agents/echo/run.sh"
chmod 755 "$caps/agents/echo/run.sh"
ga=$(gw a)
XDG_STATE_HOME=$ga "$capsule" policy set echo dispatch allow --caps "$caps" --state "$url" >/dev/null ||
  { echo "FAIL: policy set"; exit 1; }

per=$((total / 4))
echo "$total calls from 4 gateways ($per each) on one PostgreSQL; the server restarted during them"
for i in 1 2 3 4; do
  gi=$(gw "k$i")
  (for k in $(seq "$per"); do
    # each call's arguments unique: its record is found by their hash
    if XDG_STATE_HOME=$gi "$capsule" call --caps "$caps" --state "$url" echo dispatch \
      "{\"text\": \"k$i-$k\"}" >/dev/null 2>>"$work/k$i.err" </dev/null; then echo ok; else echo fail; fi
  done >"$work/k$i.out") &
  pids+=($!)
done
done_calls() { cat "$work"/k?.out 2>/dev/null | wc -l; }
# the restart once a fifth of the calls are done (no clock: a count)
running() { local p; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
while [ "$(done_calls)" -lt $((total / 5)) ] && running; do sleep 0.2; done
echo "  ($(done_calls) calls done: stopping the server)"
pg_stop immediate
pg_resume || bad "the server came back"
wait "${pids[@]}"
pids=()
for i in 1 2 3 4; do # each gateway's next start appends what it kept
  XDG_STATE_HOME=$work/gw/k$i "$capsule" audit --state "$url" >/dev/null 2>&1
done
calls_ok=$(cat "$work"/k?.out | grep -c '^ok$')
calls_failed=$(cat "$work"/k?.out | grep -c '^fail$')
[ $((calls_ok + calls_failed)) = "$total" ] && ok "all-calls-made ($calls_ok succeeded, $calls_failed failed)" ||
  bad "all-calls-made ($calls_ok + $calls_failed of $total)"
XDG_STATE_HOME=$ga "$capsule" audit --json --state "$url" >"$work/calls.json" 2>/dev/null
if python3 - "$work/calls.json" "$calls_ok" "$calls_failed" <<'PY'
import json, sys, collections
recs = [r for r in json.load(open(sys.argv[1])) if r["capability"] == "echo" and r["decision"] == "allow"]
ok, failed = int(sys.argv[2]), int(sys.argv[3])
hashes = collections.Counter(r["args_sha256"] for r in recs)
twice = [h for h, n in hashes.items() if n > 1]
print(f"  ({len(recs)} records of {ok} calls that succeeded and {failed} that failed; {len(twice)} twice)")
sys.exit(0 if not twice and ok <= len(recs) <= ok + failed and ok > 0 else 1)
PY
then ok restart-calls-none-twice-none-lost
else bad restart-calls-none-twice-none-lost "$(head -3 "$work"/k?.err)"; fi
# every failure names the state's database (unreachable, the connection
# gone); the messages other than those, counted
other=$(grep -hv '^$' "$work"/k?.err | grep -vE 'state database|audit log|connection|server' | sort | uniq -c)
[ -z "$other" ] && ok restart-calls-fail-cleanly || bad restart-calls-fail-cleanly "$other"
out=$(XDG_STATE_HOME=$(gw b) "$capsule" audit verify --state "$url" 2>&1)
echo "$out" | grep -q 'audit log verified' && ok restart-calls-chain-verifies || bad restart-calls-chain-verifies "$out"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
