#!/usr/bin/env bash
# The escape suite: hostile programs under restrictive sandboxes, as root
# and as an unprivileged user. Every attempt must fail AND leave the host as
# it was (canary intact, nothing created outside the grants, host processes
# alive). Usage: run.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
work=$(mktemp -d /var/tmp/capsule-escape.XXXXXX)
chmod 755 "$work"
mkdir -p "$work/canary" "$work/rw"
echo "host secret" >"$work/canary/secret"
chmod 644 "$work/canary/secret"
chmod 777 "$work/rw"
bindir=$(dirname "$hostile")
marker="capsule-escape-marker-$$"
pass=0 fail=0
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"; }
trap cleanup EXIT

# a host process to attack, a host TCP listener, a host abstract socket
bash -c "exec -a '$marker' sleep 600" & host_pid=$!; pids+=("$host_pid")
port=$((20000 + $$ % 20000))
"$hostile" listen-tcp "$port" & pids+=($!)
"$hostile" listen-abstract "$marker" & pids+=($!)
echo_port=$((port + 1))
"$hostile" echo-tcp "$echo_port" & pids+=($!)
sleep 0.2

# as_user USER CMD...: root, or an unprivileged uid via setpriv

# expect WHO NAME DEFENDS-AGAINST WANT-STATUS CAPSULE-ARGS... -- CMD...
# WANT-STATUS 0: the hostile program reports BLOCKED; 125: a limit killed it;
# "0|125": either (the mechanism depends on what the host lets capsule use).
expect() {
  local who=$1 name=$2 why=$3 want=$4; shift 4
  local out status
  out=$(cd "$work" && as_user "$who" "$capsule" run --timeout 30 --allow-read "$bindir" "$@" 2>&1 </dev/null)
  status=$?
  local ok=1
  [[ "|$want|" == *"|$status|"* ]] || ok=0
  [ "$status" != 0 ] || echo "$out" | grep -q '^BLOCKED' || ok=0
  echo "$out" | grep -q '^ESCAPED' && ok=0
  # no trace: the canary intact, nothing new beside it, the host process alive
  [ "$(cat "$work/canary/secret")" = "host secret" ] || ok=0
  [ "$(ls "$work/canary")" = "secret" ] || ok=0
  [ -z "$(ls -A /usr/capsule-escape* 2>/dev/null)" ] || ok=0
  kill -0 "$host_pid" 2>/dev/null || ok=0
  if [ "$ok" = 1 ]; then
    pass=$((pass + 1)); printf '  ok   %-6s %-26s %s\n' "$who" "$name" "$why"
  else
    fail=$((fail + 1)); printf '  FAIL %-6s %-26s %s (exit %s, want %s)\n' "$who" "$name" "$why" "$status" "$want"
    echo "$out" | head -5 | sed 's/^/         /'
  fi
}

