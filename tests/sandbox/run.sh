#!/usr/bin/env bash
# What a manifest grants does work: reading and writing granted paths, file
# grants, executing from a grant, the network when allowed, the working
# directory, environment, stdin and exit status pass-through, and fail-closed
# refusals (exit 3). As root and unprivileged. Usage: run.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
work=$(mktemp -d /var/tmp/capsule-positive.XXXXXX)
export XDG_STATE_HOME=$work/xdg-state # the default state of its own: not the host's, which another capsule may have migrated
chmod 755 "$work"
mkdir -p "$work/ro" "$work/rw" "$work/bin"
echo "readable" >"$work/ro/data"
echo "one file" >"$work/single"
chmod 644 "$work/ro/data" "$work/single"
chmod 777 "$work/rw"
printf '#!/bin/sh\necho "tool ran with $1"\n' >"$work/bin/tool"
chmod 755 "$work/bin/tool"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
port=$((20000 + ($$ + 7) % 20000))
"$hostile" listen-tcp "$port" & pids+=($!)
echo_port=$((port + 1))
"$hostile" echo-tcp "$echo_port" & pids+=($!)
sleep 0.2
pass=0 fail=0


# check WHO NAME WANT-STATUS WANT-OUTPUT-REGEX CAPSULE-ARGS...
check() {
  local who=$1 name=$2 want=$3 regex=$4; shift 4
  local out status
  out=$(cd "$work" && as_user "$who" timeout 60 "$capsule" "$@" 2>&1 <<<"from stdin")
  status=$?
  if [ "$status" = "$want" ] && echo "$out" | grep -qE "$regex"; then
    pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$who" "$name"
  else
    fail=$((fail + 1)); printf '  FAIL %-6s %s (exit %s, want %s)\n' "$who" "$name" "$status" "$want"
    echo "$out" | head -5 | sed 's/^/         /'
  fi
}

cat >"$work/file-grant.json" <<JSON
{"version": "0.1.0", "filesystem": {"grants": [{"path": "$work/single", "access": "read", "type": "file"}]}}
JSON
cat >"$work/proxy.json" <<JSON
{"version": "0.1.0", "filesystem": {"grants": [{"path": "$(dirname "$hostile")", "access": "read"}]},
 "network": {"mode": "proxy", "allow_domains": ["127.0.0.1"], "ports": {"connect": [$echo_port]}}}
JSON
cat >"$work/proxy-l7.json" <<JSON
{"version": "0.1.0", "filesystem": {"grants": [{"path": "$(dirname "$hostile")", "access": "read"}]},
 "network": {"mode": "proxy", "endpoints": [{"host": "127.0.0.1:$echo_port",
   "rules": [{"method": "POST", "path": "/api/**"}]}]}}
JSON
cat >"$work/ipc-full.json" <<JSON
{"version": "0.1.0", "process": {"ipc_mode": "full"},
 "filesystem": {"grants": [{"path": "$(dirname "$hostile")", "access": "read"}]}}
JSON
cat >"$work/required.toml" <<'TOML'
[agent]
id = "needs-gvisor"
name = "needs-gvisor"
version = "1.0.0"
runtime = "rust-bin"
entry = "bin/agent"
[sandbox]
required = true
backend = "linux-gvisor"
TOML

for who in "${users[@]}"; do
  echo "as $who:"
  check "$who" read-grant 0 '^readable$' run --allow-read "$work/ro" -- /bin/cat "$work/ro/data"
  check "$who" write-grant 0 '.*' run --allow-rw "$work/rw" -- /bin/sh -c "echo written > $work/rw/out-$who"
  [ "$(cat "$work/rw/out-$who" 2>/dev/null)" = written ] && pass=$((pass + 1)) ||
    { fail=$((fail + 1)); echo "  FAIL $who write-grant: the file did not reach the host"; }
  check "$who" read-only-grant 2 'Read-only file system' run --allow-read "$work/ro" -- /bin/sh -c "echo x > $work/ro/data"
  check "$who" file-grant 0 '^one file$' run --config "$work/file-grant.json" -- /bin/cat "$work/single"
  check "$who" exec-from-grant 0 'tool ran with arg' run --allow-read "$work/bin" -- "$work/bin/tool" arg
  check "$who" network-allowed 1 'ESCAPED: connect' run --net unrestricted --allow-read "$(dirname "$hostile")" -- "$hostile" tcp "$port"
  check "$who" workdir 0 "^$work/ro\$" run --allow-read "$work/ro" --workdir "$work/ro" -- /bin/pwd
  check "$who" env 0 '^FOO=bar$' run --env FOO=bar -- /bin/sh -c 'env | grep ^FOO='
  check "$who" env-cleared 0 '^clean$' run -- /bin/sh -c '[ -z "${SSH_AUTH_SOCK:-}${AWS_SECRET_ACCESS_KEY:-}" ] && echo clean'
  check "$who" shared-memory 0 '^shm$' run -- /bin/sh -c 'echo shm > /dev/shm/x && cat /dev/shm/x'
  check "$who" ipc-full-semaphores 1 'ESCAPED: semget' run --config "$work/ipc-full.json" -- "$hostile" semget
  check "$who" proxy-tunnel 1 '^TUNNEL: ping' run --config "$work/proxy.json" --proxy-allow-private -- "$hostile" via-proxy "127.0.0.1:$echo_port"
  check "$who" proxy-http-l7 1 "^Host: 127.0.0.1:$echo_port" run --config "$work/proxy-l7.json" --proxy-allow-private -- "$hostile" http-via-proxy POST "http://127.0.0.1:$echo_port/api/x?q=1" other.example
  check "$who" proxy-env 0 '^http://127.0.0.1:3128$' run --config "$work/proxy.json" -- /bin/sh -c 'echo $HTTPS_PROXY'
  check "$who" stdin 0 '^from stdin$' run -- /bin/cat
  check "$who" exit-status 42 '.*' run -- /bin/sh -c 'exit 42'
  check "$who" not-found 127 'cannot run' run -- /no/such/command
  CAPSULE_RUNSC=/nonexistent/runsc check "$who" fail-closed-gvisor 3 'linux-gvisor backend and gVisor.s runsc is not installed' run --config "$work/required.toml" -- /bin/true
  # with runsc: tests/covenant/gvisor.sh
  if command -v script >/dev/null; then # a pseudo-terminal, as an interactive user has (--tty: it is the tool's)
    out=$(as_user "$who" script -qec "$capsule run --tty -- /bin/sh -c 'test -t 0 && test -t 1 && stty size >/dev/null && echo on-a-tty'" /dev/null </dev/null 2>&1)
    if echo "$out" | grep -q on-a-tty; then pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$who" "tty pass-through"
    else fail=$((fail + 1)); printf '  FAIL %-6s %s\n' "$who" "tty pass-through"; echo "$out" | head -3; fi
  fi
  check "$who" dry-run 0 'how each right is enforced' run --dry-run --allow-read "$work/ro" -- /bin/true
done
echo "sandbox positive tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
