#!/usr/bin/env bash
# Where a new connection's time goes on each of capsule's egress paths
# (docs/benchmarks.md, "Egress proxy"): for direct and for capsule's
# absolute-form HTTP, CONNECT and transparent paths, against an upstream
# on host loopback and (as root) one behind a 1 Gbit/s veth link as in
# run.sh:
#  - CPU per connection of the tool and capsule together: perf stat's
#    task-clock of a 3,000-request run less a 1,000-request one;
#  - capsule's system calls and context switches per connection: perf stat
#    on capsule's threads over 1 s of a long request loop, connections
#    counted by the connect supervisor's process_vm_readv (one a connect;
#    below Landlock ABI 9 only, else left out);
#  - the share of capsule's samples by system call, and in its context
#    switches (perf record -g over the same loop; inclusive: a call's
#    share holds the softirq work and the switches inside it).
# Usage: bench/proxy/breakdown.sh [CAPSULE]   (needs perf; root for the veth)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capsule=$(realpath "${1:-$root/build/capsule}")
command -v perf >/dev/null || { echo "breakdown.sh needs perf (linux-perf)"; exit 77; }
out=$(mktemp -d /var/tmp/capsule-bench-breakdown.XXXXXX)
chmod 755 "$out"
export XDG_STATE_HOME="$out/state"
pids=()
ns=capsule-bd-$$
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; ip netns del "$ns" 2>/dev/null; rm -rf "$out"' EXIT
cc -O2 -pthread -o "$out/blast" "$root/bench/proxy/blast.c"
# a port of its own for each path: a path's TIME_WAIT connections do not
# take the next one's ephemeral ports
base=$((30000 + $$ % 20000))
for i in 0 1 2 3; do
  "$out/blast" serve $((base + i)) & pids+=($!)
done
sleep 0.2
link=""
if [ "$(id -u)" = 0 ] && command -v tc >/dev/null &&
   ip netns add "$ns" 2>/dev/null &&
   ip link add "cd$$a" type veth peer name "cd$$b" &&
   ip link set "cd$$b" netns "$ns" &&
   ip addr add 10.214.0.1/30 dev "cd$$a" && ip link set "cd$$a" up &&
   ip -n "$ns" addr add 10.214.0.2/30 dev "cd$$b" && ip -n "$ns" link set "cd$$b" up &&
   ip -n "$ns" link set lo up &&
   ip netns exec "$ns" tc qdisc add dev "cd$$b" root tbf rate 1gbit burst 512kb latency 50ms; then
  for i in 0 1 2 3; do
    ip netns exec "$ns" "$out/blast" serve 10.214.0.2 $((base + i)) & pids+=($!)
  done
  link=10.214.0.2
else
  echo "the 1 Gbit/s link case is left out: it needs root, iproute2 and tc"
fi
cat >"$out/cap.json" <<JSON
{"version": "0.1.0", "filesystem": {"grants": [{"path": "$out/blast", "access": "read", "type": "file"}]},
 "network": {"mode": "proxy", "allow_domains": ["127.0.0.1", "10.214.0.2"],
  "endpoints": [{"host": "up.bench:$base"}, {"host": "up.bench:$((base + 1))"},
   {"host": "up.bench:$((base + 2))"}, {"host": "up.bench:$((base + 3))"},
   {"host": "link.bench:$base"}, {"host": "link.bench:$((base + 1))"},
   {"host": "link.bench:$((base + 2))"}, {"host": "link.bench:$((base + 3))"}]}}
JSON
declare -A synthetic=([127.0.0.1]=127.77.0.1 [10.214.0.2]=127.77.0.2)
in_capsule=("$capsule" run --config "$out/cap.json" --proxy-allow-private
  --resolve up.bench:127.0.0.1 --resolve link.bench:10.214.0.2 -- "$out/blast")
# args PATH HOST N: blast's arguments for a loop of N requests on PATH
args() {
  local port=$((base + $(path_index "$1")))
  case $1 in
  direct) echo "rate $2 $port $3" ;;
  http) echo "rate $2 $port $3 3128" ;;
  connect) echo "rate $2 $port $3 3128 connect" ;;
  transparent) echo "rate ${synthetic[$2]} $port $3" ;;
  esac
}
path_index() { case $1 in direct) echo 0 ;; http) echo 1 ;; connect) echo 2 ;; *) echo 3 ;; esac; }
# cpu_ms PATH HOST N: task-clock ms of the loop, tool and capsule together
cpu_ms() {
  local cmd=("$out/blast")
  [ "$1" = direct ] || cmd=("${in_capsule[@]}")
  perf stat -x, -e task-clock -- "${cmd[@]}" $(args "$@") 2>&1 >/dev/null | awk -F, '/task-clock/ {print $1}'
}
echo
echo "| upstream | path | CPU µs per connection, tool + capsule | capsule's calls per connection | capsule's switches per connection | capsule's samples by call |"
echo "|---|---|---|---|---|---|"
for h in 127.0.0.1 $link; do
  for k in direct http connect transparent; do
    small=$(cpu_ms $k $h 1000)
    large=$(cpu_ms $k $h 3000)
    cpu=$(awk -v a="$small" -v b="$large" 'BEGIN {printf "%.1f", (b - a) * 1000 / 2000}')
    calls=-
    switches=-
    shares=-
    if [ "$k" != direct ]; then
      "${in_capsule[@]}" $(args $k $h 1000000) >/dev/null 2>&1 &
      p=$!
      sleep 1.2
      stat=$(perf stat -x, -e context-switches,syscalls:sys_enter_process_vm_readv,raw_syscalls:sys_enter -p "$p" -- sleep 1 2>&1 || true)
      perf record -q -o "$out/perf.data" -F 10000 -g -p "$p" -- sleep 1.5 >/dev/null 2>&1 || true
      kill "$p" 2>/dev/null
      wait "$p" 2>/dev/null || true
      read -r calls switches < <(echo "$stat" | awk -F, '/context-switches/ {c = $1} /process_vm_readv/ {n = $1}
        /raw_syscalls/ {s = $1} END {if (n > 0) printf "%.1f %.1f\n", s / n, c / n; else print "- -"}')
      shares=$(perf report -i "$out/perf.data" --children --sort sym --stdio -g none 2>/dev/null |
        awk '/__x64_sys_|finish_task_switch/ {sub("__x64_sys_", "", $NF); sub("finish_task_switch.*", "switches", $NF);
          if (n++ < 8) printf "%s%s %s", (n > 1 ? ", " : ""), $NF, $1}')
    fi
    echo "| $([ "$h" = 127.0.0.1 ] && echo loopback || echo "veth 1 Gbit/s") | $k | $cpu | $calls | $switches | $shares |"
  done
done