run_suite() {
  local u=$1 c="$work/canary/secret" h=$hostile
  expect "$u" read-canary "reading a file outside the grants" 0 -- "$h" read "$c"
  expect "$u" read-via-symlink "a symlink from a writable grant" 0 --allow-rw "$work/rw" -- "$h" symlink "$work/rw/link-$u" "$c"
  expect "$u" hardlink "a hard link into a writable grant" 0 --allow-rw "$work/rw" -- "$h" hardlink "$work/rw/hl-$u" "$c"
  expect "$u" dotdot "'..' out of a grant" 0 --allow-rw "$work/rw" -- "$h" read "$work/rw/../canary/secret"
  expect "$u" proc-self-root "/proc/self/root" 0 -- "$h" read "/proc/self/root$c"
  expect "$u" proc-1-root "/proc/1/root" 0 -- "$h" read "/proc/1/root$c"
  expect "$u" write-outside "writing outside the grants" 0 -- "$h" write "$c"
  expect "$u" write-system "writing a read-only system grant" 0 -- "$h" write /usr/capsule-escape
  expect "$u" deny-wins "a denied path inside a grant" 0 --config "$work/deny.json" -- "$h" read "$c"
  expect "$u" mount "mounting over the tree" 0 -- "$h" mount
  expect "$u" bind-mount "bind-mounting a host path" 0 -- "$h" bind-mount "$work/canary"
  expect "$u" unshare "new namespaces from inside" 0 -- "$h" unshare
  expect "$u" setns "joining another namespace" 0 -- "$h" setns
  expect "$u" chroot "chroot tricks" 0 -- "$h" chroot
  expect "$u" ptrace "ptrace of a host process" 0 -- "$h" ptrace "$host_pid"
  expect "$u" kill "signalling a host process" 0 -- "$h" kill "$host_pid"
  expect "$u" see-process "seeing host processes" 0 -- "$h" see-process "$marker"
  expect "$u" host-tcp "a host TCP service on loopback" 0 -- "$h" tcp "$port"
  expect "$u" host-abstract "a host abstract unix socket" 0 -- "$h" abstract "$marker"
  expect "$u" netlink "netlink sockets" 0 --net unrestricted -- "$h" netlink
  expect "$u" packet "packet sockets" 0 --net unrestricted -- "$h" packet
  expect "$u" raw "raw sockets" 0 --net unrestricted -- "$h" raw
  expect "$u" tiocsti "typing into the caller's terminal" 0 -- "$h" tiocsti
  expect "$u" keyctl "the kernel keyring" 0 -- "$h" keyctl
  expect "$u" bpf "bpf" 0 -- "$h" bpf
  expect "$u" io_uring "io_uring" 0 -- "$h" io_uring
  expect "$u" perf "perf_event_open" 0 -- "$h" perf
  expect "$u" mknod "creating device nodes" 0 -- "$h" mknod
  expect "$u" setuid "setuid binaries" 0 -- "$h" setuid /usr/bin/su
  CAPSULE_ESCAPE_SECRET="$marker-env" expect "$u" caller-environment "the caller's environment via /proc" 0 -- "$h" environ "$marker-env"
  expect "$u" inherited-fd "an fd the caller left open" 0 -- "$h" fd 7
  expect "$u" sys-write "writing /sys" 0 -- "$h" write /sys/kernel/uevent_helper
  expect "$u" dev-write "writing a disk through /dev" 0 -- "$h" write /dev/sda
  expect "$u" blocked-command "running a blocked command" 0 --config "$work/blocked.json" -- "$h" exec /usr/bin/rm
  expect "$u" blocked-copy "running a copy of a blocked command" 0 --config "$work/blocked.json" -- "$h" copy-exec /usr/bin/rm
  expect "$u" not-allowed "a command outside allowed_commands" 0 --config "$work/allowed.json" -- "$h" exec /usr/bin/ls
  expect "$u" proxy-off-list "a host:port outside the allowlist, via the proxy" 0 --config "$work/proxy.json" --proxy-allow-private -- "$h" via-proxy "127.0.0.1:$port"
  expect "$u" proxy-loopback "the host's loopback via the proxy" 0 --config "$work/proxy.json" -- "$h" via-proxy "127.0.0.1:$echo_port"
  expect "$u" proxy-metadata "the cloud metadata address via the proxy" 0 --config "$work/proxy-any.json" --proxy-allow-private -- "$h" via-proxy "169.254.169.254:80"
  expect "$u" proxy-l7-method "a method the host's rules do not allow (plain HTTP)" 0 --config "$work/proxy-l7.json" --proxy-allow-private -- "$h" http-via-proxy GET "http://127.0.0.1:$echo_port/api/x"
  expect "$u" proxy-l7-traversal "'..' past the host's path rules" 0 --config "$work/proxy-l7.json" --proxy-allow-private -- "$h" http-via-proxy POST "http://127.0.0.1:$echo_port/api/../admin"
  expect "$u" proxy-l7-tunnel "a CONNECT tunnel around the host's path rules" 0 --config "$work/proxy-l7.json" --proxy-allow-private -- "$h" via-proxy "127.0.0.1:$echo_port"
  expect "$u" proxy-bypass "a direct connection past the proxy" 0 --config "$work/proxy.json" --proxy-allow-private -- "$h" tcp "$echo_port"
  expect "$u" cpu-spin "CPU past its budget" 125 --cpu-ms 300 -- "$h" spin
  expect "$u" wall-clock "sleeping past the wall clock" 125 --timeout 1 -- "$h" sleep
  expect "$u" semaphores "semaphores under ipc_mode shared_memory_only" 0 -- "$h" semget
  expect "$u" fork-bomb "a fork bomb" 0 --pids 32 -- "$h" fork-bomb
  # kernel interfaces a tool would try next (kernel_probes.c)
  expect "$u" init-mem "pid 1's memory through /proc/1/mem" 0 -- "$h" init-mem
  expect "$u" self-mem-shared "a read-only grant written through /proc/self/mem" 0 --allow-read "$work/canary" -- "$h" self-mem-shared "$c"
  expect "$u" proc-roots "other processes' roots, cwd and descriptors" 0 -- "$h" proc-roots "$c"
  expect "$u" open-fds "any descriptor beyond 0-2 at start (the caller's fd 7)" 0 -- "$h" open-fds
  expect "$u" signal-init "kill, pidfd and SIGIO to the sandbox's init" 0 -- "$h" signal-init
  expect "$u" by-handle "open_by_handle_at on a granted file system" 0 -- "$h" by-handle "$bindir"
  expect "$u" userfaultfd "userfaultfd (user mode only)" 0 -- "$h" userfaultfd
  expect "$u" proc-sys "/proc/sys and /proc/sysrq-trigger" 0 -- "$h" proc-sys
  expect "$u" foreign-abi "unshare through the x32 and i386 ABIs" 0 -- "$h" foreign-abi
  expect "$u" xattrs "file capabilities on a file in a writable grant" 0 --allow-rw "$work/rw" -- "$h" xattrs "$work/rw"
  expect "$u" memfd-exec "a program in a memfd, run by its /proc path" 0 --config "$work/allowed.json" -- "$h" memfd-exec /usr/bin/ls
  # a memory cgroup kills the bomb (125); without a writable one capsule
  # falls back to RLIMIT_DATA, which the bomb meets as malloc failure (0)
  expect "$u" memory-bomb "a memory bomb" "0|125" --memory 64M -- "$h" memory-bomb
}

