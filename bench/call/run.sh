#!/usr/bin/env bash
# End-to-end calls through capsule's gateway beside the same tool run
# directly, in one hyperfine run: (b) a per-call Covenant agent (the sh
# wordcount example) and a Talos function (the weather example, through
# its Node shim), and (a) a warm Selu gRPC capability (the C example,
# examples/selu-text) against the same server called directly by a gRPC
# client (bench/call/selu_call.c, one process and connection per call, like
# `capsule call`). Each capsule call is the whole pipeline: registry load,
# policy, argument validation, credentials, the sandbox (or the warm
# instance's lease), the audit append.
# Usage: bench/call/run.sh [CAPSULE]   (needs `make build`: build/bench/selu_call)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capsule=$(realpath "${1:-$root/build/capsule}")
command -v hyperfine >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hyperfine >/dev/null; }
work=$(mktemp -d /var/tmp/capsule-bench-call.XXXXXX)
chmod 755 "$work"
server_pid=
trap 'kill $server_pid 2>/dev/null || true; "$capsule" stop --state "$state" text-tools >/dev/null 2>&1 || true; pkill -f "$work/caps/" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/caps"
cp -r "$root/examples/covenant/agents/wordcount" "$root/examples/weather" "$work/caps/"
selu_call=${SELU_CALL:-$(realpath "$(dirname "$capsule")/../../bench/selu_call")}
make -s -C "$root/examples/selu-text" >/dev/null
cp -r "$root/examples/selu-text" "$work/caps/"
state=$work/state
"$capsule" policy set wordcount dispatch allow --caps "$work/caps" --state "$state"
"$capsule" token issue local tool.wordcount --state "$state" >/dev/null # its capabilities.required
"$capsule" policy set weather current allow --caps "$work/caps" --state "$state"
"$capsule" policy set text-tools word_count allow --caps "$work/caps" --state "$state"
# the direct server: the same binary on a host loopback port
port=50551
"$work/caps/selu-text/capability" "127.0.0.1:$port" >/dev/null 2>&1 &
server_pid=$!
sleep 0.5
echo "bench-key" | "$capsule" cred set weather api_key --scope system --state "$state"
args='{"text": "one two three four five"}'
line='{"id":"x","text":"one two three four five","issuer":{"display":"u@local","pubkey":""},"issued_at":0,"priority":"normal","parent":null}'
echo "$line" >"$work/line"
# the same handler run by a plain Node script: the weather plugin's
# index.ts as capsule transformed it (one call fills the cache), imported
# and called as Talos calls it
"$capsule" call --caps "$work/caps" --state "$state" weather current '{"city": "Oslo"}' >/dev/null
cp "$(ls "$state"/cache/talos/*.mjs | head -1)" "$work/weather.mjs"
cat >"$work/direct.mjs" <<JS
const m = await import('$work/weather.mjs');
console.log(JSON.stringify(await m.handlers.current({ city: 'Oslo' }, { units: 'metric', poll_interval_minutes: '30', api_key: 'k' })));
JS
cmds=(-n "covenant direct" "sh -c '$work/caps/wordcount/wordcount.sh < $work/line'"
      -n "covenant via capsule call" "$capsule call --caps $work/caps --state $state wordcount dispatch '$args'")
cmds+=(-n "selu direct (grpc client)" "$selu_call $port word_count '$args'"
       -n "selu via capsule call (warm)" "$capsule call --caps $work/caps --state $state text-tools word_count '$args'")
if command -v node >/dev/null; then
  cmds+=(-n "talos direct (node)" "node $work/direct.mjs"
         -n "talos via capsule call" "$capsule call --caps $work/caps --state $state weather current '{\"city\": \"Oslo\"}'")
fi
hyperfine -N --warmup 3 --runs 40 --export-json "$work/call.json" "${cmds[@]}"
node -e '
const r = JSON.parse(require("fs").readFileSync(process.argv[1])).results;
const by = Object.fromEntries(r.map(x => [x.command, x]));
console.log("\n| tool | direct ms | via capsule call ms | calls/s via capsule | ratio |\n|---|---|---|---|---|");
for (const [k, d, c] of [["Selu gRPC capability (C), warm", "selu direct (grpc client)", "selu via capsule call (warm)"], ["Covenant agent (sh), per call", "covenant direct", "covenant via capsule call"], ["Talos function (node)", "talos direct (node)", "talos via capsule call"]]) {
  if (!by[d] || !by[c]) continue;
  console.log(`| ${k} | ${(by[d].median*1000).toFixed(2)} | ${(by[c].median*1000).toFixed(2)} | ${(1/by[c].median).toFixed(1)} | ${(by[c].median/by[d].median).toFixed(2)}x |`);
}' "$work/call.json"
"$capsule" audit verify --state "$state"
