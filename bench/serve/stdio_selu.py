"""A warm Selu tool (examples/selu-text's word_count) called over `capsule
mcp` on stdio, the transport agent hosts launch: for each capsule given, one
`capsule mcp --caps CAPS --state STATE_i` process kept for the run (its
own state directory each), an initialize, 3 warm-up calls (the first
starts the instance), then N tools/call on each, interleaved one by one.
Prints one JSON object: per capsule, p50 and p90 in ms.
Usage: stdio_selu.py CAPS N STATE1 CAPSULE1 [STATE2 CAPSULE2 ...]"""
import json
import statistics
import subprocess
import sys
import time

caps, n = sys.argv[1], int(sys.argv[2])
pairs = list(zip(sys.argv[3::2], sys.argv[4::2]))


class Client:
    def __init__(self, capsule, state):
        self.p = subprocess.Popen([capsule, "mcp", "--caps", caps, "--state", state],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        self.id = 0
        self.ask("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "bench", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.p.stdin.write(json.dumps(msg).encode() + b"\n")
        self.p.stdin.flush()

    def ask(self, method, params):
        self.id += 1
        self.send({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params})
        while True:
            line = self.p.stdout.readline()
            if not line:
                sys.exit("capsule mcp ended")
            m = json.loads(line)
            if m.get("id") == self.id:
                return m

    def call(self):
        m = self.ask("tools/call", {"name": "text-tools__word_count",
                                    "arguments": {"text": "one two three"}})
        r = m.get("result") or {}
        if r.get("isError") or (r.get("structuredContent") or {}).get("words") != 3:
            sys.exit("the call failed: %s" % json.dumps(m)[:300])

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


clients = [Client(capsule, state) for state, capsule in pairs]
for c in clients:
    for _ in range(3):
        c.call()
times = [[] for _ in clients]
for _ in range(n):
    for c, t in zip(clients, times):
        t0 = time.perf_counter()
        c.call()
        t.append((time.perf_counter() - t0) * 1000)
for c in clients:
    c.close()
print(json.dumps([{"capsule": capsule, "n": n, "p50": statistics.median(t),
                   "p90": statistics.quantiles(t, n=10)[8]}
                  for (_, capsule), t in zip(pairs, times)]))
