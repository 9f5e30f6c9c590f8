#!/usr/bin/env bash
# Review 12 (s10-mcphop: the warm MCP keeper, src/gateway/mcp_keeper*.c:
# the package checked only when poll woke for something besides the
# server's stdout; lines to the server in one write; no egress batch
# swapped for an empty one). A third-party MCP server that floods (a
# notifications/message line every 2 ms, calls or none; tests/review12/
# flood/server.py) behind serve --mcp-http: alice's two sessions and bob's
# send 10 calls each at once with alike JSON-RPC ids: each answered with
# its own tag, by one server a session, bob's not alice's (the keeper's
# name has the user; alice's sessions share hers, docs/mcp.md), the log
# lines relayed with an answer all its own server's; then the package edited (its version file rewritten) while the
# flood goes on: the next call of each session is answered by a server
# started after the edit (v2), never by the old one. As root.
# Usage: keeper_flood.sh CAPSULE
set -u
[ "$(id -u)" = 0 ] || { echo "SKIP: run as root"; exit 77; }
. "$(dirname "$0")/../lib/mcp_c.sh" "$1" review12-flood
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
"$capsule" run -- /bin/true 2>/dev/null || { echo "SKIP: this host cannot create the sandbox's namespaces"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
state=$work/state caps=$work/caps
mkdir -p "$caps" && mkdir -m 700 "$state"
cp -a "$here/flood" "$caps/flood"
echo v1 >"$caps/flood/version"
chmod -R a+rX "$caps"
C=(--caps "$caps" --state "$state")
wrap=()
"$capsule" call "${C[@]}" flood ver '{}' >/dev/null 2>&1 # its tools discovered
"$capsule" policy set "${C[@]}" flood ver allow >/dev/null || { echo "FAIL: policy set"; exit 1; }
tok() { "$capsule" access issue "t-$1-$RANDOM" --user "$1" --state "$state" 2>/dev/null | grep -o 'capsule_[0-9A-Za-z_-]*' | head -1; }
ta=$(tok alice) tb=$(tok bob)
[ -n "$ta" ] && [ -n "$tb" ] || { echo "SKIP: cannot issue a token"; exit 77; }
token=$ta
started=
for _ in 1 2 3; do # another random port when the one tried is taken
  mcpc_serve "$work/serve.log" --rate 1000000 && { started=1; break; }
  kill -9 "$serve_pid" 2>/dev/null
  wait "$serve_pid" 2>/dev/null
done
[ -n "$started" ] || { echo "SKIP: serve did not start"; exit 77; }
sa1=$sid
session() {
  local s
  s=$(curl -sS -m 60 -D - -o /dev/null "${H[@]}" -H "Authorization: Bearer $1" --data \
    '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}' \
    "$url" | tr -d '\r' | awk -F': ' 'tolower($1) == "mcp-session-id" {print $2}')
  [ -n "$s" ] && post "$url" "$1" "$s" '{"jsonrpc":"2.0","method":"notifications/initialized"}' >/dev/null
  echo "$s"
}
sa2=$(session "$ta") sb=$(session "$tb")
[ -n "$sa2" ] && [ -n "$sb" ] || { bad "no second session"; exit 1; }
# burst LABEL: 10 calls at once per session, ids alike; prints "session tag inst ver" lines
burst() {
  python3 - "$port" "$1" alice1 "$ta" "$sa1" alice2 "$ta" "$sa2" bob "$tb" "$sb" <<'PY'
import http.client, json, re, sys, threading
port, label = int(sys.argv[1]), sys.argv[2]
ss = [sys.argv[i:i + 3] for i in range(3, len(sys.argv), 3)]
out, lock = [], threading.Lock()
def one(name, tok, sid, i):
    tag = f"{label}-{name}-{i}"
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
         "Authorization": "Bearer " + tok, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
    body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                       "params": {"name": "flood__ver", "arguments": {"tag": tag}}})
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=180)
        c.request("POST", "/mcp", body=body, headers=h)
        text = c.getresponse().read().decode(errors="replace")
    except Exception as e:
        text = repr(e)
    m = re.search(r"ver=(\w+) inst=(\w+) tag=([\w-]+)", text)
    # log lines relayed with the answer (the client set no level: relayed
    # as they come) are its own server's, none another user's
    floods = set(re.findall(r"flood (\w+) ", text))
    with lock:
        if m and m.group(3) == tag and floods <= {m.group(2)}:
            out.append(f"{name} {tag} {m.group(2)} {m.group(1)}")
        else:
            out.append(f"{name} {tag} BAD {text[:200]!r}")
ts = [threading.Thread(target=one, args=(n, t, s, i)) for n, t, s in ss for i in range(10)]
for t in ts: t.start()
for t in ts: t.join()
print("\n".join(out))
PY
}
# verdict LABEL WANT: each call its own answer; one server per session, of version WANT
verdict() {
  local f=$work/$1.out why
  if why=$(python3 - "$f" "$2" <<'PY'
import collections, sys
rows = [l.split(" ", 3) for l in open(sys.argv[1]).read().splitlines() if l]
want = sys.argv[2]
bad = [" ".join(r) for r in rows if r[2] == "BAD"]
insts = collections.defaultdict(set)
for r in rows:
    if r[2] != "BAD":
        insts[r[0]].add((r[2], r[3]))
for s, v in insts.items():
    if len(v) != 1:
        bad.append(f"{s}: {len(v)} servers {sorted(v)}")
    elif next(iter(v))[1] != "v" + want:
        bad.append(f"{s}: answered by a server of {next(iter(v))[1]}, not {want}")
# alice's two sessions share her server (docs/mcp.md), bob has his own
a = insts.get("alice1", set()) | insts.get("alice2", set())
if a & insts.get("bob", set()):
    bad.append(f"alice and bob on one server: {dict((s, sorted(v)) for s, v in insts.items())}")
if len(rows) != 30:
    bad.append(f"{len(rows)} answers of 30")
print("; ".join(bad[:4]) if bad else " ".join(f"{s}:{sorted(v)[0][0]}" for s, v in sorted(insts.items())))
sys.exit(1 if bad else 0)
PY
  ); then ok "$1: each of 30 calls its own answer and its own server's log lines, one v$2 server a session, bob's apart ($why)"
  else bad "$1: $why"; fi
}
burst warm >"$work/warm.out"
verdict warm 1
burst warm2 >"$work/warm2.out"
verdict warm2 1
awk '{print $1, $3}' "$work/warm.out" | sort -u >"$work/insts.before"
sleep 2 # the flood alone wakes the keepers meanwhile
echo v2 >"$caps/flood/version"
sleep 1
burst edited >"$work/edited.out"
verdict edited 2
if awk '{print $3}' "$work/edited.out" | grep -qxFf <(awk '{print $2}' "$work/insts.before"); then
  bad "a call after the edit reached a server started before it"
else
  ok "no call after the edit reached a server started before it"
fi
kill -0 "$serve_pid" 2>/dev/null && ok "serve still runs" || bad "serve ended: $(tail -3 "$work/serve.log")"
echo "keeper_flood: $pass passed, $fail failed"
[ "$fail" = 0 ]
