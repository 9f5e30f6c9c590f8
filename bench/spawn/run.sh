#!/usr/bin/env bash
# Start-up and spawn time of capsule beside bubblewrap, measured in one
# run with the setups interleaved: ROUNDS rounds, each one hyperfine run of
# every command (RUNS runs each, after WARMUP), so a burst of load on this
# shared machine hits every setup alike. Reports each command's median over
# all rounds and its spread (10th-90th percentile of the samples, the
# 25th-75th percentile of the per-round medians), and the ratios the
# targets are stated in: of the overall medians, and the 25th-75th
# percentile of the per-round ratios.
#
#   floor   unshare with capsule's namespaces (user, mount, pid, ipc, uts,
#           net, cgroup) and nothing else: the kernel's part
#   bwrap   bwrap --unshare-all --new-session --die-with-parent with the
#           mount set capsule builds: the same grants (taken from
#           `capsule run --dry-run` of the same command, so the two cannot
#           drift apart; host symlinks such as /bin -> usr/bin recreated as
#           links, as capsule does), /dev with /dev/shm, /proc, a private
#           /tmp, the hostname, a read-only root
#   capsule capsule run --memory 256M --pids 64 -- /bin/true: the above
#           plus Landlock, the seccomp filter, cgroup limits, rlimits and
#           the supervisor
# each as root and as uid 65534 (setpriv; both sides pay its exec); capsule
# and bwrap as root again with 50 ms between runs ("spaced": a tool call now
# and then, not back to back, which kernel caches such as RCU-sync state
# favour); and the start-up of the binaries: `capsule --version`,
# `bwrap --version`, `capsule check` of one manifest.
#
# BASELINE=OTHER_CAPSULE adds another build's `run`, root and uid 65534, to
# the same rounds (a change measured before/after side by side; a build
# tree's capsule finds its modules by its own path, so copy neither).
#
# Usage: bench/spawn/run.sh [CAPSULE]   (root; env ROUNDS, RUNS, WARMUP,
# BASELINE, JSON=FILE to keep every sample). Installs hyperfine and
# bubblewrap through scripts/deps.sh when missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capsule_built=$(realpath "${1:-$root/build/capsule}")
rounds=${ROUNDS:-20} runs=${RUNS:-5} warmup=${WARMUP:-1}
[ "$(id -u)" = 0 ] || { echo "bench/spawn: run as root (it measures root and uid 65534)" >&2; exit 2; }
"$root/scripts/deps.sh" bench
out=$(mktemp -d /var/tmp/capsule-bench.XXXXXX)
trap 'rm -rf "$out"' EXIT
chmod 755 "$out"
# uid 65534 must reach the binary (a worktree may sit under a 0700 home)
capsule=$out/capsule
cp "$capsule_built" "$capsule"
manifest=$root/examples/web-search/manifest.yaml
cp "$manifest" "$out/manifest.yaml" && chmod 644 "$out/manifest.yaml"

