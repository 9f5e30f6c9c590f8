#!/usr/bin/env bash
# A warm third-party MCP server whose package changed while a call was in
# it: its keeper retires (gateway/mcp_keeper.c, retire) and serves that
# call to its end, but it unlinks RUN/KEY.mcp.status at once (and gives up
# its lock), so `capsule ps`, `capsule stop` and `capsule revoke` no longer
# see it. A revoke made then stops nothing, and the retired keeper's
# sandbox, made with the revoked grant, runs on for as long as the call
# does (here the probe's "hang": until the call's deadline). A Selu
# keeper in the same state (dying after a package change, its leases
# running) keeps its status file until a new keeper of its name writes
# over it, and is then as invisible. Here a call after the change starts
# a new keeper of the same name (same grants, same KEY): the revoke stops
# that one only. Exits 1 while a sandbox made with the
# revoked grant runs on after the revoke returned, 0 when not, 77 when
# it cannot run here. As root.
# (The fix: a keeper whose socket goes while it lives on moves its status
# to a name of its own, RUN/KEY~PID.status, gw_instance_status_retire,
# and is stopped there by signal.)
# Usage: revoke_mcp_retired_keeper.sh CAPSULE
. "$(dirname "$0")/../review14/lib.sh" "$1" review19-revoke-mcp-retired
. "$(dirname "$0")/lib.sh"
secret=$work/secret
mkdir -p "$secret" && echo s3cret >"$secret/file" && chmod -R a+rX "$secret"
probe_cap p
"$capsule" grant "${C[@]}" p --read "$secret" >/dev/null || { echo "FAIL: grant --read"; exit 1; }
serve_http
a=$(call p cat '{"path":"'"$secret/file"'"}')
grep -q 'READ:s3cret' <<<"$a" || skip "no warm MCP server reads the granted path ($a)"
st=$(ls "$state"/run/*.mcp.status 2>/dev/null)
[ "$(wc -w <<<"$st")" = 1 ] || skip "no single warm MCP keeper ($st)"
keeper=$(sed -n 's/^pid=//p' "$st")
echo "keeper: pid $keeper, $(basename "$st")"
post '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"p__hang","arguments":{}}}' >"$work/hang.out" 2>&1 &
pids+=($!)
sleep 2 # the hang call is in the keeper's server
grep -q '^leases=1' "$st" || echo "note: status file says $(grep '^leases=' "$st")"
echo "# changed" >>"$caps/p/server.py" # the package changes: the keeper retires, the call in it goes on
sleep 1
a=$(call p net '{}') # a call after the change: the keeper retires, the call goes to a new one
echo "a call after the change answered: $a"
echo "after the change: $(basename "$st") names pid $(sed -n 's/^pid=//p' "$st" 2>/dev/null); keeper $keeper alive: $(kill -0 "$keeper" 2>/dev/null && echo yes || echo no)"
"$capsule" revoke "${C[@]}" p --read "$secret" >"$work/revoke.out" 2>&1 || { cat "$work/revoke.out"; echo "FAIL: revoke"; exit 1; }
echo "revoke said: $(tr '\n' ' ' <"$work/revoke.out")"
echo "capsule ps: $("$capsule" ps --state "$state" 2>&1 | tr '\n' ' ')"
sleep 1
if grep -qs '^State:[[:space:]]*[^Z]' "/proc/$keeper/status"; then
  sandbox_reads "$keeper"
  echo "FAIL: the retired keeper (pid $keeper), started with the grant the revoke removed, runs on listed nowhere${seen:+; its sandbox (pid $seen) still reads $secret/file}"
  exit 1
fi
echo "PASS: no keeper with the revoked grant"