cat >"$work/deny.json" <<JSON
{"version": "0.1.0",
 "filesystem": {"grants": [{"path": "$work", "access": "read"}],
                "deny": [{"path": "$work/canary"}]}}
JSON
cat >"$work/blocked.json" <<JSON
{"version": "0.1.0", "filesystem": {"grants": [{"path": "$bindir", "access": "read"}]},
 "process": {"blocked_commands": ["rm"]}}
JSON
cat >"$work/allowed.json" <<JSON
{"version": "0.1.0", "filesystem": {"grants": [{"path": "$bindir", "access": "read"}]},
 "process": {"allowed_commands": ["cat"]}}
JSON
cat >"$work/proxy.json" <<JSON
{"version": "0.1.0", "filesystem": {"grants": [{"path": "$bindir", "access": "read"}]},
 "network": {"mode": "proxy", "allow_domains": ["127.0.0.1"], "ports": {"connect": [$echo_port]}}}
JSON
cat >"$work/proxy-l7.json" <<JSON
{"version": "0.1.0", "filesystem": {"grants": [{"path": "$bindir", "access": "read"}]},
 "network": {"mode": "proxy", "endpoints": [{"host": "127.0.0.1:$echo_port",
   "rules": [{"method": "POST", "path": "/api/**"}]}]}}
JSON
cat >"$work/proxy-any.json" <<JSON
{"version": "0.1.0", "filesystem": {"grants": [{"path": "$bindir", "access": "read"}]},
 "network": {"mode": "proxy", "allow_domains": ["*"]}}
JSON
exec 7<"$work/canary/secret"
for who in "${users[@]}"; do
  echo "as $who:"
  run_suite "$who"
