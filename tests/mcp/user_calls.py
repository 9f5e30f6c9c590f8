#!/usr/bin/env python3
"""A user's calls in flight across its sessions are bounded
(CAPSULE_SERVE_USER_CALLS=3 here). Usage: user_calls.py PORT ALICE BOB.
Prints ok/FAIL lines; exit 0 when all held."""
import http.client
import json
import sys
import threading

port, alice, bob = int(sys.argv[1]), sys.argv[2], sys.argv[3]
fails = 0


def check(name, good, why=""):
    global fails
    print(("  ok   " if good else "  FAIL ") + name + ("" if good else " (%s)" % why))
    fails += 0 if good else 1


def post(token, msg, sid=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    h = {"Authorization": "Bearer " + token, "Content-Type": "application/json",
         "Accept": "application/json, text/event-stream", "Host": "127.0.0.1:%d" % port}
    if sid:
        h["Mcp-Session-Id"] = sid
        h["MCP-Protocol-Version"] = "2025-06-18"
    c.request("POST", "/mcp", json.dumps(msg), h)
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    return r.status, r.getheader("Mcp-Session-Id"), body


def session(token):
    st, sid, _ = post(token, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                         "clientInfo": {"name": "uc", "version": "1"}}})
    post(token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    return sid


def result(body):
    """the JSON-RPC message of a JSON or an SSE answer"""
    for line in body.splitlines():
        if line.startswith("data:"):
            body = line[5:]
    try:
        return json.loads(body)
    except ValueError:
        return {}


def call(token, sid, n, out):
    _, _, body = post(token, {"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call",
                              "params": {"name": "slow__dispatch", "arguments": {"text": "call %d" % n}}}, sid)
    out[n] = result(body).get("result", {})


a1, a2, b1 = session(alice), session(alice), session(bob)
check("three sessions", all((a1, a2, b1)), "no session id")
out = {}
threads = [threading.Thread(target=call, args=(alice, a1 if n < 2 else a2, n, out)) for n in range(4)]
threads.append(threading.Thread(target=call, args=(bob, b1, 9, out)))
for t in threads:
    t.start()
for t in threads:
    t.join()
text = lambda r: json.dumps(r.get("content", ""))
refused = [n for n in range(4) if out.get(n, {}).get("isError") and "of this user" in text(out[n])]
served = [n for n in range(4) if not out.get(n, {}).get("isError") and "got" in text(out[n])]
check("alice's fourth call at once is refused (3 a user)", len(refused) == 1 and len(served) == 3,
      "refused %s, served %s: %s" % (refused, served, out))
check("bob's call is served meanwhile", not out.get(9, {}).get("isError") and "got" in text(out.get(9, {})),
      out.get(9))
out = {}
call(alice, a2, 5, out)
check("once they end, alice's next call runs", not out[5].get("isError") and "got" in text(out[5]), out[5])
sys.exit(1 if fails else 0)
