#!/usr/bin/env bash
# exec_strategy "supervised" (nono's capability expansion), as root and as
# uid 65534: an open of a file outside the grants waits for the operator;
# through the approval queue (no terminal) an approval gives the tool that
# file's descriptor (read, or write when asked to write), a denial or the
# timeout refuses it (EACCES); a deny entry is refused without asking; a
# decision is remembered for the run; a flood of opens is rate-limited;
# every decision is an audit record; on a terminal capsule owns, the
# question is asked there (y allows, anything else refuses). Without
# exec_strategy (nono's monitor) nothing is asked: the file is not there.
# The same supervisor serves unix connects (below Landlock ABI 9) and opens;
# as root the setuid-mode rules keep their answers beside the open trap.
# Usage: supervised.sh CAPSULE HOSTILE
set -u
# shellcheck source=../lib/sandbox.sh
. "$(dirname "$0")/../lib/sandbox.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 reads the JSON and drives the terminal"; exit 77; }
abi=$("$capsule" doctor 2>/dev/null | sed -n 's/.*Landlock *yes *ABI \([0-9]*\).*/\1/p')
[ "${abi:-0}" -gt 0 ] || { echo "SKIP: capability expansion needs Landlock"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-supervised.XXXXXX)
chmod 755 "$work"
pass=0 fail=0
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
ok() { pass=$((pass + 1)); printf '  ok   %-6s %s\n' "$1" "$2"; }
bad() {
  fail=$((fail + 1)); printf '  FAIL %-6s %s\n' "$1" "$2"
  printf '%s\n' "$3" | head -8 | sed 's/^/         /'
}
check() { # WHO NAME COND OUTPUT
  if eval "$3"; then ok "$1" "$2"; else bad "$1" "$2" "$4"; fi
}

cap() { # WHO ARGS...
  local who=$1; shift
  as_user "$who" "$capsule" --state "$work/$who/state" "$@"
}

