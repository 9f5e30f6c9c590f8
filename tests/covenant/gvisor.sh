#!/usr/bin/env bash
# sandbox.backend = "linux-gvisor": a Covenant agent runs under gVisor's
# runsc (its /proc/version is gVisor's, not the host's), with the grants
# of capsule's own sandbox (a path not granted is absent, the package is
# read-only, capsule's state is not there, the operator's read-only grant
# read-only and its read-write one writable, a deny entry covered, the
# private /tmp's size held; a write-only grant refused), its network off (a host
# listener on loopback unreachable) or through capsule's egress proxy
# (outbound-https-only: the proxy answers, a direct connection fails),
# the wall clock and, as root, the CPU budget; without runsc it fails
# closed (exit 3, audited), and doctor and list say why. As root, and as
# uid 65534 (runsc --rootless). Skips where runsc cannot run on this host.
# Usage: gvisor.sh CAPSULE
set -u
capsule=$(realpath "$1")
if ! "$capsule" run -- /bin/true 2>/dev/null; then
  echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77
fi
for tool in python3 curl; do
  command -v $tool >/dev/null || { echo "SKIP: $tool is not installed (scripts/deps.sh test installs it)"; exit 77; }
done
runsc=$(command -v runsc) || { echo "SKIP: runsc is not installed (scripts/deps.sh test installs Debian's runsc)"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-gvisor.XXXXXX)
chmod 755 "$work"
trap 'kill $srv 2>/dev/null; rm -rf "$work"' EXIT
root=$(cd "$(dirname "$0")/../.." && pwd)
[ -n "${KEEP:-}" ] && trap 'kill $srv 2>/dev/null' EXIT
# can runsc run at all here? (ptrace platform, no network, no cgroups: the least it needs)
if ! why=$(timeout 60 "$runsc" --root="$work/probe" --network=none --ignore-cgroups do /bin/true 2>&1); then
  echo "SKIP: runsc cannot run on this host: $(echo "$why" | tail -1)"; exit 77
fi
export CAPSULE_STATE_KEY= COVENANT_HOME=
# where capsule makes each run's bundle: checked empty after each suite
export TMPDIR=$work/tmp
mkdir -p "$TMPDIR" && chmod 1777 "$TMPDIR"
pass=0 fail=0
ok() { pass=$((pass + 1)); printf '  ok   %s\n' "$1"; }
bad() { fail=$((fail + 1)); printf '  FAIL %s\n' "$1"; }
as=()
t() { # t NAME WANT-STATUS REGEX ARGS...: capsule ARGS as $as
  local name=$1 want=$2 regex=$3; shift 3
  local status
  out=$("${as[@]}" "$capsule" "$@" 2>&1 </dev/null)
  status=$?
  if [ "$status" = "$want" ] && echo "$out" | grep -qE -- "$regex"; then ok "$name"
  else bad "$name (exit $status, want $want)"; echo "$out" | head -5 | sed 's/^/         /'; fi
}

# a host listener on loopback, in capsule's own namespace
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work" >/dev/null 2>&1 &
srv=$!
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
host_version=$(cat /proc/version)
mkdir -p "$work/bin"
cat >"$work/bin/runsc" <<EOF
#!/bin/sh
# runsc with an unknown platform: its sandbox cannot start
for a; do shift; [ "\$a" = --platform=ptrace ] && a=--platform=bogus; set -- "\$@" "\$a"; done
exec $runsc "\$@"
EOF
chmod 755 "$work/bin" "$work/bin/runsc"
echo secret >"$work/not-granted"
chmod 644 "$work/not-granted"

agent() { # agent DIR ID NETWORK CPU_MS BODY
  mkdir -p "$1/$2"
  cat >"$1/$2/agent.toml" <<TOML
[agent]
id = "$2"
name = "$2"
version = "0.1.0"
runtime = "rust-bin"
entry = "run.sh"
[resources]
cpu_ms_per_task = $4
memory_mb = 256
network = "$3"
[sandbox]
required = true
backend = "linux-gvisor"
TOML
  printf '#!/bin/sh\nIFS= read -r line\n%s\n' "$5" >"$1/$2/run.sh"
  chmod 755 "$1/$2/run.sh"
}

