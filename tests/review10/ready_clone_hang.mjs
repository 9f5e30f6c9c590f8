// ready_clone_hang.sh's client: CALLS tools/call of echo__dispatch in the
// 2026-07-28 form (each request its own session: its tool table built,
// and each capability's readiness dry run made, on serve's main thread),
// 16 at a time. Prints "done N" when every call was answered, "hung"
// when one got no answer within 120 s (the run's tool answers at once).
// Usage: node ready_clone_hang.mjs URL TOKEN CALLS
const [url, token, calls] = process.argv.slice(2);
const V = '2026-07-28';
let left = Number(calls), answered = 0, hung = false, nextId = 1;
const meta = { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {} };
async function one(i) {
  const msg = { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name: 'echo__dispatch', arguments: { text: `c${i}` }, _meta: meta } };
  try {
    const res = await fetch(url, {
      method: 'POST',
      signal: AbortSignal.timeout(120000),
      headers: {
        Authorization: `Bearer ${token}`, 'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': V,
        'Mcp-Method': 'tools/call', 'Mcp-Name': 'echo__dispatch',
      },
      body: JSON.stringify(msg),
    });
    await res.text();
    answered++;
  } catch (e) {
    hung = true;
    console.error(`call ${i}: ${e.name}: ${e.message}`);
  }
}
async function worker() {
  while (!hung && left > 0) await one(left--);
}
await Promise.all(Array.from({ length: 16 }, worker));
console.log(hung ? 'hung' : `done ${answered}`);
