#!/usr/bin/env python3
"""serve's sessions are bounded (SERVE_MAX_SESSIONS, 1,000): one token
holder opening sessions without end must not lock another user out.
Usage: session_room.py PORT ALICE_TOKEN BOB_TOKEN. Prints ok/FAIL lines;
exit 0 when all held."""
import http.client
import json
import sys

port, alice, bob = int(sys.argv[1]), sys.argv[2], sys.argv[3]
MAX = 1000
fails = 0


def check(name, good):
    global fails
    print(("  ok   " if good else "  FAIL ") + name)
    fails += 0 if good else 1


class Client:
    def __init__(self, token):
        self.token = token
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def post(self, msg, sid=None):
        h = {"Authorization": "Bearer " + self.token, "Content-Type": "application/json",
             "Accept": "application/json, text/event-stream", "Host": "127.0.0.1:%d" % port}
        if sid:
            h["Mcp-Session-Id"] = sid
            h["MCP-Protocol-Version"] = "2025-06-18"
        self.c.request("POST", "/mcp", json.dumps(msg), h)
        r = self.c.getresponse()
        r.read()
        return r.status, r.getheader("Mcp-Session-Id")

    def initialize(self):
        return self.post({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                     "clientInfo": {"name": "room", "version": "1"}}})

    def ping(self, sid):
        return self.post({"jsonrpc": "2.0", "id": 2, "method": "ping"}, sid)[0]


a, b = Client(alice), Client(bob)
st, bob_first = b.initialize()
check("bob's session opened", st == 200 and bob_first)
opened = []
for _ in range(MAX):
    st, sid = a.initialize()
    if st != 200:
        break
    opened.append(sid)
check("alice opens %d sessions, each answered (%d)" % (MAX, len(opened)), len(opened) == MAX)
st, bob_second = b.initialize()
check("bob opens a session once alice holds the rest (was 503: %d)" % st,
      st == 200 and bob_second)
check("bob's first session still answers", b.ping(bob_first) == 200)
check("bob's second session answers", bob_second and b.ping(bob_second) == 200)
check("alice's least recently used session gave way (404: %d)" % a.ping(opened[0]),
      a.ping(opened[0]) == 404)
check("alice's newest session answers", a.ping(opened[-1]) == 200)
more = sum(a.initialize()[0] == 200 for _ in range(MAX // 2))
check("alice opens %d more (her own older ones give way)" % more, more == MAX // 2)
check("bob's sessions outlive alice's flood",
      b.ping(bob_first) == 200 and b.ping(bob_second) == 200)
sys.exit(1 if fails else 0)