suite() { # suite WHO
  local who=$1 home=$work/$1
  local caps=$home/caps state=$home/state
  mkdir -p "$home"
  agent "$caps" inside off 20000 \
    'printf "{\"version\":\"%s\",\"line\":%s}\n" "$(cat /proc/version)" "$line"'
  agent "$caps" grants off 20000 "
e() { if [ -e \"\$1\" ]; then echo present; else echo absent; fi; }
if echo x >\"\$(dirname \"\$0\")/new\" 2>/dev/null; then w=yes; else w=no; fi
printf '{\"passwd\":\"%s\",\"not_granted\":\"%s\",\"state\":\"%s\",\"package\":\"%s\",\"package_writable\":\"%s\"}\n' \
  \$(e /etc/passwd) \$(e $work/not-granted) \$(e $state/state.db) \$(e \"\$0\") \$w"
  agent "$caps" netoff off 20000 \
    "if curl -s -m 5 -o /dev/null http://127.0.0.1:$port/; then r=reached; else r=refused; fi; echo \"{\\\"direct\\\":\\\"\$r\\\"}\""
  agent "$caps" netproxy outbound-https-only 20000 \
    "if curl -s -m 5 --noproxy '*' -o /dev/null http://127.0.0.1:$port/; then d=reached; else d=refused; fi
c=\$(curl -s -m 10 -o /dev/null -w '%{http_connect}' --noproxy '' -x \"\$HTTPS_PROXY\" https://127.0.0.1:$port/)
echo \"{\\\"direct\\\":\\\"\$d\\\",\\\"proxy_answered\\\":\\\"\$c\\\",\\\"proxy\\\":\\\"\$HTTPS_PROXY\\\"}\""
  agent "$caps" names outbound-https-only 20000 \
    'printf "{\"allowed\":\"%s\",\"other\":\"%s\"}\n" "$(getent hosts allowed.example.test | cut -d" " -f1)" "$(getent hosts other.example.test | cut -d" " -f1)"'
  # a fixed amount of work, several seconds of CPU here (the Sentry's own
  # utime under ptrace is not the host's CPU, so the work is counted out)
  agent "$caps" spend off 60000 'i=0; while [ $i -lt 6000000 ]; do i=$((i+1)); done; echo "{\"text\":\"spent\"}"'
  sed -i 's/^\[sandbox\]/[settlement]\nbudget_credits_per_hour = 5\n[sandbox]/' "$caps/spend/agent.toml"
  agent "$caps" sleeper off 60000 'sleep 30; echo "{}"'
  agent "$caps" spinner off 1000 'while :; do :; done & while :; do :; done'
  # the operator's grants (read-only, read-write) and the private /tmp's size
  mkdir -p "$home/ro" "$home/rw" "$home/wo"
  echo ro-content >"$home/ro/f"; echo hidden >"$home/ro/secret"; echo beside >"$home/beside"
  chmod 777 "$home/rw"
  agent "$caps" files off 20000 "
if echo x >$home/ro/new 2>/dev/null; then r=yes; else r=no; fi
if echo y >$home/rw/new 2>/dev/null; then w=yes; else w=no; fi
b=\$(cat $home/beside 2>/dev/null || echo absent)
if dd if=/dev/zero of=/tmp/big bs=1024 count=3072 2>/dev/null; then t=fits; else t=refused; fi
rm -f /tmp/big
if dd if=/dev/zero of=/tmp/small bs=1024 count=512 2>/dev/null; then s=fits; else s=refused; fi
printf '{\"ro_read\":\"%s\",\"ro_write\":\"%s\",\"rw_write\":\"%s\",\"beside\":\"%s\",\"tmp_3mib\":\"%s\",\"tmp_512kib\":\"%s\",\"tmp_kib\":\"%s\"}\n' \
  \"\$(cat $home/ro/f)\" \$r \$w \"\$b\" \$t \$s \$(df -k /tmp | tail -1 | awk '{print \$2}')"
  sed -i 's/^memory_mb = 256/memory_mb = 256\ndisk_mb = 2/' "$caps/files/agent.toml"
  printf 'filesystem = "ephemeral"\n' >>"$caps/files/agent.toml"
  [ "$who" = root ] || chown -R 65534:65534 "$home"
  local G=(--caps "$caps" --state "$state")
  for a in inside grants netoff netproxy names spend sleeper spinner files; do
    "${as[@]}" "$capsule" policy set "$a" dispatch allow "${G[@]}" >/dev/null
  done

  echo "$who: under runsc"
  t runs-under-gvisor 0 '"version":"Linux version [^"]*","line":\{"id":"[0-9a-f-]{36}","text":"hello"' dispatch --agent inside hello "${G[@]}"
  if echo "$out" | grep -qF "\"version\":\"$host_version\""; then bad "kernel-is-not-the-host's (it is the host's)"
  else ok "kernel-is-not-the-host's"; fi
  t gvisor-kernel 0 '"version":"Linux version 4\.4\.0 #1 SMP Sun Jan 10 15:06:54 PST 2016"' dispatch --agent inside hello "${G[@]}"
  t grants-hold 0 '"passwd":"absent","not_granted":"absent","state":"absent","package":"present","package_writable":"no"' \
    dispatch --agent grants x "${G[@]}"
  # the operator's grants under runsc: only they are mounted, read-only where read-only
  t grant-ro 0 "" grant files --read "$home/ro" "${G[@]}"
  t grant-rw 0 "" grant files --rw "$home/rw" "${G[@]}"
  t grants-as-granted 0 '"ro_read":"ro-content","ro_write":"no","rw_write":"yes","beside":"absent"' dispatch --agent files x "${G[@]}"
  [ "$(cat "$home/rw/new" 2>/dev/null)" = y ] && ok rw-grant-reached-the-host || bad rw-grant-reached-the-host
  [ ! -e "$home/ro/new" ] && ok ro-grant-untouched || bad ro-grant-untouched
  # disk_mb = 2: the private /tmp is a 2 MiB tmpfs inside the Sentry (runsc's size=)
  t tmp-size-holds 0 '"tmp_3mib":"refused","tmp_512kib":"fits","tmp_kib":"2048"' dispatch --agent files x "${G[@]}"
  if grep -q "cannot enforce" <<<"$out"; then bad "tmp-size-not-warned ($out)"; else ok tmp-size-not-warned; fi
  t dry-run-tmp-size 0 "^/tmp: a private tmpfs in the Sentry, size=2097152 bytes" run --dry-run --state "$state" --config "$caps/files/agent.toml" -- /bin/true
  # write-only needs Landlock: refused under runsc, not run read-write
  t grant-wo 0 "" grant files --write "$home/wo" "${G[@]}"
  t write-only-refused 3 "the write-only grant $home/wo cannot hold under linux-gvisor: write-only needs Landlock.*grant it read-write" dispatch --agent files x "${G[@]}"
  t write-only-refusal-audited 0 "files.dispatch .*the write-only grant $home/wo cannot hold" audit "${G[@]}"
  t dry-run-write-only 0 "grant write +dir  $home/wo: REFUSED: write-only needs Landlock" run --dry-run --state "$state" --config "$caps/files/agent.toml" --allow-read "$home/ro" -- /bin/true
  t revoke-wo 0 "" revoke files --write "$home/wo" "${G[@]}"
  # threads start (capsule's clone3 rule is not given to runsc, which would answer EPERM)
  t threads-start 0 "^thread ok" run --state "$state" --config "$caps/files/agent.toml" -- /usr/bin/python3 -c \
    'import threading; t = threading.Thread(target=lambda: None); t.start(); t.join(); print("thread ok")'
  # the bundled Node example, as its user runs it: policy, its token, a routed dispatch
  if command -v node >/dev/null; then
    cp -r "$root/examples/covenant/agents/summarize" "$caps/summarize"
    [ "$who" = root ] || chown -R 65534:65534 "$caps/summarize"
    t summarize-allow 0 "" policy set summarize dispatch allow "${G[@]}"
    t summarize-token 0 '"action":"tool.summarize"' token issue local tool.summarize --state "$state"
    t summarize-runs 0 '^\{"text":"summarize: Capsule runs agents\. It sandboxes them\. It audits every call\.","sources":\[\]\}$' \
      dispatch "summarize: Capsule runs agents. It sandboxes them. It audits every call." "${G[@]}"
    grep -q "routed to summarize" <<<"$out" && ok summarize-routed || bad "summarize-routed ($out)"
  fi
  # a deny entry inside a grant: covered (a file by /dev/null), the rest readable
  t deny-leaves-the-rest 0 "^ro-content" run --state "$state" --config "$caps/files/agent.toml" --allow-read "$home/ro" --deny "$home/ro/secret" -- /bin/cat "$home/ro/f" "$home/ro/secret"
  grep -q hidden <<<"$out" && bad "deny-in-grant ($out)" || ok deny-in-grant
  t network-off 0 '"direct":"refused"' dispatch --agent netoff x "${G[@]}"
  t egress-through-proxy 0 '"direct":"refused","proxy_answered":"403","proxy":"http://127.0.0.1:3128"' dispatch --agent netproxy x "${G[@]}"
  # the transparent path: capsule's resolver answers an allowed name inside gVisor
  t grant-name 0 "granted: names host allowed.example.test:443" grant names --host allowed.example.test:443 "${G[@]}"
  t resolver-inside 0 '"allowed":"127\.77\.[0-9]+\.[0-9]+","other":""' dispatch --agent names x "${G[@]}"
  # the budget is spent by the CPU the gVisor sandbox used (Sentry, gofer, agent)
  t budget-full 0 "^spend +5 +5 " budget show spend "${G[@]}"
  t budget-spends 0 '"text":"spent"' dispatch --agent spend x "${G[@]}"
  t budget-spent-by-cpu 0 "^spend +5 +[0-3] " budget show spend "${G[@]}"
  t wall-clock 1 "the agent was stopped: wall clock exceeded" dispatch --agent sleeper x --timeout 3 "${G[@]}"
  if [ "$who" = root ]; then
    # two spinners: the cgroup's CPU passes the budget before the wall clock
    # does, unless the machine is too loaded to give them two cores (then
    # the wall clock, equal to cpu_ms_per_task for Covenant, stops them)
    t cpu-budget 1 "the agent was stopped: (cpu budget|wall clock) exceeded" dispatch --agent spinner x "${G[@]}"
    # the CPU budget alone (wall clock 30 s): `capsule run` of a linux-gvisor manifest
    printf '[agent]\nid = "g"\nname = "g"\nversion = "1.0.0"\nruntime = "rust-bin"\nentry = "x"\n[sandbox]\nrequired = true\nbackend = "linux-gvisor"\n' >"$home/run.toml"
    t run-cpu-budget 125 "killed: cpu budget exceeded .*cpu budget 500 ms, wall clock 30000 ms" \
      run --state "$state" --config "$home/run.toml" --cpu-ms 500 -- /bin/sh -c 'while :; do :; done'
    t run-under-gvisor 0 "^Linux version 4\.4\.0 " run --state "$state" --config "$home/run.toml" -- /bin/cat /proc/version
    t dry-run-says-gvisor 0 "backend gVisor: .*runsc run, platform ptrace" run --dry-run --state "$state" --config "$home/run.toml" -- /bin/true
    if command -v script >/dev/null; then # on a terminal the tool's output is relayed, escaped
      out=$(NO_COLOR=1 script -qec "$capsule run --state $state --config $home/run.toml -- /bin/sh -c 'printf \"x\\033]0;owned\\007y\\n\"; test -t 1 || echo not-a-tty'" /dev/null </dev/null 2>&1)
      if printf '%s' "$out" | grep -q $'\033'; then bad "terminal-escaped (a raw ESC reached the terminal)"
      elif echo "$out" | grep -q 'not-a-tty' && echo "$out" | grep -qF 'owned'; then ok terminal-escaped
      else bad "terminal-escaped ($out)"; fi
    fi
  fi
  # SIGTERM to capsule reaches the tool inside gVisor (`runsc kill` in runsc's
  # network namespace), which exits on its own terms; capsule cleans up
  printf '[agent]\nid = "s"\nname = "s"\nversion = "1.0.0"\nruntime = "rust-bin"\nentry = "x"\n[sandbox]\nrequired = true\nbackend = "linux-gvisor"\n[resources]\nnetwork = "%s"\n' off >"$home/off.toml"
  sed 's/"off"/"outbound-https-only"/' "$home/off.toml" >"$home/proxy.toml"
  chmod 644 "$home"/*.toml
  # the pids limit: RLIMIT_NPROC inside the Sentry
  t pids-limit-holds 2 "Cannot fork" run --state "$state" --config "$home/off.toml" --pids 5 -- /bin/sh -c 'for i in 1 2 3 4 5 6 7 8 9 10; do sleep 1 & done; wait; echo finished'
  t pids-within-limit 0 "^finished" run --state "$state" --config "$home/off.toml" -- /bin/sh -c 'for i in 1 2 3 4 5 6 7 8 9 10; do sleep 1 & done; wait; echo finished'
  # a setup stuck before runsc's exec (a test build stalls it) is bounded
  # as capsule's own sandbox's is: killed and said, nothing of it left
  if [ "${CAPSULE_TEST_HOOKS:-0}" = 1 ]; then
    CAPSULE_TEST_SETUP_BOUND_MS=2000 CAPSULE_TEST_STALL_SETUP_MS=600000 \
      t setup-bounded 1 "gVisor sandbox setup failed: it reported nothing within 2 s" \
      run --state "$state" --config "$home/off.toml" -- /bin/echo "stalled-$who-$work"
    local n
    for n in $(seq 300); do pgrep -f "stalled-$who-$work" >/dev/null || break; sleep 0.1; done
    pgrep -f "stalled-$who-$work" >/dev/null && bad "setup-bounded-nothing-left ($(pgrep -af "stalled-$who-$work" | head -2))" ||
      ok "setup-bounded-nothing-left"
  fi
  for net in off proxy; do
    local sout=$home/signal-$net.out prefix=()
    : >"$sout"; chmod 666 "$sout"
    [ "$who" = root ] || prefix=(setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$work/nobody")
    "${prefix[@]}" "$capsule" run --state "$state" --config "$home/$net.toml" -- /bin/sh -c \
      'trap "echo got-signal; exit 3" TERM; echo ready; while :; do sleep 0.1; done' >"$sout" 2>&1 </dev/null &
    local cpid=$!
    for _ in $(seq 300); do grep -q ready "$sout" && break; sleep 0.1; done
    kill -TERM "$cpid"
    wait "$cpid"
    local st=$?
    if [ "$st" = 3 ] && grep -q got-signal "$sout"; then ok "sigterm-reaches-tool-$net"
    else bad "sigterm-reaches-tool-$net (exit $st, want 3)"; head -3 "$sout" | sed 's/^/         /'; fi
  done
  # capsule killed with SIGKILL: runsc's sandbox dies with it, and the next
  # run removes what is left (the bundle, runsc's state, its cgroups)
  local kout=$home/kill9.out prefix=()
  : >"$kout"; chmod 666 "$kout"
  [ "$who" = root ] || prefix=(setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$work/nobody")
  "${prefix[@]}" "$capsule" run --state "$state" --config "$home/off.toml" -- /bin/sh -c 'echo ready; sleep 60' >"$kout" 2>&1 </dev/null &
  local kpid=$!
  for _ in $(seq 300); do grep -q ready "$kout" && break; sleep 0.1; done
  kill -KILL "$kpid"
  wait "$kpid" 2>/dev/null
  local leftover
  leftover=$(ls -d "$TMPDIR"/capsule-gvisor-* 2>/dev/null | head -1)
  local cid
  cid=$(cat "$leftover/lock" 2>/dev/null)
  "${prefix[@]}" "$capsule" run --state "$state" --config "$home/off.toml" -- /bin/true >/dev/null 2>&1 </dev/null
  if [ -n "$leftover" ] && [ ! -e "$leftover" ] && [ -n "$cid" ] &&
     { [ "$who" != root ] || [ ! -e "/sys/fs/cgroup/memory/$cid" ]; } &&
     ! pgrep -f "runsc-sandbox .*$cid" >/dev/null; then ok "killed-capsule-leftovers-removed"
  else bad "killed-capsule-leftovers-removed (left: ${leftover:-none}, container ${cid:-?})"; fi
  t list-ready 0 "inside +\(covenant, stdio-jsonl\) +ready" list "${G[@]}"
  t doctor-has-runsc 0 "gvisor backend +yes +$runsc: linux-gvisor agents run under it" doctor
  t audited 0 "inside.dispatch +allow .* ok" audit "${G[@]}"

  echo "$who: without runsc"
  as_nr=("${as[@]}")
  [ ${#as[@]} -eq 0 ] && as_nr=(env)
  local saved=("${as[@]}")
  as=("${as_nr[@]}" CAPSULE_RUNSC=/nonexistent/runsc)
  t fails-closed 3 "linux-gvisor backend and gVisor's runsc is not installed where CAPSULE_RUNSC says .*apt-get install runsc.*refusing rather than running it with less isolation" \
    dispatch --agent inside x "${G[@]}"
  t refusal-audited 0 "inside.dispatch +allow .*runsc is not installed" audit "${G[@]}"
  # a runsc that cannot start its sandbox: said as runsc's failure, not the agent's
  as=("${as_nr[@]}" CAPSULE_RUNSC="$work/bin/runsc")
  t runsc-failure-said 1 "gVisor sandbox setup failed: runsc: unknown platform: bogus" dispatch --agent inside x "${G[@]}"
  as=("${as_nr[@]}" CAPSULE_RUNSC=/nonexistent/runsc)
  t list-not-ready 0 "inside .*not ready: it asks for linux-gvisor and gVisor's runsc is not installed" list "${G[@]}"
  t doctor-says-how 0 "gvisor backend +NO +runsc is not installed: .*apt-get install runsc" doctor
  as=("${saved[@]}")
  t audit-chain-verifies 0 "audit log verified" audit verify "${G[@]}"
  left=$(ls "$TMPDIR" | grep capsule-gvisor)
  [ -z "$left" ] && ok "bundles-removed" || bad "bundles-removed ($left left in $TMPDIR)"
}

suite root
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
   setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" 2>/dev/null; then
  mkdir -p "$work/nobody" && chown 65534:65534 "$work/nobody"
  as=(setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$work/nobody")
  suite nobody
else
  echo "  note: the uid 65534 run needs root and setpriv"
fi
echo "gvisor tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