# the id of the pending approval whose path is $2, once it is there
pending_id() { # WHO PATH
  local i id
  for i in $(seq 1 300); do
    id=$(cap "$1" approvals --json 2>/dev/null | python3 -c '
import json, sys
for a in json.load(sys.stdin):
    if json.loads(a["arguments"])["path"] == sys.argv[1]:
        print(a["id"]); break' "$2")
    [ -n "$id" ] && { echo "$id"; return 0; }
    sleep 0.1
  done
  return 1
}

decisions() { # WHO: the expansion records' decision and outcome, one a line
  cap "$1" audit --json | python3 -c '
import json, sys
for r in json.load(sys.stdin):
    if r["decision"].startswith("expand-"):
        print(r["decision"], r["outcome"])'
}

for who in "${users[@]}"; do
  echo "as $who:"
  d="$work/$who"
  mkdir -p "$d/grant" "$d/out" "$d/state"
  echo "secret for $who" >"$d/out/read.txt"
  echo "original" >"$d/out/write.txt"
  echo "never" >"$d/out/denied.txt"
  echo "late" >"$d/out/late.txt"
  echo "masked" >"$d/out/masked.txt"
  for i in $(seq 1 60); do echo "$i" >"$d/out/flood$i"; done
  [ "$who" = root ] || chown -R 65534:65534 "$d"
  cat >"$d/sup.json" <<JSON
{"version": "0.1.0", "process": {"exec_strategy": "supervised"},
 "filesystem": {"grants": [{"path": "$d/grant", "access": "readwrite"}],
                "deny": [{"path": "$d/out/masked.txt"}]}}
JSON
  cat >"$d/mon.json" <<JSON
{"version": "0.1.0", "filesystem": {"grants": [{"path": "$d/grant", "access": "readwrite"}]}}
JSON

  # monitor: no question, the file is simply not in the sandbox
  out=$(cap "$who" run --config "$d/mon.json" -- cat "$d/out/read.txt" 2>&1)
  none=$(cap "$who" approvals --json)
  check "$who" "monitor: outside file absent, nothing asked" \
    '[[ "$out" == *"No such file"* && "$none" == "[]" ]]' "$out $none"

  # approved read: the tool reads it, twice, with one question
  cap "$who" run --approval-timeout 60 --config "$d/sup.json" -- \
    sh -c "cat $d/out/read.txt && cat $d/out/read.txt" >"$d/r.out" 2>"$d/r.err" &
  run=$!
  id=$(pending_id "$who" "$d/out/read.txt") && cap "$who" approve "$id" >/dev/null 2>&1
  wait "$run"; status=$?
  check "$who" "approved read: the file's descriptor is the tool's" \
    '[ "$status" = 0 ] && [ "$(grep -c "secret for $who" "$d/r.out")" = 2 ]' "$status $(cat "$d/r.out" "$d/r.err")"
  n=$(grep -c 'approval .* is pending' "$d/r.err")
  check "$who" "a decision is remembered for the run (one question)" '[ "$n" = 1 ]' "$(cat "$d/r.err")"

  # approved write through the injected descriptor
  cap "$who" run --approval-timeout 60 --config "$d/sup.json" -- \
    sh -c "echo appended >> $d/out/write.txt" >"$d/w.out" 2>&1 &
  run=$!
  id=$(pending_id "$who" "$d/out/write.txt") && cap "$who" approve "$id" >/dev/null 2>&1
  wait "$run"; status=$?
  check "$who" "approved write lands in the host's file" \
    '[ "$status" = 0 ] && [ "$(cat "$d/out/write.txt")" = "original
appended" ]' "$status $(cat "$d/w.out" "$d/out/write.txt")"

  # denied by the operator
  cap "$who" run --approval-timeout 60 --config "$d/sup.json" -- cat "$d/out/denied.txt" >"$d/d.out" 2>&1 &
  run=$!
  id=$(pending_id "$who" "$d/out/denied.txt") && cap "$who" deny "$id" >/dev/null 2>&1
  wait "$run"; status=$?
  check "$who" "denied: EACCES, nothing read" \
    '[ "$status" != 0 ] && grep -q "Permission denied" "$d/d.out" && ! grep -q never "$d/d.out"' "$(cat "$d/d.out")"

  # nobody answers: denied when the time runs out
  out=$(cap "$who" run --approval-timeout 1 --config "$d/sup.json" -- cat "$d/out/late.txt" 2>&1)
  check "$who" "timeout denies" \
    '[[ "$out" == *"Permission denied"* ]] && ! printf "%s\n" "$out" | grep -qx late' "$out"

  # the wall clock ends the run while a question is open: killed, no crash
  out=$(cap "$who" run --timeout 2 --approval-timeout 60 --config "$d/sup.json" -- cat "$d/out/late.txt" 2>&1)
  status=$?
  check "$who" "a run killed while asking ends as killed" \
    '[ "$status" = 125 ] && [[ "$out" == *"killed: wall clock"* ]]' "$status $out"

  # a deny entry outside the grants: refused unasked
  out=$(cap "$who" run --approval-timeout 60 --config "$d/sup.json" -- cat "$d/out/masked.txt" 2>&1)
  check "$who" "deny entry refused without a question" \
    '[[ "$out" == *"Permission denied"* && "$out" == *"refused (protected)"* && "$out" != *"is pending"* ]]' "$out"

  # a flood: 60 opens at once (threads); past the burst they are refused unasked
  out=$(cap "$who" run --approval-timeout 1 --config "$d/sup.json" -- /usr/bin/python3 -c "
import threading
def read(i):
    try: print(open('$d/out/flood%d' % i).read().strip())
    except OSError: pass
ts = [threading.Thread(target=read, args=(i,)) for i in range(1, 61)]
[t.start() for t in ts]; [t.join() for t in ts]" 2>&1)
  asked=$(printf '%s\n' "$out" | grep -c 'is pending')
  check "$who" "a flood of opens is rate-limited, nothing leaks" \
    '[ "$asked" -lt 60 ] && [[ "$out" == *"refused (rate-limited)"* ]] && ! printf "%s\n" "$out" | grep -qx "[0-9]*"' \
    "asked $asked: $out"

  recs=$(decisions "$who")
  for v in approved denied timed-out protected rate-limited; do
    check "$who" "audited: expand-$v" 'printf "%s\n" "$recs" | grep -q "^expand-$v "' "$recs"
  done
  check "$who" "audit chain verifies" 'cap "$who" audit verify >/dev/null 2>&1' "$(cap "$who" audit verify 2>&1)"

  # a terminal capsule owns: the question is asked there
  for answer in y n; do
    out=$(as_user "$who" /usr/bin/python3 - "$capsule" "$d" "$answer" <<'PY'
import os, pty, select, sys, time
capsule, d, answer = sys.argv[1:4]
pid, fd = pty.fork()
if pid == 0:
    os.execv(capsule, [capsule, "--state", d + "/state", "run", "--approval-timeout", "60",
                       "--config", d + "/sup.json", "--", "cat", d + "/out/read.txt"])
buf, sent, end = b"", False, time.time() + 60
while time.time() < end:
    r, _, _ = select.select([fd], [], [], 0.2)
    if r:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
    if not sent and b"Allow? [y/N]" in buf:
        os.write(fd, (answer + "\n").encode()); sent = True
os.waitpid(pid, 0)
sys.stdout.write(buf.decode(errors="replace"))
PY
)
    if [ "$answer" = y ]; then
      check "$who" "terminal: y allows" '[[ "$out" == *"Allow? [y/N]"* && "$out" == *"secret for $who"* ]]' "$out"
    else
      check "$who" "terminal: n refuses" '[[ "$out" == *"Allow? [y/N]"* && "$out" == *"Permission denied"* ]]' "$out"
    fi
  done

  # one listener, both duties: below Landlock ABI 9 the supervisor's pool
  # serves the tool's connects and its opens; a unix connect (as root, made
  # with the tool's ids) from one process, then from another, then an
  # approved open and a protected one
  mkdir -p "$d/sock"
  [ "$who" = root ] || chown 65534:65534 "$d/sock"
  # the server answers two connects and leaves (or gives up after 60 s):
  # nothing of it outlives the test or holds its output
  as_user "$who" /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(8); s.settimeout(60)
for _ in range(2):
    c, _ = s.accept(); c.sendall(b"pong\n"); c.close()' "$d/sock/s.sock" >/dev/null 2>&1 &
  server=$!
  for i in $(seq 1 50); do [ -S "$d/sock/s.sock" ] && break; sleep 0.1; done
  cat >"$d/both.json" <<JSON
{"version": "0.1.0", "process": {"exec_strategy": "supervised"},
 "filesystem": {"grants": [{"path": "$d/grant", "access": "readwrite"},
                           {"path": "$d/sock/s.sock", "access": "readwrite", "type": "file"}],
                "deny": [{"path": "$d/out/masked.txt"}]}}
JSON
  conn="import socket; s = socket.socket(socket.AF_UNIX); s.connect('$d/sock/s.sock'); print(s.recv(16).decode().strip())"
  cap "$who" run --approval-timeout 60 --config "$d/both.json" -- sh -c \
    "/usr/bin/python3 -c \"$conn\"; /usr/bin/python3 -c \"$conn\"; cat $d/out/read.txt; cat $d/out/masked.txt" \
    >"$d/b.out" 2>&1 &
  run=$!
  id=$(pending_id "$who" "$d/out/read.txt") && cap "$who" approve "$id" >/dev/null 2>&1
  wait "$run"
  wait "$server" 2>/dev/null
  check "$who" "connects from two processes and opens, one listener" \
    '[ "$(grep -cx pong "$d/b.out")" = 2 ] && grep -q "secret for $who" "$d/b.out" && grep -q "refused (protected)" "$d/b.out" && ! grep -qx masked "$d/b.out"' \
    "$(cat "$d/b.out")"

  # as root the setuid-mode rules hold beside the open trap: a creating
  # mode with a setuid bit is refused, openat2 is ENOSYS, a plain create is
  # trapped and continued
  if [ "$who" = root ]; then
    out=$(cap root run --config "$d/sup.json" -- /usr/bin/python3 -c "
import os, errno, ctypes
libc = ctypes.CDLL(None, use_errno=True)
try:
    os.open('$d/grant/suid', os.O_CREAT | os.O_WRONLY, 0o4755); print('made suid')
except OSError as e:
    print('refused' if e.errno == errno.EPERM else e)
os.close(os.open('$d/grant/plain', os.O_CREAT | os.O_WRONLY, 0o644)); print('made plain')
if libc.syscall(437, -100, b'$d/grant/o2', ctypes.create_string_buffer(24), 24) < 0:
    print('openat2 ENOSYS' if ctypes.get_errno() == errno.ENOSYS else ctypes.get_errno())
" 2>&1)
    check root "setuid modes refused beside the open trap; openat2 ENOSYS" \
      '[ "$out" = "refused
made plain
openat2 ENOSYS" ] && [ ! -e "$d/grant/suid" ] && [ -f "$d/grant/plain" ]' "$out"
  fi
done

echo "supervised: $pass passed, $fail failed"
[ "$fail" = 0 ]
