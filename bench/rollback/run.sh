#!/usr/bin/env bash
# Rollback snapshots beside sha256sum, in one run: a tree of 10,000 files
# holding 200 MB (random contents, 100 directories), hashed by
#   sha256sum    every file (find | xargs sha256sum), the peer;
#   cold         a snapshot into an empty store (hash and store every file);
#   unchanged    a snapshot of the same tree again (the hash cache: no file
#                read, no object written).
# The page cache is warm for all three (each runs after a warm-up). Prints
# the means and the two ratios. Usage: bench/rollback/run.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath "${1:-$root/build}")
snap=$build/bench/rollback_snap
command -v hyperfine >/dev/null || { apt-get update -qq && apt-get install -y -qq hyperfine >/dev/null; }
work=$(mktemp -d /var/tmp/capsule-rollback-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 - "$work/tree" <<'PY'
import os, random, sys
root = sys.argv[1]
rng = random.Random(7)
total, files = 200 * 1000 * 1000, 10000
sizes = [rng.randint(1, 2 * total // files) for _ in range(files)]
scale = total / sum(sizes)
for i, size in enumerate(sizes):
    d = os.path.join(root, "d%02d" % (i % 100))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%05d" % i), "wb") as f:
        f.write(os.urandom(max(1, int(size * scale))))
PY
echo "tree: $(find "$work/tree" -type f | wc -l) files, $(du -sm "$work/tree" | cut -f1) MB"
"$snap" "$work/warm" "$work/tree" >/dev/null
hyperfine --warmup 1 --runs 5 --export-json "$work/result.json" \
  -n sha256sum "find $work/tree -type f -print0 | xargs -0 sha256sum >/dev/null" \
  -n cold --prepare "rm -rf $work/store" "$snap $work/store $work/tree" \
  -n unchanged "$snap $work/warm $work/tree"
python3 - "$work/result.json" <<'PY'
import json, sys
r = {x["command"]: x["mean"] for x in json.load(open(sys.argv[1]))["results"]}
print("sha256sum %.3f s, cold snapshot %.3f s (%.2fx), unchanged snapshot %.3f s (%.3fx of sha256sum)"
      % (r["sha256sum"], r["cold"], r["cold"] / r["sha256sum"], r["unchanged"],
         r["unchanged"] / r["sha256sum"]))
PY
