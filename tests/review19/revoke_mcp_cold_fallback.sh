#!/usr/bin/env bash
# A revoke that lands while a call to a third-party MCP server (warm,
# through serve) is between its read of the count of revokes
# (RUN/grants-HASH.epoch, gw_call.grants_epoch) and its start of a
# keeper: the call must not go on to read the revoked path. Found against
# a version that took a detected revoke (ESTALE) for "no warm server" and
# started a cold server of its own with the grants read before the
# revoke. The window is held open by strace delaying serve's opens of
# the count by 4 s (serve runs under strace); the revoke runs and returns
# in it. Exits 1 when the call's server reads the revoked path, 0 when
# not, 77 when it cannot run here. As root.
# Usage: revoke_mcp_cold_fallback.sh CAPSULE
. "$(dirname "$0")/../review14/lib.sh" "$1" review19-revoke-mcp-cold
command -v strace >/dev/null || skip "strace is not installed"
secret=$work/secret
mkdir -p "$secret" && echo s3cret >"$secret/file" && chmod -R a+rX "$secret"
probe_cap p
"$capsule" grant "${C[@]}" p --read "$secret" >/dev/null || { echo "FAIL: grant --read"; exit 1; }
epoch=$state/run/grants-$(printf p | sha256sum | cut -c1-32).epoch
real=$capsule
# LeakSanitizer cannot run under ptrace: an ASan build's leak check is off for the traced
cat >"$work/traced" <<SH
#!/bin/sh
export ASAN_OPTIONS="\${ASAN_OPTIONS:+\$ASAN_OPTIONS:}detect_leaks=0"
exec strace -f -qq -o "$work/strace.out" -P "$epoch" -e trace=open,openat -e inject=open,openat:delay_enter=4000000 "$real" "\$@"
SH
chmod +x "$work/traced"
capsule=$work/traced serve_http
capsule=$real
call p cat '{"path":"'"$secret/file"'"}' >"$work/call.out" &
caller=$!
pids+=($caller)
for _ in $(seq 100); do grep -qs epoch "$work/strace.out" && break; sleep 0.1; done
grep -qs epoch "$work/strace.out" || { cat "$work/call.out"; echo "FAIL: the call never reached its keeper check"; exit 1; }
"$capsule" revoke "${C[@]}" p --read "$secret" >"$work/revoke.out" 2>&1 || { cat "$work/revoke.out"; echo "FAIL: revoke"; exit 1; }
echo "revoke returned: $(tr '\n' ' ' <"$work/revoke.out")"
wait $caller
echo "the call, checked after the revoke returned, answered: $(head -c 200 "$work/call.out")"
echo "strace: $(grep -c epoch "$work/strace.out") opens of the count; warm MCP keepers: $(ls "$state"/run/*.mcp.status 2>/dev/null | wc -l)"
grep -h "grants changed\|warm server" "$work/serve.log" "$state"/logs/* 2>/dev/null | head -3
if grep -q 'READ:s3cret' "$work/call.out"; then
  echo "FAIL: the call's check saw the revoke, and the call ran on a new server with the revoked grant"
  exit 1
fi
echo "PASS: the call did not read the revoked path"
