#!/usr/bin/env bash
# Review 12 (serve's fast path with s10-mcpcpu's group commit): alice
# sends 6 calls of examples/mcp-c's wait (1.5 s each; the server runs one
# at a time) at once on her own connections and cancels three of them
# (notifications/cancelled on another connection) while they queue or
# run; bob calls echo meanwhile. Each call has exactly one record of its
# own user (a cancelled one not "ok" unless it finished first), every
# answered call an ok one, the chain verifies; serve still answers. As
# root. Usage: fast_cancel.sh CAPSULE
set -u
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root"; exit 77; }
. "$(dirname "$0")/../lib/mcp_c.sh" "$1" review12-cancel
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
mcpc_user root
"$capsule" call "${C[@]}" mcp-c echo '{"text":"x"}' >/dev/null 2>&1 # its tools discovered
for t in echo wait; do "$capsule" policy set "${C[@]}" mcp-c $t allow >/dev/null || { echo "FAIL: policy set"; exit 1; }; done
tok() { "$capsule" access issue "t-$1" --user "$1" --state "$state" 2>/dev/null | grep -o 'capsule_[0-9A-Za-z_-]*' | head -1; }
token=$(tok alice) tb=$(tok bob)
[ -n "$token" ] && [ -n "$tb" ] || { echo "SKIP: cannot issue a token"; exit 77; }
mcpc_serve "$work/serve.log" --rate 1000000 || { echo "SKIP: serve did not start"; exit 77; }
sa=$sid
sb=$(curl -sS -m 60 -D - -o /dev/null "${H[@]}" -H "Authorization: Bearer $tb" --data \
  '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}' \
  "$url" | tr -d '\r' | awk -F': ' 'tolower($1) == "mcp-session-id" {print $2}')
[ -n "$sb" ] || { bad "bob: no session"; exit 1; }
post "$url" "$tb" "$sb" '{"jsonrpc":"2.0","method":"notifications/initialized"}' >/dev/null
post "$url" "$token" "$sa" '{"jsonrpc":"2.0","id":"w","method":"tools/call","params":{"name":"mcp-c__wait","arguments":{"ms":1}}}' >/dev/null
python3 - "$port" "$token" "$sa" "$tb" "$sb" "$work/ans.json" <<'PY' || bad "the calls did not run"
import http.client, json, sys, threading, time
port, ta, sa, tb, sb, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
def hdr(t, s):
    return {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "Authorization": "Bearer " + t, "Mcp-Session-Id": s, "MCP-Protocol-Version": "2025-06-18"}
res = {}
def one(key, t, s, i, name, args):
    body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": args}})
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=180)
        c.request("POST", "/mcp", body=body, headers=hdr(t, s))
        r = c.getresponse()
        res[key] = {"status": r.status, "body": r.read().decode(errors="replace")[:400]}
    except Exception as e:
        res[key] = {"status": 0, "body": repr(e)}
ts = [threading.Thread(target=one, args=(f"a{i}", ta, sa, 100 + i, "mcp-c__wait", {"ms": 1500 + i})) for i in range(6)]
ts += [threading.Thread(target=one, args=(f"b{i}", tb, sb, 100 + i, "mcp-c__echo", {"text": f"bob-{i}"})) for i in range(6)]
for t in ts:
    t.start()
time.sleep(1)
for i in (1, 3, 5):  # cancelled: running or queued behind the others
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", "/mcp", headers=hdr(ta, sa), body=json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 100 + i, "reason": "test"}}))
    c.getresponse().read()
for t in ts:
    t.join()
json.dump(res, open(out, "w"))
PY
"$capsule" audit --json --state "$state" >"$work/audit.json" 2>&1 || { bad "audit --json: $(head -3 "$work/audit.json")"; }
if why=$(python3 - "$work/audit.json" "$work/ans.json" <<'PY'
import collections, hashlib, json, sys
rows = json.load(open(sys.argv[1]))
res = json.load(open(sys.argv[2]))
def h(args):
    return hashlib.sha256(json.dumps(args, separators=(",", ":")).encode()).hexdigest()
by = collections.defaultdict(list)
for r in rows:
    by[(r["tool"], r["args_sha256"])].append(r)
bad, seen = [], []
for i in range(6):
    got = by[("wait", h({"ms": 1500 + i}))]
    a = res.get(f"a{i}", {})
    answered = '"text":"waited"' in a.get("body", "")
    seen.append(f"a{i}:{'answered' if answered else 'no answer'}/{[r['outcome'][:20] for r in got]}")
    if len(got) != 1:
        bad.append(f"alice's wait {i}: {len(got)} records")
    elif got[0]["user"] != "alice":
        bad.append(f"alice's wait {i} recorded as {got[0]['user']}'s")
    elif answered and got[0]["outcome"] != "ok":
        bad.append(f"alice's wait {i} answered, recorded {got[0]['outcome']}")
    elif i % 2 == 0 and not answered:
        bad.append(f"alice's wait {i} (not cancelled) unanswered: {a}")
for i in range(6):
    got = by[("echo", h({"text": f"bob-{i}"}))]
    if len(got) != 1 or got[0]["user"] != "bob" or f"bob-{i}" not in res.get(f"b{i}", {}).get("body", ""):
        bad.append(f"bob's echo {i}: {[(r['user'], r['outcome']) for r in got]} {res.get(f'b{i}')}")
if [r["seq"] for r in rows] != list(range(1, len(rows) + 1)):
    bad.append("records not numbered 1..n")
print("; ".join(bad[:4]) if bad else " ".join(seen))
sys.exit(1 if bad else 0)
PY
); then ok "each call one record of its own user, the cancelled ones included ($why)"; else bad "$why"; fi
mcpc_verify "after the cancellations"
out=$(post "$url" "$token" "$sa" '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"mcp-c__echo","arguments":{"text":"after"}}}')
grep -q '"text":"after"' <<<"$out" && ok "serve still answers" || bad "serve after the cancellations: ${out:0:200}"
echo "fast_cancel: $pass passed, $fail failed"
[ "$fail" = 0 ]
