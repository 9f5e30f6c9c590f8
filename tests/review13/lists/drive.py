# A client of `capsule mcp` on stdio: sends each request of argv[2:]
# (JSON, ids 1..) after initialize, one at a time, and prints each answer
# on a line, then capsule mcp's peak memory ('hwm KB'). argv[1]: the command line of capsule mcp (JSON array).
import json, subprocess, sys
cmd = json.loads(sys.argv[1])
p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
def send(m):
    p.stdin.write(json.dumps(m) + "\n"); p.stdin.flush()
def answer(i):
    for line in p.stdout:
        m = json.loads(line)
        if m.get("id") == i and ("result" in m or "error" in m):
            return line.strip()
    return "EOF"
send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "r13", "version": "1"}}})
answer(0)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
for i, req in enumerate(sys.argv[2:], 1):
    m = json.loads(req)
    m.update({"jsonrpc": "2.0", "id": i})
    send(m)
    print(answer(i)[:300], flush=True)
hwm = [l.split()[1] for l in open("/proc/%d/status" % p.pid) if l.startswith("VmHWM")]
print("hwm", hwm[0] if hwm else "?", flush=True)
p.stdin.close()
p.wait()