done

# expect_works WHO NAME WHAT CAPSULE-ARGS... -- CMD...: what the sandbox
# must keep offering (the program prints WORKS and exits 0)
expect_works() {
  local who=$1 name=$2 why=$3; shift 3
  local out status
  out=$(cd "$work" && as_user "$who" "$capsule" run --timeout 30 --allow-read "$bindir" "$@" 2>&1 </dev/null)
  status=$?
  if [ "$status" = 0 ] && echo "$out" | grep -q '^WORKS'; then
    pass=$((pass + 1)); printf '  ok   %-6s %-26s %s\n' "$who" "$name" "$why"
  else
    fail=$((fail + 1)); printf '  FAIL %-6s %-26s %s (exit %s)\n' "$who" "$name" "$why" "$status"
    echo "$out" | head -5 | sed 's/^/         /'
  fi
}

# socket families beyond unix, inet and netlink-route, in every network mode
run_family_suite() {
  local u=$1 h=$hostile f
  for f in vsock vsock-dgram vsock-high-bits packet netlink-audit netlink-uevent netlink-diag \
           netlink-high-bits bluetooth alg xdp tipc can rds key unspec socketpair-vsock socketpair-tipc; do
    expect "$u" "family-$f" "a $f socket (blocked network)" 0 -- "$h" family "$f"
  done
  for f in vsock vsock-high-bits packet netlink-uevent alg; do
    expect "$u" "family-$f-proxy" "a $f socket (proxy network)" 0 --config "$work/proxy.json" -- "$h" family "$f"
    expect "$u" "family-$f-open" "a $f socket (unrestricted network)" 0 --net unrestricted -- "$h" family "$f"
  done
  expect_works "$u" getifaddrs "getifaddrs still works (NETLINK_ROUTE)" -- "$h" getifaddrs
  expect_works "$u" getifaddrs-open "getifaddrs still works (unrestricted)" --net unrestricted -- "$h" getifaddrs
}
for who in "${users[@]}"; do
  echo "socket families as $who:"
  run_family_suite "$who"
done

# inet protocols and types the kernel would load a module for (SCTP, DCCP,
# UDP-Lite, L2TP, MPTCP, ...), in every network mode; TCP and UDP still work
run_inet_suite() {
  local u=$1 h=$hostile p
  for p in sctp sctp-seqpacket sctp6 dccp dccp6 udplite l2tp mptcp rdm icmp6-in-inet \
           icmp-in-inet6 udp-as-stream sctp-high-bits tcp-high-bits dccp-flags socketpair-sctp \
           socketpair-dccp6; do
    expect "$u" "inet-$p" "an inet $p socket (blocked network)" 0 -- "$h" inet-refused "$p"
  done
  for p in sctp dccp sctp-high-bits socketpair-sctp; do
    expect "$u" "inet-$p-proxy" "an inet $p socket (proxy network)" 0 --config "$work/proxy.json" -- "$h" inet-refused "$p"
    expect "$u" "inet-$p-open" "an inet $p socket (unrestricted network)" 0 --net unrestricted -- "$h" inet-refused "$p"
  done
  expect_works "$u" inet-works "tcp and udp sockets (blocked network)" -- "$h" inet-works
  expect_works "$u" inet-works-proxy "tcp to the proxy, udp (proxy network)" --config "$work/proxy.json" -- "$h" inet-works
  expect_works "$u" inet-works-open "tcp to a host echo server, udp (unrestricted)" --net unrestricted -- "$h" inet-works "$echo_port"
}
for who in "${users[@]}"; do
  echo "inet protocols as $who:"
  run_inet_suite "$who"
done

# pathname unix sockets: a host service in a read-only granted directory
# (think /run/user/UID/bus, docker.sock) is out of reach unless the socket
# itself is granted; the tool's own sockets keep working
sockdir="$work/sockets"
mkdir -p "$sockdir" && chmod 755 "$sockdir"
"$hostile" unix-listen "$sockdir/bus" & pids+=($!)
"$hostile" unix-listen-dgram "$sockdir/log" & pids+=($!)
tcp_self=$((port + 2))
cat >"$work/bind.json" <<JSON
{"version": "0.1.0", "filesystem": {"grants": [{"path": "$bindir", "access": "read"}]},
 "network": {"mode": "blocked", "ports": {"bind": [$tcp_self]}}}
