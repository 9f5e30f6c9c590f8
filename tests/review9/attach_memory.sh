#!/usr/bin/env bash
# Finding (serve --grpc, src/gateway/selu_artifacts.c attach_stored_one):
# each attachment was read whole into the memory of the process making
# the call (the gRPC process itself on the warm path) before its upload
# to the Selu tool's instance: 24 calls at once attaching one 30 MiB
# artifact had that process hold 24 x 30 MiB of its own memory (64 calls:
# 2 GiB), and glibc kept most of it after. A warm instance takes 4 leases
# at once, so here 4 of the 24 calls hold theirs together (+141 MiB before
# the fix, +15 to 25 MiB after); an attacker spreads calls over sessions. Here the gRPC process's
# anonymous memory (RssAnon, sampled while the calls run) must not grow
# by more than 64 MiB (two attachments' worth). Exits 1 while it does, 0 blocked, 77
# cannot run. Usage: attach_memory.sh CAPSULE
capsule=$(realpath "${1:-build/capsule}")
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/selu_lib.sh"
# an ASan build keeps what is freed (its quarantine): not this measure
grep -qa __asan_init "$capsule" && { echo "SKIP: an ASan build (its quarantine holds freed memory)"; exit 77; }
evil_tool "{artifact: {capability_artifact_id: id}}"
start_serve
gproc=$(pgrep -P "$spid" | while read -r p; do [ "$(cat /proc/"$p"/comm 2>/dev/null)" = capsule-spawner ] || { echo "$p"; break; }; done) # not the warm Selu spawner
anon() { awk '/^RssAnon/ {print $2}' /proc/"$gproc"/status 2>/dev/null; }
TOOL=evil.read_attachments ARGS='{"attachments":[]}' drive invoke >/dev/null # the instance warm
base=$(anon)
[ -n "$base" ] || { echo "SKIP: cannot read the gRPC process's memory"; exit 77; }
TOOL=evil.read_attachments ATTACH_N=24 ATTACH_BYTES=$((30 << 20)) drive attach-big >"$W/out" &
client=$!
peak=$base
while kill -0 "$client" 2>/dev/null; do
  a=$(anon); [ -n "$a" ] && [ "$a" -gt "$peak" ] && peak=$a
  sleep 0.02
done
echo "the calls: $(cut -c1-300 "$W/out")"; tail -2 "$state/logs/evil.log" 2>/dev/null | cut -c1-200
grep -q '"id":"capsule-artifact-' "$W/out" || { echo "SKIP: the upload failed"; exit 77; }
grow=$(((peak - base) >> 10))
echo "the gRPC process's anonymous memory: $((base >> 10)) MiB, at most $((peak >> 10)) MiB during the calls (+$grow MiB)"
if [ "$grow" -gt 64 ]; then
  echo "VULNERABLE: the calls' attachments were held in the gRPC process's memory"
  exit 1
fi
echo blocked
