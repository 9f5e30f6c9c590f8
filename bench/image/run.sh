#!/usr/bin/env bash
# `capsule image import` beside `umoci unpack` of the same image, in one
# run, interleaved: an OCI layout of about SIZE_MB MiB of real
# files (shared libraries from the host's /usr/lib, gzip layers as umoci
# writes them) built here with umoci. Each import starts from an empty
# store, so it verifies every blob, unpacks every
# layer and commits; umoci unpack starts from an empty bundle directory.
# `umoci raw unpack` (the layers alone, no bundle config) is shown beside them.
# Usage: bench/image/run.sh [CAPSULE]   (env SIZE_MB=100, ROUNDS=8,
# JSON=FILE to keep every sample)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capsule=$(realpath "${1:-$root/build/capsule}")
size_mb=${SIZE_MB:-100} rounds=${ROUNDS:-8}
for t in umoci python3; do
  command -v $t >/dev/null || { echo "bench/image: $t is not installed (scripts/deps.sh bench)" >&2; exit 2; }
done
out=$(mktemp -d /var/tmp/capsule-bench-image.XXXXXX)
trap 'rm -rf "$out"' EXIT

# the image: one layer of libraries up to SIZE_MB MiB
umoci init --layout "$out/layout" >/dev/null
umoci new --image "$out/layout:bench" >/dev/null
umoci unpack --rootless --image "$out/layout:bench" "$out/make" >/dev/null
mkdir -p "$out/make/rootfs/usr/lib"
total=0
while IFS= read -r f; do
  s=$(stat -c %s "$f")
  [ $((total + s)) -gt $((size_mb << 20)) ] && continue
  cp "$f" "$out/make/rootfs/usr/lib/"
  total=$((total + s))
done < <(find /usr/lib/x86_64-linux-gnu -maxdepth 1 -type f -name '*.so*' | sort)
umoci repack --image "$out/layout:bench" "$out/make" >/dev/null
rm -rf "$out/make"
layer=$(du -sm "$out/layout/blobs" | cut -f1)
echo "image: $((total >> 20)) MiB of files, $layer MiB of blobs (gzip)"

# interleaved: each round runs every command once, from a clean target,
# so a burst of load on this shared machine hits them alike; wall time and
# the CPU time (user + system, of the command and its children)
python3 - "$out" "$capsule" "$rounds" "${JSON:-}" <<'PY'
import json, os, shutil, statistics, subprocess, sys, time
out, capsule, rounds, keep = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
cmds = {
    "capsule image import": [capsule, "image", "import", "--state", f"{out}/state",
                             f"{out}/layout", "--tag", "bench/image:1"],
    "umoci unpack": ["umoci", "unpack", "--rootless", "--image", f"{out}/layout:bench", f"{out}/bundle"],
    "umoci raw unpack": ["umoci", "raw", "unpack", "--rootless", "--image", f"{out}/layout:bench",
                         f"{out}/raw"],
}
def clean():
    for d in ("state", "bundle", "raw"):
        subprocess.run(["rm", "-rf", f"{out}/{d}"], check=True)
wall = {k: [] for k in cmds}
cpu = {k: [] for k in cmds}
for r in range(rounds + 1):  # round 0 warms the page cache
    for name, argv in cmds.items():
        clean()
        subprocess.run(["sync"])
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        t1 = time.monotonic()
        if status != 0:
            sys.exit(f"{name} failed ({status})")
        if r:
            wall[name].append(t1 - t0)
            cpu[name].append(ru.ru_utime + ru.ru_stime)
clean()
med = lambda v: statistics.median(v)
for name in cmds:
    print(f"{name:22} wall median {med(wall[name]):.3f} s (min {min(wall[name]):.3f}), "
          f"cpu median {med(cpu[name]):.3f} s")
i, u, raw = "capsule image import", "umoci unpack", "umoci raw unpack"
per_round = sorted(a / b for a, b in zip(wall[i], wall[u]))
print(f"ratio import / umoci unpack: wall {med(wall[i]) / med(wall[u]):.2f}x "
      f"(per-round median {med(per_round):.2f}x), cpu {med(cpu[i]) / med(cpu[u]):.2f}x; "
      f"import / umoci raw unpack: wall {med(wall[i]) / med(wall[raw]):.2f}x, "
      f"cpu {med(cpu[i]) / med(cpu[raw]):.2f}x")
if keep:
    json.dump({"wall": wall, "cpu": cpu}, open(keep, "w"))
PY
