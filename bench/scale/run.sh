#!/usr/bin/env bash
# Audited calls per second of a warm tool (the C Selu example,
# examples/selu-text, word_count: each `capsule call` is the whole
# pipeline, its audit append included): one gateway on SQLite beside 4
# gateways on one PostgreSQL (a server this script starts: initdb in a
# temporary directory, a unix socket), side by side in one run. A gateway
# is a loop of `capsule call` against its own state directory (on
# PostgreSQL: its own directory for the warm instance and the high-water
# mark, the shared database for the rest); the 4 run at once; one gateway
# on PostgreSQL alone besides. The sides take turns in 5 rounds. Prints
# each side's calls/s and the ratio, then verifies both audit chains.
# Usage: bench/scale/run.sh [CAPSULE] [CALLS]   (CALLS per side, default 200)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capsule=$(realpath "${1:-$root/build/capsule}")
calls=${2:-200}
. "$root/tests/state/pg-lib.sh"
[ -n "$pg_bin" ] || { echo "bench/scale: PostgreSQL is not installed (scripts/deps.sh test)"; exit 1; }
work=$(mktemp -d /var/tmp/capsule-bench-scale.XXXXXX)
chmod 755 "$work"
export CAPSULE_STATE_KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
unset CAPSULE_STATE
export XDG_STATE_HOME=$work/xdg
cleanup() {
  for d in "$work"/lite "$work"/gw*; do
    [ -d "$d" ] && "$capsule" stop text-tools --state "$d" >/dev/null 2>&1 || true
  done
  for i in 0 1 2 3 4; do
    [ -d "$work/gw$i" ] && XDG_STATE_HOME=$work/gw$i "$capsule" stop text-tools --state "$url" >/dev/null 2>&1 || true
  done
  pg_stop fast
  rm -rf "$work"
}
url=
trap cleanup EXIT
make -s -C "$root/examples/selu-text" >/dev/null
mkdir -p "$work/caps" && cp -r "$root/examples/selu-text" "$work/caps/"
# durable as the SQLite side is (WAL, synchronous=NORMAL: a power loss may
# lose the last commits, never corrupt): fsync on, synchronous_commit off
PG_DURABILITY="-c synchronous_commit=off" pg_start "$work" >/dev/null
url=$PGURL
args='{"text": "one two three four five"}'
now() { date +%s.%N; }

# warm every side: one gateway on SQLite, one on PostgreSQL, 4 on it
"$capsule" policy set text-tools word_count allow --caps "$work/caps" --state "$work/lite" >/dev/null
"$capsule" policy set text-tools word_count allow --caps "$work/caps" --state "$url" >/dev/null
"$capsule" call --caps "$work/caps" --state "$work/lite" text-tools word_count "$args" >/dev/null
for i in 0 1 2 3 4; do
  mkdir -p "$work/gw$i"
  XDG_STATE_HOME=$work/gw$i "$capsule" call --caps "$work/caps" --state "$url" text-tools word_count "$args" >/dev/null
done
loop() { # loop N XDG STATE: N calls one after the other
  for ((k = 0; k < $1; k++)); do
    XDG_STATE_HOME=$2 "$capsule" call --caps "$work/caps" --state "$3" text-tools word_count "$args" >/dev/null
  done
}
# in rounds, the sides taking turns, so a burst of load on the machine
# lands on every side alike
rounds=5 per=$((calls / 20)) # per gateway and round on the 4-gateway side
t_lite=0 t_pg1=0 t_pg4=0
for ((r = 0; r < rounds; r++)); do
  t0=$(now); loop $((per * 4)) "$XDG_STATE_HOME" "$work/lite"; t1=$(now)
  loop $((per * 4)) "$work/gw0" "$url"; t2=$(now)
  for i in 1 2 3 4; do loop "$per" "$work/gw$i" "$url" & done
  wait
  t3=$(now)
  t_lite=$(echo "$t_lite + $t1 - $t0" | bc -l)
  t_pg1=$(echo "$t_pg1 + $t2 - $t1" | bc -l)
  t_pg4=$(echo "$t_pg4 + $t3 - $t2" | bc -l)
done
n=$((rounds * per * 4))
lite=$(echo "$n / $t_lite" | bc -l)
pg1=$(echo "$n / $t_pg1" | bc -l)
pg=$(echo "$n / $t_pg4" | bc -l)

printf '| setup | calls | calls/s |\n|---|---|---|\n'
printf '| 1 gateway, SQLite | %d | %.1f |\n' "$n" "$lite"
printf '| 1 gateway, PostgreSQL | %d | %.1f |\n' "$n" "$pg1"
printf '| 4 gateways, one PostgreSQL | %d | %.1f |\n' "$n" "$pg"
printf 'ratio (4 on PostgreSQL / 1 on SQLite): %.2fx\n' "$(echo "$pg / $lite" | bc -l)"
"$capsule" audit verify --state "$work/lite"
XDG_STATE_HOME=$work/gw1 "$capsule" audit verify --state "$url"
