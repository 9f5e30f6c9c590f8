#!/usr/bin/env bash
# The first call to a cold Selu capability: the C example
# (examples/selu-text) run from x-capsule.command beside the same server
# run from its image in capsule's store (the rootfs already unpacked; an
# OCI layout built here with umoci holding the server and the libraries
# ldd names). Each call finds no warm instance (`capsule stop` before it),
# so it starts the sandbox, waits for HealthCheck and calls. Rounds are
# interleaved, the order turned every other round; medians of ROUNDS (default 10) per side.
# Usage: bench/call/cold.sh [CAPSULE]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capsule=$(realpath "${1:-$root/build/capsule}")
rounds=${ROUNDS:-10}
command -v umoci >/dev/null || { echo "bench/call/cold: umoci is not installed (scripts/deps.sh test)" >&2; exit 2; }
work=$(mktemp -d /var/tmp/capsule-bench-cold.XXXXXX)
chmod 755 "$work"
# (|| true: under set -e a stop that finds nothing would end the trap before the rm)
trap '"$capsule" stop --state "$work/state" text-tools >/dev/null 2>&1 || true; "$capsule" stop --state "$work/state" text-image >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
make -s -C "$root/examples/selu-text" >/dev/null
mkdir -p "$work/caps"
cp -r "$root/examples/selu-text" "$work/caps/"
"$root/tests/image/mkimage.sh" "$work/layout" t "$work/caps/selu-text/capability" >/dev/null
mkdir -p "$work/caps/image"
sed -e 's/^id: text-tools/id: text-image/' -e '/^x-capsule:/,$d' "$root/examples/selu-text/manifest.yaml" \
  >"$work/caps/image/manifest.yaml"
"$capsule" image import --state "$work/state" "$work/layout" --tag ghcr.io/capsule-examples/text-tools:0.1.0 >/dev/null
python3 - "$capsule" "$work" "$rounds" <<'PY'
import statistics, subprocess, sys, time
capsule, work, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
common = ["--caps", f"{work}/caps", "--state", f"{work}/state"]
sides = {"x-capsule.command": "text-tools", "image": "text-image"}
times = {k: [] for k in sides}
for r in range(rounds + 1):  # round 0 warms the caches
    # the pair's order turned every other round: each side measured first as often
    for name, cap in list(sides.items())[:: -1 if r % 2 else 1]:
        subprocess.run([capsule, "stop", "--state", f"{work}/state", cap],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.monotonic()
        out = subprocess.run([capsule, "call", *common, cap, "word_count", '{"text": "a b c"}'],
                             capture_output=True, text=True)
        t1 = time.monotonic()
        if out.returncode != 0 or '"words":3' not in out.stdout:
            sys.exit(f"{name}: the call failed: {out.stderr.strip()}")
        if r:
            times[name].append(t1 - t0)
med = {k: statistics.median(v) for k, v in times.items()}
for k, v in times.items():
    print(f"{k:18} cold call median {med[k] * 1000:.1f} ms (min {min(v) * 1000:.1f})")
per = sorted(a / b for a, b in zip(times["image"], times["x-capsule.command"]))
print(f"ratio image / x-capsule.command: {med['image'] / med['x-capsule.command']:.2f}x "
      f"(per-round median {statistics.median(per):.2f}x)")
PY
