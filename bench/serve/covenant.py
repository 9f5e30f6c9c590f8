"""A per-call Covenant agent through `capsule serve` (MCP tools/call over
one kept HTTP connection: token check, policy, validation, a new sandbox
for the agent, audit) beside `capsule run` of the same agent from the same
manifest (its request line on stdin), interleaved one by one, N of each
after 3 warm-ups. Prints one JSON object: the medians and p90s in ms.
Usage: covenant.py CAPSULE AGENT_DIR STATE PORT BEARER N"""
import http.client
import json
import statistics
import subprocess
import sys
import time

capsule, agent, state, port, bearer, n = sys.argv[1:7]
port, n = int(port), int(n)
line = b'{"id":"00000000-0000-4000-8000-000000000001","text":"one two three"}\n'
conn = http.client.HTTPConnection("127.0.0.1", port)
headers = {"Authorization": "Bearer " + bearer, "Content-Type": "application/json",
           "Accept": "application/json, text/event-stream"}


def post(body):
    conn.request("POST", "/mcp", json.dumps(body), headers)
    r = conn.getresponse()
    data = r.read()
    if r.status not in (200, 202):
        sys.exit("serve answered %d: %s" % (r.status, data[:300]))
    return r, data


r, _ = post({"jsonrpc": "2.0", "id": 0, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "bench", "version": "1"}}})
headers["Mcp-Session-Id"] = r.getheader("Mcp-Session-Id")
headers["MCP-Protocol-Version"] = "2025-06-18"
post({"jsonrpc": "2.0", "method": "notifications/initialized"})


def served(i):
    _, data = post({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                    "params": {"name": "wordcount__dispatch",
                               "arguments": {"text": "one two three"}}})
    if b"3 words" not in data or b'"isError":true' in data:
        sys.exit("the call through serve failed: %s" % data[:300])


def run(_):
    p = subprocess.run([capsule, "run", "--state", state, "--config", "agent.toml", "--",
                        "./wordcount.sh"], cwd=agent, input=line, capture_output=True)
    if p.returncode != 0 or b"3 words" not in p.stdout:
        sys.exit("capsule run failed (%d): %s" % (p.returncode, p.stderr[:300]))


def timed(f, i):
    t = time.perf_counter()
    f(i)
    return (time.perf_counter() - t) * 1000


for i in range(3):
    run(i), served(i + 1)
runs, serves = [], []
for i in range(n):  # the order turned every other round: each follows each as often
    if i % 2:
        serves.append(timed(served, 100 + i))
        runs.append(timed(run, i))
    else:
        runs.append(timed(run, i))
        serves.append(timed(served, 100 + i))


def q(v, p):
    return statistics.quantiles(v, n=10)[p // 10 - 1]


print(json.dumps({"n": n, "run_p50": statistics.median(runs), "serve_p50": statistics.median(serves),
                  "run_p90": q(runs, 90), "serve_p90": q(serves, 90)}))