JSON
sleep 0.2
run_unix_suite() {
  local u=$1 h=$hostile s="$sockdir/bus"
  expect "$u" unix-host "a host unix socket in a read-only grant" 0 --allow-read "$sockdir" -- "$h" unix-connect "$s"
  expect "$u" unix-host-proxy "the same, proxy network" 0 --config "$work/proxy.json" --allow-read "$sockdir" -- "$h" unix-connect "$s"
  expect "$u" unix-host-open "the same, unrestricted network" 0 --net unrestricted --allow-read "$sockdir" -- "$h" unix-connect "$s"
  expect "$u" unix-host-rw "the same, read-write grant" 0 --allow-rw "$sockdir" -- "$h" unix-connect "$s"
  expect "$u" unix-relative "the same by a relative path" 0 --allow-read "$sockdir" -- "$h" unix-relative "$sockdir" bus
  expect "$u" unix-symlink "the same through a symlink in /tmp" 0 --allow-read "$sockdir" -- "$h" unix-symlink /tmp/link "$s"
  expect "$u" unix-dgram "a datagram to a host unix socket" 0 --allow-read "$sockdir" -- "$h" unix-dgram "$sockdir/log"
  expect "$u" unix-raw "the same from an AF_UNIX SOCK_RAW socket" 0 --allow-read "$sockdir" -- "$h" unix-dgram "$sockdir/log" raw
  expect "$u" unix-race "the address rewritten while it is checked" 0 --allow-read "$sockdir" -- "$h" unix-race /tmp/none "$s"
  expect "$u" abstract-open "a host abstract socket, unrestricted network" 0 --net unrestricted -- "$h" abstract "$marker"
  expect "$u" tcp-self "a TCP port bound but not granted for connect" 0 --config "$work/bind.json" -- "$h" tcp-self "$tcp_self"
  # the tool's host uid: the caller's unprivileged, as root its own range's
  local peer
  peer=$(cd "$work" && as_user "$u" "$capsule" run -- cat /proc/self/uid_map </dev/null | awk '{print $2}')
  expect_works "$u" unix-granted "the socket granted itself is reached" --allow-rw "$s" -- "$h" unix-connect-ok "$s" "$peer"
  expect_works "$u" unix-self "the tool's own socket in /tmp, a socketpair" --allow-read "$sockdir" -- "$h" unix-self
}
for who in "${users[@]}"; do
  echo "unix sockets as $who:"
  run_unix_suite "$who"
done

# TIOCLINUX on a real terminal (script(1) gives one), with and without
# --tty: the filter's EPERM
run_tty_suite() {
  local u=$1 flag out
  command -v script >/dev/null || { echo "note: no script(1); TIOCLINUX untested"; return; }
  for flag in --tty ""; do
    out=$(cd "$work" && as_user "$u" script -qec "$capsule run $flag --timeout 30 --allow-read $bindir -- $hostile tioclinux" /dev/null 2>&1 </dev/null)
    if echo "$out" | grep -q '^BLOCKED' && ! echo "$out" | grep -q '^ESCAPED'; then
      pass=$((pass + 1)); printf '  ok   %-6s %-26s %s\n' "$u" "tioclinux${flag:+-tty}" "TIOCLINUX on a terminal ${flag:-(none given)}"
    else
      fail=$((fail + 1)); printf '  FAIL %-6s %-26s %s\n' "$u" "tioclinux${flag:+-tty}" "TIOCLINUX on a terminal"
      echo "$out" | head -5 | sed 's/^/         /'
    fi
  done
}
for who in "${users[@]}"; do
  echo "terminals as $who:"
  run_tty_suite "$who"
done

echo "escape suite: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
