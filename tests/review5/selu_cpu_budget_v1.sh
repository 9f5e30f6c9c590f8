#!/bin/bash
# Finding (root, cgroup v1 host; e5f8617): try_cgroup1 now makes a cpuacct
# group only when the spec has a CPU budget, but a Selu warm instance's
# server is started with cpu_ms_per_task = 0 (instance.c: the server has no
# budget of its own; the keeper enforces max_cpu_seconds per call with
# sandbox_cpu_ms). Without the group, sandbox_cpu_ms falls back to summing
# /proc, which never sees processes reaped by no one: a server whose
# workers ignore SIGCHLD (a common forking-server pattern, or on purpose)
# burns unbounded CPU during a call. Before e5f8617 the cpuacct group
# counted it and the keeper stopped the server.
# Here a helper started beside the server keeps three short spinning children
# going with SIGCHLD ignored; an 8 s call against max_cpu_seconds: 1 must fail
# with "cpu budget exceeded" (77 when a busy host let them burn less than
# 2 s). Exits 1 when the call succeeds, 0 blocked, 77 skip.
# Usage: selu_cpu_budget_v1.sh CAPSULE [SELU_FAULT_SERVER]
capsule=$(realpath "${1:-build/capsule}")
fault=$(realpath "${2:-$(dirname "$capsule")/../../tests/gateway/selu_fault}" 2>/dev/null)
[ -f "$fault" ] || fault=$(realpath "$(dirname "$capsule")/tests/gateway/selu_fault" 2>/dev/null)
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (a cgroup counts the server's CPU)"; exit 77; }
[ -x "$fault" ] || { echo "SKIP: no selu_fault server (ninja -C build tests/gateway/selu_fault)"; exit 77; }
command -v perl >/dev/null || { echo "SKIP: no perl"; exit 77; }
W=$(mktemp -d /var/tmp/capsule-review5-cpu.XXXXXX)
chmod 755 "$W"
caps=$W/caps state=$W/s
export CAPSULE_STATE_KEY=
stop_instances() { for p in $(sed -n 's/^pid=//p' "$state"/run/*.status 2>/dev/null); do kill "$p" 2>/dev/null; done; true; }
trap 'stop_instances; sleep 0.5; rm -rf "$W"' EXIT
mkdir -p "$caps/burn"
cp "$fault" "$caps/burn/server"
cat >"$caps/burn/manifest.yaml" <<'YAML'
id: burn
image: example/burn:1.0
tools:
  - {name: sleep, description: Sleeps., recommended_policy: allow,
     input_schema: {type: object, properties: {ms: {type: integer, maximum: 10000}}, required: [ms]}}
x-capsule:
  command: ["sh", "start.sh"]
  idle_timeout_ms: 3000
  startup_timeout_ms: 4000
resources: {max_cpu_seconds: 1, max_cpu_fraction: 2.0}
YAML
printf 'perl burn.pl </dev/null >/dev/null &\nexec ./server --mode normal\n' >"$caps/burn/start.sh"
cat >"$caps/burn/burn.pl" <<'PERL'
use Time::HiRes qw(time);
$SIG{CHLD} = 'IGNORE';    # children reaped by no one: their CPU reaches no cutime
$| = 1;
my %alive;
while (1) {               # three short spinning children at a time
  delete $alive{$_} for grep { !kill(0, $_) } keys %alive;
  if (keys %alive < 3) {
    my $p = fork();
    if (defined $p && $p == 0) {
      my $cpu = 0;
      while ($cpu < 0.1) {  # 100 ms of CPU, few system calls
        for (1 .. 20000) { }
        my @t = times;
        $cpu = $t[0] + $t[1];
      }
      printf STDERR "burnt %d ms at %.3f\n", $cpu * 1000, time;    # the server's log
      exit 0;
    }
    $alive{$p} = 1 if $p;
  }
  select(undef, undef, undef, 0.01);
}
PERL
t0=$(date +%s.%N)
out=$(timeout 60 "$capsule" call --caps "$caps" --state "$state" burn sleep '{"ms": 8000}' 2>&1 </dev/null)
status=$?
t1=$(date +%s.%N)
echo "call (exit $status): $out" | head -3
if grep -q 'cpu budget exceeded' <<<"$out"; then echo blocked; exit 0; fi
# the CPU the server's children burnt during the call (the host may be busy)
burnt=$(awk -v a="$t0" -v b="$t1" '$1 == "burnt" && $5 >= a && $5 <= b {n += $2} END {print n + 0}' "$state"/logs/burn.log 2>/dev/null)
echo "CPU burnt by the instance's children during the call: ${burnt:-0} ms (budget 1000 ms per call)"
if [ "$status" = 0 ] && grep -q slept_ms <<<"$out" && [ "${burnt:-0}" -ge 2000 ]; then
  echo "VULNERABLE: ${burnt} ms of the instance's CPU during one call went uncounted (budget 1 s per call)"; exit 1
fi
echo "SKIP: the instance could not burn twice its budget during the call (a busy host?)"; exit 77
