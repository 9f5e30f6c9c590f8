#!/usr/bin/env bash
# The audit's group commit (gateway/state_group.c) through `capsule serve
# --mcp-http`: 50 tools/call sent at once on a warm MCP server
# (examples/mcp-c's echo, each its own text) all answered; serve killed
# with SIGKILL the moment the last answer arrives, before it could write
# anything more; then every answered call has its own committed record
# (outcome ok, its own arguments' hash: not an "interrupted" one made
# later from its in-flight marker), which shows each answer left only
# after its record was in; `audit verify` passes (chain, head, high-water
# mark). A second round on the same state: the chain goes on. As root and
# as uid 65534.
# Usage: audit_group.sh CAPSULE
set -u
. "$(dirname "$0")/../lib/mcp_c.sh" "$1" audit-group
N=50
# round WHO ROUND: N calls at once, serve killed after the last answer
round() {
  local who=$1 rnd=$2 i
  mcpc_serve "$work/serve-$who-$rnd.log" --rate 1000000 || { bad "$who: round $rnd: no session"; kill -9 "$serve_pid"; return; }
  # the warm server started before the burst: every call of it finds it warm
  post "$url" "$token" "$sid" '{"jsonrpc":"2.0","id":"w","method":"tools/call","params":{"name":"mcp-c__echo","arguments":{"text":"warm"}}}' >/dev/null
  # N connections opened and authenticated one by one (serve holds few
  # connections without a valid token yet at once), then N calls sent at
  # once on them; serve killed the moment the last answer is in
  python3 - "$port" "$token" "$sid" "$N" "$rnd" "$work/ans-$who-$rnd" "$serve_pid" <<'PY' ||
import http.client, os, signal, sys, threading
port, token, sid, n, rnd, out, pid = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6], int(sys.argv[7])
hdr = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
       "Authorization": "Bearer " + token, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
def post(c, body):
    c.request("POST", "/mcp", body=body, headers=hdr)
    r = c.getresponse()
    return r.status, r.read().decode(errors="replace")
conns = []
for i in range(n):
    c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=120)
    st, _ = post(c, '{"jsonrpc":"2.0","id":"p%d","method":"ping"}' % i)
    if st != 200:
        sys.exit(f"ping on connection {i}: HTTP {st}")
    conns.append(c)
go = threading.Barrier(n)
def one(i):
    body = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"mcp-c__echo","arguments":{"text":"r%s-%d"}}}' % (i, rnd, i)
    go.wait()
    try:
        st, text = post(conns[i - 1], body)
    except Exception as e:
        st, text = 0, repr(e)
    with open(f"{out}-{i}", "w") as f:
        f.write(f"HTTP {st} {text}")
threads = [threading.Thread(target=one, args=(i,)) for i in range(1, n + 1)]
for t in threads:
    t.start()
for t in threads:
    t.join()
os.kill(pid, signal.SIGKILL)  # nothing after the answers: what is not in the log now never will be
PY
    bad "$who: round $rnd: the burst did not run"
  kill -9 "$serve_pid" 2>/dev/null
  wait "$serve_pid" 2>/dev/null
  local answered=0
  : >"$work/answered-$who-$rnd"
  for i in $(seq 1 "$N"); do
    if grep -q "\"text\":\"r$rnd-$i\"" "$work/ans-$who-$rnd-$i" && ! grep -q '"isError":true' "$work/ans-$who-$rnd-$i"; then
      answered=$((answered + 1))
      echo "r$rnd-$i" >>"$work/answered-$who-$rnd"
    fi
  done
  [ "$answered" = "$N" ] && ok "$who: round $rnd: $N calls at once all answered" ||
    { bad "$who: round $rnd: $answered of $N calls answered"; for i in $(seq 1 "$N"); do
        grep -qx "r$rnd-$i" "$work/answered-$who-$rnd" || { echo "    call $i: $(head -c 300 "$work/ans-$who-$rnd-$i")"; break; }
      done; tail -3 "$work/serve-$who-$rnd.log"; }
  "${wrap[@]}" "$capsule" audit --json --state "$state" >"$work/audit-$who-$rnd.json" 2>"$work/audit-$who-$rnd.err" ||
    { bad "$who: round $rnd: audit --json failed"; cat "$work/audit-$who-$rnd.err"; return; }
  local why
  if why=$(python3 - "$work/audit-$who-$rnd.json" "$work/answered-$who-$rnd" <<'PY'
import hashlib, json, sys
rows = json.load(open(sys.argv[1]))
answered = open(sys.argv[2]).read().split()
def h(text):
    return hashlib.sha256(json.dumps({"text": text}, separators=(",", ":")).encode()).hexdigest()
by_hash = {}
for r in rows:
    if r["capability"] == "mcp-c" and r["tool"] == "echo":
        by_hash.setdefault(r["args_sha256"], []).append(r)
bad = []
for t in answered:
    got = by_hash.get(h(t), [])
    if len(got) != 1:
        bad.append(f"{t}: {len(got)} records")
    elif got[0]["outcome"] != "ok" or got[0]["decision"] != "allow":
        bad.append(f"{t}: its record says {got[0]['decision']}/{got[0]['outcome']} (answered before its record was in)")
seqs = [r["seq"] for r in rows]
if seqs != list(range(1, len(rows) + 1)):
    bad.append("records not numbered 1..n")
print("; ".join(bad[:5]))
sys.exit(1 if bad else 0)
PY
  ); then
    ok "$who: round $rnd: every answered call has its own committed record"
  else
    bad "$who: round $rnd: $why"
  fi
  mcpc_verify "$who: round $rnd"
}
run_as() {
  mcpc_user "$1"
  # discovery (the call itself is blocked until allowed)
  "${wrap[@]}" "$capsule" call "${C[@]}" mcp-c echo '{"text":"x"}' >/dev/null 2>&1
  "${wrap[@]}" "$capsule" policy set "${C[@]}" mcp-c echo allow >/dev/null ||
    { bad "$who: policy set"; return; }
  token=$("${wrap[@]}" "$capsule" access issue t --state "$state" 2>/dev/null)
  [ -n "$token" ] || { bad "$who: access issue"; return; }
  round "$who" 1
  round "$who" 2
}
run_as root
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  run_as nobody
else
  echo "  (uid 65534 part skipped: needs root and setpriv)"
fi
echo "audit_group: $pass passed, $fail failed"
[ "$fail" = 0 ]
