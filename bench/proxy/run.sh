#!/usr/bin/env bash
# The egress proxy against going direct, in one run: throughput of one large
# transfer (default 1 GiB) and the latency of many small requests, each on a
# new connection, from host loopback (direct) and from inside a capsule
# sandbox through its proxy (plain-HTTP absolute form, and a CONNECT
# tunnel, and the transparent path: no proxy at all, the upstream's name's
# synthetic address inside the sandbox, forwarded by capsule). Both ends are
# bench/proxy/blast.c, so neither is the bottleneck.
# Rounds (5) interleave the setups; medians, ratios to direct and the
# median over rounds of the latency added to direct's in the same round
# are printed.
# When @anthropic-ai/sandbox-runtime installs from npm, its proxy (a Node
# HTTP proxy on the host, bridged into bwrap with socat) is measured too.
# With a second build (BASELINE: another checkout's, say main's), its
# three capsule paths are measured in the same rounds beside the first's,
# the two builds' order alternating by round. A run that gives no figure
# (a build replaced under the bench) is left out and counted.
# Usage: bench/proxy/run.sh [CAPSULE [BASELINE]]   env: BYTES, COUNT, ROUNDS
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capsule=$(realpath "${1:-$root/build/capsule}")
baseline=""
[ -n "${2:-}" ] && baseline=$(realpath "$2")
bytes=${BYTES:-1073741824}
count=${COUNT:-2000}
rounds=${ROUNDS:-5}
out=$(mktemp -d /var/tmp/capsule-bench-proxy.XXXXXX)
chmod 755 "$out"
pids=()
ns=capsule-bench-$$
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; ip netns del "$ns" 2>/dev/null; rm -rf "$out"' EXIT
need=()
command -v bwrap >/dev/null || need+=(bubblewrap) # sandbox-runtime needs bwrap, socat, ripgrep
command -v socat >/dev/null || need+=(socat)
command -v rg >/dev/null || need+=(ripgrep)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null || true
fi
cc -O2 -pthread -o "$out/blast" "$root/bench/proxy/blast.c"
port=$((30000 + $$ % 20000))
"$out/blast" serve "$port" & pids+=($!)
sleep 0.2
# a second upstream behind a 1 Gbit/s link: a network namespace of this
# run's own, a veth pair, a token bucket on the upstream's side (root only)
link=""
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && command -v tc >/dev/null &&
   ip netns add "$ns" 2>/dev/null &&
   ip link add "cb$$a" type veth peer name "cb$$b" &&
   ip link set "cb$$b" netns "$ns" &&
   ip addr add 10.211.0.1/30 dev "cb$$a" && ip link set "cb$$a" up &&
   ip -n "$ns" addr add 10.211.0.2/30 dev "cb$$b" && ip -n "$ns" link set "cb$$b" up &&
   ip -n "$ns" link set lo up &&
   ip netns exec "$ns" tc qdisc add dev "cb$$b" root tbf rate 1gbit burst 512kb latency 50ms; then
  ip netns exec "$ns" "$out/blast" serve 10.211.0.2 "$port" & pids+=($!)
  link=10.211.0.2
else
  echo "the 1 Gbit/s link case is left out: it needs root, iproute2 and tc"
fi
cat >"$out/cap.json" <<JSON
{"version": "0.1.0", "filesystem": {"grants": [{"path": "$out/blast", "access": "read", "type": "file"}]},
 "network": {"mode": "proxy", "allow_domains": ["127.0.0.1", "10.211.0.2"],
  "endpoints": [{"host": "up.bench:$port"}, {"host": "link.bench:$port"}]}}
JSON
# the transparent path's synthetic addresses: one per name, in the order
# the manifest lists them (net/egress_plan.h)
declare -A synthetic=([127.0.0.1]=127.77.0.1 [10.211.0.2]=127.77.0.2)
in_capsule() { in_build "$capsule" "$@"; }
in_baseline() { in_build "$baseline" "$@"; }
in_build() {
  local build=$1
  shift
  "$build" run --config "$out/cap.json" --proxy-allow-private --resolve up.bench:127.0.0.1 \
    --resolve link.bench:10.211.0.2 -- "$out/blast" "$@"
}

