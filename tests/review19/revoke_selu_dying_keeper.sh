#!/usr/bin/env bash
# The Selu form of revoke_mcp_retired_keeper.sh. A Selu keeper whose
# package changed while a lease was held (a long call in its server)
# unpublishes its socket, refuses new asks and serves the lease to its end
# (instance_keeper.c, lease_grant: L->dying). The call refused starts a new
# keeper of the same name (the package's tree is not in KEY), whose
# RUN/KEY.status replaces the dying keeper's: the dying keeper is listed
# nowhere, `capsule revoke` stops the new one only, and the dying keeper's
# sandbox, made with the revoked grant, runs on for as long as the lease
# is held. The lease here is held by this script on the keeper's socket,
# as a long call's would be. Exits 1 while a sandbox made with the revoked
# grant runs on after the revoke returned, 0 when not, 77 when it cannot
# run here. As root.
# (The fix: a keeper whose socket goes while it lives on moves its status
# to a name of its own, RUN/KEY~PID.status, gw_instance_status_retire,
# and is stopped there by signal: SIGTERM, then SIGKILL, since the server
# here ignores SIGTERM.)
# Usage: revoke_selu_dying_keeper.sh CAPSULE
. "$(dirname "$0")/../review17/lib.sh" "$1" review19-revoke-selu-dying
. "$(dirname "$0")/lib.sh"
selu_granted
# a server that ignores SIGTERM (a graceful drain, or a wrapper that does
# not pass it on): a keeper stopped by signal is killed after a while
deaf_started
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1]); s.send(b"L")
msg, anc, flags, addr = s.recvmsg(4096, socket.CMSG_SPACE(4))
print("leased" if anc else "refused", flush=True); time.sleep(600)' "$state/run/$key.sock" >"$work/lease.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/lease.out" ] && break; sleep 0.1; done
grep -q leased "$work/lease.out" || skip "no lease held on keeper 1: $(cat "$work/lease.out")"
echo "// changed" >>"$caps/selu-text/capability.c" # the package changes
sleep 0.5
a=$(wc_call --timeout 60) # keeper 1 refuses it as gone: the call starts keeper 2
grep -q '"words"' <<<"$a" || { echo "FAIL: call after the change: $a"; exit 1; }
new=$(sed -n 's/^pid=//p' "$state/run/$key.status" 2>/dev/null)
echo "after the change: RUN/$key.status names pid ${new:-?}; keeper 1 alive: $(kill -0 "$old" 2>/dev/null && echo yes || echo no)"
[ -n "$new" ] && [ "$new" != "$old" ] || skip "no second keeper of the same name"
"$capsule" revoke "${C[@]}" text-tools --read "$secret" >"$work/revoke.out" 2>&1 ||
  { cat "$work/revoke.out"; echo "FAIL: revoke --read"; exit 1; }
echo "revoke said: $(tr '\n' ' ' <"$work/revoke.out")"
echo "capsule ps: $("$capsule" ps --state "$state" 2>&1 | tr '\n' ' ')"
sleep 1
if grep -qs '^State:[[:space:]]*[^Z]' "/proc/$old/status"; then
  sandbox_reads "$old"
  echo "FAIL: keeper 1 (pid $old), dying with a lease held and started with the grant the revoke removed, runs on listed nowhere${seen:+; its sandbox (pid $seen) still reads $secret/file}"
  exit 1
fi
echo "PASS: no keeper with the revoked grant"
