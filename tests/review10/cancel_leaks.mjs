// cancel_leaks.sh's client: CALLS 2026-07-28 tools/call of slow__dispatch
// (a tool that sleeps 30 s), 8 at a time, each closed by the client after
// 400 ms (the revision's cancellation: the stream's close). Prints the
// number closed so.
// Usage: node cancel_leaks.mjs URL TOKEN CALLS
const [url, token, calls] = process.argv.slice(2);
const V = '2026-07-28';
let left = Number(calls), closed = 0, nextId = 1;
const meta = { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {} };
async function one() {
  const msg = { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name: 'slow__dispatch', arguments: { text: 'x' }, _meta: meta } };
  try {
    const res = await fetch(url, {
      method: 'POST', signal: AbortSignal.timeout(400),
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
        'MCP-Protocol-Version': V, 'Mcp-Method': 'tools/call', 'Mcp-Name': 'slow__dispatch' },
      body: JSON.stringify(msg),
    });
    await res.text();
  } catch { closed++; }
}
async function worker() { while (left-- > 0) await one(); }
await Promise.all(Array.from({ length: 8 }, worker));
console.log(closed);
