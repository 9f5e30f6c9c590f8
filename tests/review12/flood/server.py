# A tiny MCP server over stdio that floods: a notifications/message line
# (naming this start) every 2 ms, calls or none; its tool "ver" says the version file as it was
# read at start, and a name of this start (random).
import json, os, sys, threading, time
out_lock = threading.Lock()
inst = os.urandom(6).hex()
ver = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "version")).read().strip()
def put(m):
    with out_lock:
        sys.stdout.write(json.dumps(m) + "\n")
        sys.stdout.flush()
def flood():
    n = 0
    while True:
        n += 1
        put({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "flood %s %d" % (inst, n)}})
        time.sleep(0.002)
started = False
for line in sys.stdin:
    try:
        m = json.loads(line)
    except Exception:
        continue
    meth, mid = m.get("method"), m.get("id")
    if meth == "initialize":
        put({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": m["params"].get("protocolVersion", "2025-06-18"),
             "capabilities": {"tools": {}, "logging": {}}, "serverInfo": {"name": "flood", "version": "1"}}})
    elif meth == "notifications/initialized" and not started:
        started = True
        threading.Thread(target=flood, daemon=True).start()
    elif meth == "tools/list":
        put({"jsonrpc": "2.0", "id": mid, "result": {"tools": [{"name": "ver", "description": "the version read at start",
             "inputSchema": {"type": "object", "properties": {"tag": {"type": "string"}}}}]}})
    elif meth == "tools/call":
        tag = (m["params"].get("arguments") or {}).get("tag", "")
        put({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "ver=%s inst=%s tag=%s" % (ver, inst, tag)}]}})
    elif mid is not None and meth:
        put({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
