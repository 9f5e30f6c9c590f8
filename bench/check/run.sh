#!/usr/bin/env bash
# Time `capsule check` over 1,000 capabilities (250 per format, copies of
# the bundled examples with distinct ids) with hyperfine, and report the
# per-manifest cost. Usage: bench/check/run.sh [CAPSULE]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capsule=$(realpath "${1:-$root/build/capsule}")
command -v hyperfine >/dev/null || { apt-get update -qq && apt-get install -y -qq hyperfine >/dev/null; }
out=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$work" "$out"' EXIT
for i in $(seq 1 250); do
  mkdir -p "$work/selu-$i" "$work/cov-$i/agents/summarize-$i" "$work/weather$i" "$work/nono-$i"
  sed "s/^id: web-search/id: web-search-$i/" "$root/examples/web-search/manifest.yaml" >"$work/selu-$i/manifest.yaml"
  sed "s/^id = \"summarize\"/id = \"summarize-$i\"/" "$root/examples/covenant/agents/summarize/agent.toml" \
    >"$work/cov-$i/agents/summarize-$i/agent.toml"
  sed "s/\"id\": \"weather\"/\"id\": \"weather$i\"/" "$root/examples/weather/manifest.json" >"$work/weather$i/manifest.json"
  cp "$root/examples/repo-build/capability.json" "$work/nono-$i/capability.json"
done
cd "$work"
"$capsule" check -q ./* >/dev/null
hyperfine --warmup 3 --runs 20 --export-json "$out/result.json" \
  "$capsule check -q ./*"
mean=$(sed -n 's/.*"mean": *\([0-9.e-]*\).*/\1/p' "$out/result.json" | head -1)
awk -v m="$mean" 'BEGIN { printf "capsule check: 1000 manifests in %.1f ms, %.1f us per manifest\n", m * 1000, m * 1e6 / 1000 }'