# inside srt's sandbox HTTP_PROXY is http://USER:PASS@localhost:PORT (a socat bridge)
in_srt() {
  "$srt" --settings "$out/srt.json" -c \
    "u=\${HTTP_PROXY#http://}; PROXY_AUTH=\$(printf %s \"\${u%@*}\" | base64 -w0) $out/blast $* \${HTTP_PROXY##*:}"
}
srt=""
if command -v bwrap >/dev/null && command -v socat >/dev/null && command -v rg >/dev/null &&
   (cd "$out" && npm install --silent --no-audit --no-fund @anthropic-ai/sandbox-runtime >/dev/null 2>&1); then
  echo '{"network": {"allowedDomains": ["127.0.0.1", "localhost"], "deniedDomains": []},
         "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}}' >"$out/srt.json"
  srt_probe=$("$out/node_modules/.bin/srt" --settings "$out/srt.json" -c 'echo "$HTTP_PROXY"' 2>/dev/null || true)
  srt_port=${srt_probe##*:}
  srt="$out/node_modules/.bin/srt"
  if [ -n "$srt_port" ] && in_srt fetch 127.0.0.1 "$port" 1000 >"$out/srt.probe" 2>&1; then
    :
  else
    srt=""
    echo "srt left out: its proxy did not carry a request to 127.0.0.1 here: $(head -c 300 "$out/srt.probe")"
  fi
else
  echo "srt left out: @anthropic-ai/sandbox-runtime, bwrap, socat or ripgrep did not install"
fi

declare -A res
# a run that failed (no figure: the build was replaced under the run, a
# refused connection) is kept as "-" in its place: the rounds' paired
# differences stay aligned, and medians leave it out
failed=0
add() {
  local v=$2
  [ -n "$v" ] || { v=-; failed=$((failed + 1)); }
  res[$1]="${res[$1]:-} $v"
}
# paths LABEL HOST BYTES KIND SUFFIX RUNNER: one build's three capsule paths
paths() {
  local l=$1 h=$2 b=$3 k=$4 s=$5 run=$6
  if [ "$k" = fetch ]; then
    add "$l-fetch-http$s" "$($run fetch "$h" "$port" "$b" 3128 | cut -d' ' -f1)"
    add "$l-fetch-connect$s" "$($run fetch "$h" "$port" "$b" 3128 connect | cut -d' ' -f1)"
    add "$l-fetch-transparent$s" "$($run fetch "${synthetic[$h]}" "$port" "$b" | cut -d' ' -f1)"
  else
    add "$l-rate-http$s" "$($run rate "$h" "$port" "$count" 3128 | cut -d' ' -f2)"
    add "$l-rate-connect$s" "$($run rate "$h" "$port" "$count" 3128 connect | cut -d' ' -f2)"
    add "$l-rate-transparent$s" "$($run rate "${synthetic[$h]}" "$port" "$count" | cut -d' ' -f2)"
  fi
}
# both builds' paths, the order alternating by round (what runs first in
# a round comes out some 10-25 µs apart from what runs later on this VM)
builds() {
  local l=$1 h=$2 b=$3 k=$4 r=$5
  if [ -n "$baseline" ] && [ $((r % 2)) = 0 ]; then
    paths "$l" "$h" "$b" "$k" 0 in_baseline
    paths "$l" "$h" "$b" "$k" "" in_capsule
  else
    paths "$l" "$h" "$b" "$k" "" in_capsule
    [ -z "$baseline" ] || paths "$l" "$h" "$b" "$k" 0 in_baseline
  fi
}
# measure LABEL HOST BYTES ROUND: every setup once against HOST
measure() {
  local l=$1 h=$2 b=$3 r=$4
  add "$l-fetch-direct" "$("$out/blast" fetch "$h" "$port" "$b" | cut -d' ' -f1)"
  builds "$l" "$h" "$b" fetch "$r"
  [ -n "$srt" ] && [ "$l" = loopback ] && add "$l-fetch-srt" "$(in_srt fetch "$h" "$port" "$b" | cut -d' ' -f1)"
  add "$l-rate-direct" "$("$out/blast" rate "$h" "$port" "$count" | cut -d' ' -f2)"
  builds "$l" "$h" "$b" rate "$r"
  [ -n "$srt" ] && [ "$l" = loopback ] && add "$l-rate-srt" "$(in_srt rate "$h" "$port" "$count" | cut -d' ' -f2)"
  return 0
}
for r in $(seq "$rounds"); do
  echo "round $r/$rounds"
  measure loopback 127.0.0.1 "$bytes" "$r"
  [ -n "$link" ] && measure link "$link" "$((bytes / 8))" "$r"
done
median() { tr ' ' '\n' | { grep -v '^-\?$' || true; } | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
table() {
  local l=$1 fd
  fd=$(echo "${res[$l-fetch-direct]}" | median)
  echo
  echo "| $2 | throughput MB/s | of direct | request on a new connection, median µs | added µs (median of rounds' differences) |"
  echo "|---|---|---|---|---|"
  for k in direct http connect transparent http0 connect0 transparent0 srt; do
    [ -n "${res[$l-fetch-$k]:-}" ] || continue
    local f lat added
    f=$(echo "${res[$l-fetch-$k]}" | median)
    lat=$(echo "${res[$l-rate-$k]}" | median)
    [ -n "$f" ] && [ -n "$lat" ] || continue # every run of it failed
    # added: the median over rounds of this setup's latency less direct's
    # in the same round (paired: the machine's load moves both)
    added=$(paste <(echo "${res[$l-rate-$k]}" | tr ' ' '\n' | grep -v '^$') \
      <(echo "${res[$l-rate-direct]}" | tr ' ' '\n' | grep -v '^$') |
      awk '$1 != "-" && $2 != "-" {print $1 - $2}' | median)
    awk -v k="$k" -v f="$f" -v fd="$fd" -v l="$lat" -v a="$added" 'BEGIN {
      name = "sandbox-runtime proxy (socat bridge)"
      if (k == "direct") name = "direct"
      if (k == "http") name = "capsule proxy, absolute-form HTTP"
      if (k == "connect") name = "capsule proxy, CONNECT tunnel"
      if (k == "transparent") name = "capsule transparent path (no proxy in the tool)"
      if (k == "http0") name = "baseline build: absolute-form HTTP"
      if (k == "connect0") name = "baseline build: CONNECT tunnel"
      if (k == "transparent0") name = "baseline build: transparent path"
      printf "| %s | %.0f | %.0f%% | %.1f | %+.1f |\n", name, f, 100 * f / fd, l, a }'
  done
}
table loopback "upstream on host loopback ($((bytes / 1048576)) MiB)"
[ -n "$link" ] && table link "upstream behind a 1 Gbit/s veth link ($((bytes / 8388608)) MiB)"
echo "($rounds rounds; $count requests per latency run${baseline:+; baseline build $baseline, run first in even rounds})"
[ "$failed" = 0 ] || echo "($failed runs gave no figure and are left out; their errors are above)"