run_args=(run --memory 256M --pids 64 -- /bin/true)
# bwrap's arguments for the mount tree capsule's dry run describes
binds=$("$capsule" "${run_args[@]:0:5}" --dry-run --json -- /bin/true 2>/dev/null | python3 -c '
import json, os, sys
spec = json.load(sys.stdin)
args = []
for g in sorted(spec["filesystem"]["grants"], key=lambda g: g["path"].count("/")):
    p = g["path"]
    if os.path.islink(p):
        args += ["--symlink", os.readlink(p), p]
    elif os.path.exists(p):
        args += ["--ro-bind" if g["access"] == "read" else "--bind", p, p]
args += ["--dev", "/dev", "--tmpfs", "/dev/shm", "--proc", "/proc"]
if spec["sandbox"]["private_tmp"]:
    args += ["--tmpfs", "/tmp"]
args += ["--hostname", "capsule", "--remount-ro", "/"]
print(" ".join(args))')
bwrap_cmd="bwrap --unshare-all --new-session --die-with-parent $binds /bin/true"
floor_cmd="unshare --user --map-root-user --mount --pid --fork --ipc --uts --net --cgroup /bin/true"
capsule_cmd="$capsule ${run_args[*]}"
nobody="setpriv --reuid=65534 --regid=65534 --clear-groups --"
echo "bwrap's mount set (from capsule's dry run): $binds"

cmds=(-n "floor root" "$floor_cmd"
      -n "bwrap root" "$bwrap_cmd"
      -n "capsule root" "$capsule_cmd"
      -n "floor 65534" "$nobody $floor_cmd"
      -n "bwrap 65534" "$nobody $bwrap_cmd"
      -n "capsule 65534" "$nobody $capsule_cmd"
      -n "bwrap --version" "bwrap --version"
      -n "capsule --version" "$capsule --version"
      -n "capsule check (1 manifest)" "$capsule check -q $out/manifest.yaml")
spaced=(-n "bwrap root, spaced" "$bwrap_cmd" -n "capsule root, spaced" "$capsule_cmd")
if [ -n "${BASELINE:-}" ]; then
  baseline=$(realpath "$BASELINE")
  setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$baseline" ||
    { echo "bench/spawn: uid 65534 cannot run $baseline" >&2; exit 2; }
  cmds+=(-n "baseline root" "$baseline ${run_args[*]}"
         -n "baseline 65534" "$nobody $baseline ${run_args[*]}")
fi
for ((r = 1; r <= rounds; r++)); do
  printf 'round %d/%d\r' "$r" "$rounds" >&2
  hyperfine -N --style none --warmup "$warmup" --runs "$runs" \
    --export-json "$out/round-$r.json" "${cmds[@]}" >/dev/null 2>"$out/hyperfine.log" ||
    { cat "$out/hyperfine.log" >&2; exit 1; }
  hyperfine -N --style none --warmup 1 --runs "$runs" --prepare "sleep 0.05" \
    --export-json "$out/spaced-$r.json" "${spaced[@]}" >/dev/null 2>"$out/hyperfine.log" ||
    { cat "$out/hyperfine.log" >&2; exit 1; }
done
echo >&2
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
samples, medians, order = {}, {}, []
for r, kind in ((r, k) for r in range(1, rounds + 1) for k in ("round", "spaced")):
    for res in json.load(open(f"{out}/{kind}-{r}.json"))["results"]:
        name = res["command"]
        if name not in samples:
            order.append(name)
        samples.setdefault(name, []).extend(t * 1000 for t in res["times"])
        medians.setdefault(name, []).append(statistics.median(res["times"]) * 1000)
def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]
med = {n: statistics.median(samples[n]) for n in order}
print(f"\n{rounds} interleaved rounds; medians in ms over all samples\n")
print("| command | samples | median | p10-p90 | per-round medians p25-p75 |")
print("|---|---|---|---|---|")
for n in order:
    s = samples[n]
    print(f"| {n} | {len(s)} | {med[n]:.2f} | {pct(s, .1):.2f}-{pct(s, .9):.2f} "
          f"| {pct(medians[n], .25):.2f}-{pct(medians[n], .75):.2f} |")
def ratio(a, b, target):
    per_round = [x / y for x, y in zip(medians[a], medians[b])]
    print(f"| {a} / {b} | {med[a] / med[b]:.2f}x | {pct(per_round, .25):.2f}x-{pct(per_round, .75):.2f}x "
          f"| {target} |")
print("\n| ratio | of medians | per round p25-p75 | target |\n|---|---|---|---|")
ratio("capsule root", "bwrap root", "<= 1.0x")
ratio("capsule 65534", "bwrap 65534", "<= 1.0x")
ratio("capsule root, spaced", "bwrap root, spaced", "")
ratio("capsule root", "floor root", "")
ratio("capsule 65534", "floor 65534", "")
ratio("capsule --version", "bwrap --version", "<= 2x")
if "baseline root" in medians:
    ratio("capsule root", "baseline root", "")
    ratio("capsule 65534", "baseline 65534", "")
    ratio("baseline root", "bwrap root", "")
ratio("capsule check (1 manifest)", "capsule --version", "<= 2x")
PY
if [ -n "${JSON:-}" ]; then
  python3 -c 'import json,sys; print(json.dumps([json.load(open(f)) for f in sys.argv[1:]]))' \
    "$out"/round-*.json "$out"/spaced-*.json >"$JSON"
fi
