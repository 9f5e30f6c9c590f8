#!/usr/bin/env bash
# Time to run /bin/true under full isolation, side by side in one hyperfine
# run: bare fork+exec, the namespace floor (unshare with the same
# namespaces, nothing else), capsule run (namespaces, mount tree, Landlock,
# seccomp, cgroup limits, supervisor), bwrap --unshare-all with a comparable
# bind set, firejail, crun (a read-only host root as its rootfs) and
# sandbox-runtime (srt, from npm) where each works on this host. Prints
# ratios to capsule.
# Usage: bench/spawn/run.sh [CAPSULE]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capsule=$(realpath "${1:-$root/build/capsule}")
need=()
command -v hyperfine >/dev/null || need+=(hyperfine)
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v firejail >/dev/null || need+=(firejail)
command -v crun >/dev/null || need+=(crun)
command -v rg >/dev/null || need+=(ripgrep)   # srt needs ripgrep, socat and bwrap
command -v socat >/dev/null || need+=(socat)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null || true
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

cmds=(-n bare "/bin/true"
      -n floor "unshare --user --map-root-user --mount --pid --fork --ipc --uts --net --cgroup /bin/true"
      -n capsule "$capsule run --memory 256M --pids 64 -- /bin/true")
binds="--ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
 --symlink usr/sbin /sbin --ro-bind /etc/ssl /etc/ssl --ro-bind /etc/ld.so.cache /etc/ld.so.cache \
 --proc /proc --dev /dev --tmpfs /tmp"
command -v bwrap >/dev/null && cmds+=(-n bwrap "bwrap --unshare-all --die-with-parent --new-session $binds /bin/true")
command -v firejail >/dev/null && cmds+=(-n firejail "firejail --quiet --noprofile --net=none --private /bin/true")
# crun: an OCI bundle whose rootfs is the host root, read-only
if command -v crun >/dev/null; then
  mkdir -p "$out/bundle" && (cd "$out/bundle" && crun spec --rootless)
  node -e '
    const f = process.argv[1], c = JSON.parse(require("fs").readFileSync(f));
    c.root = {path: "/", readonly: true}; c.process.args = ["/bin/true"]; c.process.terminal = false;
    require("fs").writeFileSync(f, JSON.stringify(c));' "$out/bundle/config.json"
  if why=$(crun run --bundle "$out/bundle" capsule-bench 2>&1); then
    cmds+=(-n crun "crun run --bundle $out/bundle capsule-bench")
  else
    echo "crun left out: it does not run on this host: $why"
  fi
fi
# sandbox-runtime from npm, installed for this run only
if (cd "$out" && npm install --silent --no-audit --no-fund @anthropic-ai/sandbox-runtime >/dev/null 2>&1) &&
   "$out/node_modules/.bin/srt" /bin/true >/dev/null 2>&1; then
  cmds+=(-n srt "$out/node_modules/.bin/srt /bin/true")
else
  echo "srt left out: @anthropic-ai/sandbox-runtime did not install or run here"
fi
hyperfine -N --warmup 5 --runs 60 --export-json "$out/spawn.json" "${cmds[@]}"
node -e '
const r = JSON.parse(require("fs").readFileSync(process.argv[1])).results;
const cap = r.find(x => x.command === "capsule").mean;
console.log("\n| runner | mean ms | ratio to capsule |\n|---|---|---|");
for (const x of r) console.log(`| ${x.command} | ${(x.mean*1000).toFixed(2)} | ${(x.mean/cap).toFixed(2)}x |`);
' "$out/spawn.json"
