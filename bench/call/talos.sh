#!/usr/bin/env bash
# A Talos function through `capsule call` beside the same handler called by
# a plain Node script, side by side: interleaved rounds (each round runs
# both once, in the order turned every other round; round 0 only warms
# the caches), medians of wall clock and CPU
# time (user + system of the command and its children, from wait4). The
# handler is the weather example's `current` (examples/weather); the
# direct script imports the JavaScript capsule's esbuild step made of its
# index.ts (the cache under the state, filled by a first call) and calls it
# as Talos does, handler(args, config). The target: the call through
# capsule <= 1.2x the direct script.
# Usage: bench/call/talos.sh [CAPSULE]   (env ROUNDS=20)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capsule=$(realpath "${1:-$root/build/capsule}")
rounds=${ROUNDS:-20}
command -v node >/dev/null || { echo "bench/call/talos: node is not installed" >&2; exit 2; }
work=$(mktemp -d /var/tmp/capsule-bench-talos.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/caps"
cp -r "$root/examples/weather" "$work/caps/"
state=$work/state
"$capsule" policy set weather current allow --caps "$work/caps" --state "$state" >/dev/null
echo "bench-key" | "$capsule" cred set weather api_key --scope system --state "$state" >/dev/null
"$capsule" call --caps "$work/caps" --state "$state" weather current '{"city": "Oslo"}' >/dev/null
cp "$(ls "$state"/cache/talos/*.mjs | head -1)" "$work/weather.mjs"
cat >"$work/direct.mjs" <<JS
const m = await import('$work/weather.mjs');
console.log(JSON.stringify(await m.handlers.current({ city: 'Oslo' }, { units: 'metric', poll_interval_minutes: '30', api_key: 'k' })));
JS
python3 - "$rounds" node "$work/direct.mjs" -- "$capsule" call --caps "$work/caps" --state "$state" weather current '{"city": "Oslo"}' <<'PY'
import os, statistics, subprocess, sys, time
rounds = int(sys.argv[1])
sep = sys.argv.index("--")
cmds = {"node direct": sys.argv[2:sep], "capsule call": sys.argv[sep + 1:]}
wall = {k: [] for k in cmds}
cpu = {k: [] for k in cmds}
for r in range(rounds + 1):
    # the pair's order turned every other round: each side measured first as often
    for name, argv in list(cmds.items())[:: -1 if r % 2 else 1]:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        t1 = time.monotonic()
        if status != 0:
            sys.exit(f"{name} failed ({status})")
        if r:
            wall[name].append(t1 - t0)
            cpu[name].append(ru.ru_utime + ru.ru_stime)
med = statistics.median
for name in cmds:
    print(f"{name:14} wall median {med(wall[name]) * 1000:.1f} ms (min {min(wall[name]) * 1000:.1f}), "
          f"cpu median {med(cpu[name]) * 1000:.1f} ms")
c, d = "capsule call", "node direct"
per_round = sorted(a / b for a, b in zip(wall[c], wall[d]))
print(f"ratio capsule call / node direct: wall {med(wall[c]) / med(wall[d]):.2f}x "
      f"(per-round median {med(per_round):.2f}x), cpu {med(cpu[c]) / med(cpu[d]):.2f}x")
PY
